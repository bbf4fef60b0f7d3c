package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// matrixUsage is what every matrix answer reports: 1,234 input tokens of
// which 200 cached, 567 output tokens.
var matrixUsage = tokenUsage{Input: 1234, Cached: 200, Output: 567}

// matrixVariant is one kind of answer the fake gives.
type matrixVariant struct {
	name   string
	text   string
	tools  bool
	length bool
}

var matrixVariants = []matrixVariant{
	{name: "text", text: "Paris: 18°C and clear. Flights CDG→JFK from 412 EUR."},
	{name: "tools", text: "Let me check both.", tools: true},
	{name: "length", text: "The forecast for Paris over the next three days is", length: true},
}

// matrixCalls are the tool calls of the tools variant: nested JSON
// arguments, which the fakes split into 4 pieces when streaming.
var matrixCalls = []struct{ name, args string }{
	{"get_weather", `{"location":{"city":"Paris","country":"FR"},"units":["celsius","kelvin"],"days":3}`},
	{"search_flights", `{"route":{"from":"CDG","to":"JFK"},"passengers":{"adults":2,"children":[{"age":5},{"age":9}]},"flexible":true,"note":"aisle \"window\" ✈"}`},
}

// matrixChunks is how many pieces the fake streams text and arguments in.
const matrixChunks = 4

// matrixScript is what b's fake answers for v.
func matrixScript(b backend, v matrixVariant) (fake.Script, []fake.ToolCall) {
	s := fake.Script{Text: v.text, Usage: fakeUsage(b.anthropic, matrixUsage), Chunks: matrixChunks}
	if b.gemini && v.length {
		s.Finish = "MAX_TOKENS"
	}
	if v.tools {
		for i, c := range matrixCalls {
			id := fmt.Sprintf("call_gw%dmatrix", i+1)
			if b.anthropic {
				id = fmt.Sprintf("toolu_01gw%dmatrix", i+1)
			}
			s.ToolCalls = append(s.ToolCalls, fake.ToolCall{ID: id, Name: c.name, Arguments: c.args})
		}
	}
	if v.length && !b.gemini {
		s.Finish = "length"
		if b.anthropic {
			s.Finish = "max_tokens"
		}
	}
	return s, s.ToolCalls
}

// wantFinish is the finish reason (chat), stop reason (messages) or
// status and incomplete reason (responses) a client must see for v.
func wantFinish(k clientKind, v matrixVariant) (finish, incomplete string) {
	switch k {
	case chatClient:
		switch {
		case v.length:
			return "length", ""
		case v.tools:
			return "tool_calls", ""
		}
		return "stop", ""
	case messagesClient:
		switch {
		case v.length:
			return "max_tokens", ""
		case v.tools:
			return "tool_use", ""
		}
		return "end_turn", ""
	}
	if v.length {
		return "incomplete", "max_output_tokens"
	}
	return "completed", ""
}

// wantUsage is matrixUsage as client k's format reports it: messages
// counts cache reads apart from input_tokens and has no total.
func wantUsage(k clientKind, u tokenUsage) clientUsage {
	if k == messagesClient {
		return clientUsage{Input: u.Input - u.Cached, Cached: u.Cached, Output: u.Output, Total: -1}
	}
	return clientUsage{Input: u.Input, Cached: u.Cached, Output: u.Output, Total: u.Input + u.Output}
}

