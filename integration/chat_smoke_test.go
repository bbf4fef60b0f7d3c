package integration

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// chatGateway starts fake upstreams of both formats and a gateway pointed
// at them, with a bootstrap key.
func chatGateway(t *testing.T) (*gateway, *fake.Upstream, *fake.Upstream, string) {
	t.Helper()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	const key = "sk-chat-bootstrap"
	g := startGateway(t, gwOptions{BootstrapKey: key, Env: map[string]string{
		"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL,
	}})
	return g, oa, an, key
}

func TestChatSmoke(t *testing.T) {
	g, _, _, key := chatGateway(t)
	oc := openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(g.BaseURL+"/alt"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	ctx := context.Background()
	for _, model := range []string{"gw-pinned-gpt-4.1-mini", "gw-pinned-claude-sonnet-4-5"} {
		res, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		if err != nil {
			t.Fatalf("%s chat: %v", model, err)
		}
		t.Logf("%s chat: %q finish %s usage %+v", model, res.Choices[0].Message.Content, res.Choices[0].FinishReason, res.Usage)

		st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		acc := openai.ChatCompletionAccumulator{}
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatalf("%s chat stream: %v", model, err)
		}
		t.Logf("%s chat stream: %q usage %+v", model, acc.Choices[0].Message.Content, acc.Usage)

		msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
		if err != nil {
			t.Fatalf("%s messages: %v", model, err)
		}
		t.Logf("%s messages: %+v stop %s", model, msg.Content, msg.StopReason)
	}
}
