package fake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// formatGemini is the Gemini API's format.
const formatGemini format = formatAnthropic + 1

// NewGemini starts a fake of the Gemini API on 127.0.0.1; its URL has no
// version (the gateway appends /v1beta/models/...). It serves:
//
//   - POST /v1beta/models/{model}:generateContent: a
//     GenerateContentResponse (one candidate);
//   - POST /v1beta/models/{model}:streamGenerateContent?alt=sse: data-only
//     server-sent events, each a GenerateContentResponse chunk, lines
//     ended with CRLF as the API ends them: a thought part first when
//     asked for (thinkingConfig.includeThoughts) and SetThoughts is set,
//     the text in Script.Chunks pieces, the function calls together in one
//     chunk, then a chunk with an empty text, the finishReason and the
//     final usageMetadata (every earlier chunk carries the prompt's
//     counts). Without alt=sse it is a 400 (the API would answer a JSON
//     array, which the fake does not speak);
//   - POST /v1beta/models/{model}:countTokens: {"totalTokens":
//     GeminiCountTokens(body)}, for contents or a generateContentRequest
//     (with its model), never both; CountStatus and CountError answer as
//     on the Anthropic fake.
//
// Anything else is a 404 NOT_FOUND. Errors are Gemini's: {"error":
// {"code", "message", "status"}} (Script.ErrorType replaces the status,
// Script.ErrorCode adds a google.rpc.ErrorInfo with that reason); a
// mid-stream error is a bare JSON error object after the events (no
// "data:"), as the API sends one.
//
// Strictness, where a gateway bug would show: the key must come in the
// x-goog-api-key header (none: 403 PERMISSION_DENIED, as the API answers
// a caller without identity; a key other than APIKey when set: 400
// INVALID_ARGUMENT with reason API_KEY_INVALID); the body must be a
// GenerateContentRequest (an unknown member, here or in
// generationConfig, is a 400 "Unknown name"), contents must be a
// non-empty list of user and model turns, each part holding exactly one
// datum, function calls and responses named, a response an object;
// function declarations named, with parameters or parametersJsonSchema
// but not both, an OBJECT parameter schema with properties;
// allowedFunctionNames only with mode ANY. For a model whose name begins
// with gemini-3, the first function call of each model turn since the
// last user text must carry a thought signature: one the fake made, or
// SkipThoughtSignature.
//
// Usage: promptTokenCount = Script.Usage.Input (cached included),
// cachedContentTokenCount = CachedInput, candidatesTokenCount = Output
// less the thoughts (SetThoughts), thoughtsTokenCount = the thoughts;
// CacheWrite is ignored. Finish is Gemini's finishReason (default STOP,
// with or without function calls). CapOutput caps the output at
// generationConfig.maxOutputTokens.
func NewGemini() *Upstream { return newUpstream(formatGemini, serveGemini) }

// SkipThoughtSignature is the signature Gemini documents for a function
// call it did not make; the fake accepts it, as the API does.
const SkipThoughtSignature = "skip_thought_signature_validator"

// GeminiThoughtSignature is the thought signature the Gemini fake gives
// the first function call of an answer (Gemini's are opaque bytes).
func GeminiThoughtSignature(name string) string {
	return base64.StdEncoding.EncodeToString([]byte(geminiSignaturePrefix + name))
}

const geminiSignaturePrefix = "fake-thought:"

// geminiThoughts holds each Gemini fake's SetThoughts.
var geminiThoughts sync.Map // *Upstream → int

// SetThoughts makes a Gemini fake report n of each answer's output tokens
// (Script.Usage.Output, at most all of them) as thinking:
// thoughtsTokenCount, the rest being candidatesTokenCount. Other fakes
// ignore it.
func (u *Upstream) SetThoughts(n int) { geminiThoughts.Store(u, n) }

func (u *Upstream) thoughts(output int) int {
	n, _ := geminiThoughts.Load(u)
	t, _ := n.(int)
	return max(min(t, output), 0)
}

// geminiMethods are the methods the fake serves, after the model.
var geminiMethods = map[string]bool{"generateContent": true, "streamGenerateContent": true, "countTokens": true}

func serveGemini(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte) {
	rest, found := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, method, _ := strings.Cut(rest, ":")
	if !found || model == "" || !geminiMethods[method] || r.Method != http.MethodPost {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Method not found.", "")
		return
	}
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		geminiError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", "")
		return
	}
	if u.APIKey != "" && key != u.APIKey {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. The body is not a JSON object.", "")
		return
	}
	if method == "countTokens" {
		u.geminiCount(w, req, model)
		return
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the fake streams only with alt=sse", "")
		return
	}
	if msg := checkGeminiRequest(req, model, "GenerateContentRequest"); msg != "" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, "")
		return
	}
	u.geminiGenerate(w, r, req, model, stream)
}

