package translate

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// amsg is a messages-style message being built.
type amsg struct {
	role        string
	str         string // content as a plain string, when blocks is nil
	isStr       bool
	blocks      [][]byte
	toolResults bool // holds tool results (and what was merged after them)
}

func (m *amsg) raw() []byte {
	b := set(obj(), "role", m.role)
	if m.isStr {
		return set(b, "content", m.str)
	}
	return setRawB(b, "content", rawArray(m.blocks))
}

// parseMessagesRequest reads a chat or messages request body: the object and
// its "messages", which must be an array.
func parseMessagesRequest(body []byte) (req, msgs gjson.Result, err error) {
	if req, err = parseObject(body); err != nil {
		return req, msgs, err
	}
	if msgs = req.Get("messages"); !msgs.IsArray() {
		return req, msgs, &FieldError{Param: "messages", Message: "must be an array"}
	}
	return req, msgs, nil
}

// ChatToMessagesRequest translates a chat request body into a messages
// request for the backing model. See the package documentation for what does
// not map one to one.
func ChatToMessagesRequest(body []byte, model string) ([]byte, error) {
	req, msgs, err := parseMessagesRequest(body)
	if err != nil {
		return nil, err
	}

	var system [][]byte
	var out []*amsg
	last := func() *amsg {
		if len(out) == 0 {
			return nil
		}
		return out[len(out)-1]
	}
	msgs.ForEach(func(_, m gjson.Result) bool {
		content := m.Get("content")
		switch m.Get("role").String() {
		case "system", "developer":
			system = append(system, chatPartsToBlocks(content)...)
		case "user":
			if l := last(); l != nil && l.role == "user" && l.toolResults {
				l.blocks = append(l.blocks, chatPartsToBlocks(content)...)
				return true
			}
			if content.Type == gjson.String {
				if s := content.String(); s != "" {
					out = append(out, &amsg{role: "user", str: s, isStr: true})
				}
				return true
			}
			if blocks := chatPartsToBlocks(content); len(blocks) > 0 {
				out = append(out, &amsg{role: "user", blocks: blocks})
			}
		case "assistant":
			blocks := chatPartsToBlocks(content)
			if r := m.Get("refusal"); r.Type == gjson.String && r.String() != "" && len(blocks) == 0 {
				blocks = append(blocks, textBlock(r.String(), gjson.Result{}))
			}
			m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
				fn := tc.Get("function")
				blocks = append(blocks, toolUseBlock(tc.Get("id").String(), fn.Get("name").String(), fn.Get("arguments").String()))
				return true
			})
			if len(blocks) == 0 {
				return true
			}
			if len(blocks) == 1 && content.Type == gjson.String && !m.Get("tool_calls").IsArray() {
				out = append(out, &amsg{role: "assistant", str: content.String(), isStr: true})
				return true
			}
			out = append(out, &amsg{role: "assistant", blocks: blocks})
		case "tool":
			b := set(obj(), "type", "tool_result")
			b = set(b, "tool_use_id", toolID(m.Get("tool_call_id").String()))
			if content.Type == gjson.String {
				if s := content.String(); s != "" {
					b = set(b, "content", s)
				}
			} else if blocks := chatPartsToBlocks(content); len(blocks) > 0 {
				b = setRawB(b, "content", rawArray(blocks))
			}
			if l := last(); l != nil && l.role == "user" && l.toolResults {
				l.blocks = append(l.blocks, b)
				return true
			}
			out = append(out, &amsg{role: "user", blocks: [][]byte{b}, toolResults: true})
		}
		return true
	})

	// JSON mode: an instruction in the system prompt.
	rf := req.Get("response_format")
	switch rf.Get("type").String() {
	case "json_object":
		system = append(system, textBlock(JSONInstruction, gjson.Result{}))
	case "json_schema":
		text := JSONInstruction
		if s := rf.Get("json_schema.schema"); s.Exists() {
			text += " It must conform to this JSON schema:\n" + s.Raw
		}
		system = append(system, textBlock(text, gjson.Result{}))
	}

	res := set(obj(), "model", model)
	maxTokens := int64(DefaultMaxTokens)
	if v := req.Get("max_completion_tokens"); v.Type == gjson.Number {
		maxTokens = v.Int()
	} else if v := req.Get("max_tokens"); v.Type == gjson.Number {
		maxTokens = v.Int()
	}
	res = set(res, "max_tokens", maxTokens)
	switch {
	case len(system) == 1 && !gjson.GetBytes(system[0], "cache_control").Exists():
		res = set(res, "system", gjson.GetBytes(system[0], "text").String())
	case len(system) > 0:
		res = setRawB(res, "system", rawArray(system))
	}
	raws := make([][]byte, len(out))
	for i, m := range out {
		raws[i] = m.raw()
	}
	res = setRawB(res, "messages", rawArray(raws))

	// Tools and tool choice.
	var tools [][]byte
	req.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").String(); typ != "" && typ != "function" {
			return true
		}
		fn := t.Get("function")
		name := fn.Get("name").String()
		if name == "" {
			return true
		}
		b := set(obj(), "name", name)
		if d := fn.Get("description"); d.Type == gjson.String {
			b = set(b, "description", d.String())
		}
		schema := fn.Get("parameters")
		switch {
		case !schema.IsObject():
			b = setRaw(b, "input_schema", `{"type":"object","properties":{}}`)
		case !schema.Get("type").Exists():
			b = setRaw(b, "input_schema", schema.Raw)
			b = set(b, "input_schema.type", "object")
		default:
			b = setRaw(b, "input_schema", schema.Raw)
		}
		tools = append(tools, b)
		return true
	})
	if len(tools) > 0 {
		res = setRawB(res, "tools", rawArray(tools))
		var tc []byte
		switch c := req.Get("tool_choice"); {
		case c.Type == gjson.String:
			switch c.String() {
			case "none":
				tc = set(obj(), "type", "none")
			case "required":
				tc = set(obj(), "type", "any")
			case "auto":
				tc = set(obj(), "type", "auto")
			}
		case c.IsObject():
			if name := c.Get("function.name").String(); name != "" {
				tc = set(set(obj(), "type", "tool"), "name", name)
			}
		}
		if p := req.Get("parallel_tool_calls"); p.Type == gjson.False {
			if tc == nil {
				tc = set(obj(), "type", "auto")
			}
			if gjson.GetBytes(tc, "type").String() != "none" {
				tc = set(tc, "disable_parallel_tool_use", true)
			}
		}
		if tc != nil {
			res = setRawB(res, "tool_choice", tc)
		}
	}

	// Sampling and the rest.
	if kept := chatStops(req); len(kept) > 0 {
		res = set(res, "stop_sequences", kept)
	}
	if t := req.Get("temperature"); t.Type == gjson.Number {
		switch f := t.Float(); {
		case f > 1:
			res = set(res, "temperature", 1)
		case f < 0:
			res = set(res, "temperature", 0)
		default:
			res = setRaw(res, "temperature", t.Raw)
		}
	}
	if t := req.Get("top_p"); t.Type == gjson.Number {
		res = setRaw(res, "top_p", t.Raw)
	}
	if t := req.Get("top_k"); t.Type == gjson.Number {
		res = setRaw(res, "top_k", t.Raw)
	}
	if s := req.Get("stream"); s.IsBool() {
		res = set(res, "stream", s.Bool())
	}
	if u := req.Get("user"); u.Type == gjson.String && u.String() != "" {
		res = set(res, "metadata.user_id", u.String())
	}
	return res, nil
}

