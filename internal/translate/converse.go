package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// Bedrock Runtime's Converse API: a chat request becomes a Converse
// request, a Converse answer (or ConverseStream's events, see
// NewConverseToChat) a chat completion.

// MaxConverseToolID is the longest tool use id Converse accepts.
const MaxConverseToolID = 64

// ConversePath is the path, after the base URL, of model's Converse
// endpoint (ConverseStream's when stream): /model/{modelId}/converse or
// /converse-stream. The model id is escaped as AWS's SDKs escape a path
// label (every byte but letters, digits and -._~), so an inference
// profile's or a model ARN's colons and slashes stay in one segment.
func ConversePath(model string, stream bool) string {
	p := "/model/" + escapeLabel(model) + "/converse"
	if stream {
		p += "-stream"
	}
	return p
}

// ConverseCountPath is the path of Bedrock Runtime's CountTokens of
// model.
func ConverseCountPath(model string) string {
	return "/model/" + escapeLabel(model) + "/count-tokens"
}

// ConverseCountRequest makes a CountTokens body from a Converse body
// (ChatToConverseRequest's): {"input": {"converse": {messages, system,
// toolConfig}}}, what Converse bills as prompt.
func ConverseCountRequest(converse []byte, _ string) ([]byte, error) {
	r, err := parseObject(converse)
	if err != nil {
		return nil, err
	}
	in := newObject()
	for _, k := range []string{"messages", "system", "toolConfig"} {
		if v := r.Get(k); v.Exists() {
			in = in.raw(k, []byte(v.Raw))
		}
	}
	return newObject().raw("input", newObject().raw("converse", in.done()).done()).done(), nil
}

// ConverseCountTokens reads a CountTokens answer: its inputTokens.
func ConverseCountTokens(body []byte) (int64, error) {
	r, err := parseObject(body)
	if err != nil {
		return 0, err
	}
	if t := r.Get("inputTokens"); t.Type == gjson.Number {
		return t.Int(), nil
	}
	return 0, &FieldError{Message: "upstream body is not a token count"}
}

