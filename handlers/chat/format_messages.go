package chat

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// messagesSpec is the messages format (POST {alt}/v1/messages), the
// format of anthropic-style providers.
var messagesSpec = formatSpec{
	path:        upstream.PathMessages,
	outputLimit: []string{"max_tokens"},
	betas:       true,
	counts:      true,

	readPrompt:   readMessagesPrompt,
	promptTokens: countLocalPrompt,

	// Custom tools (type absent or "custom") and the client-executed tools
	// whose cost is tokens.
	pricedTools:        map[string]bool{"": true, "custom": true},
	clientToolPrefixes: []string{"bash_", "text_editor_", "computer_"},
	serviceTiers:       map[string]bool{"auto": true, "standard_only": true},
	unpricedFields:     []string{"mcp_servers", "container"},

	answerList:    "content",
	stopReasonKey: "stop_reason",
	cutShort:      map[string]bool{"max_tokens": true, "refusal": true},
	wrappedUsage:  "message.usage",
	usageOf:       translate.MessagesUsageOf,
	eachPart:      messagesPart,

	appendDelta: func(b []byte, data string, ev sse.Event) []byte {
		if ev.Event != "content_block_delta" {
			return b
		}
		d := gjson.Get(data, "delta")
		b = append(b, d.Get("text").String()...)
		b = append(b, d.Get("partial_json").String()...)
		return append(b, d.Get("thinking").String()...)
	},
	isError: func(ev sse.Event) bool { return ev.Event == "error" },
	errorEvent: func(msg string, _ int64) sse.Event {
		return translate.MessagesErrorEvent("api_error", msg)
	},
	finalUsage: func(ev sse.Event) (string, bool) {
		return "usage", ev.Event == "message_delta" && gjson.GetBytes(ev.Data, "usage").IsObject()
	},
	usageLacking: func(ev sse.Event) (string, bool) {
		return "usage", ev.Event == "message_delta" && !gjson.GetBytes(ev.Data, "usage").IsObject()
	},
	usageBlock: func(u translate.Usage) []byte {
		return usageObject(tokenCount{"input_tokens", u.Uncached()}, tokenCount{"cache_creation_input_tokens", u.CacheWrite},
			tokenCount{"cache_read_input_tokens", u.CachedInput}, tokenCount{"output_tokens", u.Output})
	},
	watch: messagesWatch,
}

// messagesWatch reads a messages stream's usage: the input at
// message_start, the output (and input, when given) at message_delta,
// whose usage is cumulative; message_stop ends it.
func messagesWatch(ev sse.Event, u *translate.Usage) bool {
	switch ev.Event {
	case "message_start":
		*u = translate.MessagesUsage([]byte(gjson.GetBytes(ev.Data, "message").Raw))
	case "message_delta":
		// Input counts may be absent from it.
		d := translate.MessagesUsage(ev.Data)
		u.Output = d.Output
		if d.Input > 0 {
			u.Input, u.CachedInput, u.CacheWrite = d.Input, d.CachedInput, d.CacheWrite
		}
	case "message_stop":
		return true
	}
	return false
}

// readMessagesPrompt reads a messages request's messages and its output
// limit, which the format requires.
func readMessagesPrompt(req *request, top members, size int) error {
	msgs, err := messageList(top.messages)
	if err != nil {
		return err
	}
	if mt := top.maxTokens; !mt.Exists() || mt.Type == gjson.Null {
		return invalid("max_tokens", "max_tokens is required: a whole number from 1 to %d", MaxOutputTokens)
	}
	mt, err := readOutputLimit(top.maxTokens, "max_tokens")
	if err != nil {
		return err
	}
	req.needs.MaxTokens = mt
	readMessageList(req, &top, msgs, size)
	return nil
}

// messagesPart reads one content block of a message: text, thinking, a
// tool use.
func messagesPart(item gjson.Result, fn partFunc) {
	switch item.Get("type").String() {
	case "text":
		fn(partText, "", item.Get("text").String())
	case "thinking":
		fn(partReasoning, "", item.Get("thinking").String())
	case "tool_use", "server_tool_use":
		fn(partToolCall, item.Get("name").String(), item.Get("input").Raw)
	}
}
