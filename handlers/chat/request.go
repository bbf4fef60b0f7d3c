package chat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
)

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
	// stops: the request names stop sequences, so an empty answer can be
	// its own doing.
	stops bool
	// images is how many image parts the prompt holds.
	images int
	// documentTokens is the most the prompt's inline documents (PDFs by
	// their pages, text files by their bytes) can be billed for, in
	// tokens; counted apart from the rest of the prompt.
	documentTokens int
	needs          lanes.Needs
}

// parse validates a client body of format f and reads what routing,
// reservation and caching need. Errors name the offending field.
func parse(body []byte, f Format) (*request, error) {
	// One reading of the body: a duplicate key (which gjson would read one
	// way and the upstream another) or a nesting past jsonbody.MaxDepth is
	// refused before anything reads it.
	root, why := jsonbody.Object(body)
	if why != "" {
		return nil, invalid("body", "%s", why)
	}
	top := readMembers(root, f)
	req := &request{}
	if m := top.model; m.Exists() {
		if m.Type != gjson.String {
			return nil, invalid("model", "model must be a string")
		}
		req.model = m.Str
	}
	if s := top.stream; s.Exists() {
		if s.Type != gjson.True && s.Type != gjson.False {
			return nil, invalid("stream", "stream must be a boolean")
		}
		req.stream = s.Bool()
	}
	if t := top.temperature; t.Exists() {
		if t.Type != gjson.Number {
			return nil, invalid("temperature", "temperature must be a number")
		}
		req.temperatureZero = t.Float() == 0
	}
	req.secondOpinion = top.secondOpinion.Type == gjson.True
	for _, v := range []gjson.Result{top.stop, top.stopSequences} {
		if v.Type == gjson.String && v.Str != "" || v.IsArray() && len(v.Array()) > 0 {
			req.stops = true
		}
	}
	if err := unpriced(root, &top, f); err != nil {
		return nil, err
	}
	req.needs.PromptTokens = len(body) / charsPerToken
	if err := f.spec().readPrompt(req, top, len(body)); err != nil {
		return nil, err
	}
	return req, nil
}

// messageList checks the messages of a body of a messages-list format: a
// non-empty array of objects, each with a role and content (or, for a
// chat completion's assistant, tool calls).
func messageList(v gjson.Result) ([]gjson.Result, error) {
	msgs := v.Array()
	if !v.IsArray() || len(msgs) == 0 {
		return nil, invalid("messages", "messages must be a non-empty array of messages")
	}
	for i, m := range msgs {
		if !m.IsObject() || m.Get("role").Type != gjson.String || !m.Get("content").Exists() && m.Get("tool_calls").Type == gjson.Null {
			return nil, invalid("messages", "messages[%d] must be an object with a role and content", i)
		}
	}
	return msgs, nil
}

// readMessageList reads what routing and reservation need of a body's
// messages (msgs, checked by messageList), the body being size bytes:
// tools, JSON mode, the last message's text, the images and documents.
func readMessageList(req *request, top *members, msgs []gjson.Result, size int) error {
	n := &req.needs
	n.Tools = len(top.tools.Array()) > 0
	n.JSON = jsonFormat(top.responseFormat.Get("type"))
	n.Text = text(msgs[len(msgs)-1].Get("content"))
	return readInline(req, top, top.messages, "messages", size)
}

// readInline reads the inline parts of a body's messages or input items
// (list, the member name), the body being size bytes: the images and
// documents, for routing and the worst case (PromptBound), with the
// members the format bills no tokens for left out and those it bills as
// output reserved as output too. A document whose cost cannot be bounded
// is a 400 naming it.
func readInline(req *request, top *members, list gjson.Result, name string, size int) error {
	n := &req.needs
	in := inlineParts{}
	in.images, in.dataBytes = images(list)
	docs, err := documents(list, name)
	if err != nil {
		return err
	}
	in.dataBytes += docs.dataBytes
	in.documentTokens = docs.tokens
	req.images, req.documentTokens = in.images, docs.tokens
	n.Vision = in.images > 0
	n.PromptTokens += in.images * ImageTokenCeiling
	n.PromptBound = promptBound(size-top.unbilledBytes, in, n.Tools)
	n.ExtraOutput = top.outputBytes
	return nil
}

// jsonFormat reports a structured output format type (JSON mode).
func jsonFormat(typ gjson.Result) bool {
	return typ.Str == "json_object" || typ.Str == "json_schema"
}

