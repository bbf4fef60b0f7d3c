package translate

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// chatUsageRaw renders u as a chat usage object.
func chatUsageRaw(u Usage) []byte {
	details := newObject().val("cached_tokens", u.CachedInput)
	if u.CacheWrite > 0 {
		details = details.val("cache_write_tokens", u.CacheWrite)
	}
	return newObject().val("prompt_tokens", u.Input).val("completion_tokens", u.Output).val("total_tokens", u.Input+u.Output).
		raw("prompt_tokens_details", details.done()).done()
}

// messagesUsageRaw renders u as a messages usage object.
func messagesUsageRaw(u Usage) []byte {
	return newObject().val("input_tokens", u.Uncached()).val("cache_creation_input_tokens", u.CacheWrite).
		val("cache_read_input_tokens", u.CachedInput).val("output_tokens", u.Output).done()
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
	choice := chatChoice(text, calls, chatFinish(r.Get("stop_reason").String()))
	return newObject().val("id", swapID(r.Get("id").String(), "chatcmpl-")).val("object", "chat.completion").
		val("created", now().Unix()).val("model", model).raw("choices", rawArray([][]byte{choice.done()})).
		raw("usage", chatUsageRaw(MessagesUsageOf(r.Get("usage")))).done(), nil
}

// completion is what the translations read of a chat completion's top
// level.
type completion struct{ id, created, choices, usage gjson.Result }

// parseCompletion reads a chat completion body in one pass over its top
// level (of a repeated key, the first counts, as a path lookup reads it),
// refusing an error body.
func parseCompletion(body []byte) (completion, error) {
	r, err := parseObject(body)
	if err != nil {
		return completion{}, err
	}
	var c completion
	var errMember gjson.Result
	jsonbody.Members(r, jsonbody.Member{Key: "error", To: &errMember}, jsonbody.Member{Key: "id", To: &c.id},
		jsonbody.Member{Key: "created", To: &c.created}, jsonbody.Member{Key: "choices", To: &c.choices},
		jsonbody.Member{Key: "usage", To: &c.usage})
	if errMember.Exists() {
		return completion{}, &FieldError{Message: "upstream body is an error, not a completion"}
	}
	return c, nil
}

// chatMessageParts reads the first choice of a chat response: its text
// (content and refusal), its tool calls as (id, name, arguments), and its
// finish reason.
func chatMessageParts(c completion) (text string, calls [][3]string, finish string) {
	var msg, reason gjson.Result
	jsonbody.Members(c.choices.Get("0"), jsonbody.Member{Key: "message", To: &msg}, jsonbody.Member{Key: "finish_reason", To: &reason})
	var content, refusal, toolCalls, functionCall gjson.Result
	jsonbody.Members(msg, jsonbody.Member{Key: "content", To: &content}, jsonbody.Member{Key: "refusal", To: &refusal},
		jsonbody.Member{Key: "tool_calls", To: &toolCalls}, jsonbody.Member{Key: "function_call", To: &functionCall})
	text = textOf(content, "")
	if refusal.Type == gjson.String && text == "" {
		text = refusal.String()
	}
	toolCalls.ForEach(func(_, tc gjson.Result) bool {
		fn := tc.Get("function")
		calls = append(calls, [3]string{tc.Get("id").String(), fn.Get("name").String(), fn.Get("arguments").String()})
		return true
	})
	if functionCall.IsObject() && len(calls) == 0 {
		calls = append(calls, [3]string{"", functionCall.Get("name").String(), functionCall.Get("arguments").String()})
	}
	return text, calls, reason.String()
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
	return newObject().val("id", swapID(r.id.String(), "msg_")).val("type", "message").val("role", "assistant").
		val("model", model).raw("content", rawArray(blocks)).val("stop_reason", stop).rawS("stop_sequence", "null").
		raw("usage", messagesUsageRaw(ChatUsageOf(r.usage))).done(), nil
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
	created := r.created.Int()
	if created == 0 {
		created = now().Unix()
	}
	usage := responsesUsageRaw(ChatUsageOf(r.usage), r.usage.Get("completion_tokens_details.reasoning_tokens").Int())
	return responseObject(swapID(r.id.String(), "resp_"), created, model, status, output, usage, incomplete, "null"), nil
}

// chatChoice is the one choice of a chat completion: the assistant's
// text (null when it only called tools), its tool calls, and why it
// finished.
func chatChoice(text string, calls [][]byte, finish string) object {
	msg := newObject().val("role", "assistant")
	if text != "" || len(calls) == 0 {
		msg = msg.val("content", text)
	} else {
		msg = msg.rawS("content", "null")
	}
	msg = msg.rawS("refusal", "null")
	if len(calls) > 0 {
		msg = msg.raw("tool_calls", rawArray(calls))
	}
	return newObject().val("index", 0).raw("message", msg.done()).rawS("logprobs", "null").val("finish_reason", finish)
}

// chatStops are a chat request's stop sequences: its stop string, or the
// strings of its list, empty ones left out.
func chatStops(req gjson.Result) []string {
	var stops []string
	switch s := req.Get("stop"); {
	case s.Type == gjson.String && s.String() != "":
		stops = append(stops, s.String())
	case s.IsArray():
		s.ForEach(func(_, v gjson.Result) bool {
			if v.Type == gjson.String && v.String() != "" {
				stops = append(stops, v.String())
			}
			return true
		})
	}
	return stops
}
