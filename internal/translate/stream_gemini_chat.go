package translate

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// NewGeminiToChat translates a Gemini stream (streamGenerateContent with
// alt=sse: data-only events, each a GenerateContentResponse chunk) into
// chat chunks reporting model. The first candidate's text parts become
// content deltas (thought parts are skipped), each functionCall part a
// whole tool call (Gemini sends a call in one piece; its id as
// GeminiToChatResponse makes it). The chunk carrying finishReason (or a
// blocked prompt's promptFeedback) ends the client stream: the finish
// chunk (geminiFinish), a usage chunk (empty choices; usage as
// GeminiUsageOf reads the last counts seen, with
// completion_tokens_details.reasoning_tokens) and "data: [DONE]", produced
// by the Stream itself; Done is true from then on. A Gemini stream has no
// other end: when it stops before a finishReason, Done is false and Close
// ends the client stream as above with finish_reason stop (tool_calls
// after calls). An event with an "error" member becomes a chat error chunk
// and [DONE].
func NewGeminiToChat(model string) Stream {
	return &geminiToChat{messagesToChat: messagesToChat{model: model, created: now().Unix()}}
}

// geminiToChat reuses messagesToChat's chunks (head, chunk, start, fail).
type geminiToChat struct {
	messagesToChat
	calls                              int // tool calls sent
	prompt, toolUse, cached, cand, thk int64
}

func (g *geminiToChat) Usage() Usage {
	return Usage{Input: g.prompt + g.toolUse, CachedInput: g.cached, Output: g.cand + g.thk}
}

func (g *geminiToChat) Event(ev sse.Event) ([]sse.Event, error) {
	if g.done {
		return nil, nil
	}
	if !jsonbody.Valid(ev.Data) {
		return nil, ErrBadEvent
	}
	d := gjson.ParseBytes(ev.Data)
	if e := d.Get("error"); e.Exists() {
		msg := e.Get("message").String()
		if msg == "" {
			msg = "upstream stream error"
		}
		status := e.Get("status").String()
		return g.fail(geminiStreamErrorType(status), status, msg), nil
	}
	g.usage(d.Get("usageMetadata"))
	if !g.started {
		if id := d.Get("responseId").String(); id != "" {
			g.id = swapID(id, "chatcmpl-")
		}
	}
	text, calls, reason := geminiCandidate(d)
	var out []sse.Event
	if text != "" {
		out = append(g.start(), g.chunk(newObject().val("content", text).done(), ""))
	}
	for _, c := range calls {
		tc := newObject().val("index", g.calls).rawS("id", gjsonRaw(c, "id")).val("type", "function").
			rawS("function", gjsonRaw(c, "function")).done()
		g.calls++
		out = append(out, g.start()...)
		out = append(out, g.chunk(newObject().raw("tool_calls", rawArray([][]byte{tc})).done(), ""))
	}
	if reason != "" {
		g.finish = geminiFinish(reason, g.calls > 0)
		out = append(out, g.end()...)
	}
	return out, nil
}

// usage takes the counts present in a usageMetadata object (each chunk's
// are totals so far).
func (g *geminiToChat) usage(u gjson.Result) {
	if !u.IsObject() {
		return
	}
	for _, f := range []struct {
		key string
		to  *int64
	}{{"promptTokenCount", &g.prompt}, {"toolUsePromptTokenCount", &g.toolUse}, {"cachedContentTokenCount", &g.cached},
		{"candidatesTokenCount", &g.cand}, {"thoughtsTokenCount", &g.thk}} {
		if v := u.Get(f.key); v.Type == gjson.Number {
			*f.to = v.Int()
		}
	}
}

// end closes the client stream: the start and finish chunks if not sent
// yet, the usage chunk, [DONE].
func (g *geminiToChat) end() []sse.Event {
	out := g.start()
	if !g.finished {
		g.finished = true
		if g.finish == "" {
			g.finish = geminiFinish("", g.calls > 0)
		}
		out = append(out, g.chunk(obj(), g.finish))
	}
	u := setRaw(g.head(), "choices", "[]")
	u = setRawB(u, "usage", geminiChatUsageRaw(g.Usage(), g.thk))
	out = append(out, sse.Event{Data: u}, sse.Event{Data: []byte("[DONE]")})
	g.done = true
	return out
}

func (g *geminiToChat) Close() []sse.Event {
	if g.done {
		return nil
	}
	return g.end()
}