// geminiErrorBody is Gemini's error envelope.
type geminiErrorBody struct {
	Error geminiErrorObject `json:"error"`
}

type geminiErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []jobj `json:"details,omitempty"`
}

func geminiErrorOf(status int, gstatus, msg, reason string) geminiErrorBody {
	e := geminiErrorObject{Code: status, Message: msg, Status: gstatus}
	if reason != "" {
		e.Details = []jobj{o("@type", "type.googleapis.com/google.rpc.ErrorInfo", "reason", reason, "domain", "googleapis.com",
			"metadata", o("service", "generativelanguage.googleapis.com"))}
	}
	return geminiErrorBody{Error: e}
}

func geminiError(w http.ResponseWriter, status int, gstatus, msg, reason string) {
	writeJSON(w, status, geminiErrorOf(status, gstatus, msg, reason))
}

// geminiErrorDefaults is the status and message Gemini answers an HTTP
// status with.
func geminiErrorDefaults(status int) (string, string) {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT", "Request contains an invalid argument."
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED", "Request had invalid authentication credentials."
	case http.StatusForbidden:
		return "PERMISSION_DENIED", "The caller does not have permission"
	case http.StatusNotFound:
		return "NOT_FOUND", "Requested entity was not found."
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details."
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE", "The model is overloaded. Please try again later."
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."
	}
	if status >= 500 {
		return "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	}
	return "INVALID_ARGUMENT", http.StatusText(status)
}

// geminiScriptError is the error body of s answered with status.
func geminiScriptError(s Script, status int) geminiErrorBody {
	gstatus, msg := geminiErrorDefaults(status)
	if s.ErrorType != "" {
		gstatus = s.ErrorType
	}
	if s.ErrorMessage != "" {
		msg = s.ErrorMessage
	}
	return geminiErrorOf(status, gstatus, msg, s.ErrorCode)
}

// geminiUsage is Gemini's usageMetadata.
type geminiUsage struct {
	PromptTokenCount        int    `json:"promptTokenCount"`
	CandidatesTokenCount    int    `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int    `json:"totalTokenCount"`
	CachedContentTokenCount int    `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int    `json:"thoughtsTokenCount,omitempty"`
	PromptTokensDetails     []jobj `json:"promptTokensDetails"`
}

func newGeminiUsage(prompt, cached, candidates, thoughts int) *geminiUsage {
	return &geminiUsage{PromptTokenCount: prompt, CandidatesTokenCount: candidates, CachedContentTokenCount: cached,
		ThoughtsTokenCount: thoughts, TotalTokenCount: prompt + candidates + thoughts,
		PromptTokensDetails: []jobj{o("modality", "TEXT", "tokenCount", prompt)}}
}

// geminiResponse is a GenerateContentResponse or a chunk of one.
type geminiResponse struct {
	Candidates    []jobj       `json:"candidates"`
	UsageMetadata *geminiUsage `json:"usageMetadata,omitempty"`
	ModelVersion  string       `json:"modelVersion"`
	ResponseID    string       `json:"responseId"`
}

// geminiCandidate is a candidate with parts (and a finish reason when
// not empty).
func geminiCandidate(parts []jobj, finish string) jobj {
	c := o("content", o("parts", parts, "role", "model"))
	if finish != "" {
		c = c.with("finishReason", finish)
	}
	return c.with("index", 0)
}

func (u *Upstream) geminiGenerate(w http.ResponseWriter, r *http.Request, req map[string]any, model string, stream bool) {
	s := u.next(r)
	gc, _ := req["generationConfig"].(map[string]any)
	if gc == nil {
		gc, _ = req["generation_config"].(map[string]any)
	}
	if n, ok := gc["maxOutputTokens"].(float64); ok && s.CapOutput && int(n) < s.Usage.Output {
		s.Usage.Output = int(n)
	}
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		writeJSON(w, s.Status, geminiScriptError(s, s.Status))
		return
	}
	thoughts := u.thoughts(s.Usage.Output)
	final := newGeminiUsage(s.Usage.Input, s.Usage.CachedInput, s.Usage.Output-thoughts, thoughts)
	if s.NoUsage {
		final = nil
	}
	var thought []jobj
	if tc, _ := gc["thinkingConfig"].(map[string]any); thoughts > 0 && tc["includeThoughts"] == true {
		thought = []jobj{o("text", "**Weighing the request**\n\nWorking out the answer.", "thought", true)}
	}
	var calls []jobj
	for i, tc := range s.ToolCalls {
		var a any = json.RawMessage(args(tc))
		if !strings.HasPrefix(strings.TrimSpace(args(tc)), "{") || !json.Valid([]byte(args(tc))) {
			a = o()
		}
		part := o("functionCall", o("name", tc.Name, "args", a))
		if i == 0 {
			part = part.with("thoughtSignature", GeminiThoughtSignature(tc.Name))
		}
		calls = append(calls, part)
	}
	finish := s.Finish
	if finish == "" {
		finish = "STOP"
	}
	id := newID("", 22)
	if !stream {
		parts := append([]jobj{}, thought...)
		if s.Text != "" || s.EmptyBlock {
			parts = append(parts, o("text", s.Text))
		}
		parts = append(parts, calls...)
		writeJSON(w, http.StatusOK, geminiResponse{Candidates: []jobj{geminiCandidate(parts, finish)}, UsageMetadata: final,
			ModelVersion: model, ResponseID: id})
		return
	}
	var early *geminiUsage
	if !s.NoUsage {
		early = newGeminiUsage(s.Usage.Input, s.Usage.CachedInput, 0, 0)
	}
	var events []sseEvent
	add := func(parts []jobj, finish string, usage *geminiUsage, content bool) {
		events = append(events, sseEvent{data: mustJSON(geminiResponse{Candidates: []jobj{geminiCandidate(parts, finish)},
			UsageMetadata: usage, ModelVersion: model, ResponseID: id}), content: content})
	}
	if thought != nil {
		add(thought, "", early, false)
	}
	for _, piece := range split(s.Text, s.Chunks) {
		add([]jobj{o("text", piece)}, "", early, true)
	}
	if len(calls) > 0 {
		add(calls, "", early, true)
	}
	add([]jobj{o("text", "")}, finish, final, false)
	u.geminiStream(w, r, s, events)
}