// TestChatMatrix: every client × upstream format × streaming or not × kind
// of answer (text, text and two tool calls, cut at the length limit) gets
// the right content, tool calls, finish reason and usage; the upstream
// receives the backing model id, an untouched body when the formats match
// and a valid translation otherwise; the receipt (X-Gw-Cost-Usd, or
// cost_usd in the stream's final usage block) is the list price of the
// usage to the nano-dollar, and equals the ledger entry under the request
// id; the account's spend is the sum of the receipts.
func TestChatMatrix(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "matrix"
	key := e.account(t, account, nil)

	var total pricing.Money
	var ids []string
	for _, k := range clientKinds {
		for _, b := range backends {
			for _, stream := range []bool{false, true} {
				for _, v := range matrixVariants {
					mode := "whole"
					if stream {
						mode = "stream"
					}
					name := fmt.Sprintf("%s/%s/%s/%s", k, b.name, mode, v.name)
					t.Run(name, func(t *testing.T) {
						e.reset()
						script, calls := matrixScript(b, v)
						e.fakeOf(b).Push(script)
						req := chatReq{model: b.model, stream: stream, tools: v.tools, extra: true}
						res, err := e.run(t, k, key, req)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						checkAnswer(t, k, b, v, stream, res, calls)
						checkUpstreamRequest(t, e, k, b, req, res, key)

						cost := listCost(t, b.backing, matrixUsage, false)
						id := res.header.Get("X-Gw-Request-Id")
						if stream {
							expectGwHeaders(t, res.header, streamHeaders(b.model))
							if res.streamCost != cost.String() {
								t.Errorf("cost_usd of the stream's final usage block %q, want %q", res.streamCost, cost.String())
							}
						} else {
							expectGwHeaders(t, res.header, receipts(b.backing, b.model, false, cost))
						}
						e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: k.ledgerEndpoint(), Model: b.backing,
							Units: matrixUsage.Units(), Unit: "token", Cost: cost.String()})
						total += cost
						ids = append(ids, id)
					})
				}
			}
		}
	}

	spend, _ := e.accountMoney(t, account)
	if spend != total {
		t.Errorf("account spend %s, want the sum of the receipts %s", spend, total)
	}
	if l := e.ledger(t, account); len(l) != len(ids) {
		t.Errorf("ledger has %d entries, want one per call (%d)", len(l), len(ids))
	}
}

// checkAnswer checks what client k read against what b's fake was scripted
// with.
func checkAnswer(t *testing.T, k clientKind, b backend, v matrixVariant, stream bool, res clientResult, calls []fake.ToolCall) {
	t.Helper()
	if res.text != v.text {
		t.Errorf("text %q, want %q", res.text, v.text)
	}
	if res.model != b.backing {
		t.Errorf("model in the body %q, want %q", res.model, b.backing)
	}
	checkEnvelope(t, k, stream, res)
	if len(res.calls) != len(calls) {
		t.Errorf("%d tool calls %+v, want %d", len(res.calls), res.calls, len(calls))
	} else {
		for i, c := range calls {
			got := res.calls[i]
			if b.gemini && strings.HasPrefix(got.ID, "call_") {
				c.ID = got.ID // the gateway's own
			}
			if got.ID != c.ID || got.Name != c.Name {
				t.Errorf("tool call %d: id %q name %q, want %q %q", i, got.ID, got.Name, c.ID, c.Name)
			}
			if !sameJSON(got.Arguments, c.Arguments) {
				t.Errorf("tool call %d arguments %s, want the JSON of %s", i, got.Arguments, c.Arguments)
			}
		}
	}
	finish, incomplete := wantFinish(k, v)
	if res.finish != finish || res.incomplete != incomplete {
		t.Errorf("finish %q (incomplete reason %q), want %q (%q)", res.finish, res.incomplete, finish, incomplete)
	}
	if u := wantUsage(k, matrixUsage); res.usage != u {
		t.Errorf("usage %+v, want %+v", res.usage, u)
	}
	if !stream {
		return
	}
	// The fake streams the text and each call's arguments in 4 pieces: the
	// client gets them as 4 deltas, not merged.
	if res.textDeltas != matrixChunks {
		t.Errorf("text arrived in %d deltas, want %d", res.textDeltas, matrixChunks)
	}
	if res.streamedText != v.text {
		t.Errorf("text deltas join to %q, want %q", res.streamedText, v.text)
	}
	for i, c := range calls {
		want := matrixChunks
		if b.gemini && i < len(res.calls) {
			c.ID, want = res.calls[i].ID, 1
		}
		if n := res.argDeltas[c.ID]; n != want {
			t.Errorf("arguments of %s arrived in %d deltas, want %d", c.ID, n, want)
		}
		if got := res.streamedArgs[c.ID]; !sameJSON(got, c.Arguments) {
			t.Errorf("argument deltas of %s join to %s, want the JSON of %s", c.ID, got, c.Arguments)
		}
	}
}