// members are the top-level members of a body that parse reads, found in
// one pass over it (jsonbody.Check has refused a repeated key).
type members struct {
	model, stream, temperature, secondOpinion, stop, stopSequences gjson.Result
	background, modalities, serviceTier, messages, input, tools    gjson.Result
	maxTokens, maxCompletionTokens, maxOutputTokens, n             gjson.Result
	responseFormat, text, logprobs, topLogprobs                    gjson.Result
	// unpriced are the members of the format's unpricedFields present and
	// not null; unpricedValues the members of its pricedValues with a value
	// it does not list.
	unpriced, unpricedValues []string
	// unbilledBytes are the bytes of the members the format's table bills
	// no tokens for (key and value); outputBytes the bytes of those it
	// bills as output too.
	unbilledBytes, outputBytes int
}

// readMembers reads root's top-level members for a body of format f.
func readMembers(root gjson.Result, f Format) members {
	var m members
	spec := f.spec()
	root.ForEach(func(k, v gjson.Result) bool {
		switch spec.billing[k.Str].billed {
		case unbilled:
			m.unbilledBytes += len(k.Raw) + 1 + len(v.Raw)
		case asOutput:
			m.outputBytes += len(v.Raw)
		}
		switch k.Str {
		case "model":
			m.model = v
		case "stream":
			m.stream = v
		case "temperature":
			m.temperature = v
		case "second_opinion":
			m.secondOpinion = v
		case "stop":
			m.stop = v
		case "stop_sequences":
			m.stopSequences = v
		case "background":
			m.background = v
		case "modalities":
			m.modalities = v
		case "service_tier":
			m.serviceTier = v
		case "messages":
			m.messages = v
		case "input":
			m.input = v
		case "tools":
			m.tools = v
		case "max_tokens":
			m.maxTokens = v
		case "max_completion_tokens":
			m.maxCompletionTokens = v
		case "max_output_tokens":
			m.maxOutputTokens = v
		case "n":
			m.n = v
		case "response_format":
			m.responseFormat = v
		case "text":
			m.text = v
		case "logprobs":
			m.logprobs = v
		case "top_logprobs":
			m.topLogprobs = v
		default:
			if v.Type == gjson.Null {
				break
			}
			if slices.Contains(spec.unpricedFields, k.Str) {
				m.unpriced = append(m.unpriced, k.Str)
			}
			if vals, ok := spec.pricedValues[k.Str]; ok && (v.Type != gjson.String || !slices.Contains(vals, v.Str)) {
				m.unpricedValues = append(m.unpricedValues, k.Str)
			}
		}
		return true
	})
	return m
}

// MaxAnswers bounds chat completions' n (the provider's own limit).
const MaxAnswers = 128

// MaxOutputTokens bounds the output limit a request may set
// (max_completion_tokens, max_tokens, max_output_tokens): more than any
// model writes in one answer, so that no limit can make the reservation
// overflow or be read one way here and another upstream.
const MaxOutputTokens = 1_000_000

// readOutputLimit reads the output limit v, the member field: 0 when absent or null
// (the gateway then sends its own, lanes.DefaultMaxTokens), else a whole
// number from 1 to MaxOutputTokens, or a 400 naming the field.
func readOutputLimit(v gjson.Result, field string) (int, error) {
	if !v.Exists() || v.Type == gjson.Null {
		return 0, nil
	}
	if v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < 1 || v.Num > MaxOutputTokens {
		return 0, invalid(field, "%s must be a whole number from 1 to %d", field, MaxOutputTokens)
	}
	return int(v.Num), nil
}

// What one output token can take in a whole answer's JSON, for the bound
// of fitsWhole: its text (escaped), and with log-probabilities one entry
// (token, logprob, bytes) for it and for each alternative asked.
const (
	answerBytesPerToken  = 16
	logprobBytesPerEntry = 96
)

// fitsWhole refuses a non-streamed request whose answer could be larger
// than the gateway reads of one (MaxResponse): answers × output limit ×
// what a token takes, log-probabilities (logprobs, with top alternatives
// each) included. Such an answer would be cut, so the call could only
// fail after the provider made (and billed) it. It names the field that
// multiplies the size: n, else top_logprobs (without either, the largest
// output limit fits).
func fitsWhole(n *lanes.Needs, logprobs bool, top int64) error {
	answers, limit := int64(max(n.Answers, 1)), int64(n.MaxTokens)
	if limit <= 0 {
		limit = lanes.DefaultMaxTokens
	}
	perToken := int64(answerBytesPerToken)
	if logprobs {
		perToken += (1 + max(top, 0)) * logprobBytesPerEntry
	}
	if answers*limit*perToken <= MaxResponse {
		return nil
	}
	if answers > 1 {
		return invalid("n", "n × the output limit makes an answer larger than the gateway reads (%d bytes); ask for fewer answers or stream", MaxResponse)
	}
	return invalid("top_logprobs", "log-probabilities × the output limit make an answer larger than the gateway reads (%d bytes); ask for fewer or stream", MaxResponse)
}

// ToolUseOverheadTokens is what a provider adds to the prompt of a request
// with tools (the messages-style tool-use system prompt is a few hundred
// tokens), with room.
const ToolUseOverheadTokens = 1024