// geminiStream sends events as the API does (data-only, CRLF), flushing
// each. After the first content event (or the first event when none
// carries content) it waits for s.Gate and, with s.MidStreamError, sends
// a bare JSON error object in place of the rest.
func (u *Upstream) geminiStream(w http.ResponseWriter, r *http.Request, s Script, events []sseEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	gateAt := 0
	for i, e := range events {
		if e.content {
			gateAt = i
			break
		}
	}
	for i, e := range events {
		if _, err := w.Write([]byte("data: " + string(e.data) + "\r\n\r\n")); err != nil || rc.Flush() != nil {
			return
		}
		if i != gateAt {
			continue
		}
		if s.Gate != nil && !u.wait(r, s.Gate, 0) {
			panic(http.ErrAbortHandler)
		}
		if s.MidStreamError {
			b, _ := json.MarshalIndent(geminiScriptError(s, http.StatusServiceUnavailable), "", "  ")
			_, _ = w.Write(append(b, '\n'))
			_ = rc.Flush()
			return
		}
	}
}

// geminiCountMembers are the members of a request whose text the Gemini
// fake counts, as the API bills them as prompt.
var geminiCountMembers = []string{"contents", "systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config"}

// GeminiCountTokens is the Gemini fake's countTokens estimate for a
// countTokens or generateContent body: the runes of every JSON string
// value under the members the API bills as prompt (contents, the system
// instruction, tools and tool config; keys excluded), divided by four and
// rounded up, at least 1.
func GeminiCountTokens(body []byte) int {
	var req map[string]any
	if json.Unmarshal(body, &req) != nil {
		return 1
	}
	if inner, ok := req["generateContentRequest"].(map[string]any); ok {
		req = inner
	}
	n := 0
	for _, k := range geminiCountMembers {
		n += stringRunes(req[k])
	}
	return max((n+3)/4, 1)
}

func (u *Upstream) geminiCount(w http.ResponseWriter, req map[string]any, model string) {
	inner, wrapped := req["generateContentRequest"]
	if inner == nil {
		inner, wrapped = req["generate_content_request"]
	}
	for k := range req {
		switch k {
		case "contents", "generateContentRequest", "generate_content_request":
		default:
			geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", k), "")
			return
		}
	}
	msg := ""
	switch g, _ := inner.(map[string]any); {
	case wrapped && req["contents"] != nil:
		msg = "* CountTokensRequest: contents and generate_content_request cannot both be set\n"
	case wrapped && g == nil:
		msg = "Invalid JSON payload received. generateContentRequest is not an object."
	case wrapped:
		if m, _ := g["model"].(string); m != "models/"+model {
			msg = "* GenerateContentRequest.model: unexpected model name format\n"
		} else {
			msg = checkGeminiRequest(g, model, "CountTokensRequest.generate_content_request")
		}
	default:
		msg = checkGeminiContents(req["contents"], model, "CountTokensRequest")
	}
	if msg != "" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, "")
		return
	}
	if u.CountError.Status != 0 {
		writeJSON(w, u.CountError.Status, geminiScriptError(u.CountError, u.CountError.Status))
		return
	}
	if u.CountStatus != 0 {
		writeJSON(w, u.CountStatus, geminiScriptError(Script{}, u.CountStatus))
		return
	}
	n := GeminiCountTokens(mustJSON(req))
	writeJSON(w, http.StatusOK, o("totalTokens", n, "promptTokensDetails", []jobj{o("modality", "TEXT", "tokenCount", n)}))
}
