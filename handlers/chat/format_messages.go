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
	promptTokens: func(root gjson.Result) int { return countLocalPrompt(messagesMembers, root) },

	// Custom tools (type absent or "custom") and the client-executed tools
	// whose cost is tokens.
	pricedTools:        map[string]bool{"": true, "custom": true},
	clientToolPrefixes: []string{"bash_", "text_editor_", "computer_"},
	serviceTiers:       map[string]bool{"auto": true, "standard_only": true},
	unpricedFields:     []string{"mcp_servers", "container"},
	pricedValues:       map[string][]string{"inference_geo": {"global"}},
	billing:            messagesMembers,

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

// messagesMembers is the messages format's table of request members
// (stable and beta): what the provider bills as prompt (the messages, the
// system prompt, tool definitions and choice, the output format's
// schema), which of them its count endpoint takes, and why the rest bills
// nothing.
var messagesMembers = memberTable{
	"messages":      prompt(true),
	"system":        prompt(true),
	"tools":         prompt(true),
	"tool_choice":   prompt(true),
	"output_config": prompt(true),
	"output_format": prompt(true),
	"thinking":      {billed: unbilled, why: "the thinking budget: output, bounded by max_tokens; the count endpoint reads it", countable: true},
	"context_management": {billed: unbilled, why: "edits the context (clears old tool results and thinking): bills less, never more; the count endpoint reads it",
		countable: true},
	"mcp_servers": {billed: unbilled, why: whyRefused, countable: true},

	"model":                 notBilled(whyModel),
	"max_tokens":            notBilled(whyOutputLimit),
	"temperature":           notBilled(whySampling),
	"top_k":                 notBilled(whySampling),
	"top_p":                 notBilled(whySampling),
	"stop_sequences":        notBilled(whySampling),
	"stream":                notBilled(whyDelivery),
	"metadata":              notBilled(whyLabel),
	"cache_control":         notBilled(whyCache),
	"service_tier":          notBilled(whyTier),
	"inference_geo":         notBilled("where the model runs: any but global costs more than list price and is refused"),
	"speed":                 notBilled("fast mode, billed at the percentages of its beta"),
	"container":             notBilled(whyRefused),
	"compaction":            notBilled(whyBetaRefused),
	"fallbacks":             notBilled(whyBetaRefused),
	"fallback_credit_token": notBilled("a credit for a call retried after a refusal, with its beta: bills nothing more"),
	"diagnostics":           notBilled("asks for diagnostic fields in the answer"),
	"second_opinion":        notBilled(whyOwn),
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
	return readMessageList(req, &top, msgs, size)
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