// escapeLabel percent-encodes every byte of s but RFC 3986's unreserved
// characters.
func escapeLabel(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// ChatToConverseRequest translates a chat request body into a Converse
// (or ConverseStream: the same body) request. The model is not written:
// Converse names it in the path (ConversePath). What does not map one to
// one:
//
//   - system and developer messages (wherever they stand) become "system"
//     text blocks, in order; response_format json_object or json_schema
//     adds JSONInstruction there (with the schema), as for messages.
//   - consecutive messages of one role share one Converse message (the
//     roles must alternate); tool messages become toolResult blocks of a
//     user message, with the user message that follows them.
//   - images must be data: URLs (Converse takes their bytes): a PNG, JPEG,
//     GIF or WebP image becomes an image block whose format is read from
//     its bytes, else from its declared type. An image by URL, or of
//     another type, is refused (a FieldError naming the part,
//     messages[i].content[j]), as are file parts given by id, files that
//     are neither PDF nor text, and audio.
//   - a file part's data becomes a document block (pdf, or txt, csv, html,
//     md for text); its name keeps only what Converse allows (letters,
//     digits, single spaces, hyphens, parentheses, brackets), without the
//     extension, "document" when nothing is left, numbered when repeated.
//   - a part's cache_control becomes a cachePoint block after it (system
//     and message text, images and documents; not inside tool results).
//   - assistant tool_calls become toolUse blocks whose input is the parsed
//     arguments (RawArgumentsKey for arguments that are not an object);
//     tool call ids are reduced as for messages and, past
//     MaxConverseToolID characters, shortened with a hash of the whole.
//   - max_completion_tokens (else max_tokens), temperature (clamped to
//     [0, 1]), top_p and stop (empty strings dropped) become
//     inferenceConfig's maxTokens, temperature, topP, stopSequences.
//   - function tools become toolConfig.tools toolSpecs (a tool without
//     parameters gets {"type":"object","properties":{}}); tool_choice auto
//     → {auto:{}}, required → {any:{}}, a named function → {tool:{name}}.
//     Converse has no "none": the tools are left out, unless the
//     conversation holds tool calls or results (Converse then requires
//     tools), when they are sent without a choice. A conversation with
//     tool calls but no tools gets a toolSpec for each name it calls.
//   - parallel_tool_calls, n, logprobs, penalties, seed, user, metadata,
//     stream, stream_options and reasoning settings are dropped; empty
//     texts and messages left without content are dropped.
func ChatToConverseRequest(body []byte, _ string) ([]byte, error) {
	req, msgs, err := parseMessagesRequest(body)
	if err != nil {
		return nil, err
	}
	c := &converseRequest{names: map[string]int{}}
	msgs.ForEach(func(i, m gjson.Result) bool {
		err = c.message(m, fmt.Sprintf("messages[%d]", i.Int()))
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if text := jsonModeInstruction(req.Get("response_format")); text != "" {
		c.system = append(c.system, converseText(text))
	}

	turns := make([][]byte, len(c.turns))
	for i, t := range c.turns {
		turns[i] = newObject().val("role", t.role).raw("content", rawArray(t.blocks)).done()
	}
	res := newObject().raw("messages", rawArray(turns))
	if len(c.system) > 0 {
		res = res.raw("system", rawArray(c.system))
	}
	if ic := converseInference(req); ic != nil {
		res = res.raw("inferenceConfig", ic)
	}
	if tc := c.toolConfig(req.Get("tools"), req.Get("tool_choice")); tc != nil {
		res = res.raw("toolConfig", tc)
	}
	return res.done(), nil
}

// jsonModeInstruction is the system text asking for JSON that a chat
// response_format stands for, "" for none.
func jsonModeInstruction(rf gjson.Result) string {
	switch rf.Get("type").String() {
	case "json_object":
		return JSONInstruction
	case "json_schema":
		if s := rf.Get("json_schema.schema"); s.Exists() {
			return JSONInstruction + " It must conform to this JSON schema:\n" + s.Raw
		}
		return JSONInstruction
	}
	return ""
}

// converseTurn is one Converse message being built.
type converseTurn struct {
	role   string
	blocks [][]byte
}

// converseRequest is a Converse request being built from chat messages.
type converseRequest struct {
	system [][]byte
	turns  []*converseTurn
	// names counts the document names used so far; called lists the tool
	// names the conversation calls, in order; toolBlocks tells whether it
	// holds tool calls or results.
	names      map[string]int
	called     []string
	toolBlocks bool
}

// add appends blocks to the conversation as role: to the last message
// when it is role's too.
func (c *converseRequest) add(role string, blocks [][]byte) {
	if len(blocks) == 0 {
		return
	}
	if n := len(c.turns); n > 0 && c.turns[n-1].role == role {
		c.turns[n-1].blocks = append(c.turns[n-1].blocks, blocks...)
		return
	}
	c.turns = append(c.turns, &converseTurn{role: role, blocks: blocks})
}

// message adds one chat message; at names it (messages[i]).
func (c *converseRequest) message(m gjson.Result, at string) error {
	content := m.Get("content")
	switch m.Get("role").String() {
	case "system", "developer":
		c.system = append(c.system, converseSystemBlocks(content)...)
	case "user":
		blocks, err := c.blocks(content, at+".content", true)
		if err != nil {
			return err
		}
		c.add("user", blocks)
	case "assistant":
		blocks, err := c.blocks(content, at+".content", true)
		if err != nil {
			return err
		}
		if r := m.Get("refusal"); r.Type == gjson.String && r.String() != "" && len(blocks) == 0 {
			blocks = append(blocks, converseText(r.String()))
		}
		m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			fn := tc.Get("function")
			blocks = append(blocks, c.toolUse(tc.Get("id").String(), fn.Get("name").String(), fn.Get("arguments").String()))
			return true
		})
		c.add("assistant", blocks)
	case "tool":
		result, err := c.toolResult(m.Get("tool_call_id").String(), content, at+".content")
		if err != nil {
			return err
		}
		c.add("user", [][]byte{result})
	}
	return nil
}

// converseText is a text block.
func converseText(text string) []byte { return newObject().val("text", text).done() }

// converseCachePoint is the block that ends a cached prefix.
const converseCachePoint = `{"cachePoint":{"type":"default"}}`

// converseSystemBlocks converts a system message's content: its text
// parts, each followed by a cache point when it asks for one.
func converseSystemBlocks(content gjson.Result) [][]byte {
	var blocks [][]byte
	if content.Type == gjson.String {
		if s := content.String(); s != "" {
			blocks = append(blocks, converseText(s))
		}
		return blocks
	}
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "text", "input_text", "output_text":
			if s := p.Get("text").String(); s != "" {
				blocks = append(blocks, converseText(s))
				if p.Get("cache_control").IsObject() {
					blocks = append(blocks, []byte(converseCachePoint))
				}
			}
		}
		return true
	})
	return blocks
}

