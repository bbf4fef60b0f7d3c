package chat

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// chatCompletionsSpec is the chat completions format (POST
// /v1/chat/completions), the format of openai-style providers.
var chatCompletionsSpec = formatSpec{
	path:        upstream.PathChat,
	outputLimit: []string{"max_completion_tokens", "max_tokens"},
	streamUsage: true,

	readPrompt:   readChatPrompt,
	promptTokens: func(root gjson.Result) int { return countLocalPrompt(chatCompletionsMembers, root) },

	pricedTools:    map[string]bool{"function": true, "custom": true},
	serviceTiers:   map[string]bool{"auto": true, "default": true, "flex": true},
	unpricedFields: []string{"web_search_options", "audio"},
	billing:        chatCompletionsMembers,

	answerList:     "choices",
	itemStopReason: "finish_reason",
	cutShort:       map[string]bool{"length": true},
	usageOf:        translate.ChatUsageOf,
	eachPart:       chatPart,

	endsWithDone: true,
	appendDelta:  chatDelta,
	isError: func(ev sse.Event) bool {
		return !sse.IsDone(ev) && mayHold(jsonbody.String(ev.Data), "error") && gjson.GetBytes(ev.Data, "error").Exists()
	},
	errorEvent: func(msg string, _ int64) sse.Event {
		return translate.ChatErrorEvent("api_error", "upstream_error", msg)
	},
	finalUsage: func(ev sse.Event) (string, bool) {
		return "usage", chatHasUsage(ev)
	},
	usageLacking: func(ev sse.Event) (string, bool) { return "", sse.IsDone(ev) },
	usageBlock: func(u translate.Usage) []byte {
		return usageObject(tokenCount{"prompt_tokens", u.Input}, tokenCount{"prompt_tokens_details.cached_tokens", u.CachedInput},
			tokenCount{"completion_tokens", u.Output}, tokenCount{"total_tokens", u.Input + u.Output})
	},
	watch: func(ev sse.Event, u *translate.Usage) bool {
		if sse.IsDone(ev) {
			return true
		}
		if chatHasUsage(ev) {
			*u = translate.ChatUsage(ev.Data)
		}
		return false
	},
}

// chatCompletionsMembers is the chat completions format's table of
// request members: what the provider bills as prompt (the messages, tool
// and legacy function definitions, the tool choice, the response format's
// schema), what it may bill as output (a prediction), and why the rest
// bills nothing.
var chatCompletionsMembers = memberTable{
	"messages":        prompt(false),
	"tools":           prompt(false),
	"tool_choice":     prompt(false),
	"functions":       prompt(false),
	"function_call":   prompt(false),
	"response_format": prompt(false),
	"prediction":      {billed: asOutput},

	"model":                  notBilled(whyModel),
	"max_completion_tokens":  notBilled(whyOutputLimit),
	"max_tokens":             notBilled(whyOutputLimit),
	"n":                      notBilled(whyAnswers),
	"temperature":            notBilled(whySampling),
	"top_p":                  notBilled(whySampling),
	"frequency_penalty":      notBilled(whySampling),
	"presence_penalty":       notBilled(whySampling),
	"logit_bias":             notBilled(whySampling),
	"seed":                   notBilled(whySampling),
	"stop":                   notBilled(whySampling),
	"logprobs":               notBilled(whyLogprobs),
	"top_logprobs":           notBilled(whyLogprobs),
	"reasoning_effort":       notBilled(whyEffort),
	"verbosity":              notBilled(whyEffort),
	"parallel_tool_calls":    notBilled(whyToolUse),
	"stream":                 notBilled(whyDelivery),
	"stream_options":         notBilled(whyDelivery),
	"user":                   notBilled(whyLabel),
	"safety_identifier":      notBilled(whyLabel),
	"metadata":               notBilled(whyLabel),
	"store":                  notBilled(whyStore),
	"prompt_cache_key":       notBilled(whyCache),
	"prompt_cache_retention": notBilled(whyCache),
	"prompt_cache_options":   notBilled(whyCache),
	"service_tier":           notBilled(whyTier),
	"moderation":             notBilled(whyModeration),
	"modalities":             notBilled("output modalities: any but text is refused"),
	"audio":                  notBilled(whyRefused),
	"web_search_options":     notBilled(whyRefused),
	"second_opinion":         notBilled(whyOwn),
}

// readChatPrompt reads a chat completion request's messages, output
// limits and answers (n); a whole answer must fit what the gateway reads.
func readChatPrompt(req *request, top members, size int) error {
	msgs, err := messageList(top.messages)
	if err != nil {
		return err
	}
	n := &req.needs
	// Both limits may be sent; the estimate takes the larger, so it
	// bounds the call whichever one the provider honours.
	for _, l := range []struct {
		v     gjson.Result
		field string
	}{{top.maxCompletionTokens, "max_completion_tokens"}, {top.maxTokens, "max_tokens"}} {
		mt, err := readOutputLimit(l.v, l.field)
		if err != nil {
			return err
		}
		n.MaxTokens = max(n.MaxTokens, mt)
	}
	if v := top.n; v.Exists() {
		if v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < 1 || v.Num > MaxAnswers {
			return invalid("n", "n must be a whole number from 1 to %d", MaxAnswers)
		}
		n.Answers = int(v.Num)
	}
	if !req.stream {
		if err := fitsWhole(n, top.logprobs.Type == gjson.True, top.topLogprobs.Int()); err != nil {
			return err
		}
	}
	return readMessageList(req, &top, msgs, size)
}

// chatHasUsage reports a chunk with a usage object (the final usage: a
// chat-completions stream reports it once).
func chatHasUsage(ev sse.Event) bool {
	return !sse.IsDone(ev) && mayHold(jsonbody.String(ev.Data), "usage") && gjson.GetBytes(ev.Data, "usage").IsObject()
}

// chatDelta appends a chunk's deltas of every choice: text, reasoning,
// refusal, tool calls' names and arguments.
func chatDelta(b []byte, data string, ev sse.Event) []byte {
	if sse.IsDone(ev) {
		return b
	}
	gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
		d := c.Get("delta")
		b = append(b, d.Get("content").String()...)
		b = append(b, d.Get("reasoning_content").String()...)
		b = append(b, d.Get("refusal").String()...)
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			b = append(b, tc.Get("function.name").String()...)
			b = append(b, tc.Get("function.arguments").String()...)
			b = append(b, tc.Get("custom.name").String()...)
			b = append(b, tc.Get("custom.input").String()...)
			return true
		})
		return true
	})
	return b
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