// MessagesToChatRequest translates a messages request body into a chat
// request for the backing model. See the package documentation for what does
// not map one to one.
func MessagesToChatRequest(body []byte, model string) ([]byte, error) {
	req, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	// The top level is read in one pass, not a search from the start for
	// each member.
	var msgs, sys, maxTokens, toolList, toolChoice, stopSeqs, temperature, topP, metadata, outputConfig, outputFormat, stream gjson.Result
	jsonbody.Members(req, jsonbody.Member{Key: "messages", To: &msgs}, jsonbody.Member{Key: "system", To: &sys},
		jsonbody.Member{Key: "max_tokens", To: &maxTokens}, jsonbody.Member{Key: "tools", To: &toolList},
		jsonbody.Member{Key: "tool_choice", To: &toolChoice}, jsonbody.Member{Key: "stop_sequences", To: &stopSeqs},
		jsonbody.Member{Key: "temperature", To: &temperature}, jsonbody.Member{Key: "top_p", To: &topP},
		jsonbody.Member{Key: "metadata", To: &metadata}, jsonbody.Member{Key: "output_config", To: &outputConfig},
		jsonbody.Member{Key: "output_format", To: &outputFormat}, jsonbody.Member{Key: "stream", To: &stream})
	if !msgs.IsArray() {
		return nil, &FieldError{Param: "messages", Message: "must be an array"}
	}

	var out [][]byte
	if s := textOf(sys, "\n\n"); s != "" {
		out = append(out, set(set(obj(), "role", "system"), "content", s))
	}
	msgs.ForEach(func(_, m gjson.Result) bool {
		content := m.Get("content")
		role := m.Get("role").String()
		switch role {
		case "user":
			if content.Type == gjson.String {
				out = append(out, set(set(obj(), "role", "user"), "content", content.String()))
				return true
			}
			var parts [][]byte
			content.ForEach(func(_, b gjson.Result) bool {
				switch b.Get("type").String() {
				case "tool_result":
					tm, images := chatToolMessage(b.Get("tool_use_id").String(), b.Get("content"), toolResultPartsToChat)
					out = append(out, tm)
					parts = append(parts, images...)
				default:
					if p := blockToChatPart(b); p != nil {
						parts = append(parts, p)
					}
				}
				return true
			})
			if len(parts) > 0 {
				out = append(out, setRawB(set(obj(), "role", "user"), "content", rawArray(parts)))
			}
		case "assistant":
			if content.Type == gjson.String {
				out = append(out, set(set(obj(), "role", "assistant"), "content", content.String()))
				return true
			}
			out = append(out, chatAssistantMessage(messagesTextAndCalls(content)))
		}
		return true
	})

	res := set(obj(), "model", model)
	res = setRawB(res, "messages", rawArray(out))
	if v := maxTokens; v.Type == gjson.Number {
		res = setRaw(res, "max_completion_tokens", v.Raw)
	}

	var tools [][]byte
	toolList.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").String(); typ != "" && typ != "custom" {
			return true // server tools
		}
		name := t.Get("name").String()
		if name == "" {
			return true
		}
		tools = append(tools, chatFunctionTool(name, t.Get("description"), t.Get("input_schema")))
		return true
	})
	if len(tools) > 0 {
		res = setRawB(res, "tools", rawArray(tools))
		tc := toolChoice
		switch tc.Get("type").String() {
		case "auto":
			res = set(res, "tool_choice", "auto")
		case "any":
			res = set(res, "tool_choice", "required")
		case "none":
			res = set(res, "tool_choice", "none")
		case "tool":
			c := set(obj(), "type", "function")
			res = setRawB(res, "tool_choice", set(c, "function.name", tc.Get("name").String()))
		}
		if tc.Get("disable_parallel_tool_use").Type == gjson.True {
			res = set(res, "parallel_tool_calls", false)
		}
	}

	var stops []string
	stopSeqs.ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String && len(stops) < MaxChatStop {
			stops = append(stops, v.String())
		}
		return true
	})
	if len(stops) > 0 {
		res = set(res, "stop", stops)
	}
	for _, v := range []struct {
		key string
		v   gjson.Result
	}{{"temperature", temperature}, {"top_p", topP}} {
		if v.v.Type == gjson.Number {
			res = setRaw(res, v.key, v.v.Raw)
		}
	}
	if u := metadata.Get("user_id"); u.Type == gjson.String && u.String() != "" {
		res = set(res, "user", u.String())
	}
	format := outputConfig.Get("format")
	if !format.Exists() {
		format = outputFormat
	}
	if format.Get("type").String() == "json_schema" && format.Get("schema").IsObject() {
		rf := set(obj(), "type", "json_schema")
		rf = set(rf, "json_schema.name", "output")
		rf = setRaw(rf, "json_schema.schema", format.Get("schema").Raw)
		res = setRawB(res, "response_format", rf)
	}
	res = setStream(res, stream)
	return res, nil
}

