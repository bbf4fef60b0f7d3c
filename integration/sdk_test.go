package integration

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestSDKErrors: the official SDKs parse the gateway's error shapes into
// their own error types, on the paths they build from the base addresses.
func TestSDKErrors(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-sdk-test-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	ctx := context.Background()
	const badKey = "sk-bad-key-for-sdk-test"

	anthropicClient := func(key string) anthropic.Client {
		return anthropic.NewClient(aoption.WithBaseURL(g.BaseURL+"/alt"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	}
	messageParams := anthropic.MessageNewParams{
		Model:     "gw-auto",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
	expectAnthropic := func(t *testing.T, err error, status int, typ anthropic.ErrorType, path string) {
		t.Helper()
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v (%T), want *anthropic.Error", err, err)
		}
		if apiErr.StatusCode != status || apiErr.Type() != typ {
			t.Errorf("StatusCode %d Type %q, want %d %q; body %s", apiErr.StatusCode, apiErr.Type(), status, typ, apiErr.RawJSON())
		}
		if got := apiErr.Request.URL.Path; got != path {
			t.Errorf("the SDK called %s, want %s", got, path)
		}
		expectRequestID(t, response{Header: apiErr.Response.Header}, "req-")
	}

	t.Run("anthropic-sdk-go messages with a bad key", func(t *testing.T) {
		c := anthropicClient(badKey)
		_, err := c.Messages.New(ctx, messageParams)
		expectAnthropic(t, err, http.StatusUnauthorized, anthropic.ErrorTypeAuthenticationError, "/alt/v1/messages")
	})

	t.Run("anthropic-sdk-go count_tokens with a bad key", func(t *testing.T) {
		c := anthropicClient(badKey)
		_, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    "gw-auto",
			Messages: messageParams.Messages,
		})
		expectAnthropic(t, err, http.StatusUnauthorized, anthropic.ErrorTypeAuthenticationError, "/alt/v1/messages/count_tokens")
	})

	t.Run("anthropic-sdk-go messages with a good key reaches the route", func(t *testing.T) {
		// The harness points the providers at an address nothing listens
		// on: the route runs and reports the unreachable upstream as 502.
		c := anthropicClient(boot)
		_, err := c.Messages.New(ctx, messageParams)
		expectAnthropic(t, err, http.StatusBadGateway, anthropic.ErrorTypeAPIError, "/alt/v1/messages")
	})

	openaiClient := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	expectOpenAI := func(t *testing.T, err error, path string) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v (%T), want *openai.Error", err, err)
		}
		if apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" || apiErr.Type != "authentication_error" || apiErr.Message == "" {
			t.Errorf("StatusCode %d Code %q Type %q Message %q, want 401 invalid_api_key authentication_error; body %s",
				apiErr.StatusCode, apiErr.Code, apiErr.Type, apiErr.Message, apiErr.RawJSON())
		}
		if got := apiErr.Request.URL.Path; got != path {
			t.Errorf("the SDK called %s, want %s", got, path)
		}
		expectRequestID(t, response{Header: apiErr.Response.Header}, "req-")
	}

	t.Run("openai-go chat completions with a bad key", func(t *testing.T) {
		c := openaiClient(badKey)
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gw-auto",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		expectOpenAI(t, err, "/v1/chat/completions")
	})

	t.Run("openai-go responses with a bad key", func(t *testing.T) {
		c := openaiClient(badKey)
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gw-auto",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		})
		expectOpenAI(t, err, "/v1/responses")
	})

	t.Run("openai-go models with a bad key", func(t *testing.T) {
		c := openaiClient(badKey)
		_, err := c.Models.List(ctx)
		expectOpenAI(t, err, "/v1/models")
	})
}
