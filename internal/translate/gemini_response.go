package translate

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// GeminiUsage reads the usage of a Gemini response body or stream chunk
// ("usageMetadata"); see GeminiUsageOf.
func GeminiUsage(body []byte) Usage {
	return GeminiUsageOf(gjson.GetBytes(body, "usageMetadata"))
}

// GeminiUsageOf reads a Gemini usageMetadata object as the gateway bills
// it:
//
//   - Input is promptTokenCount (which already holds the cached tokens)
//     plus toolUsePromptTokenCount (the results of Gemini's own tools read
//     back as prompt, billed as input but counted apart);
//   - CachedInput is cachedContentTokenCount;
//   - Output is candidatesTokenCount plus thoughtsTokenCount: Gemini bills
//     thinking as output and counts it apart from the answer;
//   - CacheWrite is 0: Gemini bills a cache's storage, not its writing.
//
// GeminiReasoningTokens is the thinking part of Output.
func GeminiUsageOf(u gjson.Result) Usage {
	var prompt, toolUse, cached, candidates, thoughts gjson.Result
	jsonbody.Members(u, jsonbody.Member{Key: "promptTokenCount", To: &prompt}, jsonbody.Member{Key: "toolUsePromptTokenCount", To: &toolUse},
		jsonbody.Member{Key: "cachedContentTokenCount", To: &cached}, jsonbody.Member{Key: "candidatesTokenCount", To: &candidates},
		jsonbody.Member{Key: "thoughtsTokenCount", To: &thoughts})
	return Usage{Input: prompt.Int() + toolUse.Int(), CachedInput: cached.Int(), Output: candidates.Int() + thoughts.Int()}
}

// GeminiReasoningTokens is the thoughtsTokenCount of a usageMetadata
// object: the part of GeminiUsageOf's Output spent thinking.
func GeminiReasoningTokens(u gjson.Result) int64 {
	var thoughts gjson.Result
	jsonbody.Members(u, jsonbody.Member{Key: "thoughtsTokenCount", To: &thoughts})
	return thoughts.Int()
}

// geminiChatUsageRaw renders u as a chat usage object with its reasoning
// tokens (completion_tokens_details.reasoning_tokens).
func geminiChatUsageRaw(u Usage, reasoning int64) []byte {
	return newObject().val("prompt_tokens", u.Input).val("completion_tokens", u.Output).val("total_tokens", u.Input+u.Output).
		raw("prompt_tokens_details", newObject().val("cached_tokens", u.CachedInput).done()).
		raw("completion_tokens_details", newObject().val("reasoning_tokens", reasoning).done()).done()
}

// geminiFilters are the finish reasons of a candidate that a filter
// stopped (safety, recitation, blocked terms, protected data, language).
var geminiFilters = map[string]bool{
	"SAFETY": true, "RECITATION": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true, "LANGUAGE": true,
	"IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true,
}

// geminiFinish maps a Gemini finishReason to a chat finish_reason:
// MAX_TOKENS → length; the filters (geminiFilters) → content_filter; STOP
// (or none) with function calls → tool_calls; STOP and anything else
// (OTHER, MALFORMED_FUNCTION_CALL, ...) → stop.
func geminiFinish(reason string, calls bool) string {
	switch {
	case reason == "MAX_TOKENS":
		return "length"
	case geminiFilters[reason]:
		return "content_filter"
	case calls && (reason == "STOP" || reason == ""):
		return "tool_calls"
	}
	return "stop"
}

// geminiCandidate is what the translations read of a response or chunk's
// first candidate: its text (thought parts skipped), its function calls
// as chat tool_calls entries, and its finish reason. A prompt Gemini
// blocked (promptFeedback.blockReason, no candidate) finishes with
// SAFETY.
func geminiCandidate(r gjson.Result) (text string, calls [][]byte, finish string) {
	c := r.Get("candidates.0")
	var b strings.Builder
	c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		if p.Get("thought").Type == gjson.True {
			return true
		}
		if t := p.Get("text"); t.Type == gjson.String {
			b.WriteString(t.String())
		}
		if fc := p.Get("functionCall"); fc.IsObject() {
			calls = append(calls, chatToolCall(geminiCallID(p.Get("thoughtSignature").String()), fc.Get("name").String(), argumentsOf(fc.Get("args"))))
		}
		return true
	})
	finish = c.Get("finishReason").String()
	if !c.Exists() && r.Get("promptFeedback.blockReason").String() != "" {
		finish = "SAFETY"
	}
	return b.String(), calls, finish
}

// GeminiToChatResponse translates a Gemini generateContent response body
// into a chat completion reporting model: the first candidate's text parts
// are the content (thought parts are skipped), its functionCall parts the
// tool calls (ids: call_ and a random suffix, carrying the call's thought
// signature; arguments the args object as JSON), finish_reason as
// geminiFinish maps it (a blocked prompt: content_filter), usage as
// GeminiUsageOf reads it with completion_tokens_details.reasoning_tokens
// the thoughts. The id is chatcmpl- and the responseId.
func GeminiToChatResponse(body []byte, model string) ([]byte, error) {
	r, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	if r.Get("error").Exists() {
		return nil, &FieldError{Message: "upstream body is an error, not a response"}
	}
	text, calls, reason := geminiCandidate(r)
	choice := chatChoice(text, calls, geminiFinish(reason, len(calls) > 0))
	u := r.Get("usageMetadata")
	return newObject().val("id", swapID(r.Get("responseId").String(), "chatcmpl-")).val("object", "chat.completion").
		val("created", now().Unix()).val("model", model).raw("choices", rawArray([][]byte{choice.done()})).
		raw("usage", geminiChatUsageRaw(GeminiUsageOf(u), GeminiReasoningTokens(u))).done(), nil
}

