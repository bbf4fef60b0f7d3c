package integration

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// pacedText is what a paced upstream streams, in 4 pieces of 5 runes; it
// holds its stream after the first ("tick ") until the test lets it go.
const pacedText = "tick tock tick tock "

// TestChatPacedStreams: the gateway forwards a stream event by event. The
// fake upstream sends its first text piece and then holds its stream at a
// gate; each client reads that piece through its SDK while the upstream is
// still held (the gate opens only from the SDK's read of it), then reads
// the rest, for same-format and translated streams alike.
func TestChatPacedStreams(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "paced"
	key := e.account(t, account, nil)
	for _, k := range clientKinds {
		for _, b := range backends {
			t.Run(fmt.Sprintf("%s/%s", k, b.name), func(t *testing.T) {
				e.reset()
				gate := make(chan struct{})
				var once sync.Once
				open := func() { once.Do(func() { close(gate) }) }
				defer open()
				e.fakeOf(b).Push(fake.Script{Text: pacedText, Chunks: 4, Gate: gate, Usage: fakeUsage(b.anthropic, matrixUsage)})

				var first string
				heldAtFirst := false
				res, err := e.run(t, k, key, chatReq{model: b.model, stream: true, timeout: 10 * time.Second,
					onFirstText: func(delta string) {
						first = delta
						select {
						case <-gate:
						default:
							heldAtFirst = true
						}
						open()
					}})
				if err != nil {
					t.Fatalf("stream: %v (a gateway that buffers the stream never delivers the first piece while the upstream is held)", err)
				}
				if first != "tick " || !heldAtFirst {
					t.Errorf("first text delta %q (upstream held: %t), want %q while the upstream was held", first, heldAtFirst, "tick ")
				}
				if res.text != pacedText || res.textDeltas != 4 {
					t.Errorf("text %q in %d deltas, want %q in 4", res.text, res.textDeltas, pacedText)
				}
				cost := listCost(t, b.backing, matrixUsage, false)
				if res.streamCost != cost.String() {
					t.Errorf("stream cost_usd %q, want %q", res.streamCost, cost.String())
				}
				e.expectLedger(t, account, ledgerEntry{RequestID: res.header.Get("X-Gw-Request-Id"), Endpoint: k.ledgerEndpoint(),
					Model: b.backing, Units: matrixUsage.Units(), Unit: "token", Cost: cost.String()})
			})
		}
	}

	// The same over plain HTTP, reading the body line by line: the
	// response's headers and its first text piece arrive while the
	// upstream is held.
	t.Run("raw/chat/anthropic", func(t *testing.T) {
		e.reset()
		gate := make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(gate) }) }
		defer open()
		e.AN.Push(fake.Script{Text: pacedText, Chunks: 4, Gate: gate, Usage: fakeUsage(true, matrixUsage)})
		path, body := rawChat(chatClient, anthropicBackend.model, true)
		req, err := http.NewRequest(http.MethodPost, e.BaseURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d Content-Type %q, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(resp.Body)
		var lines []string
		for sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			if strings.Contains(line, `"content":"tick "`) {
				break
			}
		}
		select {
		case <-gate:
			t.Fatal("gate opened before the first piece was read")
		default:
		}
		if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"content":"tick "`) {
			t.Fatalf("the first piece did not arrive while the upstream was held; read %q (%v)", lines, sc.Err())
		}
		open()
		var rest strings.Builder
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") || !strings.Contains(rest.String(), `"cost_usd":"`+listCost(t, anthropicBackend.backing, matrixUsage, false).String()+`"`) {
			t.Errorf("the rest of the stream lacks the usage chunk's cost or [DONE]:\n%s", rest.String())
		}
	})
}

// TestChatStreamUsageUnasked: a chat-completions stream whose client did
// not ask for usage still ends with the usage chunk and its cost_usd (the
// gateway asks the upstream for it), and the call is billed.
func TestChatStreamUsageUnasked(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "unasked"
	key := e.account(t, account, nil)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e.reset()
			e.fakeOf(b).Push(fake.Script{Text: pacedText, Usage: fakeUsage(b.anthropic, matrixUsage)})
			path, body := rawChat(chatClient, b.model, true)
			r := e.do(t, http.MethodPost, path, body, bearer(key)...)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			cost := listCost(t, b.backing, matrixUsage, false)
			if got := sseCost(r.Body); got != cost.String() {
				t.Errorf("cost_usd %q, want %q; stream:\n%s", got, cost.String(), r.Body)
			}
			if !strings.HasSuffix(string(r.Body), "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]:\n%s", r.Body)
			}
			if !b.anthropic {
				if up := e.OA.Requests()[0].JSON(); get(up, "stream_options", "include_usage") != true {
					t.Errorf("upstream body %v lacks stream_options.include_usage", up)
				}
			}
			e.expectLedger(t, account, ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "chat", Model: b.backing,
				Units: matrixUsage.Units(), Unit: "token", Cost: cost.String()})
		})
	}
}
