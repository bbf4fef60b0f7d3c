package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// formatBedrock is the Bedrock fake's format (its URL has no suffix).
const formatBedrock format = 16

// NewBedrock starts an Amazon Bedrock Runtime fake on 127.0.0.1; its URL
// is the base the paths follow. It serves the Converse API:
//
//   - POST /model/{modelId}/converse: a Converse answer (output.message
//     with text and toolUse blocks, stopReason, usage, metrics);
//   - POST /model/{modelId}/converse-stream: the same as an AWS event
//     stream (application/vnd.amazon.eventstream, framed by AWS's own
//     encoder): messageStart, contentBlockDelta text pieces,
//     contentBlockStop, for each tool call contentBlockStart (toolUse id
//     and name), contentBlockDelta input pieces and contentBlockStop,
//     messageStop and metadata (usage, metrics); every payload carries the
//     padding member "p" the service adds.
//
// The model id is the path segment, percent-decoded. Every request must be
// signed with AWS Signature Version 4 by BedrockAccessKeyID (or APIKey)
// and BedrockSecretAccessKey for BedrockRegion and the service "bedrock";
// one that is not is a 403 in Bedrock's error shape (the type in
// x-amzn-ErrorType, {"message": ...}). The body is checked as Converse
// checks it where a gateway's translation could go wrong (400
// ValidationException): a "messages" array of user and assistant turns
// that starts with the user and alternates, none empty, every content
// block one known member, no blank text, toolUse and toolResult blocks
// only with a toolConfig, an inferenceConfig.maxTokens of at least 1.
// Other paths are a 404 UnknownOperationException.
//
// Script.Usage is written into Converse's fields as the Anthropic fake
// writes it: inputTokens = Input, cacheReadInputTokens = CachedInput,
// cacheWriteInputTokens = CacheWrite (each left out when zero),
// totalTokens the sum with outputTokens = Output. Script.Status answers
// with that status and ErrorType (default by status: 400
// ValidationException, 403 AccessDeniedException, 404
// ResourceNotFoundException, 408 ModelTimeoutException, 424
// ModelErrorException, 429 ThrottlingException, 503
// ServiceUnavailableException, other 5xx InternalServerException); a
// MidStreamError is an exception frame of ErrorType's stream member
// (throttlingException for ThrottlingException; default
// modelStreamErrorException). Finish is the stopReason (default end_turn,
// tool_use with tool calls); CapOutput caps the output at
// inferenceConfig.maxTokens.
func NewBedrock() *Upstream { return newUpstream(formatBedrock, serveBedrock) }

// bedrockOperations are the fake's operations, by the last path segment.
var bedrockOperations = map[string]bool{"converse": true, "converse-stream": true, "count-tokens": true}

func serveBedrock(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("x-amzn-RequestId", newHexID("", 8)+"-"+newHexID("", 4)+"-"+newHexID("", 4)+"-"+newHexID("", 4)+"-"+newHexID("", 12))
	parts := strings.Split(r.URL.EscapedPath(), "/")
	model := ""
	if len(parts) == 4 && parts[0] == "" && parts[1] == "model" && bedrockOperations[parts[3]] {
		model, _ = url.PathUnescape(parts[2])
	}
	if model == "" {
		bedrockError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	if r.Method != http.MethodPost {
		bedrockError(w, http.StatusMethodNotAllowed, "UnknownOperationException", "")
		return
	}
	if failure, ok := u.bedrockSignature(r, body); !ok {
		bedrockError(w, http.StatusForbidden, failure[0], failure[1])
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		bedrockError(w, http.StatusBadRequest, "SerializationException", "Unexpected token in the request body.")
		return
	}
	if parts[3] == "count-tokens" {
		u.converseCount(w, req)
		return
	}
	if msg := checkConverse(req); msg != "" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return
	}
	u.converse(w, r, req, parts[3] == "converse-stream")
}

// checkConverse is the first thing Converse would refuse in req, "" for
// nothing.
func checkConverse(req map[string]any) string {
	msgs, ok := req["messages"].([]any)
	if !ok {
		return "1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null"
	}
	if s, present := req["system"]; present {
		if _, ok := s.([]any); !ok {
			return "1 validation error detected: Value at 'system' failed to satisfy constraint: Member must be a list"
		}
	}
	if ic, ok := req["inferenceConfig"].(map[string]any); ok {
		if n, present := ic["maxTokens"]; present {
			if f, ok := n.(float64); !ok || f < 1 || f != float64(int64(f)) {
				return fmt.Sprintf("1 validation error detected: Value '%v' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1", n)
			}
		}
	}
	_, hasTools := req["toolConfig"].(map[string]any)
	last := ""
	for i, m := range msgs {
		msg, _ := m.(map[string]any)
		role, _ := msg["role"].(string)
		if role != "user" && role != "assistant" {
			return fmt.Sprintf("1 validation error detected: Value '%v' at 'messages.%d.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]", msg["role"], i+1)
		}
		if i == 0 && role != "user" {
			return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
		}
		if role == last {
			return "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
		}
		last = role
		if why := checkBlocks(msg["content"], i, hasTools); why != "" {
			return why
		}
	}
	return ""
}