// inlineParts are the parts of a prompt billed otherwise than by their
// bytes: how many images, the tokens its documents can be billed for, and
// the bytes of the inline data of both.
type inlineParts struct {
	images, documentTokens, dataBytes int
}

// promptBound is the most prompt tokens a body can be billed for, from
// counted, the bytes of its members billed as prompt: every token is at
// least one byte of text, except inline parts (in): an image costs at
// most ImageTokenCeiling whatever its data's size, a document its bound
// (documentTokens); and the provider adds its own prompt for tools.
func promptBound(counted int, in inlineParts, tools bool) int {
	b := counted - in.dataBytes + in.images*ImageTokenCeiling + in.documentTokens
	if tools {
		b += ToolUseOverheadTokens
	}
	return b
}

// unpriced refuses what a request would buy that the gateway cannot price:
// hosted and server tools, dearer service tiers, background runs, audio
// output, stored conversations (whose ids would let one tenant read
// another's, since the gateway sends responses with store false).
func unpriced(root gjson.Result, m *members, f Format) error {
	spec := f.spec()
	for _, field := range spec.unpricedFields {
		if slices.Contains(m.unpriced, field) {
			return invalid(field, "%s is not supported through the gateway (it cannot be priced or is not kept)", field)
		}
	}
	if len(m.unpricedValues) > 0 {
		field := m.unpricedValues[0]
		return invalid(field, "this %s costs more than list price, which the gateway does not bill; send %s", field,
			strings.Join(spec.pricedValues[field], " or "))
	}
	if m.background.Type == gjson.True {
		return invalid("background", "background responses are not supported through the gateway")
	}
	if m.modalities.IsArray() {
		for _, x := range m.modalities.Array() {
			if x.String() != "text" {
				return invalid("modalities", "only text output is supported through the gateway")
			}
		}
	}
	if st := m.serviceTier; st.Exists() && st.Type != gjson.Null && !spec.serviceTiers[st.String()] {
		return invalid("service_tier", "service_tier %q is not supported through the gateway", shorten(st.String()))
	}
	for _, list := range []struct {
		v    gjson.Result
		name string
	}{{m.messages, "messages"}, {m.input, "input"}} {
		if mayHold(root.Raw, "input_audio") && audioInput(list.v) {
			return invalid(list.name, "audio input is billed at audio prices the gateway cannot price; send text")
		}
		if mayHold(root.Raw, "file") || mayHold(root.Raw, "document") {
			if at := fetchedPart(list.v); at != "" {
				return invalid(list.name, "%s%s is a document or file the provider fetches itself (by URL or file id): "+
					"what it holds cannot be reserved for; send its content inline", list.name, at)
			}
		}
	}
	if mayHold(root.Raw, "cache_control") && longCache(root) {
		return invalid("cache_control", "a prompt cache lifetime other than 5m costs more than the gateway can price; omit ttl or send \"5m\"")
	}
	var err error
	m.tools.ForEach(func(_, tool gjson.Result) bool {
		typ := tool.Get("type").String()
		if spec.pricedTools[typ] {
			return true
		}
		for _, p := range spec.clientToolPrefixes {
			if len(typ) > len(p) && typ[:len(p)] == p {
				return true
			}
		}
		err = invalid("tools", "tool type %q is a hosted tool the gateway cannot price; only function tools are supported", shorten(typ))
		return false
	})
	return err
}

// audioInput reports an audio content part (input_audio) in messages or
// input items: providers bill audio tokens at their own, dearer price.
func audioInput(list gjson.Result) bool {
	found := false
	list.ForEach(func(_, m gjson.Result) bool {
		for _, p := range itemParts(m) {
			p.list.ForEach(func(_, part gjson.Result) bool {
				found = part.Get("type").String() == "input_audio"
				return !found
			})
		}
		return !found
	})
	return found
}

// fetchedPart finds the first content part of messages or input items
// whose content the provider fetches itself, and returns where it is
// ("[2].content[0]"), or "". Such a part costs a few bytes of the body but
// a whole document upstream, so no reservation made from the body can
// bound it: a messages-style document (or file) given by URL or file id,
// a chat-completions file part by file id, a responses input file by URL
// or file id. Images by URL are bounded (ImageTokenCeiling) and pass.
func fetchedPart(list gjson.Result) string {
	at := ""
	list.ForEach(func(i, m gjson.Result) bool {
		for _, p := range itemParts(m) {
			if j := fetchedIn(p.list); j != "" {
				at = fmt.Sprintf("[%d].%s%s", i.Int(), p.name, j)
				return false
			}
		}
		return true
	})
	return at
}

// partList is a list of content parts in a message or input item, and
// the member that holds it.
type partList struct {
	name string
	list gjson.Result
}

