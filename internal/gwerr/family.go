package gwerr

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Family is a group of endpoints that share one error shape (the shapes
// are listed below).
type Family int

const (
	// Chat: chat completions, responses and the model list:
	// {error:{message,type,param,code}}, 402s with X-Gw-Hold-Reason and
	// error.provider_specific_fields.error.
	Chat Family = iota + 1
	// Messages: the messages-style endpoints, in the shape messages-style
	// SDKs parse: {type:"error", error:{type,message}}.
	Messages
	// Ability: transcription, speech, search:
	// {error:{message,type,code?,param?}}.
	Ability
	// Images: the ability shape, with 401/403 as permission_error and credit
	// holds in {detail:{error:{code,message}}}.
	Images
	// Decide: {error:{message,type,code,param}}, all four always present.
	Decide
	// Voices: {error:{message}}.
	Voices
	// Fetch: flat {error:<code>, message}.
	Fetch
	// Tools: the tools server's tool error object (ToolObject).
	Tools
	// RPC: the routing server's JSON-RPC errors (RPCCode).
	RPC
	// StatelessRPC: both MCP servers' refusals to a client of the
	// stateless protocol era, which forbids the sessions era's codes:
	// JSON-RPC errors whose code is StatelessRPCBase minus the status.
	StatelessRPC
)

// StatelessRPCBase starts the codes of StatelessRPC refusals: -31000
// minus the HTTP status (401 is -31401), outside the range JSON-RPC and
// the protocol keep for themselves.
const StatelessRPCBase = -31000

// StatelessRPCCode is the JSON-RPC code of a StatelessRPC refusal with
// HTTP status.
func StatelessRPCCode(status int) int { return StatelessRPCBase - status }

// HeaderHoldReason carries a 402's refusal code on chat and messages.
const HeaderHoldReason = "X-Gw-Hold-Reason"

// def is a family's default rendering of a kind.
type def struct {
	status int
	typ    string
	code   string
}

// kindStatus is the status of each kind unless a family says otherwise.
var kindStatus = map[Kind]int{
	Invalid: 400, Unauthenticated: 401, ModelNotAllowed: 401, PlanLocked: 402,
	Payment: 402, Forbidden: 403, Disabled: 404, NotFound: 404, MethodNotAllowed: 405,
	TooLarge: 413, Unprocessable: 422, RateLimited: 429, Internal: 500,
	NotImplemented: 501, Upstream: 502, Unavailable: 503, Timeout: 504, Overloaded: 529,
	TooSlow: 408,
}

// chatDefs: chat-completions-style types and codes.
var chatDefs = map[Kind]def{
	Invalid:          {typ: "invalid_request_error"},
	Unauthenticated:  {typ: "authentication_error", code: "invalid_api_key"},
	ModelNotAllowed:  {typ: "permission_error", code: "model_not_allowed"},
	PlanLocked:       {typ: "insufficient_quota", code: CodePremiumLocked},
	Payment:          {typ: "insufficient_quota"},
	Forbidden:        {typ: "permission_error", code: "forbidden"},
	Disabled:         {typ: "not_found_error", code: "not_found"},
	NotFound:         {typ: "not_found_error", code: "not_found"},
	MethodNotAllowed: {typ: "invalid_request_error", code: "method_not_allowed"},
	TooLarge:         {typ: "invalid_request_error", code: "request_too_large"},
	Unprocessable:    {typ: "invalid_request_error"},
	RateLimited:      {typ: "rate_limit_error", code: "rate_limit_exceeded"},
	Internal:         {typ: "api_error", code: "internal_error"},
	NotImplemented:   {typ: "api_error", code: "not_implemented"},
	Upstream:         {typ: "api_error", code: "upstream_error"},
	Unavailable:      {typ: "api_error", code: "service_unavailable"},
	Timeout:          {typ: "api_error", code: "timeout"},
	Overloaded:       {typ: "overloaded_error", code: "overloaded"},
	TooSlow:          {typ: "invalid_request_error", code: CodeRequestTimeout},
}

// messagesDefs: the error types messages-style SDKs map to their classes.
var messagesDefs = map[Kind]def{
	Invalid:          {typ: "invalid_request_error"},
	Unauthenticated:  {typ: "authentication_error"},
	ModelNotAllowed:  {typ: "permission_error", code: "model_not_allowed"},
	PlanLocked:       {typ: "billing_error", code: CodePremiumLocked},
	Payment:          {typ: "billing_error"},
	Forbidden:        {typ: "permission_error"},
	Disabled:         {typ: "not_found_error"},
	NotFound:         {typ: "not_found_error"},
	MethodNotAllowed: {typ: "invalid_request_error"},
	TooLarge:         {typ: "request_too_large"},
	Unprocessable:    {typ: "invalid_request_error"},
	RateLimited:      {typ: "rate_limit_error"},
	Internal:         {typ: "api_error"},
	NotImplemented:   {typ: "api_error", code: "not_implemented"},
	Upstream:         {typ: "api_error"},
	Unavailable:      {typ: "api_error"},
	Timeout:          {typ: "timeout_error"},
	Overloaded:       {typ: "overloaded_error"},
	TooSlow:          {typ: "invalid_request_error", code: CodeRequestTimeout},
}

// abilityDefs: the ability endpoints' types and codes (of transcription,
// speech and search: many refusals have no code).
var abilityDefs = map[Kind]def{
	Invalid:          {typ: "invalid_request_error"},
	Unauthenticated:  {typ: "authentication_error"},
	ModelNotAllowed:  {typ: "authentication_error"},
	PlanLocked:       {typ: "insufficient_quota", code: CodePremiumLocked},
	Payment:          {typ: "insufficient_quota"},
	Forbidden:        {typ: "permission_error"},
	Disabled:         {typ: "not_found_error"},
	NotFound:         {typ: "not_found_error"},
	MethodNotAllowed: {typ: "invalid_request_error"},
	TooLarge:         {typ: "invalid_request_error", code: "file_too_large"},
	Unprocessable:    {typ: "invalid_request_error"},
	RateLimited:      {typ: "rate_limit_error", code: "rate_limit_error"},
	Internal:         {typ: "api_error"},
	NotImplemented:   {typ: "api_error", code: "not_implemented"},
	Upstream:         {typ: "api_error", code: "capability_unavailable"},
	Unavailable:      {typ: "api_error", code: "capability_unavailable"},
	Timeout:          {typ: "api_error", code: "capability_unavailable"},
	Overloaded:       {typ: "api_error", code: "capability_unavailable"},
	TooSlow:          {typ: "invalid_request_error", code: CodeRequestTimeout},
}

// imageDefs: as abilities, with the image table's permission_error rows.
var imageDefs = overlay(abilityDefs, map[Kind]def{
	Unauthenticated: {typ: "permission_error", code: "permission_error"},
	ModelNotAllowed: {status: 403, typ: "permission_error", code: "permission_error"},
	Forbidden:       {typ: "permission_error", code: "permission_error"},
})

// decideDefs: the decision mode table (no 400s: shape errors are 422).
var decideDefs = map[Kind]def{
	Invalid:          {status: 422, typ: "invalid_request_error", code: "invalid_request"},
	Unauthenticated:  {typ: "authentication_error", code: "invalid_api_key"},
	ModelNotAllowed:  {status: 403, typ: "permission_error", code: "model_not_allowed"},
	PlanLocked:       {status: 403, typ: "permission_error", code: CodePaidPlanRequired},
	Payment:          {typ: "insufficient_quota"},
	Forbidden:        {typ: "permission_error", code: "forbidden"},
	Disabled:         {typ: "not_found_error", code: "not_found"},
	NotFound:         {typ: "not_found_error", code: "not_found"},
	MethodNotAllowed: {typ: "invalid_request_error", code: "method_not_allowed"},
	TooLarge:         {typ: "invalid_request_error", code: "request_too_large"},
	Unprocessable:    {typ: "invalid_request_error", code: "invalid_request"},
	RateLimited:      {typ: "rate_limit_error", code: "rate_limit_exceeded"},
	Internal:         {status: 503, typ: "api_error", code: "capability_unavailable"},
	NotImplemented:   {typ: "api_error", code: "not_implemented"},
	Upstream:         {status: 503, typ: "api_error", code: "upstream_unavailable"},
	Unavailable:      {typ: "api_error", code: "capability_unavailable"},
	Timeout:          {status: 503, typ: "api_error", code: "upstream_unavailable"},
	Overloaded:       {typ: "api_error", code: "upstream_overloaded"},
	TooSlow:          {typ: "invalid_request_error", code: CodeRequestTimeout},
}

// fetchCodes: page reading's flat string codes.
var fetchDefs = map[Kind]def{
	Invalid:          {code: "invalid_request"},
	Unauthenticated:  {code: "unauthorized"},
	ModelNotAllowed:  {code: "unauthorized"},
	PlanLocked:       {code: CodeUpgradeRequired},
	Payment:          {},
	Forbidden:        {code: "forbidden"},
	Disabled:         {code: "not found"},
	NotFound:         {code: "not found"},
	MethodNotAllowed: {code: "method not allowed"},
	TooLarge:         {code: "too_large"},
	Unprocessable:    {code: "invalid_request"},
	RateLimited:      {code: "rate_limited"},
	Internal:         {code: "internal_error"},
	NotImplemented:   {code: "not_implemented"},
	Upstream:         {code: "provider failed"},
	Unavailable:      {code: "capability_unavailable"},
	Timeout:          {status: 502, code: "provider failed"},
	Overloaded:       {code: "capability_unavailable"},
	TooSlow:          {code: CodeRequestTimeout},
}

// voiceDefs: the voice list table has only 401 and 503; a list that could
// not be built (an internal failure included) answers 503.
var voiceDefs = map[Kind]def{
	Internal: {status: 503},
}

// voiceMessages: the voice list's fixed messages.
var voiceMessages = map[Kind]string{
	Unauthenticated: "Unauthorized",
	ModelNotAllowed: "Unauthorized",
	Unavailable:     "Voice catalogue unavailable",
	Internal:        "Voice catalogue unavailable",
}

func overlay(base, over map[Kind]def) map[Kind]def {
	m := make(map[Kind]def, len(base))
	for k, v := range base {
		m[k] = v
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

var familyDefs = map[Family]map[Kind]def{
	Chat: chatDefs, Messages: messagesDefs, Ability: abilityDefs, Images: imageDefs,
	Decide: decideDefs, Voices: voiceDefs, Fetch: fetchDefs, Tools: abilityDefs, RPC: abilityDefs,
	StatelessRPC: abilityDefs,
}

// resolved is an error with the family's defaults applied.
type resolved struct {
	status int
	typ    string
	code   string
}

func (f Family) resolve(e *Error) resolved {
	d := familyDefs[f][e.Kind]
	r := resolved{status: kindStatus[e.Kind], typ: d.typ, code: d.code}
	if r.status == 0 {
		r.status = http.StatusInternalServerError
	}
	if d.status != 0 {
		r.status = d.status
	}
	if e.Status != 0 {
		r.status = e.Status
	}
	if e.Type != "" {
		r.typ = e.Type
	}
	if e.Code != "" {
		r.code = e.Code
	}
	return r
}

// Status returns the HTTP status f answers e with.
func (f Family) Status(e *Error) int { return f.resolve(e).status }

// Code returns the machine-readable code f gives e ("" when none).
func (f Family) Code(e *Error) string { return f.resolve(e).code }

// Render writes e to w in f's shape, with its status and headers.
func Render(w http.ResponseWriter, f Family, e *Error) {
	r := f.resolve(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Kind == MethodNotAllowed && e.Allow != "" {
		h.Set("Allow", e.Allow)
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(r.status)
	}
	var body any
	switch f {
	case Chat:
		obj := map[string]any{"message": msg, "type": r.typ, "param": nullable(e.Param), "code": nullable(r.code)}
		if r.status == http.StatusPaymentRequired && r.code != "" {
			h.Set(HeaderHoldReason, r.code)
			obj["provider_specific_fields"] = map[string]any{"error": r.code}
		}
		body = map[string]any{"error": obj}
	case Messages:
		obj := map[string]any{"type": r.typ, "message": msg}
		if r.code != "" {
			obj["code"] = r.code
		}
		if r.status == http.StatusPaymentRequired && r.code != "" {
			h.Set(HeaderHoldReason, r.code)
		}
		body = map[string]any{"type": "error", "error": obj}
	case Images:
		if r.status == http.StatusPaymentRequired && isCreditHold(r.code) {
			body = map[string]any{"detail": map[string]any{"error": map[string]any{"code": r.code, "message": msg}}}
			break
		}
		body = map[string]any{"error": abilityObject(msg, r, e.Param)}
	case Decide:
		body = map[string]any{"error": map[string]any{"message": msg, "type": r.typ, "code": nullable(r.code), "param": nullable(e.Param)}}
	case Voices:
		h.Set("Cache-Control", "no-store")
		if m, ok := voiceMessages[e.Kind]; ok {
			msg = m
		}
		body = map[string]any{"error": map[string]any{"message": msg}}
	case Fetch:
		code := r.code
		if code == "" {
			code = "error"
		}
		obj := map[string]any{"error": code}
		if e.Message != "" {
			obj["message"] = e.Message
		}
		body = obj
	case Tools, RPC:
		// Refusals before any tool runs are JSON-RPC errors; tool results
		// carry ToolObject instead.
		body = map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": RPCCode(e), "message": msg}}
	case StatelessRPC:
		body = map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": StatelessRPCCode(r.status), "message": msg}}
	default: // Ability
		body = map[string]any{"error": abilityObject(msg, r, e.Param)}
	}
	b, _ := json.Marshal(body)
	b = append(b, '\n')
	// The length goes with it, so a pipeline may send it on at once.
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(r.status)
	_, _ = w.Write(b)
}

func abilityObject(msg string, r resolved, param string) map[string]any {
	obj := map[string]any{"message": msg, "type": r.typ}
	if r.code != "" {
		obj["code"] = r.code
	}
	if param != "" {
		obj["param"] = param
	}
	return obj
}

// isCreditHold reports the image family's codes that go in the detail wrapper.
func isCreditHold(code string) bool {
	switch code {
	case CodeCreditExhausted, CodeDailyCap, CodeMonthlyCap, CodeKeyDailyCap, CodeKeyMonthlyCap, CodeKeyTotalCap,
		CodeOrgDailyCap, CodeOrgMonthlyCap:
		return true
	}
	return false
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