// bedrockBlocks are the members a content block may have (one each).
var bedrockBlocks = map[string]bool{"text": true, "image": true, "document": true, "video": true, "audio": true, "toolUse": true,
	"toolResult": true, "guardContent": true, "cachePoint": true, "reasoningContent": true, "citationsContent": true, "searchResult": true}

// checkBlocks checks the content of message i.
func checkBlocks(content any, i int, hasTools bool) string {
	blocks, _ := content.([]any)
	if len(blocks) == 0 {
		return fmt.Sprintf("The content field in the Message object at messages.%d is empty. Add a ContentBlock object to the content field and try again.", i)
	}
	for j, b := range blocks {
		block, _ := b.(map[string]any)
		if len(block) != 1 {
			return fmt.Sprintf("The ContentBlock object at messages.%d.content.%d must set one of the following keys: text, image, toolUse, toolResult, document, video.", i, j)
		}
		for k, v := range block {
			switch {
			case !bedrockBlocks[k]:
				return fmt.Sprintf("The ContentBlock object at messages.%d.content.%d has an unknown key: %s.", i, j, k)
			case k == "text" && strings.TrimSpace(fmt.Sprint(v)) == "":
				return fmt.Sprintf("The text field in the ContentBlock object at messages.%d.content.%d is blank. Add text to the text field, and try again.", i, j)
			case (k == "toolUse" || k == "toolResult") && !hasTools:
				return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
			}
		}
	}
	return ""
}

// bedrockErrorType is the error type and message Bedrock answers a
// status with.
func bedrockErrorType(status int) (string, string) {
	switch status {
	case http.StatusBadRequest:
		return "ValidationException", "Malformed input request, please reformat your input and try again."
	case http.StatusForbidden:
		return "AccessDeniedException", "You don't have access to the model with the specified model ID."
	case http.StatusNotFound:
		return "ResourceNotFoundException", "Could not resolve the foundation model from the provided model identifier."
	case http.StatusRequestTimeout:
		return "ModelTimeoutException", "Model has timed out in processing the request. Try your request again."
	case http.StatusFailedDependency:
		return "ModelErrorException", "The model encountered an error processing the request."
	case http.StatusTooManyRequests:
		return "ThrottlingException", "Too many requests, please wait before trying again."
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException", "Bedrock is unable to process your request."
	}
	if status >= 500 {
		return "InternalServerException", "The server encountered an internal error while processing the request."
	}
	return "ValidationException", http.StatusText(status)
}

// bedrockError answers an error in Bedrock's shape: the type in
// x-amzn-ErrorType (with the URI the service appends), {"message": ...}
// (the type's default message when msg is empty).
func bedrockError(w http.ResponseWriter, status int, typ, msg string) {
	if msg == "" {
		_, msg = bedrockErrorType(status)
	}
	w.Header().Set("x-amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, o("message", msg))
}

// bedrockScriptError is a script's error: its type and message.
func bedrockScriptError(s Script, status int) (string, string) {
	typ, msg := bedrockErrorType(status)
	if s.ErrorType != "" {
		typ = s.ErrorType
	}
	if s.ErrorMessage != "" {
		msg = s.ErrorMessage
	}
	return typ, msg
}

type bedrockUsage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens,omitempty"`
}

// bedrockPadding is what the "p" member of the fake's stream payloads
// holds (the service pads its payloads with such letters).
const bedrockPadding = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123"

func (u *Upstream) converse(w http.ResponseWriter, r *http.Request, req map[string]any, stream bool) {
	s := u.next(r)
	if ic, ok := req["inferenceConfig"].(map[string]any); ok && s.CapOutput {
		if n, ok := ic["maxTokens"].(float64); ok && int(n) < s.Usage.Output {
			s.Usage.Output = int(n)
		}
	}
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		typ, msg := bedrockScriptError(s, s.Status)
		bedrockError(w, s.Status, typ, msg)
		return
	}
	calls := scriptedCalls(s, "tooluse_", 22)
	stop := s.Finish
	if stop == "" {
		stop = "end_turn"
		if len(calls) > 0 {
			stop = "tool_use"
		}
	}
	var usage any = bedrockUsage{InputTokens: s.Usage.Input, OutputTokens: s.Usage.Output,
		TotalTokens:          s.Usage.Input + s.Usage.Output + s.Usage.CachedInput + s.Usage.CacheWrite,
		CacheReadInputTokens: s.Usage.CachedInput, CacheWriteInputTokens: s.Usage.CacheWrite}
	if stream {
		u.converseStream(w, r, s, calls, stop, usage)
		return
	}
	content := []any{}
	if s.Text != "" || s.EmptyBlock {
		content = append(content, o("text", s.Text))
	}
	for _, tc := range calls {
		content = append(content, o("toolUse", o("toolUseId", tc.ID, "name", tc.Name, "input", toolInput(tc))))
	}
	answer := o("output", o("message", o("role", "assistant", "content", content)), "stopReason", stop)
	if !s.NoUsage {
		answer = answer.with("usage", usage)
	}
	writeJSON(w, http.StatusOK, answer.with("metrics", o("latencyMs", 321)))
}

