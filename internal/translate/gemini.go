package translate

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Gemini methods, after the model in a path (GeminiPath).
const (
	// GeminiGenerateMethod answers whole.
	GeminiGenerateMethod = ":generateContent"
	// GeminiStreamMethod streams server-sent events, each a
	// GenerateContentResponse chunk.
	GeminiStreamMethod = ":streamGenerateContent?alt=sse"
	// GeminiCountMethod counts a request's prompt (GeminiCountRequest).
	GeminiCountMethod = ":countTokens"
)

// GeminiPath is the path of method (GeminiGenerateMethod, ...) for model
// under the API's base URL: /v1beta/models/{model}{method}.
func GeminiPath(model, method string) string {
	return "/v1beta/models/" + url.PathEscape(model) + method
}

// SkipThoughtSignature is the thought signature Gemini documents for a
// function call it did not make itself (a conversation begun with another
// model): Gemini 3 models refuse a turn's first call without one.
const SkipThoughtSignature = "skip_thought_signature_validator"

// geminiSignatureMark separates, in a tool call id made from a Gemini
// function call, the id from the call's thought signature (base64url, so
// the id keeps to the characters every format accepts).
const geminiSignatureMark = "_sig_"

// geminiThinkingBudgets are the thinkingBudget of each reasoning_effort:
// none 0 (thinking off, where a model allows it), minimal and low 1024,
// medium 8192, high and xhigh 24576 (the budgets of Gemini's own
// chat-completions compatibility).
var geminiThinkingBudgets = map[string]int{"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576}

// geminiFileTypes are the media types of the file extensions an http(s)
// image URL may end in: Gemini needs the type of a file it fetches.
var geminiFileTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif",
	".heic": "image/heic", ".heif": "image/heif",
}

// geminiCallID is the chat id of a Gemini function call: call_ and a
// random suffix, followed when the call has a thought signature by
// geminiSignatureMark and the signature, so that the call sent back
// (ChatToGeminiRequest) carries it again.
func geminiCallID(signature string) string {
	id := newID("call_")
	if signature == "" {
		return id
	}
	raw, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		if raw, err = base64.URLEncoding.DecodeString(signature); err != nil {
			return id
		}
	}
	return id + geminiSignatureMark + base64.RawURLEncoding.EncodeToString(raw)
}

