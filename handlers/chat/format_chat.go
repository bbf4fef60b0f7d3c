package chat

import (
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

	answerList: "choices",
	cutShort:   map[string]bool{"length": true},
}
