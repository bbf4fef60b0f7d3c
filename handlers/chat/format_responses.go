package chat

import (
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
}
