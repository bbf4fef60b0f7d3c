package chat

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// chatCompletionsSpec is the chat completions format (POST
// /v1/chat/completions), the format of openai-style providers.
var chatCompletionsSpec = formatSpec{
	path:        upstream.PathChat,
	outputLimit: []string{"max_completion_tokens", "max_tokens"},

	pricedTools:    map[string]bool{"function": true, "custom": true},
	serviceTiers:   map[string]bool{"auto": true, "default": true, "flex": true},
	unpricedFields: []string{"web_search_options", "audio"},

	answerList:     "choices",
	itemStopReason: "finish_reason",
	cutShort:       map[string]bool{"length": true},
	usageOf:        translate.ChatUsageOf,
	eachPart:       chatPart,
}

// chatPart reads one choice of a chat completion: its reasoning, text,
// refusal and tool calls.
func chatPart(item gjson.Result, fn partFunc) {
	var msg, content, reasoning, refusal, calls gjson.Result
	jsonbody.Members(item, jsonbody.Member{Key: "message", To: &msg})
	jsonbody.Members(msg, jsonbody.Member{Key: "content", To: &content}, jsonbody.Member{Key: "reasoning_content", To: &reasoning},
		jsonbody.Member{Key: "refusal", To: &refusal}, jsonbody.Member{Key: "tool_calls", To: &calls})
	if reasoning.Type == gjson.String {
		fn(partReasoning, "", reasoning.Str)
	}
	if content.Type == gjson.String {
		fn(partText, "", content.Str)
	}
	if refusal.Type == gjson.String {
		fn(partRefusal, "", refusal.Str)
	}
	calls.ForEach(func(_, tc gjson.Result) bool {
		if c := tc.Get("custom"); c.Exists() {
			fn(partToolCall, c.Get("name").String(), c.Get("input").String())
		} else {
			fn(partToolCall, tc.Get("function.name").String(), tc.Get("function.arguments").String())
		}
		return true
	})
}