// geminiSignature is the thought signature a geminiCallID carries
// (standard base64), "" when it carries none.
func geminiSignature(id string) string {
	_, sig, found := strings.Cut(id, geminiSignatureMark)
	if !found || sig == "" {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// gturn is a Gemini content (turn) being built.
type gturn struct {
	role  string
	parts [][]byte
}

// geminiReq is a chat request being translated into Gemini contents.
type geminiReq struct {
	system [][]byte
	turns  []*gturn
	names  map[string]string // tool call id → function name
}

// add appends parts to a turn of role, the last one when it has that role.
func (g *geminiReq) add(role string, parts ...[]byte) {
	if len(parts) == 0 {
		return
	}
	if n := len(g.turns); n > 0 && g.turns[n-1].role == role {
		g.turns[n-1].parts = append(g.turns[n-1].parts, parts...)
		return
	}
	g.turns = append(g.turns, &gturn{role: role, parts: parts})
}

// ChatToGeminiRequest translates a chat request body into a Gemini
// generateContent body for model. A request that cannot be translated is a
// *FieldError whose Param names the part (messages[i].content[j]...). What
// does not map one to one:
//
//   - the body carries neither the model nor the stream flag: both are in
//     the path (GeminiPath); a streaming chat request goes to
//     GeminiStreamMethod.
//   - system and developer messages (wherever they stand) become
//     systemInstruction, their texts as parts in order.
//   - roles: user stays user, assistant becomes model; tool messages
//     become functionResponse parts of a user turn. Consecutive turns of
//     the same role are one turn (Gemini answers parallel calls' results
//     together).
//   - images: a data: URL becomes inlineData (its media type; sniffed from
//     the bytes when the URL names none), an http(s) URL fileData when its
//     path's extension names an image type Gemini reads; any other image
//     is refused (a FieldError naming the part). file parts with
//     file_data become inlineData; a file_id is refused (the file is kept
//     by another provider). input_audio becomes inlineData audio/<format>.
//     Other parts and empty texts are dropped.
//   - assistant tool_calls become functionCall parts whose args are the
//     parsed arguments (not an object: kept under RawArgumentsKey). A
//     call's thought signature comes back from its id (see
//     geminiCallID); the first call of a turn that has none carries
//     SkipThoughtSignature, as Gemini asks of calls it did not make.
//   - a tool message's functionResponse is named after the call its
//     tool_call_id answers (an id that answers no earlier call is
//     refused); its response is the content when that is a JSON object,
//     else {"content": the text}. Images in a tool message follow as parts
//     of the same turn.
//   - tools: function tools become functionDeclarations. Their parameters
//     are converted to Gemini's Schema (geminiSchema); a schema it cannot
//     say is sent whole as parametersJsonSchema; an object without
//     properties is no parameters. Other tools are dropped.
//   - tool_choice none/auto/required/{function} becomes
//     toolConfig.functionCallingConfig mode NONE/AUTO/ANY/ANY with
//     allowedFunctionNames; dropped without tools. parallel_tool_calls is
//     dropped (Gemini has no such switch).
//   - generationConfig: max_completion_tokens (else max_tokens) becomes
//     maxOutputTokens (which bounds thinking and answer together, as the
//     gateway's output limit does), temperature, top_p, top_k and seed keep their
//     values, stop (string or array, empty ones dropped) becomes
//     stopSequences, response_format json_object becomes responseMimeType
//     application/json, json_schema the same with responseSchema (or
//     responseJsonSchema when Gemini's Schema cannot say it),
//     reasoning_effort becomes thinkingConfig.thinkingBudget
//     (geminiThinkingBudgets; other values dropped).
//   - n above 1 is refused (one candidate is asked for and billed);
//     logprobs, penalties, logit_bias, user, metadata, modalities,
//     stream_options, store and service_tier are dropped.
//   - a request with no user or assistant content is refused (Gemini
//     needs contents).
func ChatToGeminiRequest(body []byte, model string) ([]byte, error) {
	req, msgs, err := parseMessagesRequest(body)
	if err != nil {
		return nil, err
	}
	if n := req.Get("n"); n.Type == gjson.Number && n.Float() > 1 {
		return nil, &FieldError{Param: "n", Message: "must be 1: " + model + " answers with one choice"}
	}
	g := &geminiReq{names: map[string]string{}}
	var ferr error
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		ferr = g.message(m, "messages["+strconv.Itoa(i)+"]")
		i++
		return ferr == nil
	})
	if ferr != nil {
		return nil, ferr
	}
	if len(g.turns) == 0 {
		return nil, &FieldError{Param: "messages", Message: "has no user or assistant content to send"}
	}

	turns := make([][]byte, len(g.turns))
	for i, t := range g.turns {
		turns[i] = newObject().val("role", t.role).raw("parts", rawArray(t.parts)).done()
	}
	res := newObject().raw("contents", rawArray(turns))
	if len(g.system) > 0 {
		res = res.raw("systemInstruction", newObject().raw("parts", rawArray(g.system)).done())
	}
	if decls := geminiDeclarations(req.Get("tools")); len(decls) > 0 {
		res = res.raw("tools", rawArray([][]byte{newObject().raw("functionDeclarations", rawArray(decls)).done()}))
		if tc := geminiToolConfig(req.Get("tool_choice")); tc != nil {
			res = res.raw("toolConfig", tc)
		}
	}
	if gc := geminiGenerationConfig(req); gc != nil {
		res = res.raw("generationConfig", gc)
	}
	return res.done(), nil
}

// message adds one chat message (at param) to g.
func (g *geminiReq) message(m gjson.Result, param string) error {
	content := m.Get("content")
	switch m.Get("role").String() {
	case "system", "developer":
		g.system = append(g.system, geminiTexts(content)...)
	case "user":
		parts, err := geminiParts(content, param+".content")
		if err != nil {
			return err
		}
		g.add("user", parts...)
	case "assistant":
		return g.assistant(m, param)
	case "tool":
		id := m.Get("tool_call_id").String()
		name, ok := g.names[id]
		if !ok {
			return &FieldError{Param: param + ".tool_call_id", Message: "answers no tool call of an earlier assistant message"}
		}
		text, media, err := geminiToolOutput(content, param+".content")
		if err != nil {
			return err
		}
		fr := newObject().val("name", name).raw("response", geminiResponseObject(text)).done()
		g.add("user", append([][]byte{newObject().raw("functionResponse", fr).done()}, media...)...)
	}
	return nil
}