// blocks converts a user or assistant message's content (or, without
// cache points, a tool's) into content blocks; at names the content
// (messages[i].content), a refused part is at[j].
func (c *converseRequest) blocks(content gjson.Result, at string, cache bool) ([][]byte, error) {
	var blocks [][]byte
	if content.Type == gjson.String {
		if s := content.String(); s != "" {
			blocks = append(blocks, converseText(s))
		}
		return blocks, nil
	}
	var err error
	content.ForEach(func(j, p gjson.Result) bool {
		var b []byte
		if b, err = c.part(p, fmt.Sprintf("%s[%d]", at, j.Int())); err != nil {
			return false
		}
		if b == nil {
			return true
		}
		blocks = append(blocks, b)
		if cache && p.Get("cache_control").IsObject() {
			blocks = append(blocks, []byte(converseCachePoint))
		}
		return true
	})
	return blocks, err
}

// part converts one chat content part into a content block: nil for a
// part that is dropped (an empty text, an unknown type), an error for
// one Converse cannot take.
func (c *converseRequest) part(p gjson.Result, at string) ([]byte, error) {
	switch p.Get("type").String() {
	case "text", "input_text", "output_text":
		if s := p.Get("text").String(); s != "" {
			return converseText(s), nil
		}
	case "refusal":
		if s := p.Get("refusal").String(); s != "" {
			return converseText(s), nil
		}
	case "image_url":
		iu := p.Get("image_url")
		u := iu.String()
		if iu.IsObject() {
			u = iu.Get("url").String()
		}
		return converseImage(u, at)
	case "file":
		return c.document(p.Get("file"), at)
	case "input_audio":
		return nil, &FieldError{Param: at, Message: "is audio, which Bedrock's Converse API does not take here"}
	}
	return nil, nil
}

// converseImage makes an image block from a data: URL.
func converseImage(u, at string) ([]byte, error) {
	mt, data, ok := dataURL(u)
	if !ok {
		return nil, &FieldError{Param: at, Message: "is an image by URL; Bedrock takes images as data: send it as a data: URL"}
	}
	format := converseImageFormats[sniffType(data)]
	if format == "" {
		format = converseImageFormats[strings.ToLower(mt)]
	}
	if format == "" {
		return nil, &FieldError{Param: at, Message: "is an image Bedrock does not take: PNG, JPEG, GIF and WebP are taken"}
	}
	img := newObject().val("format", format).raw("source", newObject().val("bytes", data).done()).done()
	return newObject().raw("image", img).done(), nil
}

// converseImageFormats are Converse's image formats by media type.
var converseImageFormats = map[string]string{
	"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp",
}

// converseDocumentFormats are Converse's document formats by media type;
// any other text/ type is "txt".
var converseDocumentFormats = map[string]string{
	"application/pdf": "pdf", "text/plain": "txt", "text/csv": "csv", "text/html": "html", "text/markdown": "md",
}

// document makes a document block from a file part's file (its
// file_data, and filename).
func (c *converseRequest) document(f gjson.Result, at string) ([]byte, error) {
	fileData := f.Get("file_data").String()
	if fileData == "" {
		return nil, &FieldError{Param: at, Message: "is a file without its data (by id, or empty); Bedrock takes files as data: send file_data"}
	}
	mt, data, ok := dataURL(fileData)
	if !ok {
		mt, data = "application/pdf", fileData // bare base64: a PDF, as chat sends them
	}
	mt = strings.ToLower(mt)
	format := converseDocumentFormats[mt]
	if format == "" && strings.HasPrefix(mt, "text/") {
		format = "txt"
	}
	if format == "" {
		return nil, &FieldError{Param: at, Message: "is a file Bedrock's Converse API does not take here: PDF and text files are taken"}
	}
	doc := newObject().val("format", format).val("name", c.documentName(f.Get("filename").String())).
		raw("source", newObject().val("bytes", data).done()).done()
	return newObject().raw("document", doc).done(), nil
}