// setStream copies the stream flag; a streaming chat request also asks for
// the final usage chunk.
func setStream(res []byte, s gjson.Result) []byte {
	if !s.IsBool() {
		return res
	}
	res = set(res, "stream", s.Bool())
	if s.Bool() {
		res = set(res, "stream_options.include_usage", true)
	}
	return res
}

// chatToolCall makes one chat tool_calls entry.
func chatToolCall(id, name, args string) []byte {
	b := set(obj(), "id", id)
	b = set(b, "type", "function")
	b = set(b, "function.name", name)
	return set(b, "function.arguments", args)
}

// chatAssistantMessage makes a chat assistant message from its text and tool
// calls: content is the text, null when there is only tool calls, else "".
func chatAssistantMessage(text string, calls [][]byte) []byte {
	am := set(obj(), "role", "assistant")
	switch {
	case text != "":
		am = set(am, "content", text)
	case len(calls) > 0:
		am = setRaw(am, "content", "null")
	default:
		am = set(am, "content", "")
	}
	if len(calls) > 0 {
		am = setRawB(am, "tool_calls", rawArray(calls))
	}
	return am
}

// messagesTextAndCalls reads messages assistant content blocks: the text
// blocks concatenated, and the tool_use blocks as chat tool_calls entries.
func messagesTextAndCalls(content gjson.Result) (string, [][]byte) {
	var text strings.Builder
	var calls [][]byte
	content.ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").String() {
		case "text":
			text.WriteString(b.Get("text").String())
		case "tool_use":
			calls = append(calls, chatToolCall(b.Get("id").String(), b.Get("name").String(), argumentsOf(b.Get("input"))))
		}
		return true
	})
	return text.String(), calls
}

