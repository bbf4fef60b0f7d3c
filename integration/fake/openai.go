package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// NewOpenAI starts an OpenAI-style fake on 127.0.0.1; its URL ends in /v1.
// It serves POST /v1/chat/completions, POST /v1/responses, GET /v1/models and
// GET /v1/models/{id}, POST /v1/embeddings; anything else is a 404 in OpenAI's error shape.
func NewOpenAI() *Upstream { return newUpstream(formatOpenAI, serveOpenAI) }

func serveOpenAI(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("x-request-id", newHexID("req_", 32))
	path := r.URL.Path
	// ability answers the binary and image endpoints, which have their own
	// handlers.
	ability := map[string]func(){
		"/v1/audio/transcriptions": func() { u.transcription(w, r, body) },
		"/v1/audio/speech":         func() { u.speech(w, r, body) },
		"/v1/images/generations":   func() { u.images(w, r, body, false) },
		"/v1/images/edits":         func() { u.images(w, r, body, true) },
	}
	method, route := http.MethodPost, path
	if path == "/v1/models" || strings.HasPrefix(path, "/v1/models/") {
		method, route = http.MethodGet, "/v1/models"
	}
	known := path == "/v1/chat/completions" || path == "/v1/responses" || path == "/v1/embeddings" || route == "/v1/models" || ability[path] != nil
	if known && r.Method != method {
		openAIError(w, http.StatusMethodNotAllowed, "invalid_request_error", nil, nil,
			fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, path))
		return
	}
	if !known {
		openAIError(w, http.StatusNotFound, "invalid_request_error", nil, nil,
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, path))
		return
	}
	if !u.openAIAuth(w, r) {
		return
	}
	if serve := ability[path]; serve != nil {
		serve()
		return
	}
	if route == "/v1/models" {
		u.models(w, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/models"), "/"))
		return
	}

	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil,
			"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
		return
	}
	model, ok := req["model"].(string)
	if !ok || model == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("model"), str("missing_required_parameter"),
			"Missing required parameter: 'model'.")
		return
	}
	if route == "/v1/embeddings" {
		u.embeddings(w, r, req, model)
		return
	}
	if route == "/v1/chat/completions" {
		if !validateChat(w, req) {
			return
		}
		u.chat(w, r, req, model)
		return
	}
	u.responses(w, r, req, model)
}

func (u *Upstream) openAIAuth(w http.ResponseWriter, r *http.Request) bool {
	switch u.Auth {
	case "none":
		return true
	case "api-key":
		if key := r.Header.Get("api-key"); key == "" || (u.APIKey != "" && key != u.APIKey) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "401",
				"message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}})
			return false
		}
		return true
	}
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", nil, nil,
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return false
	}
	if u.APIKey != "" && key != u.APIKey {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", nil, str("invalid_api_key"),
			"Incorrect API key provided.")
		return false
	}
	return true
}

var openAIRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

func validateChat(w http.ResponseWriter, req map[string]any) bool {
	msgs, present := req["messages"]
	if !present || msgs == nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("messages"), str("missing_required_parameter"),
			"Missing required parameter: 'messages'.")
		return false
	}
	list, ok := msgs.([]any)
	if !ok {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("messages"), str("invalid_type"),
			fmt.Sprintf("Invalid type for 'messages': expected an array of objects, but got %s instead.", jsonType(msgs)))
		return false
	}
	if len(list) == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("messages"), nil,
			"[] is too short - 'messages'")
		return false
	}
	for i, m := range list {
		obj, ok := m.(map[string]any)
		if !ok {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str(fmt.Sprintf("messages[%d]", i)), str("invalid_type"),
				fmt.Sprintf("Invalid type for 'messages[%d]': expected an object, but got %s instead.", i, jsonType(m)))
			return false
		}
		role, _ := obj["role"].(string)
		if !openAIRoles[role] {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str(fmt.Sprintf("messages[%d].role", i)), str("invalid_value"),
				fmt.Sprintf("Invalid value: '%v'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", obj["role"]))
			return false
		}
	}
	if so, ok := req["stream_options"]; ok && so != nil {
		if stream, _ := req["stream"].(bool); !stream {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str("stream_options"), nil,
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
			return false
		}
	}
	return true
}

func (u *Upstream) models(w http.ResponseWriter, id string) {
	u.mu.Lock()
	names := append([]string(nil), u.Models...)
	u.mu.Unlock()
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := make([]model, 0, len(names))
	for _, n := range names {
		m := model{ID: n, Object: "model", Created: 1715367049, OwnedBy: "system"}
		if id == n {
			writeJSON(w, http.StatusOK, m)
			return
		}
		list = append(list, m)
	}
	if id != "" {
		openAIError(w, http.StatusNotFound, "invalid_request_error", str("model"), str("model_not_found"),
			fmt.Sprintf("The model '%s' does not exist", id))
		return
	}
	writeJSON(w, http.StatusOK, o("object", "list", "data", list))
}