// checkUpstreamRequest checks the one request b's fake received for r.
func checkUpstreamRequest(t *testing.T, e *chatEnv, k clientKind, b backend, r chatReq, res clientResult, clientKey string) {
	t.Helper()
	if n := len(e.otherFake(b).Requests()); n != 0 {
		t.Errorf("the other upstream received %d requests", n)
	}
	reqs := e.fakeOf(b).Requests()
	if len(reqs) != 1 {
		t.Fatalf("%s upstream received %d requests, want 1", b.name, len(reqs))
	}
	got := reqs[0]
	wantPath := "/v1/chat/completions"
	switch {
	case b.anthropic:
		wantPath = "/v1/messages"
	case k == responsesClient:
		wantPath = "/v1/responses"
	}
	if got.Method != http.MethodPost || got.Path != wantPath {
		t.Errorf("upstream request %s %s, want POST %s", got.Method, got.Path, wantPath)
	}
	if b.anthropic {
		if key := got.Header.Get("X-Api-Key"); key != upstreamAnthropicKey {
			t.Errorf("upstream x-api-key %q, want the gateway's %q", key, upstreamAnthropicKey)
		}
	} else if auth := got.Header.Get("Authorization"); auth != "Bearer "+upstreamOpenAIKey {
		t.Errorf("upstream Authorization %q, want the gateway's key", auth)
	}
	for name, vs := range got.Header {
		for _, v := range vs {
			if strings.Contains(v, clientKey) {
				t.Errorf("upstream header %s carries a client key: %q", name, v)
			}
		}
	}

	if k.sameFormat(b) {
		// Untouched but for the model (and store false on responses).
		want := sameFormatBody(t, k, res.sent, b)
		if !bytes.Equal(got.Body, want) {
			t.Errorf("same-format upstream body\n%s\nwant the client's body with only the model rewritten (and store false)\n%s", got.Body, want)
		}
		body := got.JSON()
		if v, ok := body[extraField]; !ok || !sameJSON(mustJSONText(t, v), mustJSONText(t, extraValue())) {
			t.Errorf("upstream %s = %v, want %v", extraField, v, extraValue())
		}
		return
	}

	// Translated: valid for the upstream (the fakes refuse what the real
	// APIs refuse, so it was answered), with the backing model, the
	// system prompt, the user turn, the token limit, the stream flag and
	// the tools carried over; the unknown field has no counterpart.
	body := got.JSON()
	if body == nil {
		t.Fatalf("upstream body is not a JSON object: %s", got.Body)
	}
	if body["model"] != b.backing {
		t.Errorf("upstream model %v, want %q", body["model"], b.backing)
	}
	if _, ok := body[extraField]; ok {
		t.Errorf("translated upstream body carries %s: %s", extraField, got.Body)
	}
	if stream, _ := body["stream"].(bool); stream != r.stream {
		t.Errorf("upstream stream %v, want %v", body["stream"], r.stream)
	}
	var system, user string
	var limit any
	msgs, _ := body["messages"].([]any)
	if b.anthropic {
		system = contentText(body["system"])
		limit = body["max_tokens"]
		if len(msgs) != 1 || get(msgs, 0, "role") != "user" {
			t.Errorf("upstream messages %v, want one user turn", msgs)
		}
	} else {
		limit = body["max_completion_tokens"]
		if len(msgs) != 2 || get(msgs, 0, "role") != "system" || get(msgs, 1, "role") != "user" {
			t.Errorf("upstream messages %v, want a system and a user message", msgs)
		}
		system = contentText(get(msgs, 0, "content"))
		if r.stream && get(body, "stream_options", "include_usage") != true {
			t.Errorf("streaming chat upstream without stream_options.include_usage: %s", got.Body)
		}
	}
	if len(msgs) > 0 {
		user = contentText(get(msgs, len(msgs)-1, "content"))
	}
	if system != systemText || user != userText {
		t.Errorf("upstream system %q user %q, want %q %q", system, user, systemText, userText)
	}
	if limit != float64(maxTokens) {
		t.Errorf("upstream token limit %v, want %d", limit, maxTokens)
	}
	checkTools(t, k, b, res.sent, got.Body, r.tools)
}