// chatToolMessage makes the chat tool message answering callID from a tool's
// output: a string, or an array that toChat turns into chat parts. Tool
// messages carry text only: the other parts (images) are returned, for a user
// message after it.
func chatToolMessage(callID string, output gjson.Result, toChat func(gjson.Result) [][]byte) (msg []byte, images [][]byte) {
	msg = set(obj(), "role", "tool")
	msg = set(msg, "tool_call_id", callID)
	if output.Type == gjson.String {
		return set(msg, "content", output.String()), nil
	}
	var texts [][]byte
	for _, p := range toChat(output) {
		if gjson.GetBytes(p, "type").String() == "text" {
			texts = append(texts, p)
		} else {
			images = append(images, p)
		}
	}
	if len(texts) > 0 {
		return setRawB(msg, "content", rawArray(texts)), images
	}
	return set(msg, "content", ""), images
}

// toolResultPartsToChat converts the content blocks of a messages
// tool_result into chat parts: text and image blocks; others are dropped.
func toolResultPartsToChat(content gjson.Result) [][]byte {
	var parts [][]byte
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "text":
			parts = append(parts, chatTextPart(p.Get("text").String()))
		case "image":
			if u := sourceURL(p.Get("source")); u != "" {
				parts = append(parts, chatImagePart(u, ""))
			}
		}
		return true
	})
	return parts
}

