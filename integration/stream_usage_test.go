package integration

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A messages stream translated from a chat-completions model announces the
// gateway's count of the prompt in message_start (LangChain reads input
// tokens only there), and message_delta carries the provider's exact usage.
func TestTranslatedStreamAnnouncesInput(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "announce", nil)
	e.OA.Push(fake.Script{Text: "Announced.", Usage: fake.Usage{Input: 900, Output: 12}})
	c := anthropic.NewClient(aoption.WithBaseURL(e.BaseURL+"/alt"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "gw-pinned-gpt-4.1-mini", MaxTokens: 64,
		System:   []anthropic.TextBlockParam{{Text: "You answer in one word."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say something about the weather in Lisbon today."))}})
	var start, delta int64 = -1, -1
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			start = ev.Message.Usage.InputTokens
		case "message_delta":
			delta = ev.Usage.InputTokens
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// The local count of a one-line system prompt and a one-line message.
	if start < 10 || start > 60 {
		t.Errorf("message_start input_tokens %d, want the gateway's count of the prompt", start)
	}
	if delta != 900 {
		t.Errorf("message_delta input_tokens %d, want the provider's 900", delta)
	}
}

// The error event the gateway adds to a pass-through responses stream that
// breaks off continues the stream's sequence_number.
func TestResponsesCutStreamSequence(t *testing.T) {
	t.Parallel()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, typ := range []string{"response.created", "response.in_progress", "response.output_text.delta"} {
			w.Write([]byte("event: " + typ + "\ndata: " + `{"type":"` + typ + `","sequence_number":` + string(rune('0'+i)) +
				`,"response":{"id":"resp_1","status":"in_progress"},"delta":"half"}` + "\n\n"))
		}
	}))
	t.Cleanup(cut.Close)
	an := fake.NewAnthropic()
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": cut.URL + "/v1", "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "cutresp", "plan": "paid", "cleared": true})
	req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/responses", strings.NewReader(`{"model":"gw-pinned-gpt-4.1-mini","input":"hi","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seqs []int64
	var errSeq int64 = -1
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		n := gjson.Get(data, "sequence_number").Int()
		if gjson.Get(data, "type").String() == "error" {
			errSeq = n
		} else {
			seqs = append(seqs, n)
		}
	}
	if len(seqs) != 3 || errSeq != 3 {
		t.Fatalf("sequence numbers %v, error event %d: want 0 1 2, then 3", seqs, errSeq)
	}
}
