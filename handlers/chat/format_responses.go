package chat

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/sse"
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
	promptTokens: responsesPromptTokens,

	pricedTools:    map[string]bool{"function": true, "custom": true},
	serviceTiers:   map[string]bool{"auto": true, "default": true, "flex": true},
	unpricedFields: []string{"previous_response_id", "conversation", "prompt"},

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
	n.PromptBound = promptBound(size, 0, 0, n.Tools)
	if !req.stream {
		if err := fitsWhole(n, top.topLogprobs.Type == gjson.Number, top.topLogprobs.Int()); err != nil {
			return err
		}
	}
	if in.Type == gjson.String {
		n.Text = in.String()
	} else if items := in.Array(); len(items) > 0 {
		n.Text = text(items[len(items)-1].Get("content"))
		pics, data := images(in)
		req.images = pics
		n.Vision = pics > 0
		n.PromptTokens += pics * ImageTokenCeiling
		n.PromptBound = promptBound(size, pics, data, n.Tools)
	}
	return nil
}

// responsesPromptTokens counts a responses body's prompt locally: its
// instructions and the text of its input.
func responsesPromptTokens(root gjson.Result) int {
	n := countTokens(root.Get("instructions").String())
	in := root.Get("input")
	if in.Type == gjson.String {
		return n + countTokens(in.String())
	}
	in.ForEach(func(_, item gjson.Result) bool {
		n += perMessageTokens + countTokens(text(item.Get("content")))
		return true
	})
	return n
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