// chatFunctionTool makes a chat function tool; description is kept when it
// is a string, parameters when it is an object.
func chatFunctionTool(name string, description, parameters gjson.Result) []byte {
	b := set(obj(), "type", "function")
	b = set(b, "function.name", name)
	if description.Type == gjson.String {
		b = set(b, "function.description", description.String())
	}
	if parameters.IsObject() {
		b = setRaw(b, "function.parameters", parameters.Raw)
	}
	return b
}

// toolUseBlock makes a messages tool_use block from a chat tool call; see
// toolID and parseArguments.
func toolUseBlock(id, name, args string) []byte {
	return newObject().val("type", "tool_use").val("id", toolID(id)).val("name", name).rawS("input", parseArguments(args)).done()
}

// blockToChatPart converts a messages user content block into a chat part
// (text, image, PDF document); other blocks give nil.
func blockToChatPart(b gjson.Result) []byte {
	switch b.Get("type").String() {
	case "text":
		return chatTextPart(b.Get("text").String())
	case "image":
		if u := sourceURL(b.Get("source")); u != "" {
			return chatImagePart(u, "")
		}
	case "document":
		src := b.Get("source")
		switch src.Get("type").String() {
		case "base64":
			f := set(obj(), "type", "file")
			name := b.Get("title").String()
			if name == "" {
				name = "document.pdf"
			}
			f = set(f, "file.filename", name)
			mt := src.Get("media_type").String()
			if mt == "" {
				mt = "application/pdf"
			}
			return set(f, "file.file_data", "data:"+mt+";base64,"+src.Get("data").String())
		case "text":
			return chatTextPart(src.Get("data").String())
		}
	}
	return nil
}

