package chat

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// responsesSpec is the responses format (POST /v1/responses), served by
// openai-style providers that say so, translated to chat completions for
// the others.
var responsesSpec = formatSpec{
	path:        upstream.PathResponses,
	outputLimit: []string{"max_output_tokens"},

	pricedTools:    map[string]bool{"function": true, "custom": true},
	serviceTiers:   map[string]bool{"auto": true, "default": true, "flex": true},
	unpricedFields: []string{"previous_response_id", "conversation", "prompt"},

	answerList:    "output",
	stopReasonKey: "status",
	cutShort:      map[string]bool{"incomplete": true},
	wrappedUsage:  "response.usage",
	usageOf:       translate.ResponsesUsageOf,
	eachPart:      responsesPart,

	sequenced: true,
	appendDelta: func(b []byte, data string, _ sse.Event) []byte {
		if strings.HasSuffix(gjson.Get(data, "type").String(), ".delta") {
			return append(b, gjson.Get(data, "delta").String()...)
		}
		return b
	},
	isError: func(ev sse.Event) bool {
		t := gjson.GetBytes(ev.Data, "type").String()
		return ev.Event == "error" || t == "error" || t == "response.failed"
	},
	errorEvent: func(msg string, seq int64) sse.Event {
		return translate.ResponsesErrorEventAt("server_error", msg, seq)
	},
	finalUsage: func(ev sse.Event) (string, bool) {
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()]
	},
	usageLacking: func(ev sse.Event) (string, bool) {
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()] && !gjson.GetBytes(ev.Data, "response.usage").IsObject()
	},
	usageBlock: func(u translate.Usage) []byte {
		return usageObject(tokenCount{"input_tokens", u.Input}, tokenCount{"input_tokens_details.cached_tokens", u.CachedInput},
			tokenCount{"output_tokens", u.Output}, tokenCount{"total_tokens", u.Input + u.Output})
	},
	watch: func(ev sse.Event, u *translate.Usage) bool {
		if !responsesFinal[gjson.GetBytes(ev.Data, "type").String()] {
			return false
		}
		*u = translate.ResponsesUsage([]byte(gjson.GetBytes(ev.Data, "response").Raw))
		return true
	},
}

// responsesFinal are the responses stream's terminal events that carry the
// usage of a finished answer: complete, or cut short by its output limit.
var responsesFinal = map[string]bool{"response.completed": true, "response.incomplete": true}

// responsesPart reads one output item of a response: a message's text and
// refusals, a tool call, a reasoning summary.
func responsesPart(item gjson.Result, fn partFunc) {
	switch item.Get("type").String() {
	case "message":
		item.Get("content").ForEach(func(_, c gjson.Result) bool {
			switch c.Get("type").String() {
			case "output_text":
				fn(partText, "", c.Get("text").String())
			case "refusal":
				fn(partRefusal, "", c.Get("refusal").String())
			}
			return true
		})
	case "function_call":
		fn(partToolCall, item.Get("name").String(), item.Get("arguments").String())
	case "custom_tool_call":
		fn(partToolCall, item.Get("name").String(), item.Get("input").String())
	case "reasoning":
		item.Get("summary").ForEach(func(_, s gjson.Result) bool {
			fn(partReasoning, "", s.Get("text").String())
			return true
		})
	}
}