// documentName is a file name as Converse allows a document's: letters,
// digits, hyphens, parentheses and square brackets, whitespace single;
// without its extension, "document" when nothing is left, " (n)" after a
// name used before.
func (c *converseRequest) documentName(filename string) string {
	filename = strings.TrimSuffix(filename, path.Ext(filename))
	var b strings.Builder
	space := false
	for _, r := range filename {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '(', r == ')', r == '[', r == ']':
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		default:
			space = true
		}
	}
	name := b.String()
	if name == "" {
		name = "document"
	}
	c.names[name]++
	if n := c.names[name]; n > 1 {
		name = fmt.Sprintf("%s (%d)", name, n)
	}
	return name
}

// toolUse makes a toolUse block from a chat tool call.
func (c *converseRequest) toolUse(id, name, args string) []byte {
	c.toolBlocks = true
	if name != "" && !slices.Contains(c.called, name) {
		c.called = append(c.called, name)
	}
	use := newObject().val("toolUseId", converseToolID(id)).val("name", name).rawS("input", parseArguments(args)).done()
	return newObject().raw("toolUse", use).done()
}

// toolResult makes a toolResult block from a chat tool message; at names
// its content.
func (c *converseRequest) toolResult(callID string, content gjson.Result, at string) ([]byte, error) {
	c.toolBlocks = true
	blocks, err := c.blocks(content, at, false)
	if err != nil {
		return nil, err
	}
	result := newObject().val("toolUseId", converseToolID(callID)).raw("content", rawArray(blocks)).done()
	return newObject().raw("toolResult", result).done(), nil
}

// converseToolID is toolID within MaxConverseToolID characters: a longer
// id keeps its start and ends with a hash of the whole, the same on the
// call and its result.
func converseToolID(id string) string {
	id = toolID(id)
	if len(id) <= MaxConverseToolID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	const hashLen = 16
	return id[:MaxConverseToolID-hashLen-1] + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// converseInference is the inferenceConfig of a chat request, nil when it
// sets nothing Converse takes.
func converseInference(req gjson.Result) []byte {
	ic := newObject()
	if v := req.Get("max_completion_tokens"); v.Type == gjson.Number {
		ic = ic.val("maxTokens", v.Int())
	} else if v := req.Get("max_tokens"); v.Type == gjson.Number {
		ic = ic.val("maxTokens", v.Int())
	}
	if t := req.Get("temperature"); t.Type == gjson.Number {
		switch f := t.Float(); {
		case f > 1:
			ic = ic.val("temperature", 1)
		case f < 0:
			ic = ic.val("temperature", 0)
		default:
			ic = ic.rawS("temperature", t.Raw)
		}
	}
	if t := req.Get("top_p"); t.Type == gjson.Number {
		ic = ic.rawS("topP", t.Raw)
	}
	stops := chatStops(req)
	if len(stops) > 0 {
		raw := make([][]byte, len(stops))
		for i, s := range stops {
			raw[i] = jsonbody.AppendString(nil, s)
		}
		ic = ic.raw("stopSequences", rawArray(raw))
	}
	if len(ic) == 1 {
		return nil
	}
	return ic.done()
}

// emptySchema is the input schema of a tool that declares none.
const emptySchema = `{"type":"object","properties":{}}`

// toolConfig is the toolConfig of a chat request's tools and tool_choice,
// nil for none.
func (c *converseRequest) toolConfig(list, choice gjson.Result) []byte {
	var tools [][]byte
	list.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").String(); typ != "" && typ != "function" {
			return true
		}
		fn := t.Get("function")
		if name := fn.Get("name").String(); name != "" {
			tools = append(tools, toolSpec(name, fn.Get("description").String(), fn.Get("parameters")))
		}
		return true
	})
	if len(tools) == 0 {
		for _, name := range c.called {
			tools = append(tools, toolSpec(name, "", gjson.Result{}))
		}
	}
	var tc string
	switch {
	case choice.Type == gjson.String && choice.String() == "auto":
		tc = `{"auto":{}}`
	case choice.Type == gjson.String && choice.String() == "required":
		tc = `{"any":{}}`
	case choice.Type == gjson.String && choice.String() == "none":
		if !c.toolBlocks {
			return nil
		}
	case choice.IsObject():
		if name := choice.Get("function.name").String(); name != "" {
			tc = string(newObject().raw("tool", newObject().val("name", name).done()).done())
		}
	}
	if len(tools) == 0 {
		return nil
	}
	cfg := newObject().raw("tools", rawArray(tools))
	if tc != "" {
		cfg = cfg.rawS("toolChoice", tc)
	}
	return cfg.done()
}