// assistant adds an assistant message (at param): its text, then its
// tool calls as functionCall parts, the first signed (see
// ChatToGeminiRequest).
func (g *geminiReq) assistant(m gjson.Result, param string) error {
	parts := geminiTexts(m.Get("content"))
	if r := m.Get("refusal"); r.Type == gjson.String && r.String() != "" && len(parts) == 0 {
		parts = append(parts, geminiText(r.String()))
	}
	var err error
	j := 0
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		id, fn := tc.Get("id").String(), tc.Get("function")
		name := fn.Get("name").String()
		if name == "" {
			err = &FieldError{Param: param + ".tool_calls[" + strconv.Itoa(j) + "].function.name", Message: "is required"}
			return false
		}
		g.names[id] = name
		call := newObject().val("name", name).rawS("args", parseArguments(fn.Get("arguments").String())).done()
		part := newObject().raw("functionCall", call)
		sig := geminiSignature(id)
		if sig == "" && j == 0 {
			sig = SkipThoughtSignature
		}
		if sig != "" {
			part = part.val("thoughtSignature", sig)
		}
		parts = append(parts, part.done())
		j++
		return true
	})
	if err != nil {
		return err
	}
	g.add("model", parts...)
	return nil
}

// geminiText is a text part.
func geminiText(s string) []byte { return newObject().val("text", s).done() }

// geminiTexts are the text parts of a chat content (a string, or the text
// and refusal parts of an array); empty texts are dropped.
func geminiTexts(content gjson.Result) [][]byte {
	if content.Type == gjson.String {
		if s := content.String(); s != "" {
			return [][]byte{geminiText(s)}
		}
		return nil
	}
	var parts [][]byte
	content.ForEach(func(_, p gjson.Result) bool {
		if s := partText(p); s != "" {
			parts = append(parts, geminiText(s))
		}
		return true
	})
	return parts
}

// partText is the text of a chat or responses text or refusal part, ""
// for other parts.
func partText(p gjson.Result) string {
	switch p.Get("type").String() {
	case "text", "input_text", "output_text":
		return p.Get("text").String()
	case "refusal":
		return p.Get("refusal").String()
	}
	return ""
}

// geminiParts converts a user content (at param) into Gemini parts: text,
// images, files and audio; other parts are dropped.
func geminiParts(content gjson.Result, param string) ([][]byte, error) {
	if content.Type == gjson.String {
		return geminiTexts(content), nil
	}
	var parts [][]byte
	var err error
	j := 0
	content.ForEach(func(_, p gjson.Result) bool {
		var part []byte
		part, err = geminiPart(p, param+"["+strconv.Itoa(j)+"]")
		j++
		if part != nil {
			parts = append(parts, part)
		}
		return err == nil
	})
	return parts, err
}

// geminiPart converts one chat content part (at param); nil for a part
// that is dropped.
func geminiPart(p gjson.Result, param string) ([]byte, error) {
	switch p.Get("type").String() {
	case "text", "input_text", "output_text", "refusal":
		if s := partText(p); s != "" {
			return geminiText(s), nil
		}
	case "image_url":
		iu := p.Get("image_url")
		u := iu.String()
		if iu.IsObject() {
			u = iu.Get("url").String()
		}
		return geminiImage(u, param+".image_url.url")
	case "file":
		f := p.Get("file")
		if d := f.Get("file_data").String(); d != "" {
			mt, data, ok := dataURL(d)
			if !ok || data == "" {
				return nil, &FieldError{Param: param + ".file.file_data", Message: "must be a data: URL with content"}
			}
			if mt == "" {
				mt = sniffType(data)
			}
			return geminiInline(mt, data), nil
		}
		if f.Get("file_id").String() != "" {
			return nil, &FieldError{Param: param + ".file.file_id", Message: "cannot be sent to this model: send the file's content as file_data"}
		}
	case "input_audio":
		a := p.Get("input_audio")
		if data := a.Get("data").String(); data != "" {
			mt := "audio/" + a.Get("format").String()
			if a.Get("format").String() == "" {
				mt = sniffType(data)
			}
			return geminiInline(mt, data), nil
		}
	}
	return nil, nil
}

// geminiInline is an inlineData part.
func geminiInline(mimeType, b64 string) []byte {
	return newObject().raw("inlineData", newObject().val("mimeType", mimeType).val("data", b64).done()).done()
}

// geminiImage converts an image URL (at param): a data: URL becomes
// inlineData, an http(s) URL whose extension names its type fileData;
// another URL is refused.
func geminiImage(u, param string) ([]byte, error) {
	if mt, data, ok := dataURL(u); ok {
		if data == "" {
			return nil, &FieldError{Param: param, Message: "is a data: URL without content"}
		}
		if mt == "" {
			mt = sniffType(data)
		}
		return geminiInline(mt, data), nil
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return nil, &FieldError{Param: param, Message: "must be a data: URL or an http(s) URL"}
	}
	mt, ok := geminiFileTypes[strings.ToLower(path.Ext(pu.Path))]
	if !ok {
		return nil, &FieldError{Param: param, Message: "names no image type this model reads (png, jpeg, webp, gif, heic, heif): send the image as a data: URL"}
	}
	return newObject().raw("fileData", newObject().val("mimeType", mt).val("fileUri", u).done()).done(), nil
}

