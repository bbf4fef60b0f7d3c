package translate

import "github.com/tidwall/gjson"

// chatUsageRaw renders u as a chat usage object.
func chatUsageRaw(u Usage) []byte {
	b := set(obj(), "prompt_tokens", u.Input)
	b = set(b, "completion_tokens", u.Output)
	b = set(b, "total_tokens", u.Input+u.Output)
	b = set(b, "prompt_tokens_details.cached_tokens", u.CachedInput)
	if u.CacheWrite > 0 {
		b = set(b, "prompt_tokens_details.cache_write_tokens", u.CacheWrite)
	}
	return b
}

// messagesUsageRaw renders u as a messages usage object.
func messagesUsageRaw(u Usage) []byte {
	b := set(obj(), "input_tokens", u.Uncached())
	b = set(b, "cache_creation_input_tokens", u.CacheWrite)
	b = set(b, "cache_read_input_tokens", u.CachedInput)
	return set(b, "output_tokens", u.Output)
}

// responsesUsageRaw renders u as a responses usage object.
func responsesUsageRaw(u Usage, reasoning int64) []byte {
	b := set(obj(), "input_tokens", u.Input)
	b = set(b, "input_tokens_details.cached_tokens", u.CachedInput)
	if u.CacheWrite > 0 {
		b = set(b, "input_tokens_details.cache_write_tokens", u.CacheWrite)
	}
	b = set(b, "output_tokens", u.Output)
	b = set(b, "output_tokens_details.reasoning_tokens", reasoning)
	return set(b, "total_tokens", u.Input+u.Output)
}

// MessagesToChatResponse translates a messages response body into a chat
// completion reporting model.
func MessagesToChatResponse(body []byte, model string) ([]byte, error) {
	r, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	if r.Get("type").String() == "error" {
		return nil, &FieldError{Message: "upstream body is an error, not a message"}
	}
	text, calls := messagesTextAndCalls(r.Get("content"))
	msg := set(obj(), "role", "assistant")
	if text != "" || len(calls) == 0 {
		msg = set(msg, "content", text)
	} else {
		msg = setRaw(msg, "content", "null")
	}
	msg = setRaw(msg, "refusal", "null")
	if len(calls) > 0 {
		msg = setRawB(msg, "tool_calls", rawArray(calls))
	}
	choice := set(obj(), "index", 0)
	choice = setRawB(choice, "message", msg)
	choice = setRaw(choice, "logprobs", "null")
	choice = set(choice, "finish_reason", chatFinish(r.Get("stop_reason").String()))

	res := set(obj(), "id", swapID(r.Get("id").String(), "chatcmpl-"))
	res = set(res, "object", "chat.completion")
	res = set(res, "created", now().Unix())
	res = set(res, "model", model)
	res = setRawB(res, "choices", rawArray([][]byte{choice}))
	res = setRawB(res, "usage", chatUsageRaw(messagesUsageOf(r.Get("usage"))))
	return res, nil
}

// parseCompletion reads a chat completion body, refusing an error body.
func parseCompletion(body []byte) (gjson.Result, error) {
	r, err := parseObject(body)
	if err != nil {
		return r, err
	}
	if r.Get("error").Exists() {
		return r, &FieldError{Message: "upstream body is an error, not a completion"}
	}
	return r, nil
}

// chatMessageParts reads the first choice of a chat response: its text
// (content and refusal), its tool calls as (id, name, arguments), and its
// finish reason.
func chatMessageParts(r gjson.Result) (text string, calls [][3]string, finish string) {
	choice := r.Get("choices.0")
	msg := choice.Get("message")
	text = textOf(msg.Get("content"), "")
	if ref := msg.Get("refusal"); ref.Type == gjson.String && text == "" {
		text = ref.String()
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		fn := tc.Get("function")
		calls = append(calls, [3]string{tc.Get("id").String(), fn.Get("name").String(), fn.Get("arguments").String()})
		return true
	})
	if fc := msg.Get("function_call"); fc.IsObject() && len(calls) == 0 {
		calls = append(calls, [3]string{"", fc.Get("name").String(), fc.Get("arguments").String()})
	}
	return text, calls, choice.Get("finish_reason").String()
}