// toolSpec is one tool of a toolConfig; description is dropped when
// empty (Converse refuses an empty one).
func toolSpec(name, description string, parameters gjson.Result) []byte {
	spec := newObject().val("name", name)
	if description != "" {
		spec = spec.val("description", description)
	}
	schema := []byte(emptySchema)
	switch {
	case parameters.IsObject() && !parameters.Get("type").Exists():
		schema = set([]byte(parameters.Raw), "type", "object")
	case parameters.IsObject():
		schema = []byte(parameters.Raw)
	}
	spec = spec.raw("inputSchema", newObject().raw("json", schema).done())
	return newObject().raw("toolSpec", spec.done()).done()
}

// ConverseUsage reads the usage of a Converse answer, or of
// ConverseStream's metadata event ("usage").
func ConverseUsage(body []byte) Usage { return ConverseUsageOf(gjson.GetBytes(body, "usage")) }

// ConverseUsageOf reads a Converse usage object. Converse counts the
// cache apart, as messages does: inputTokens is the input neither read
// from nor written to the cache, so Input is inputTokens +
// cacheReadInputTokens + cacheWriteInputTokens, CachedInput the reads and
// CacheWrite the writes; Output is outputTokens (reasoning included).
// totalTokens is not read.
func ConverseUsageOf(u gjson.Result) Usage {
	var uncached, output, read, written gjson.Result
	jsonbody.Members(u, jsonbody.Member{Key: "inputTokens", To: &uncached}, jsonbody.Member{Key: "outputTokens", To: &output},
		jsonbody.Member{Key: "cacheReadInputTokens", To: &read}, jsonbody.Member{Key: "cacheWriteInputTokens", To: &written})
	return Usage{Input: uncached.Int() + read.Int() + written.Int(), Output: output.Int(), CachedInput: read.Int(), CacheWrite: written.Int()}
}

// converseFinish maps a Converse stopReason to a chat finish_reason:
// end_turn and stop_sequence → stop; max_tokens and
// model_context_window_exceeded → length; tool_use → tool_calls;
// guardrail_intervened and content_filtered → content_filter; anything
// else (malformed_model_output, malformed_tool_use, unknown) → stop.
func converseFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	default:
		return "stop"
	}
}

// ConverseToChatResponse translates a Converse answer into a chat
// completion reporting model. output.message.content's text blocks make
// the content (concatenated), its toolUse blocks the tool_calls (input as
// the arguments, RawArgumentsKey restored); reasoning and other blocks are
// skipped. stopReason becomes finish_reason (see converseFinish), usage
// the chat usage (see ConverseUsageOf). Converse answers carry no id: the
// completion gets a new one. A body without output (an error body) is
// refused.
func ConverseToChatResponse(body []byte, model string) ([]byte, error) {
	r, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	var output, stop, usage gjson.Result
	jsonbody.Members(r, jsonbody.Member{Key: "output", To: &output}, jsonbody.Member{Key: "stopReason", To: &stop},
		jsonbody.Member{Key: "usage", To: &usage})
	if !output.IsObject() {
		return nil, &FieldError{Message: "upstream body is not a Converse answer (no output)"}
	}
	text, calls := converseTextAndCalls(output.Get("message.content"))
	choice := chatChoice(text, calls, converseFinish(stop.String()))
	return newObject().val("id", newID("chatcmpl-")).val("object", "chat.completion").
		val("created", now().Unix()).val("model", model).raw("choices", rawArray([][]byte{choice.done()})).
		raw("usage", chatUsageRaw(ConverseUsageOf(usage))).done(), nil
}

// converseTextAndCalls reads an answer's content blocks: the text blocks
// concatenated, and the toolUse blocks as chat tool_calls entries.
func converseTextAndCalls(content gjson.Result) (string, [][]byte) {
	var text strings.Builder
	var calls [][]byte
	content.ForEach(func(_, b gjson.Result) bool {
		if t := b.Get("text"); t.Type == gjson.String {
			text.WriteString(t.String())
		} else if use := b.Get("toolUse"); use.IsObject() {
			calls = append(calls, chatToolCall(use.Get("toolUseId").String(), use.Get("name").String(), argumentsOf(use.Get("input"))))
		}
		return true
	})
	return text.String(), calls
}