// itemParts are the content part lists of a message or input item: its
// content, and a responses tool output given as parts
// (function_call_output's output).
func itemParts(m gjson.Result) []partList {
	var content, output gjson.Result
	jsonbody.Members(m, jsonbody.Member{Key: "content", To: &content}, jsonbody.Member{Key: "output", To: &output})
	if output.IsArray() {
		return []partList{{"content", content}, {"output", output}}
	}
	return []partList{{"content", content}}
}

// fetchedIn is fetchedPart for one content list, tool results' content
// included.
func fetchedIn(content gjson.Result) string {
	at := ""
	content.ForEach(func(j, part gjson.Result) bool {
		fetched := false
		switch part.Get("type").String() {
		case "document":
			st := part.Get("source.type").String()
			fetched = st == "url" || st == "file"
		case "file":
			fetched = part.Get("file_id").Exists() || part.Get("file.file_id").Exists()
		case "input_file":
			fetched = part.Get("file_url").Exists() || part.Get("file_id").Exists()
		case "tool_result":
			if k := fetchedIn(part.Get("content")); k != "" {
				at = fmt.Sprintf("[%d].content%s", j.Int(), k)
				return false
			}
		}
		if fetched {
			at = fmt.Sprintf("[%d]", j.Int())
		}
		return at == ""
	})
	return at
}

// mayHold reports whether the JSON text raw may spell word (a key or a
// string value of letters and underscores): it may when word is in it, or
// when it has a \u escape, the only escape that can spell a letter. A
// search of the text is far cheaper than a walk of its tree.
func mayHold(raw, word string) bool {
	return strings.Contains(raw, word) || strings.Contains(raw, `\u`)
}

// cacheTTLs are the prompt cache lifetimes the catalogue's cache write
// price is for (the providers' default); a longer one (messages-style
// "ttl": "1h", generally available without a beta) is billed at a higher
// write price and is refused.
var cacheTTLs = map[string]bool{"5m": true}

// longCache reports whether any cache_control object in v, at any level
// (tools, system blocks, content parts, tool results, the top level),
// asks for a cache lifetime outside cacheTTLs. The body passed
// jsonbody.Check, so the recursion is at most jsonbody.MaxDepth deep.
func longCache(v gjson.Result) bool {
	found := false
	v.ForEach(func(k, x gjson.Result) bool {
		if k.Type == gjson.String && k.Str == "cache_control" && x.IsObject() {
			if ttl := x.Get("ttl"); ttl.Exists() && ttl.Type != gjson.Null && (ttl.Type != gjson.String || !cacheTTLs[ttl.Str]) {
				found = true
			}
		}
		if !found && (x.IsObject() || x.IsArray()) {
			found = longCache(x)
		}
		return !found
	})
	return found
}

// shorten cuts a client value for a message.
func shorten(s string) string {
	const most = 64
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

// text joins the text of a content value: a string, or parts with text.
func text(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.String()
	}
	var s strings.Builder
	content.ForEach(func(_, part gjson.Result) bool {
		if t := part.Get("text"); t.Type == gjson.String {
			s.WriteString(t.String())
			s.WriteByte('\n')
		}
		return true
	})
	return s.String()
}

// ImageTokenCeiling is the most input tokens one image part can cost on
// any catalogued model (the largest tiling of the providers' vision
// pricing, with room): a linked image adds only its URL's length to the
// body, so the reservation adds this for every image part.
const ImageTokenCeiling = 6000

// images counts the image parts in messages or input items, in any of the
// three formats (image_url, image, input_image), tool results' included,
// and the bytes of their inline data (data: URLs, base64 sources).
func images(list gjson.Result) (n, dataBytes int) {
	list.ForEach(func(_, m gjson.Result) bool {
		for _, p := range itemParts(m) {
			k, d := imageParts(p.list)
			n, dataBytes = n+k, dataBytes+d
		}
		return true
	})
	return n, dataBytes
}

// imageParts counts the image parts of one content list, descending into
// messages-style tool results (whose content may hold images).
func imageParts(content gjson.Result) (n, dataBytes int) {
	content.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").String() {
		case "image_url":
			n++
			url := part.Get("image_url")
			if url.IsObject() {
				url = url.Get("url")
			}
			dataBytes += inline(url)
		case "input_image":
			n++
			dataBytes += inline(part.Get("image_url"))
		case "image":
			n++
			dataBytes += len(part.Get("source.data").Raw)
		case "tool_result":
			k, d := imageParts(part.Get("content"))
			n, dataBytes = n+k, dataBytes+d
		}
		return true
	})
	return n, dataBytes
}

// inline is the size of an image URL that carries its data (data:...).
func inline(url gjson.Result) int {
	if url.Type == gjson.String && strings.HasPrefix(url.Str, "data:") {
		return len(url.Raw)
	}
	return 0
}

func invalid(param, format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}
