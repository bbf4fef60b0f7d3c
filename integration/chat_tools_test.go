package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A conversation that went through a tool round: the user asks, the
// assistant says something and calls two tools, their results come back,
// the user asks on. Each client format writes it its own way (toolTurns);
// every upstream must receive the same conversation (toolConversation).
const (
	toolArgsA = `{"location":{"city":"Paris","country":"FR"},"units":["celsius"]}`
	toolArgsB = `{"route":{"from":"CDG","to":"JFK"},"passengers":{"adults":2,"children":[{"age":5}]}}`
)

var toolConversation = []string{
	"user: Weather in Paris, and flights to New York?",
	"assistant: Let me check both.",
	"call call_A1 get_weather " + canonicalJSON(toolArgsA),
	"call call_B2 search_flights " + canonicalJSON(toolArgsB),
	"result call_A1 18°C, clear",
	"result call_B2 3 flights from 412 EUR",
	"user: Thanks. Which is cheapest?",
}

// toolTurns is the conversation as a request body of client k's format,
// with the two tools offered, and its path.
func toolTurns(k clientKind, model string) (path, body string) {
	quote := func(s string) string { return string(mustMarshal(s)) }
	switch k {
	case responsesClient:
		return "/v1/responses", fmt.Sprintf(`{"model":%q,"instructions":%s,"max_output_tokens":200,"input":[
{"type":"message","role":"user","content":"Weather in Paris, and flights to New York?"},
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me check both."}]},
{"type":"function_call","call_id":"call_A1","name":"get_weather","arguments":%s},
{"type":"function_call","call_id":"call_B2","name":"search_flights","arguments":%s},
{"type":"function_call_output","call_id":"call_A1","output":"18°C, clear"},
{"type":"function_call_output","call_id":"call_B2","output":"3 flights from 412 EUR"},
{"type":"message","role":"user","content":"Thanks. Which is cheapest?"}],
"tools":[{"type":"function","name":"get_weather","parameters":%s},{"type":"function","name":"search_flights","parameters":%s}]}`,
			model, quote(systemText), quote(toolArgsA), quote(toolArgsB), schemaJSON(0), schemaJSON(1))
	case messagesClient:
		return "/alt/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":200,"system":%s,"messages":[
{"role":"user","content":"Weather in Paris, and flights to New York?"},
{"role":"assistant","content":[{"type":"text","text":"Let me check both."},
 {"type":"tool_use","id":"call_A1","name":"get_weather","input":%s},
 {"type":"tool_use","id":"call_B2","name":"search_flights","input":%s}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_A1","content":"18°C, clear"},
 {"type":"tool_result","tool_use_id":"call_B2","content":[{"type":"text","text":"3 flights from 412 EUR"}]},
 {"type":"text","text":"Thanks. Which is cheapest?"}]}],
"tools":[{"name":"get_weather","input_schema":%s},{"name":"search_flights","input_schema":%s}]}`,
			model, quote(systemText), toolArgsA, toolArgsB, schemaJSON(0), schemaJSON(1))
	}
	return "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"max_completion_tokens":200,"messages":[
{"role":"system","content":%s},
{"role":"user","content":"Weather in Paris, and flights to New York?"},
{"role":"assistant","content":"Let me check both.","tool_calls":[
 {"id":"call_A1","type":"function","function":{"name":"get_weather","arguments":%s}},
 {"id":"call_B2","type":"function","function":{"name":"search_flights","arguments":%s}}]},
{"role":"tool","tool_call_id":"call_A1","content":"18°C, clear"},
{"role":"tool","tool_call_id":"call_B2","content":"3 flights from 412 EUR"},
{"role":"user","content":"Thanks. Which is cheapest?"}],
"tools":[{"type":"function","function":{"name":"get_weather","parameters":%s}},{"type":"function","function":{"name":"search_flights","parameters":%s}}]}`,
		model, quote(systemText), quote(toolArgsA), quote(toolArgsB), schemaJSON(0), schemaJSON(1))
}

// mustMarshal is the JSON of v (plain data; it cannot fail).
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func schemaJSON(i int) string { return string(mustMarshal(toolDefs[i].schema)) }

// canonicalJSON is s re-encoded with sorted keys.
func canonicalJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "invalid JSON: " + s
	}
	return string(mustMarshal(v))
}

