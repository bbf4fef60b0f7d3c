package fake

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// NewAnthropic starts an Anthropic-style fake on 127.0.0.1; its URL has no
// /v1. It serves POST /v1/messages and POST /v1/messages/count_tokens;
// anything else is a 404 not_found_error.
func NewAnthropic() *Upstream { return newUpstream(formatAnthropic, serveAnthropic) }

// anthropicVersions are the anthropic-version values the API accepts
// (2026-10-21 is what @anthropic-ai/sdk 1.x sends).
var anthropicVersions = map[string]bool{"2023-06-01": true, "2023-01-01": true, "2026-10-21": true}

// countTokensMembers are the members count_tokens takes (its request
// type in the official SDK, betas' members included); any other is a 400,
// as the real endpoint refuses extra inputs.
var countTokensMembers = map[string]bool{"model": true, "messages": true, "system": true, "tools": true, "tool_choice": true,
	"thinking": true, "output_config": true, "output_format": true, "context_management": true, "mcp_servers": true,
	"cache_control": true, "compaction": true, "speed": true}

func serveAnthropic(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte) {
	rid := newID("req_011C", 20)
	w.Header().Set("request-id", rid)
	path := r.URL.Path
	if path != "/v1/messages" && path != "/v1/messages/count_tokens" {
		anthropicError(w, rid, http.StatusNotFound, "not_found_error", "Not Found")
		return
	}
	if r.Method != http.MethodPost {
		anthropicError(w, rid, http.StatusMethodNotAllowed, "invalid_request_error", "Method Not Allowed")
		return
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		anthropicError(w, rid, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if u.APIKey != "" && key != u.APIKey {
		anthropicError(w, rid, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	version := r.Header.Get("anthropic-version")
	if version == "" {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if !anthropicVersions[version] {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("anthropic-version: %q is not a valid version", version))
		return
	}

	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
			"There was an issue with the format of your request: the body is not a JSON object")
		return
	}
	countOnly := path == "/v1/messages/count_tokens"
	model, ok := req["model"].(string)
	if !ok || model == "" {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	}
	if !countOnly {
		mt, present := req["max_tokens"]
		if !present || mt == nil {
			anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
			return
		}
		if f, ok := mt.(float64); !ok || f != float64(int64(f)) || f < 1 {
			anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
				"max_tokens: Input should be a valid integer greater than or equal to 1")
			return
		}
	}
	msgs, present := req["messages"]
	if !present || msgs == nil {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
		return
	}
	list, ok := msgs.([]any)
	if !ok {
		anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", "messages: Input should be a valid list")
		return
	}
	for i, m := range list {
		obj, ok := m.(map[string]any)
		if !ok {
			anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("messages.%d: Input should be a valid dictionary", i))
			return
		}
		switch role, _ := obj["role"].(string); role {
		case "user", "assistant":
		case "system":
			anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
				`messages: Unexpected role "system". The Messages API accepts a top-level `+"`system`"+` parameter, not "system" as an input message role.`)
			return
		default:
			anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
			return
		}
	}

	if countOnly {
		for k := range req {
			if !countTokensMembers[k] {
				anthropicError(w, rid, http.StatusBadRequest, "invalid_request_error", k+": Extra inputs are not permitted")
				return
			}
		}
		if u.CountError.Status != 0 {
			writeJSON(w, u.CountError.Status, anthropicErrorBody{Type: "error", Error: anthropicScriptError(u.CountError, u.CountError.Status), RequestID: rid})
			return
		}
		if u.CountStatus != 0 {
			writeJSON(w, u.CountStatus, anthropicErrorBody{Type: "error", Error: anthropicScriptError(Script{}, u.CountStatus), RequestID: rid})
			return
		}
		writeJSON(w, http.StatusOK, o("input_tokens", CountTokens(body)))
		return
	}
	u.messages(w, r, req, model, rid)
}

type anthropicErrorBody struct {
	Type      string               `json:"type"`
	Error     anthropicErrorObject `json:"error"`
	RequestID string               `json:"request_id,omitempty"`
}

type anthropicErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func anthropicError(w http.ResponseWriter, rid string, status int, typ, msg string) {
	writeJSON(w, status, anthropicErrorBody{Type: "error", Error: anthropicErrorObject{Type: typ, Message: msg}, RequestID: rid})
}

