package chat

import (
	"fmt"

	"github.com/caddy-gw/caddy-gw/internal/translate"
)

// pair is two formats: the client's, and the upstream's it is sent
// to.
type pair struct{ client, upstream Format }

// translator carries a call between two formats: the client's request to
// the upstream's format, and the upstream's answer and stream back to the
// client's.
type translator struct {
	request  func(body []byte, model string) ([]byte, error)
	response func(body []byte, model string) ([]byte, error)
	stream   func(model string) translate.Stream
}

// translators are the pairs of formats a call can be carried between, one
// row each. A pair that is not here is never routed: a client of a format
// is sent to a provider of its own format or to one of these.
var translators = map[pair]translator{
	{ChatCompletions, Messages}: {
		request: translate.ChatToMessagesRequest, response: translate.MessagesToChatResponse, stream: translate.NewMessagesToChat,
	},
	{Messages, ChatCompletions}: {
		request: translate.MessagesToChatRequest, response: translate.ChatToMessagesResponse, stream: translate.NewChatToMessages,
	},
	{Responses, ChatCompletions}: {
		request: translate.ResponsesToChatRequest, response: translate.ChatToResponsesResponse, stream: translate.NewChatToResponses,
	},
	// Through chat completions, both ways.
	{Responses, Messages}: {
		request:  then(translate.ResponsesToChatRequest, translate.ChatToMessagesRequest),
		response: then(translate.MessagesToChatResponse, translate.ChatToResponsesResponse),
		stream: func(model string) translate.Stream {
			return translate.Chain(translate.NewMessagesToChat(model), translate.NewChatToResponses(model))
		},
	},
}

// then is a body translation a followed by b.
func then(a, b func([]byte, string) ([]byte, error)) func([]byte, string) ([]byte, error) {
	return func(body []byte, model string) ([]byte, error) {
		mid, err := a(body, model)
		if err != nil {
			return nil, err
		}
		return b(mid, model)
	}
}

// translatorFor is the row of a client of format client sent to an
// upstream of format up.
func translatorFor(client, up Format) (translator, error) {
	t, ok := translators[pair{client, up}]
	if !ok {
		return translator{}, fmt.Errorf("no translation from format %d to %d", client, up)
	}
	return t, nil
}