// GeminiCountRequest makes a countTokens body from a generateContent body
// (ChatToGeminiRequest's) for model: {"generateContentRequest": {"model":
// "models/<model>", ...the body's members}}, which counts the system
// instruction, the tools and the response schema as well as the contents.
func GeminiCountRequest(generate []byte, model string) ([]byte, error) {
	r, err := parseObject(generate)
	if err != nil {
		return nil, err
	}
	inner := newObject().val("model", "models/"+model)
	r.ForEach(func(k, v gjson.Result) bool {
		if k.String() != "model" {
			inner = inner.raw(k.String(), []byte(v.Raw))
		}
		return true
	})
	return newObject().raw("generateContentRequest", inner.done()).done(), nil
}

// VertexCountMembers are the members of a generateContent body that Vertex
// AI's countTokens takes (its CountTokensRequest has no toolConfig or
// safetySettings, and refuses them).
var VertexCountMembers = []string{"contents", "systemInstruction", "tools", "generationConfig"}

// VertexCountRequest is Vertex AI's countTokens body for a generateContent
// body: its VertexCountMembers, as they are.
func VertexCountRequest(generate []byte, _ string) ([]byte, error) {
	r, err := parseObject(generate)
	if err != nil {
		return nil, err
	}
	out := newObject()
	for _, k := range VertexCountMembers {
		if v := r.Get(k); v.Exists() {
			out = out.raw(k, []byte(v.Raw))
		}
	}
	return out.done(), nil
}

// GeminiCountTokens reads a countTokens answer: its totalTokens.
func GeminiCountTokens(body []byte) (int64, error) {
	r, err := parseObject(body)
	if err != nil {
		return 0, err
	}
	t := r.Get("totalTokens")
	if r.Get("error").Exists() || (t.Exists() && t.Type != gjson.Number) {
		return 0, &FieldError{Message: "upstream body is not a token count"}
	}
	return t.Int(), nil // absent: Gemini leaves a zero out
}

// GeminiError is what a Gemini error body says: {"error": {"code": 429,
// "message": "...", "status": "RESOURCE_EXHAUSTED", "details": [...]}}.
type GeminiError struct {
	// Code is the HTTP status the body repeats.
	Code int64
	// Status is the canonical error code (INVALID_ARGUMENT,
	// RESOURCE_EXHAUSTED, UNAVAILABLE, ...).
	Status string
	// Message is the provider's message.
	Message string
	// Reason is the reason of the details' google.rpc.ErrorInfo
	// (API_KEY_INVALID, SERVICE_DISABLED, ...), "" when none.
	Reason string
	// Field is the first field of the details' google.rpc.BadRequest
	// violations, "" when none.
	Field string
}

// ReadGeminiError reads a Gemini error body: an object with "error", or
// an array holding one (a stream asked for without alt=sse). ok is false
// for anything else.
func ReadGeminiError(body []byte) (e GeminiError, ok bool) {
	if !jsonbody.Valid(body) {
		return e, false
	}
	r := jsonbody.Parse(body)
	if r.IsArray() {
		r = r.Get("0")
	}
	ge := r.Get("error")
	if !ge.IsObject() {
		return e, false
	}
	e = GeminiError{Code: ge.Get("code").Int(), Status: ge.Get("status").String(), Message: ge.Get("message").String()}
	ge.Get("details").ForEach(func(_, d gjson.Result) bool {
		switch d.Get("@type").String() {
		case "type.googleapis.com/google.rpc.ErrorInfo":
			if e.Reason == "" {
				e.Reason = d.Get("reason").String()
			}
		case "type.googleapis.com/google.rpc.BadRequest":
			if e.Field == "" {
				e.Field = d.Get("fieldViolations.0.field").String()
			}
		}
		return true
	})
	return e, true
}

// geminiSetupReasons are ErrorInfo reasons about the key or project the
// gateway calls Gemini with.
var geminiSetupReasons = map[string]bool{
	"API_KEY_INVALID": true, "API_KEY_EXPIRED": true, "API_KEY_SERVICE_BLOCKED": true, "API_KEY_HTTP_REFERRER_BLOCKED": true,
	"API_KEY_IP_ADDRESS_BLOCKED": true, "API_KEY_ANDROID_APP_BLOCKED": true, "API_KEY_IOS_APP_BLOCKED": true,
	"SERVICE_DISABLED": true, "CONSUMER_SUSPENDED": true, "CONSUMER_INVALID": true, "BILLING_DISABLED": true,
	"ACCESS_TOKEN_EXPIRED": true, "ACCESS_TOKEN_SCOPE_INSUFFICIENT": true, "ACCESS_TOKEN_TYPE_UNSUPPORTED": true,
}

// Setup reports an error about the gateway's own key or project rather
// than the caller's request, whatever its status (an invalid key is a 400
// INVALID_ARGUMENT): an ErrorInfo reason of the key, the project or
// billing, UNAUTHENTICATED, PERMISSION_DENIED, or FAILED_PRECONDITION
// (Gemini's answer where its free tier is not offered and billing is off).
// The caller should not see the provider's words: they name the
// operator's project.
func (e GeminiError) Setup() bool {
	switch e.Status {
	case "UNAUTHENTICATED", "PERMISSION_DENIED", "FAILED_PRECONDITION":
		return true
	}
	return geminiSetupReasons[e.Reason]
}

// geminiStreamErrorType is the chat error type of a Gemini error status
// met in a stream.
func geminiStreamErrorType(status string) string {
	switch status {
	case "RESOURCE_EXHAUSTED":
		return "rate_limit_error"
	case "UNAVAILABLE":
		return "overloaded_error"
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return "invalid_request_error"
	}
	return "api_error"
}