// anthropicErrorType is the error type and message Anthropic answers a
// status with (its errors page: 400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413
// request_too_large, 429 rate_limit_error, 500 api_error, 529
// overloaded_error).
func anthropicErrorType(status int) (string, string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", "Invalid request."
	case http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "not_found_error", "The requested resource could not be found."
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."
	case http.StatusInternalServerError:
		return "api_error", "Internal server error"
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", http.StatusText(status)
}

func anthropicScriptError(s Script, status int) anthropicErrorObject {
	typ, msg := anthropicErrorType(status)
	if s.ErrorType != "" {
		typ = s.ErrorType
	}
	if s.ErrorMessage != "" {
		msg = s.ErrorMessage
	}
	return anthropicErrorObject{Type: typ, Message: msg}
}

type anthropicUsage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier,omitempty"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

func (u *Upstream) messages(w http.ResponseWriter, r *http.Request, req map[string]any, model, rid string) {
	stream, _ := req["stream"].(bool)
	s := u.next(r).capped(req)
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		writeJSON(w, s.Status, anthropicErrorBody{Type: "error", Error: anthropicScriptError(s, s.Status), RequestID: rid})
		return
	}

	id := newID("msg_01", 22)
	calls := scriptedCalls(s, "toolu_01", 22)
	stop := s.Finish
	if stop == "" {
		stop = "end_turn"
		if len(calls) > 0 {
			stop = "tool_use"
		}
	}
	usage := anthropicUsage{
		InputTokens:              s.Usage.Input,
		CacheCreationInputTokens: s.Usage.CacheWrite,
		CacheReadInputTokens:     s.Usage.CachedInput,
		OutputTokens:             s.Usage.Output,
		ServiceTier:              "standard",
	}

	if !stream {
		content := []any{}
		if s.Text != "" || s.EmptyBlock {
			content = append(content, o("type", "text", "text", s.Text))
		}
		for _, tc := range calls {
			var input any = json.RawMessage(tc.Arguments)
			if !json.Valid([]byte(tc.Arguments)) {
				input = tc.Arguments
			}
			content = append(content, o("type", "tool_use", "id", tc.ID, "name", tc.Name, "input", input))
		}
		writeAnswer(w, s, anthropicMessage{
			ID: id, Type: "message", Role: "assistant", Model: model, Content: content,
			StopReason: &stop, Usage: usage,
		})
		return
	}

	var events []sseEvent
	add := func(typ string, fields jobj, content bool) {
		events = append(events, sseEvent{name: typ, data: mustJSON(o("type", typ).with(fields...)), content: content})
	}
	start := usage
	start.OutputTokens = min(1, s.Usage.Output)
	add("message_start", o("message", anthropicMessage{
		ID: id, Type: "message", Role: "assistant", Model: model, Content: []any{}, Usage: start,
	}), false)
	pinged := false
	ping := func() {
		if !pinged {
			pinged = true
			add("ping", o(), false)
		}
	}
	index := 0
	if s.Text != "" {
		add("content_block_start", o("index", index, "content_block", o("type", "text", "text", "")), false)
		ping()
		for _, piece := range split(s.Text, s.Chunks) {
			add("content_block_delta", o("index", index, "delta", o("type", "text_delta", "text", piece)), true)
		}
		add("content_block_stop", o("index", index), false)
		index++
	}
	for _, tc := range calls {
		add("content_block_start", o("index", index, "content_block", o(
			"type", "tool_use", "id", tc.ID, "name", tc.Name, "input", o(),
		)), false)
		ping()
		for _, piece := range split(tc.Arguments, s.Chunks) {
			add("content_block_delta", o("index", index, "delta", o("type", "input_json_delta", "partial_json", piece)), true)
		}
		add("content_block_stop", o("index", index), false)
		index++
	}
	ping()
	final := usage
	final.ServiceTier = ""
	add("message_delta", o(
		"delta", o("stop_reason", stop, "stop_sequence", nil),
		"usage", final,
	), false)
	add("message_stop", o(), false)

	errEvent := func(int) sseEvent {
		e := anthropicScriptError(s, 529)
		return sseEvent{name: "error", data: mustJSON(anthropicErrorBody{Type: "error", Error: e})}
	}
	u.writeStream(w, r, s, events, errEvent)
}