// checkTools compares the tools of the client's body (format k) with the
// tools of the upstream body (b's format): same names, descriptions and
// parameter schemas, in order.
func checkTools(t *testing.T, k clientKind, b backend, sent, upstream []byte, want bool) {
	t.Helper()
	type tool struct {
		name, description string
		schema            any
	}
	read := func(body []byte, path func(any) (string, any, any)) []tool {
		var out []tool
		list, _ := decodeJSON(t, string(body)).(map[string]any)["tools"].([]any)
		for _, x := range list {
			name, d, s := path(x)
			desc, _ := d.(string)
			out = append(out, tool{name, desc, s})
		}
		return out
	}
	chatTool := func(x any) (string, any, any) {
		if get(x, "type") != "function" {
			return "", nil, nil
		}
		n, _ := get(x, "function", "name").(string)
		return n, get(x, "function", "description"), get(x, "function", "parameters")
	}
	responsesTool := func(x any) (string, any, any) {
		if get(x, "type") != "function" {
			return "", nil, nil
		}
		n, _ := get(x, "name").(string)
		return n, get(x, "description"), get(x, "parameters")
	}
	messagesTool := func(x any) (string, any, any) {
		n, _ := get(x, "name").(string)
		return n, get(x, "description"), get(x, "input_schema")
	}
	clientPath := map[clientKind]func(any) (string, any, any){chatClient: chatTool, responsesClient: responsesTool, messagesClient: messagesTool}[k]
	upPath := chatTool
	if b.anthropic {
		upPath = messagesTool
	}
	from, to := read(sent, clientPath), read(upstream, upPath)
	if !want {
		if len(from) != 0 || len(to) != 0 {
			t.Errorf("tools sent %v, upstream got %v; want none", from, to)
		}
		return
	}
	if len(from) != len(toolDefs) {
		t.Fatalf("the client sent %d tools, want %d: %s", len(from), len(toolDefs), sent)
	}
	if len(to) != len(from) {
		t.Fatalf("upstream got %d tools, want %d: %s", len(to), len(from), upstream)
	}
	for i := range from {
		f, u := from[i], to[i]
		if u.name != f.name || u.description != f.description || !sameJSON(mustJSONText(t, u.schema), mustJSONText(t, f.schema)) {
			t.Errorf("upstream tool %d: %s %q %v, want %s %q %v", i, u.name, u.description, u.schema, f.name, f.description, f.schema)
		}
	}
}

// checkEnvelope checks the answer's id, object type, Content-Type and
// stream protocol in client k's format.
func checkEnvelope(t *testing.T, k clientKind, stream bool, res clientResult) {
	t.Helper()
	want := map[clientKind][2]string{
		chatClient:      {"chatcmpl-", "chat.completion"},
		responsesClient: {"resp_", "response"},
		messagesClient:  {"msg_", "message"},
	}[k]
	prefix, object := want[0], want[1]
	if k == chatClient && stream {
		object += ".chunk"
	}
	if !strings.HasPrefix(res.id, prefix) || len(res.id) <= len(prefix) || res.object != object {
		t.Errorf("id %q object %q, want %s<id> and %q", res.id, res.object, prefix, object)
	}
	ct := "application/json"
	if stream {
		ct = "text/event-stream"
	}
	if got := res.header.Get("Content-Type"); !strings.HasPrefix(got, ct) {
		t.Errorf("Content-Type %q, want %s", got, ct)
	}
	if len(res.protocol) > 0 {
		t.Errorf("stream protocol:\n  %s", strings.Join(res.protocol, "\n  "))
	}
}
