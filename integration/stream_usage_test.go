package integration

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A messages stream translated from a chat-completions model announces the
// gateway's count of the prompt in message_start (LangChain reads input
// tokens only there): the o200k count of the text, 4 a message, and the
// tool definitions, the count count_tokens gives for the same body. The
// message_delta carries the provider's exact usage, which the SDK's
// accumulated message ends with.
func TestTranslatedStreamAnnouncesInput(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "announce", nil)
	c := e.anthropicClient(key)
	count := func(s string) int64 { return o200k(t, s) }
	const (
		system = "You answer in one word."
		user   = "Say something about the weather in Lisbon today."
	)
	weather := anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather of a city today."),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}
	for _, tc := range []struct {
		name  string
		tools []anthropic.ToolUnionParam
		// want is the count, or -1: the count_tokens answer.
		want int64
	}{
		{"text", nil, count(system) + count(user) + 4},
		{"tools", []anthropic.ToolUnionParam{{OfTool: &weather}}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want < 0 {
				ct, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: openaiBackend.model,
					System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(system)},
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
					Tools:    []anthropic.MessageCountTokensToolUnionParam{{OfTool: &weather}}})
				if err != nil {
					t.Fatal(err)
				}
				if want = ct.InputTokens; want <= count(system)+count(user)+4 {
					t.Fatalf("count_tokens %d does not count the tools", want)
				}
			}
			e.OA.Push(fake.Script{Text: "Announced.", Usage: fake.Usage{Input: 900, Output: 12}})
			stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: openaiBackend.model, MaxTokens: 64,
				System:   []anthropic.TextBlockParam{{Text: system}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(user))},
				Tools:    tc.tools})
			var start, delta int64 = -1, -1
			var acc anthropic.Message
			for stream.Next() {
				ev := stream.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
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
			if start != want {
				t.Errorf("message_start input_tokens %d, want the gateway's count of the prompt %d", start, want)
			}
			if delta != 900 || acc.Usage.InputTokens != 900 || acc.Usage.OutputTokens != 12 {
				t.Errorf("message_delta input_tokens %d, accumulated usage %d/%d: want the provider's 900/12", delta, acc.Usage.InputTokens, acc.Usage.OutputTokens)
			}
		})
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
	r := g.do(t, http.MethodPost, "/v1/responses", `{"model":"gw-pinned-gpt-4.1-mini","input":"hi","stream":true}`, bearer(key)...)
	seqs, errSeq := responsesEvents(t, r.Body)
	if len(seqs) != 3 || errSeq != 3 {
		t.Fatalf("sequence numbers %v, error event %d: want 0 1 2, then 3", seqs, errSeq)
	}
}

// responsesEvents reads a responses stream: the sequence_number of each
// event before the error event, and the error event's (-1: none).
func responsesEvents(t *testing.T, body []byte) (seqs []int64, errSeq int64) {
	t.Helper()
	errSeq = -1
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		n := gjson.Get(data, "sequence_number")
		if n.Type != gjson.Number {
			t.Fatalf("event without a sequence_number: %s", data)
		}
		if gjson.Get(data, "type").String() == "error" {
			errSeq = n.Int()
		} else {
			seqs = append(seqs, n.Int())
		}
	}
	return seqs, errSeq
}

// The error event the gateway adds when a responses stream fails at its
// final event (here the provider reports usage that cannot be right, so
// the final event is not sent) continues the numbering of what the client
// got: on the pass-through stream and on the one translated from a
// messages-style model.
func TestResponsesFinalFailureSequence(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "badusage", nil)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e.fakeOf(b).Push(fake.Script{Text: "A few words of answer.", Usage: fake.Usage{Input: -50, Output: 5}})
			r := e.do(t, http.MethodPost, "/v1/responses", `{"model":"`+b.model+`","input":"hi","stream":true}`, bearer(key)...)
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			seqs, errSeq := responsesEvents(t, r.Body)
			for i, n := range seqs {
				if n != int64(i) {
					t.Fatalf("sequence numbers %v: want 0, 1, 2, ...", seqs)
				}
			}
			if len(seqs) < 3 || errSeq != int64(len(seqs)) {
				t.Fatalf("sequence numbers %v, error event %d: want the error numbered %d", seqs, errSeq, len(seqs))
			}
		})
	}
}