// openAIErrorBody is OpenAI's error envelope.
type openAIErrorBody struct {
	Error openAIErrorObject `json:"error"`
}

type openAIErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIError(w http.ResponseWriter, status int, typ string, param, code *string, msg string) {
	writeJSON(w, status, openAIErrorBody{Error: openAIErrorObject{Message: msg, Type: typ, Param: param, Code: code}})
}

// openAIErrorDefaults is the type, code and message OpenAI answers a status
// with. A Script's ErrorType replaces both the type and the code.
func openAIErrorDefaults(status int, model string) (typ string, code *string, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", nil, "Invalid request."
	case http.StatusUnauthorized:
		return "invalid_request_error", str("invalid_api_key"), "Incorrect API key provided."
	case http.StatusForbidden:
		return "invalid_request_error", str("model_not_allowed"), fmt.Sprintf("You are not allowed to sample from model %s.", model)
	case http.StatusNotFound:
		return "invalid_request_error", str("model_not_found"), fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)
	case http.StatusTooManyRequests:
		return "requests", str("rate_limit_exceeded"), fmt.Sprintf("Rate limit reached for %s on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", model)
	case http.StatusInternalServerError:
		return "server_error", nil, "The server had an error while processing your request. Sorry about that!"
	case http.StatusServiceUnavailable:
		return "server_error", nil, "The server is overloaded or not ready yet."
	}
	if status >= 500 {
		return "server_error", nil, "The server had an error while processing your request. Sorry about that!"
	}
	return "invalid_request_error", nil, http.StatusText(status)
}

func openAIScriptError(s Script, status int, model string) openAIErrorObject {
	typ, code, msg := openAIErrorDefaults(status, model)
	if s.ErrorType != "" {
		typ, code = s.ErrorType, str(s.ErrorType)
	}
	if s.ErrorCode != "" {
		code = str(s.ErrorCode)
	}
	if s.ErrorMessage != "" {
		msg = s.ErrorMessage
	}
	return openAIErrorObject{Message: msg, Type: typ, Code: code}
}

// oaUsage is chat completions' usage object.
type oaUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func chatUsage(u Usage) oaUsage {
	var o oaUsage
	o.PromptTokens = u.Input
	o.CompletionTokens = u.Output
	o.TotalTokens = u.Input + u.Output
	o.PromptTokensDetails.CachedTokens = u.CachedInput
	return o
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             oaUsage      `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int    `json:"index"`
	Message      jobj   `json:"message"`
	Logprobs     any    `json:"logprobs"`
	FinishReason string `json:"finish_reason"`
}

type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	// Usage is absent without include_usage, null on every chunk but the
	// last with it.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type chatChunkChoice struct {
	Index        int     `json:"index"`
	Delta        jobj    `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

const fingerprint = "fp_fake0001"

func (u *Upstream) chat(w http.ResponseWriter, r *http.Request, req map[string]any, model string) {
	stream, _ := req["stream"].(bool)
	includeUsage := false
	if so, ok := req["stream_options"].(map[string]any); ok && stream {
		includeUsage, _ = so["include_usage"].(bool)
	}
	s := u.next(r).capped(req)
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}

	id := newID("chatcmpl-", 29)
	created := time.Now().Unix()
	calls := scriptedCalls(s, "call_", 24)
	finish := s.Finish
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}

	if !stream {
		var content any // null when there are only tool calls
		if s.Text != "" || len(calls) == 0 {
			content = s.Text
		}
		msg := o("role", "assistant", "content", content)
		if len(calls) > 0 {
			tcs := make([]jobj, len(calls))
			for i, tc := range calls {
				tcs[i] = o("id", tc.ID, "type", "function",
					"function", o("name", tc.Name, "arguments", tc.Arguments))
			}
			msg = msg.with("tool_calls", tcs)
		}
		msg = msg.with("refusal", nil, "annotations", []any{})
		writeAnswer(w, s, chatCompletion{
			ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices:     []chatChoice{{Index: 0, Message: msg, FinishReason: finish, Logprobs: s.logprobs(req)}},
			Usage:       chatUsage(s.Usage),
			ServiceTier: "default", SystemFingerprint: fingerprint,
		})
		return
	}

	var nullUsage json.RawMessage
	if includeUsage {
		nullUsage = json.RawMessage("null")
	}
	chunk := func(delta jobj, finish *string) []byte {
		return mustJSON(chatChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			ServiceTier: "default", SystemFingerprint: fingerprint,
			Choices: []chatChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}},
			Usage:   nullUsage,
		})
	}
	var events []sseEvent
	var firstContent any = ""
	if s.Text == "" && len(calls) > 0 {
		firstContent = nil
	}
	events = append(events, sseEvent{data: chunk(o("role", "assistant", "content", firstContent, "refusal", nil), nil)})
	for _, piece := range split(s.Text, s.Chunks) {
		events = append(events, sseEvent{data: chunk(o("content", piece), nil), content: true})
	}
	for i, tc := range calls {
		for j, piece := range split(tc.Arguments, s.Chunks) {
			call := o("index", i, "function", o("arguments", piece))
			if j == 0 {
				call = o("index", i, "id", tc.ID, "type", "function",
					"function", o("name", tc.Name, "arguments", piece))
			}
			events = append(events, sseEvent{data: chunk(o("tool_calls", []jobj{call}), nil), content: true})
		}
	}
	events = append(events, sseEvent{data: chunk(o(), &finish)})
	if includeUsage {
		usage := chatUsage(s.Usage)
		events = append(events, sseEvent{data: mustJSON(chatChunk{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			ServiceTier: "default", SystemFingerprint: fingerprint,
			Choices: []chatChunkChoice{},
			Usage:   mustJSON(usage),
		})})
	}
	events = append(events, sseEvent{data: []byte("[DONE]")})

	errEvent := func(int) sseEvent {
		e := openAIScriptError(s, http.StatusInternalServerError, model)
		return sseEvent{data: mustJSON(openAIErrorBody{Error: e})}
	}
	u.writeStream(w, r, s, events, errEvent)
}