// sniffLen is how much of a base64 payload sniffType decodes.
const sniffLen = 684 // 512 bytes and some, a multiple of 4

// sniffType is the media type of a base64 payload's first bytes
// (application/octet-stream when they say nothing).
func sniffType(b64 string) string {
	head := b64[:min(len(b64), sniffLen)]
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		if raw, err = base64.URLEncoding.DecodeString(head); err != nil {
			return "application/octet-stream"
		}
	}
	mt, _, _ := strings.Cut(http.DetectContentType(raw), ";")
	return mt
}

// geminiToolOutput reads a tool message's content (at param): its text
// (a string, or the text parts joined) and its images as Gemini parts.
func geminiToolOutput(content gjson.Result, param string) (text string, media [][]byte, err error) {
	if content.Type == gjson.String || !content.IsArray() {
		return content.String(), nil, nil
	}
	var texts []string
	j := 0
	content.ForEach(func(_, p gjson.Result) bool {
		pp := param + "[" + strconv.Itoa(j) + "]"
		j++
		if s := partText(p); s != "" {
			texts = append(texts, s)
			return true
		}
		var part []byte
		if part, err = geminiPart(p, pp); part != nil {
			media = append(media, part)
		}
		return err == nil
	})
	return strings.Join(texts, ""), media, err
}

// geminiResponseObject is a functionResponse's response: the text when it
// is a JSON object, else {"content": text}.
func geminiResponseObject(text string) []byte {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") && gjson.Valid(t) {
		return []byte(t)
	}
	return newObject().val("content", text).done()
}

// geminiDeclarations are the functionDeclarations of chat tools.
func geminiDeclarations(tools gjson.Result) [][]byte {
	var decls [][]byte
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").String(); typ != "" && typ != "function" {
			return true
		}
		fn := t.Get("function")
		name := fn.Get("name").String()
		if name == "" {
			return true
		}
		d := newObject().val("name", name)
		if desc := fn.Get("description"); desc.Type == gjson.String {
			d = d.val("description", desc.String())
		}
		if key, params := geminiParameters(fn.Get("parameters")); key != "" {
			d = d.raw(key, params)
		}
		decls = append(decls, d.done())
		return true
	})
	return decls
}

// geminiToolConfig is the toolConfig of a chat tool_choice, nil for none.
func geminiToolConfig(c gjson.Result) []byte {
	fc := newObject()
	switch {
	case c.Type == gjson.String:
		mode, ok := map[string]string{"none": "NONE", "auto": "AUTO", "required": "ANY"}[c.String()]
		if !ok {
			return nil
		}
		fc = fc.val("mode", mode)
	case c.IsObject() && c.Get("function.name").String() != "":
		fc = fc.val("mode", "ANY").val("allowedFunctionNames", []string{c.Get("function.name").String()})
	default:
		return nil
	}
	return newObject().raw("functionCallingConfig", fc.done()).done()
}

// geminiGenerationConfig is the generationConfig of a chat request, nil
// when it sets nothing Gemini has.
func geminiGenerationConfig(req gjson.Result) []byte {
	gc := newObject()
	stops := chatStops(req)
	if len(stops) > 0 {
		gc = gc.val("stopSequences", stops)
	}
	if v := req.Get("max_completion_tokens"); v.Type == gjson.Number {
		gc = gc.val("maxOutputTokens", v.Int())
	} else if v := req.Get("max_tokens"); v.Type == gjson.Number {
		gc = gc.val("maxOutputTokens", v.Int())
	}
	for _, k := range [][2]string{{"temperature", "temperature"}, {"top_p", "topP"}, {"top_k", "topK"}} {
		if v := req.Get(k[0]); v.Type == gjson.Number {
			gc = gc.rawS(k[1], v.Raw)
		}
	}
	if v := req.Get("seed"); v.Type == gjson.Number {
		gc = gc.val("seed", v.Int())
	}
	rf := req.Get("response_format")
	switch rf.Get("type").String() {
	case "json_object":
		gc = gc.val("responseMimeType", "application/json")
	case "json_schema":
		gc = gc.val("responseMimeType", "application/json")
		if s := rf.Get("json_schema.schema"); s.IsObject() {
			if conv, ok := geminiSchema(s, 0); ok {
				gc = gc.raw("responseSchema", conv)
			} else {
				gc = gc.rawS("responseJsonSchema", s.Raw)
			}
		}
	}
	if e := req.Get("reasoning_effort"); e.Type == gjson.String {
		if budget, ok := geminiThinkingBudgets[e.String()]; ok {
			gc = gc.raw("thinkingConfig", newObject().val("thinkingBudget", budget).done())
		}
	}
	if len(gc) == 1 {
		return nil
	}
	return gc.done()
}