// ResponsesToChatRequest translates a responses request body into a chat
// request for the backing model. See the package documentation for what does
// not map one to one.
func ResponsesToChatRequest(body []byte, model string) ([]byte, error) {
	req, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"previous_response_id", "conversation"} {
		if v := req.Get(k); v.Exists() && v.Type != gjson.Null && v.String() != "" {
			return nil, &FieldError{Param: k, Message: "is not supported: the gateway stores no responses"}
		}
	}
	input := req.Get("input")
	if input.Type != gjson.String && !input.IsArray() {
		return nil, &FieldError{Param: "input", Message: "must be a string or an array of items"}
	}

	var out [][]byte
	if ins := req.Get("instructions"); ins.Type == gjson.String && ins.String() != "" {
		out = append(out, set(set(obj(), "role", "system"), "content", ins.String()))
	}
	if input.Type == gjson.String {
		out = append(out, set(set(obj(), "role", "user"), "content", input.String()))
	}

	// An assistant message being built from an assistant item and the
	// function_call items after it.
	var asstText string
	var asstCalls [][]byte
	asstOpen := false
	var toolImages [][]byte
	flushAsst := func() {
		if !asstOpen {
			return
		}
		out = append(out, chatAssistantMessage(asstText, asstCalls))
		asstOpen, asstText, asstCalls = false, "", nil
	}
	flushImages := func() {
		if len(toolImages) > 0 {
			out = append(out, setRawB(set(obj(), "role", "user"), "content", rawArray(toolImages)))
			toolImages = nil
		}
	}
	input.ForEach(func(_, it gjson.Result) bool {
		typ := it.Get("type").String()
		if typ == "" && it.Get("role").Exists() {
			typ = "message"
		}
		if typ != "function_call_output" {
			flushImages()
		}
		switch typ {
		case "message":
			flushAsst()
			role := it.Get("role").String()
			content := it.Get("content")
			if role == "assistant" {
				asstText, asstOpen = textOf(content, ""), true
				return true
			}
			if role != "system" && role != "developer" {
				role = "user"
			}
			m := set(obj(), "role", role)
			if content.Type == gjson.String {
				out = append(out, set(m, "content", content.String()))
				return true
			}
			parts := responsesPartsToChat(content)
			if len(parts) > 0 {
				out = append(out, setRawB(m, "content", rawArray(parts)))
			}
		case "function_call":
			asstOpen = true
			asstCalls = append(asstCalls, chatToolCall(it.Get("call_id").String(), it.Get("name").String(), it.Get("arguments").String()))
		case "function_call_output":
			flushAsst()
			tm, images := chatToolMessage(it.Get("call_id").String(), it.Get("output"), responsesPartsToChat)
			out = append(out, tm)
			toolImages = append(toolImages, images...)
		}
		return true
	})
	flushAsst()
	flushImages()

	res := set(obj(), "model", model)
	res = setRawB(res, "messages", rawArray(out))
	if v := req.Get("max_output_tokens"); v.Type == gjson.Number {
		res = setRaw(res, "max_completion_tokens", v.Raw)
	}
	var tools [][]byte
	req.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() != "function" || t.Get("name").String() == "" {
			return true
		}
		b := chatFunctionTool(t.Get("name").String(), t.Get("description"), t.Get("parameters"))
		if s := t.Get("strict"); s.IsBool() {
			b = set(b, "function.strict", s.Bool())
		}
		tools = append(tools, b)
		return true
	})
	if len(tools) > 0 {
		res = setRawB(res, "tools", rawArray(tools))
		switch tc := req.Get("tool_choice"); {
		case tc.Type == gjson.String:
			switch s := tc.String(); s {
			case "auto", "none", "required":
				res = set(res, "tool_choice", s)
			}
		case tc.Get("type").String() == "function" && tc.Get("name").String() != "":
			c := set(obj(), "type", "function")
			res = setRawB(res, "tool_choice", set(c, "function.name", tc.Get("name").String()))
		}
		if p := req.Get("parallel_tool_calls"); p.IsBool() {
			res = set(res, "parallel_tool_calls", p.Bool())
		}
	}
	for _, k := range []string{"temperature", "top_p"} {
		if v := req.Get(k); v.Type == gjson.Number {
			res = setRaw(res, k, v.Raw)
		}
	}
	for _, k := range []string{"user", "safety_identifier", "prompt_cache_key"} {
		if v := req.Get(k); v.Type == gjson.String && v.String() != "" {
			res = set(res, k, v.String())
		}
	}
	switch f := req.Get("text.format"); f.Get("type").String() {
	case "json_object":
		res = setRaw(res, "response_format", `{"type":"json_object"}`)
	case "json_schema":
		rf := set(obj(), "type", "json_schema")
		name := f.Get("name").String()
		if name == "" {
			name = "output"
		}
		rf = set(rf, "json_schema.name", name)
		if d := f.Get("description"); d.Type == gjson.String {
			rf = set(rf, "json_schema.description", d.String())
		}
		if s := f.Get("schema"); s.IsObject() {
			rf = setRaw(rf, "json_schema.schema", s.Raw)
		}
		if s := f.Get("strict"); s.IsBool() {
			rf = set(rf, "json_schema.strict", s.Bool())
		}
		res = setRawB(res, "response_format", rf)
	}
	res = setStream(res, req.Get("stream"))
	return res, nil
}

// responsesPartsToChat converts responses content parts into chat parts.
func responsesPartsToChat(content gjson.Result) [][]byte {
	var parts [][]byte
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "input_text", "output_text", "text":
			parts = append(parts, chatTextPart(p.Get("text").String()))
		case "refusal":
			parts = append(parts, chatTextPart(p.Get("refusal").String()))
		case "input_image":
			if u := p.Get("image_url").String(); u != "" {
				parts = append(parts, chatImagePart(u, p.Get("detail").String()))
			}
		case "input_file":
			f := set(obj(), "type", "file")
			switch {
			case p.Get("file_data").String() != "":
				f = set(f, "file.file_data", p.Get("file_data").String())
				if n := p.Get("filename").String(); n != "" {
					f = set(f, "file.filename", n)
				}
			case p.Get("file_id").String() != "":
				f = set(f, "file.file_id", p.Get("file_id").String())
			default:
				return true
			}
			parts = append(parts, f)
		}
		return true
	})
	return parts
}
