package chat

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/router"
)

// Format is a chat wire format, of a client or of an upstream.
type Format int

const (
	// ChatCompletions is POST /v1/chat/completions.
	ChatCompletions Format = iota
	// Responses is POST /v1/responses.
	Responses
	// Messages is POST {alt}/v1/messages.
	Messages
)

// upstreamFormat is the format a provider speaks.
func upstreamFormat(p *catalog.Provider) Format {
	if p.Format == catalog.FormatAnthropic {
		return Messages
	}
	return ChatCompletions
}

// charsPerToken turns a body's length into the rough token estimate used
// for routing and reservations (count_tokens counts exactly).
const charsPerToken = 4

// request is what the handler reads of a client body.
type request struct {
	model  string
	stream bool
	// temperatureZero: temperature is present and 0 (the cache applies).
	temperatureZero bool
	secondOpinion   bool
	needs           router.Needs
}

// parse validates a client body of format f and reads what routing,
// reservation and caching need. Errors name the offending field.
func parse(body []byte, f Format) (*request, error) {
	// One reading of the body: a duplicate key (which gjson would read one
	// way and the upstream another) or a nesting past jsonbody.MaxDepth is
	// refused before anything reads it.
	if err := jsonbody.Check(body); err != nil {
		var e *jsonbody.Error
		if errors.As(err, &e) {
			return nil, invalid("body", "%s", e.Reason)
		}
		return nil, invalid("body", "the body must be valid JSON")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, invalid("body", "the body must be a JSON object")
	}
	req := &request{}
	if m := root.Get("model"); m.Exists() {
		if m.Type != gjson.String {
			return nil, invalid("model", "model must be a string")
		}
		req.model = m.String()
	}
	if s := root.Get("stream"); s.Exists() {
		if s.Type != gjson.True && s.Type != gjson.False {
			return nil, invalid("stream", "stream must be a boolean")
		}
		req.stream = s.Bool()
	}
	if t := root.Get("temperature"); t.Exists() {
		if t.Type != gjson.Number {
			return nil, invalid("temperature", "temperature must be a number")
		}
		req.temperatureZero = t.Float() == 0
	}
	req.secondOpinion = root.Get("second_opinion").Type == gjson.True
	n := &req.needs
	n.PromptTokens = len(body) / charsPerToken
	switch f {
	case ChatCompletions, Messages:
		msgs := root.Get("messages")
		if !msgs.IsArray() || len(msgs.Array()) == 0 {
			return nil, invalid("messages", "messages must be a non-empty array of messages")
		}
		for i, m := range msgs.Array() {
			if !m.IsObject() || m.Get("role").Type != gjson.String || !m.Get("content").Exists() && m.Get("tool_calls").Type == gjson.Null {
				return nil, invalid("messages", "messages[%d] must be an object with a role and content", i)
			}
		}
		if f == Messages {
			mt := root.Get("max_tokens")
			if mt.Type != gjson.Number || mt.Int() <= 0 {
				return nil, invalid("max_tokens", "max_tokens is required: a positive whole number")
			}
			n.MaxTokens = int(mt.Int())
		} else {
			n.MaxTokens = int(firstInt(root, "max_completion_tokens", "max_tokens"))
		}
		n.Tools = len(root.Get("tools").Array()) > 0
		n.JSON = root.Get("response_format.type").String() == "json_object" || root.Get("response_format.type").String() == "json_schema"
		last := msgs.Array()[len(msgs.Array())-1]
		n.Text = text(last.Get("content"))
		n.Vision = hasImage(msgs)
	case Responses:
		in := root.Get("input")
		if !in.Exists() || in.Type != gjson.String && !in.IsArray() {
			return nil, invalid("input", "input must be a string or an array of input items")
		}
		n.MaxTokens = int(root.Get("max_output_tokens").Int())
		n.Tools = len(root.Get("tools").Array()) > 0
		n.JSON = root.Get("text.format.type").String() == "json_object" || root.Get("text.format.type").String() == "json_schema"
		if in.Type == gjson.String {
			n.Text = in.String()
		} else if items := in.Array(); len(items) > 0 {
			n.Text = text(items[len(items)-1].Get("content"))
			n.Vision = hasImage(in)
		}
	}
	return req, nil
}

func firstInt(root gjson.Result, paths ...string) int64 {
	for _, p := range paths {
		if v := root.Get(p); v.Type == gjson.Number {
			return v.Int()
		}
	}
	return 0
}

// text joins the text of a content value: a string, or parts with text.
func text(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.String()
	}
	var s string
	content.ForEach(func(_, part gjson.Result) bool {
		if t := part.Get("text"); t.Type == gjson.String {
			s += t.String() + "\n"
		}
		return true
	})
	return s
}

// hasImage reports an image part anywhere in messages or input items, in
// any of the three formats (image_url, image, input_image).
func hasImage(list gjson.Result) bool {
	found := false
	list.ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, part gjson.Result) bool {
			switch part.Get("type").String() {
			case "image_url", "image", "input_image":
				found = true
			}
			return !found
		})
		return !found
	})
	return found
}

func invalid(param, format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}
