package chat

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// responsesSpec is the responses format (POST /v1/responses), served by
// openai-style providers that say so, translated to chat completions for
// the others.
var responsesSpec = formatSpec{
	path:        upstream.PathResponses,
	outputLimit: []string{"max_output_tokens"},
	// Nothing is stored at the provider: a stored response's id would let
	// any tenant of the gateway read it back.
	unstored: true,
	servedBy: func(p *catalog.Provider) bool { return p.Format == catalog.FormatOpenAI && p.Responses },

	readPrompt:   readResponsesPrompt,
	promptTokens: func(root gjson.Result) int { return responsesPromptTokens(responsesMembers, root) },

	pricedTools:    map[string]bool{"function": true, "custom": true},
	serviceTiers:   map[string]bool{"auto": true, "default": true, "flex": true},
	unpricedFields: []string{"previous_response_id", "conversation", "prompt", "context_management"},
	billing:        responsesMembers,

	answerList:    "output",
	stopReasonKey: "status",
	cutShort:      map[string]bool{"incomplete": true},
	wrappedUsage:  "response.usage",
	usageOf:       translate.ResponsesUsageOf,
	eachPart:      responsesPart,

	sequenced: true,
	appendDelta: func(b []byte, data string, _ sse.Event) []byte {
		if strings.HasSuffix(gjson.Get(data, "type").String(), ".delta") {
			return append(b, gjson.Get(data, "delta").String()...)
		}
		return b
	},
	isError: func(ev sse.Event) bool {
		t := gjson.GetBytes(ev.Data, "type").String()
		return ev.Event == "error" || t == "error" || t == "response.failed"
	},
	errorEvent: func(msg string, seq int64) sse.Event {
		return translate.ResponsesErrorEventAt("server_error", msg, seq)
	},
	finalUsage: func(ev sse.Event) (string, bool) {
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()]
	},
	usageLacking: func(ev sse.Event) (string, bool) {
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()] && !gjson.GetBytes(ev.Data, "response.usage").IsObject()
	},
	usageBlock: func(u translate.Usage) []byte {
		return usageObject(tokenCount{"input_tokens", u.Input}, tokenCount{"input_tokens_details.cached_tokens", u.CachedInput},
			tokenCount{"output_tokens", u.Output}, tokenCount{"total_tokens", u.Input + u.Output})
	},
	watch: func(ev sse.Event, u *translate.Usage) bool {
		if !responsesFinal[gjson.GetBytes(ev.Data, "type").String()] {
			return false
		}
		*u = translate.ResponsesUsage([]byte(gjson.GetBytes(ev.Data, "response").Raw))
		return true
	},
}

// responsesMembers is the responses format's table of request members:
// what the provider bills as prompt (the instructions, the input, tool
// definitions and choice, the text format's schema) and why the rest
// bills nothing.
var responsesMembers = memberTable{
	"instructions": prompt(false),
	"input":        prompt(false),
	"tools":        prompt(false),
	"tool_choice":  prompt(false),
	"text":         prompt(false),

	"model":                  notBilled(whyModel),
	"max_output_tokens":      notBilled(whyOutputLimit),
	"temperature":            notBilled(whySampling),
	"top_p":                  notBilled(whySampling),
	"top_logprobs":           notBilled(whyLogprobs),
	"include":                notBilled("asks for more of the answer (encrypted reasoning, log-probabilities, image URLs)"),
	"reasoning":              notBilled(whyEffort),
	"parallel_tool_calls":    notBilled(whyToolUse),
	"max_tool_calls":         notBilled(whyToolUse),
	"truncation":             notBilled(whyTruncation),
	"stream":                 notBilled(whyDelivery),
	"stream_options":         notBilled(whyDelivery),
	"user":                   notBilled(whyLabel),
	"safety_identifier":      notBilled(whyLabel),
	"metadata":               notBilled(whyLabel),
	"store":                  notBilled("sent false by the gateway"),
	"prompt_cache_key":       notBilled(whyCache),
	"prompt_cache_retention": notBilled(whyCache),
	"prompt_cache_options":   notBilled(whyCache),
	"service_tier":           notBilled(whyTier),
	"moderation":             notBilled(whyModeration),
	"access_programs":        notBilled("an access program: allows or refuses the call, at the same price"),
	"background":             notBilled(whyRefused),
	"previous_response_id":   notBilled(whyRefused),
	"conversation":           notBilled(whyRefused),
	"prompt":                 notBilled(whyRefused),
	"context_management":     notBilled("server-side compaction, a summarising run the gateway does not price: refused"),
	"second_opinion":         notBilled(whyOwn),
}

// responsesFinal are the responses stream's terminal events that carry the
// usage of a finished answer: complete, or cut short by its output limit.
var responsesFinal = map[string]bool{"response.completed": true, "response.incomplete": true}

// readResponsesPrompt reads a responses request's input (a string or
// input items) and output limit; a whole answer must fit what the gateway
// reads.
func readResponsesPrompt(req *request, top members, size int) error {
	in := top.input
	if !in.Exists() || in.Type != gjson.String && !in.IsArray() {
		return invalid("input", "input must be a string or an array of input items")
	}
	mt, err := readOutputLimit(top.maxOutputTokens, "max_output_tokens")
	if err != nil {
		return err
	}
	n := &req.needs
	n.MaxTokens = mt
	n.Tools = len(top.tools.Array()) > 0
	n.JSON = jsonFormat(top.text.Get("format.type"))
	if !req.stream {
		if err := fitsWhole(n, top.topLogprobs.Type == gjson.Number, top.topLogprobs.Int()); err != nil {
			return err
		}
	}
	if in.Type == gjson.String {
		n.Text = in.String()
	} else if items := in.Array(); len(items) > 0 {
		n.Text = text(items[len(items)-1].Get("content"))
	}
	return readInline(req, &top, in, "input", size)
}

// responsesPromptTokens counts a responses body's prompt locally: its
// instructions, the text of its input, and the JSON of every other member
// the format's table t bills as prompt (tools, the text format's schema).
func responsesPromptTokens(t memberTable, root gjson.Result) int {
	n := tokens.Count(root.Get("instructions").String())
	in := root.Get("input")
	if in.Type == gjson.String {
		n += tokens.Count(in.String())
	} else {
		in.ForEach(func(_, item gjson.Result) bool {
			n += perMessageTokens + tokens.Count(text(item.Get("content")))
			return true
		})
	}
	return n + countOthers(t, root, "instructions", "input")
}

// responsesPart reads one output item of a response: a message's text and
// refusals, a tool call, a reasoning summary.
func responsesPart(item gjson.Result, fn partFunc) {
	switch item.Get("type").String() {
	case "message":
		item.Get("content").ForEach(func(_, c gjson.Result) bool {
			switch c.Get("type").String() {
			case "output_text":
				fn(partText, "", c.Get("text").String())
			case "refusal":
				fn(partRefusal, "", c.Get("refusal").String())
			}
			return true
		})
	case "function_call":
		fn(partToolCall, item.Get("name").String(), item.Get("arguments").String())
	case "custom_tool_call":
		fn(partToolCall, item.Get("name").String(), item.Get("input").String())
	case "reasoning":
		item.Get("summary").ForEach(func(_, s gjson.Result) bool {
			fn(partReasoning, "", s.Get("text").String())
			return true
		})
	}
}