// ChatToMessagesResponse translates a chat completion body into a messages
// response reporting model.
func ChatToMessagesResponse(body []byte, model string) ([]byte, error) {
	r, err := parseCompletion(body)
	if err != nil {
		return nil, err
	}
	text, calls, finish := chatMessageParts(r)
	var blocks [][]byte
	if text != "" {
		blocks = append(blocks, textBlock(text, gjson.Result{}))
	}
	for _, c := range calls {
		blocks = append(blocks, toolUseBlock(c[0], c[1], c[2]))
	}
	stop := messagesStop(finish)
	if len(calls) > 0 && stop == "end_turn" {
		stop = "tool_use"
	}
	res := set(obj(), "id", swapID(r.Get("id").String(), "msg_"))
	res = set(res, "type", "message")
	res = set(res, "role", "assistant")
	res = set(res, "model", model)
	res = setRawB(res, "content", rawArray(blocks))
	res = set(res, "stop_reason", stop)
	res = setRaw(res, "stop_sequence", "null")
	res = setRawB(res, "usage", messagesUsageRaw(chatUsageOf(r.Get("usage"))))
	return res, nil
}

// responsesStatus is the status and incomplete_details of a responses body
// for a chat finish reason.
func responsesStatus(finish string) (status, incomplete string) {
	switch finish {
	case "length":
		return "incomplete", `{"reason":"max_output_tokens"}`
	case "content_filter":
		return "incomplete", `{"reason":"content_filter"}`
	}
	return "completed", "null"
}

// responseObject renders a responses body.
func responseObject(id string, createdAt int64, model, status string, output [][]byte, usage []byte, incomplete, errRaw string) []byte {
	b := set(obj(), "id", id)
	b = set(b, "object", "response")
	b = set(b, "created_at", createdAt)
	b = set(b, "status", status)
	b = setRaw(b, "error", errRaw)
	b = setRaw(b, "incomplete_details", incomplete)
	b = setRaw(b, "instructions", "null")
	b = setRaw(b, "max_output_tokens", "null")
	b = set(b, "model", model)
	b = setRawB(b, "output", rawArray(output))
	b = set(b, "parallel_tool_calls", true)
	b = setRaw(b, "previous_response_id", "null")
	b = set(b, "store", false)
	b = setRaw(b, "temperature", "null")
	b = setRaw(b, "text", `{"format":{"type":"text"}}`)
	b = set(b, "tool_choice", "auto")
	b = setRaw(b, "tools", "[]")
	b = setRaw(b, "top_p", "null")
	b = set(b, "truncation", "disabled")
	if usage == nil {
		b = setRaw(b, "usage", "null")
	} else {
		b = setRawB(b, "usage", usage)
	}
	return setRaw(b, "metadata", "{}")
}

// outputTextPart renders an output_text content part.
func outputTextPart(text string) []byte {
	b := set(obj(), "type", "output_text")
	b = set(b, "text", text)
	b = setRaw(b, "annotations", "[]")
	return setRaw(b, "logprobs", "[]")
}

// messageItem renders a responses output message item.
func messageItem(id, status string, content [][]byte) []byte {
	b := set(obj(), "id", id)
	b = set(b, "type", "message")
	b = set(b, "status", status)
	b = set(b, "role", "assistant")
	return setRawB(b, "content", rawArray(content))
}

// functionCallItem renders a responses function_call output item.
func functionCallItem(id, status, callID, name, args string) []byte {
	b := set(obj(), "id", id)
	b = set(b, "type", "function_call")
	b = set(b, "status", status)
	b = set(b, "arguments", args)
	b = set(b, "call_id", callID)
	return set(b, "name", name)
}

// ChatToResponsesResponse translates a chat completion body into a responses
// body reporting model.
func ChatToResponsesResponse(body []byte, model string) ([]byte, error) {
	r, err := parseCompletion(body)
	if err != nil {
		return nil, err
	}
	text, calls, finish := chatMessageParts(r)
	status, incomplete := responsesStatus(finish)
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	var output [][]byte
	if text != "" {
		output = append(output, messageItem(newID("msg_"), itemStatus, [][]byte{outputTextPart(text)}))
	}
	for _, c := range calls {
		callID := c[0]
		if callID == "" {
			callID = newID("call_")
		}
		output = append(output, functionCallItem(newID("fc_"), "completed", callID, c[1], c[2]))
	}
	created := r.Get("created").Int()
	if created == 0 {
		created = now().Unix()
	}
	u := r.Get("usage")
	usage := responsesUsageRaw(chatUsageOf(u), u.Get("completion_tokens_details.reasoning_tokens").Int())
	return responseObject(swapID(r.Get("id").String(), "resp_"), created, model, status, output, usage, incomplete, "null"), nil
}
