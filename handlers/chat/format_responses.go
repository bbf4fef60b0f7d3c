package chat

import (
	"github.com/tidwall/gjson"

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
}

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