// toolInput is a call's arguments as a toolUse input: the JSON itself,
// or the text when it is not JSON.
func toolInput(tc ToolCall) any {
	if json.Valid([]byte(tc.Arguments)) {
		return json.RawMessage(tc.Arguments)
	}
	return tc.Arguments
}

// bedrockFrame is one event of a stream, and whether it carries content.
type bedrockFrame struct {
	event   string
	payload jobj
	content bool
}

func (u *Upstream) converseStream(w http.ResponseWriter, r *http.Request, s Script, calls []ToolCall, stop string, usage any) {
	var frames []bedrockFrame
	add := func(event string, payload jobj, content bool) {
		pad := bedrockPadding[:1+len(frames)%len(bedrockPadding)]
		frames = append(frames, bedrockFrame{event: event, payload: payload.with("p", pad), content: content})
	}
	add("messageStart", o("role", "assistant"), false)
	index := 0
	if s.Text != "" {
		for _, piece := range split(s.Text, s.Chunks) {
			add("contentBlockDelta", o("contentBlockIndex", index, "delta", o("text", piece)), true)
		}
		add("contentBlockStop", o("contentBlockIndex", index), false)
		index++
	}
	for _, tc := range calls {
		add("contentBlockStart", o("contentBlockIndex", index, "start", o("toolUse", o("toolUseId", tc.ID, "name", tc.Name))), false)
		for _, piece := range split(tc.Arguments, s.Chunks) {
			add("contentBlockDelta", o("contentBlockIndex", index, "delta", o("toolUse", o("input", piece))), true)
		}
		add("contentBlockStop", o("contentBlockIndex", index), false)
		index++
	}
	add("messageStop", o("stopReason", stop), false)
	meta := o("metrics", o("latencyMs", 321))
	if !s.NoUsage {
		meta = meta.with("usage", usage)
	}
	add("metadata", meta, false)

	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	gateAt := 0
	for i, f := range frames {
		if f.content {
			gateAt = i
			break
		}
	}
	for i, f := range frames {
		if !writeFrame(w, rc, enc, eventFrame(f.event, mustJSON(f.payload))) {
			return
		}
		if i != gateAt {
			continue
		}
		if s.Gate != nil && !u.wait(r, s.Gate, 0) {
			panic(http.ErrAbortHandler)
		}
		if s.MidStreamError {
			writeFrame(w, rc, enc, exceptionFrame(s))
			return
		}
	}
}

// eventFrame is an event frame of a stream.
func eventFrame(event string, payload []byte) eventstream.Message {
	var m eventstream.Message
	m.Headers.Set(":event-type", eventstream.StringValue(event))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Headers.Set(":message-type", eventstream.StringValue("event"))
	m.Payload = payload
	return m
}

// exceptionFrame is the exception frame a script's MidStreamError sends:
// its ErrorType as the stream's member (the first letter lowered).
func exceptionFrame(s Script) eventstream.Message {
	typ, msg := "modelStreamErrorException", "The model stream was interrupted."
	if s.ErrorType != "" {
		typ = strings.ToLower(s.ErrorType[:1]) + s.ErrorType[1:]
	}
	if s.ErrorMessage != "" {
		msg = s.ErrorMessage
	}
	var m eventstream.Message
	m.Headers.Set(":exception-type", eventstream.StringValue(typ))
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Payload = mustJSON(o("message", msg))
	return m
}

func writeFrame(w http.ResponseWriter, rc *http.ResponseController, enc *eventstream.Encoder, m eventstream.Message) bool {
	var b bytes.Buffer
	if err := enc.Encode(&b, m); err != nil {
		panic("fake: " + err.Error())
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// converseCount answers CountTokens of a Converse input
// ({"input": {"converse": {...}}}) with BedrockCountTokens of it.
func (u *Upstream) converseCount(w http.ResponseWriter, req map[string]any) {
	in, _ := req["input"].(map[string]any)
	conv, _ := in["converse"].(map[string]any)
	if len(req) != 1 || len(in) != 1 || conv == nil {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'input' failed to satisfy constraint: Member must have exactly one of converse or invokeModel")
		return
	}
	if msg := checkConverse(conv); msg != "" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"inputTokens": BedrockCountTokens(conv)})
}

// BedrockCountTokens is the Bedrock fake's count of a Converse input: the
// runes of its JSON strings (keys excluded) divided by four, rounded up,
// at least 1.
func BedrockCountTokens(conv map[string]any) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			n += len([]rune(x))
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(conv)
	return max(1, (n+3)/4)
}
