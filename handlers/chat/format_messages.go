package chat

import (
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
}
