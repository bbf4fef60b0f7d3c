package chat

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// messagesSpec is the messages format (POST {alt}/v1/messages), the
// format of anthropic-style providers.
var messagesSpec = formatSpec{
	path:        upstream.PathMessages,
	outputLimit: []string{"max_tokens"},

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