// Responses API.

type respObject struct {
	ID                 string `json:"id"`
	Object             string `json:"object"`
	CreatedAt          int64  `json:"created_at"`
	Status             string `json:"status"`
	Background         bool   `json:"background"`
	Error              any    `json:"error"`
	IncompleteDetails  any    `json:"incomplete_details"`
	Instructions       any    `json:"instructions"`
	MaxOutputTokens    any    `json:"max_output_tokens"`
	Model              string `json:"model"`
	Output             []any  `json:"output"`
	ParallelToolCalls  any    `json:"parallel_tool_calls"`
	PreviousResponseID any    `json:"previous_response_id"`
	Reasoning          jobj   `json:"reasoning"`
	ServiceTier        string `json:"service_tier"`
	Store              any    `json:"store"`
	Temperature        any    `json:"temperature"`
	Text               any    `json:"text"`
	ToolChoice         any    `json:"tool_choice"`
	Tools              any    `json:"tools"`
	TopP               any    `json:"top_p"`
	Truncation         any    `json:"truncation"`
	Usage              any    `json:"usage"`
	User               any    `json:"user"`
	Metadata           any    `json:"metadata"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func responsesUsage(u Usage) respUsage {
	var o respUsage
	o.InputTokens = u.Input
	o.InputTokensDetails.CachedTokens = u.CachedInput
	o.OutputTokens = u.Output
	o.TotalTokens = u.Input + u.Output
	return o
}

func orDefault(req map[string]any, key string, def any) any {
	if v, ok := req[key]; ok && v != nil {
		return v
	}
	return def
}

// responsesStatus maps a Script's Finish onto a Responses status and
// incomplete_details.
func responsesStatus(finish string) (string, any) {
	switch finish {
	case "length", "max_tokens", "max_output_tokens":
		return "incomplete", o("reason", "max_output_tokens")
	case "content_filter":
		return "incomplete", o("reason", "content_filter")
	}
	return "completed", nil
}

func (u *Upstream) responses(w http.ResponseWriter, r *http.Request, req map[string]any, model string) {
	stream, _ := req["stream"].(bool)
	s := u.next(r).capped(req)
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}

	respID := newHexID("resp_", 48)
	created := time.Now().Unix()
	status, incomplete := responsesStatus(s.Finish)
	obj := func(status string, output []any, usage any, incomplete any) respObject {
		return respObject{
			ID: respID, Object: "response", CreatedAt: created, Status: status,
			IncompleteDetails:  incomplete,
			Instructions:       orDefault(req, "instructions", nil),
			MaxOutputTokens:    orDefault(req, "max_output_tokens", nil),
			Model:              model,
			Output:             output,
			ParallelToolCalls:  orDefault(req, "parallel_tool_calls", true),
			PreviousResponseID: orDefault(req, "previous_response_id", nil),
			Reasoning:          o("effort", nil, "summary", nil),
			ServiceTier:        "default",
			Store:              orDefault(req, "store", true),
			Temperature:        orDefault(req, "temperature", 1.0),
			Text:               orDefault(req, "text", o("format", o("type", "text"))),
			ToolChoice:         orDefault(req, "tool_choice", "auto"),
			Tools:              orDefault(req, "tools", []any{}),
			TopP:               orDefault(req, "top_p", 1.0),
			Truncation:         orDefault(req, "truncation", "disabled"),
			Usage:              usage,
			User:               orDefault(req, "user", nil),
			Metadata:           orDefault(req, "metadata", o()),
		}
	}

	type fnItem struct {
		itemID string
		call   ToolCall
	}
	msgID := newHexID("msg_", 48)
	var fns []fnItem
	for _, tc := range s.ToolCalls {
		if tc.ID == "" {
			tc.ID = newID("call_", 24)
		}
		tc.Arguments = args(tc)
		fns = append(fns, fnItem{itemID: newHexID("fc_", 48), call: tc})
	}
	textPart := func(text string) jobj {
		annotations := []any{}
		for _, c := range s.Citations {
			annotations = append(annotations, o("type", "url_citation", "start_index", 0, "end_index", len(text), "url", c, "title", "Source"))
		}
		return o("type", "output_text", "annotations", annotations, "logprobs", []any{}, "text", text)
	}
	msgItem := func(status string, content []any) jobj {
		return o("id", msgID, "type", "message", "status", status, "content", content, "role", "assistant")
	}
	fnCall := func(f fnItem, status, arguments string) jobj {
		return o("id", f.itemID, "type", "function_call", "status", status,
			"arguments", arguments, "call_id", f.call.ID, "name", f.call.Name)
	}
	hasMsg := s.Text != "" || len(fns) == 0
	var output []any
	for _, q := range s.WebSearches {
		output = append(output, o("id", newHexID("ws_", 48), "type", "web_search_call", "status", "completed",
			"action", o("type", "search", "query", q)))
	}
	if hasMsg {
		output = append(output, msgItem("completed", []any{textPart(s.Text)}))
	}
	for _, f := range fns {
		output = append(output, fnCall(f, "completed", f.call.Arguments))
	}
	if output == nil {
		output = []any{}
	}
	final := obj(status, output, responsesUsage(s.Usage), incomplete)

	if !stream {
		writeAnswer(w, s, final)
		return
	}

	var events []sseEvent
	add := func(typ string, fields jobj, content bool) {
		data := o("type", typ).with(fields...).with("sequence_number", len(events))
		events = append(events, sseEvent{name: typ, data: mustJSON(data), content: content})
	}
	add("response.created", o("response", obj("in_progress", []any{}, nil, nil)), false)
	add("response.in_progress", o("response", obj("in_progress", []any{}, nil, nil)), false)
	outIdx := 0
	if hasMsg {
		add("response.output_item.added", o("output_index", outIdx, "item", msgItem("in_progress", []any{})), false)
		add("response.content_part.added", o("item_id", msgID, "output_index", outIdx, "content_index", 0, "part", textPart("")), false)
		for _, piece := range split(s.Text, s.Chunks) {
			add("response.output_text.delta", o("item_id", msgID, "output_index", outIdx, "content_index", 0, "delta", piece, "logprobs", []any{}), true)
		}
		add("response.output_text.done", o("item_id", msgID, "output_index", outIdx, "content_index", 0, "text", s.Text, "logprobs", []any{}), false)
		add("response.content_part.done", o("item_id", msgID, "output_index", outIdx, "content_index", 0, "part", textPart(s.Text)), false)
		add("response.output_item.done", o("output_index", outIdx, "item", msgItem("completed", []any{textPart(s.Text)})), false)
		outIdx++
	}
	for _, f := range fns {
		add("response.output_item.added", o("output_index", outIdx, "item", fnCall(f, "in_progress", "")), false)
		for _, piece := range split(f.call.Arguments, s.Chunks) {
			add("response.function_call_arguments.delta", o("item_id", f.itemID, "output_index", outIdx, "delta", piece), true)
		}
		add("response.function_call_arguments.done", o("item_id", f.itemID, "output_index", outIdx, "name", f.call.Name, "arguments", f.call.Arguments), false)
		add("response.output_item.done", o("output_index", outIdx, "item", fnCall(f, "completed", f.call.Arguments)), false)
		outIdx++
	}
	terminal := "response.completed"
	if status == "incomplete" {
		terminal = "response.incomplete"
	}
	add(terminal, o("response", final), false)

	// The documented error event is flat (code, message, param); the API has
	// also been seen nesting them under "error". Both are sent so either
	// reading works (and openai-go surfaces it as a stream error).
	errEvent := func(seq int) sseEvent {
		e := openAIScriptError(s, http.StatusInternalServerError, model)
		code := e.Type
		if e.Code != nil {
			code = *e.Code
		}
		return sseEvent{name: "error", data: mustJSON(o(
			"type", "error",
			"code", code, "message", e.Message, "param", nil,
			"error", o("type", e.Type, "code", code, "message", e.Message, "param", nil),
			"sequence_number", seq,
		))}
	}
	u.writeStream(w, r, s, events, errEvent)
}

func str(s string) *string { return &s }

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "an unknown type"
}