// upstreamConversation flattens the turns of an upstream body (chat
// completions or messages format) into toolConversation's lines, and
// returns its system prompt.
func upstreamConversation(t *testing.T, body map[string]any, anthropicFormat bool) (system string, lines []string) {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if anthropicFormat {
		system = contentText(body["system"])
		for _, m := range msgs {
			role, _ := get(m, "role").(string)
			switch c := get(m, "content").(type) {
			case string:
				lines = append(lines, role+": "+c)
			case []any:
				for _, b := range c {
					switch get(b, "type") {
					case "text":
						lines = append(lines, fmt.Sprintf("%s: %v", role, get(b, "text")))
					case "tool_use":
						lines = append(lines, fmt.Sprintf("call %v %v %s", get(b, "id"), get(b, "name"), mustMarshal(get(b, "input"))))
					case "tool_result":
						lines = append(lines, fmt.Sprintf("result %v %s", get(b, "tool_use_id"), contentText(get(b, "content"))))
					default:
						lines = append(lines, fmt.Sprintf("unexpected block %s", mustMarshal(b)))
					}
				}
			}
		}
		return system, lines
	}
	for _, m := range msgs {
		role, _ := get(m, "role").(string)
		switch role {
		case "system", "developer":
			system += contentText(get(m, "content"))
		case "tool":
			lines = append(lines, fmt.Sprintf("result %v %s", get(m, "tool_call_id"), contentText(get(m, "content"))))
		default:
			if s := contentText(get(m, "content")); s != "" {
				lines = append(lines, role+": "+s)
			}
			calls, _ := get(m, "tool_calls").([]any)
			for _, c := range calls {
				args, _ := get(c, "function", "arguments").(string)
				lines = append(lines, fmt.Sprintf("call %v %v %s", get(c, "id"), get(c, "function", "name"), canonicalJSON(args)))
			}
		}
	}
	return system, lines
}

// TestChatToolTurns: a conversation carrying tool calls and their results
// reaches every upstream as the same conversation: untouched when the
// formats match, and translated into the upstream's own structure
// (tool_use / tool_result blocks, or tool_calls and tool messages)
// otherwise, which the strict fakes accept.
func TestChatToolTurns(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "tool-turns", nil)
	for _, k := range clientKinds {
		for _, b := range backends {
			t.Run(fmt.Sprintf("%s/%s", k, b.name), func(t *testing.T) {
				e.reset()
				e.fakeOf(b).Push(fake.Script{Text: "The weather is free; flights from 412 EUR.", Usage: fakeUsage(b.anthropic, tokenUsage{Input: 700, Output: 20})})
				path, body := toolTurns(k, b.model)
				r := e.do(t, http.MethodPost, path, body, authFor(k, key)...)
				if r.Status != http.StatusOK {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				if !strings.Contains(string(r.Body), "flights from 412 EUR.") {
					t.Errorf("answer %s lacks the upstream's text", r.Body)
				}
				reqs := e.fakeOf(b).Requests()
				if len(reqs) != 1 {
					t.Fatalf("upstream received %d requests, want 1", len(reqs))
				}
				got := reqs[0]
				if k.sameFormat(b) {
					want := string(sameFormatBody(t, k, []byte(body), b))
					if string(got.Body) != want {
						t.Errorf("same-format upstream body\n%s\nwant\n%s", got.Body, want)
					}
					if k == responsesClient {
						return // /v1/responses upstream: the body is the client's
					}
				}
				up := got.JSON()
				if up["model"] != b.backing {
					t.Errorf("upstream model %v, want %s", up["model"], b.backing)
				}
				system, lines := upstreamConversation(t, up, b.anthropic)
				if system != systemText || !reflect.DeepEqual(lines, toolConversation) {
					t.Errorf("upstream conversation (system %q):\n  %s\nwant (system %q):\n  %s\nbody %s",
						system, strings.Join(lines, "\n  "), systemText, strings.Join(toolConversation, "\n  "), got.Body)
				}
				var names []string
				tools, _ := up["tools"].([]any)
				for _, tl := range tools {
					if b.anthropic {
						names = append(names, fmt.Sprint(get(tl, "name")))
					} else {
						names = append(names, fmt.Sprint(get(tl, "function", "name")))
					}
				}
				if fmt.Sprint(names) != "[get_weather search_flights]" {
					t.Errorf("upstream tools %v, want get_weather and search_flights", names)
				}
			})
		}
	}
}
