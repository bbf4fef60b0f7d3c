package gwerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// allKinds lists every Kind, for the family × kind sweeps.
var allKinds = []Kind{
	Invalid, Unauthenticated, ModelNotAllowed, PlanLocked, Payment, Forbidden, Disabled, NotFound,
	MethodNotAllowed, TooLarge, Unprocessable, RateLimited, Internal, NotImplemented, Upstream,
	Unavailable, Timeout, Overloaded, TooSlow,
}

var allFamilies = []Family{Chat, Messages, Ability, Images, Decide, Voices, Fetch, Tools, RPC, StatelessRPC}

func familyName(f Family) string {
	return map[Family]string{Chat: "Chat", Messages: "Messages", Ability: "Ability", Images: "Images",
		Decide: "Decide", Voices: "Voices", Fetch: "Fetch", Tools: "Tools", RPC: "RPC", StatelessRPC: "StatelessRPC"}[f]
}

// decodeJSON decodes s into a generic value (numbers as float64).
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	return v
}

func render(f Family, e *Error) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	Render(rec, f, e)
	return rec
}

// with builds an error; code, param and message may be empty.
func with(kind Kind, code, param, msg string) *Error {
	return &Error{Kind: kind, Code: code, Param: param, Message: msg}
}

type renderCase struct {
	name   string
	fam    Family
	err    *Error
	status int
	body   string            // whole body, compared after decoding
	header map[string]string // headers that must have exactly this value
}

// holdAndCache are the headers that must be absent unless a case says so.
var holdAndCache = []string{HeaderHoldReason, "Retry-After", "Allow", "Cache-Control"}

func TestRender(t *testing.T) {
	cases := []renderCase{
		// Chat: {error:{message,type,param,code}}, param and code null when
		// absent; a 402 carries its code in X-Gw-Hold-Reason and
		// error.provider_specific_fields.error.
		{name: "chat 401 missing key", fam: Chat, err: with(Unauthenticated, "", "", "missing API key"), status: 401,
			body: `{"error":{"message":"missing API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`},
		{name: "chat 400 with param", fam: Chat, err: with(Invalid, "", "messages", "messages is required"), status: 400,
			body: `{"error":{"message":"messages is required","type":"invalid_request_error","param":"messages","code":null}}`},
		{name: "chat 401 model not allowed", fam: Chat, err: with(ModelNotAllowed, "", "model", "no"), status: 401,
			body: `{"error":{"message":"no","type":"permission_error","param":"model","code":"model_not_allowed"}}`},
		{name: "chat 402 credit_exhausted", fam: Chat, err: with(Payment, CodeCreditExhausted, "", "balance spent"), status: 402,
			header: map[string]string{HeaderHoldReason: "credit_exhausted"},
			body:   `{"error":{"message":"balance spent","type":"insufficient_quota","param":null,"code":"credit_exhausted","provider_specific_fields":{"error":"credit_exhausted"}}}`},
		{name: "chat 402 daily_cap", fam: Chat, err: with(Payment, CodeDailyCap, "", "cap"), status: 402,
			header: map[string]string{HeaderHoldReason: "daily_cap"},
			body:   `{"error":{"message":"cap","type":"insufficient_quota","param":null,"code":"daily_cap","provider_specific_fields":{"error":"daily_cap"}}}`},
		{name: "chat 402 monthly_cap", fam: Chat, err: with(Payment, CodeMonthlyCap, "", "cap"), status: 402,
			header: map[string]string{HeaderHoldReason: "monthly_cap"},
			body:   `{"error":{"message":"cap","type":"insufficient_quota","param":null,"code":"monthly_cap","provider_specific_fields":{"error":"monthly_cap"}}}`},
		{name: "chat 402 credit_unresolved", fam: Chat, err: with(Payment, CodeCreditUnresolved, "", "retry once"), status: 402,
			header: map[string]string{HeaderHoldReason: "credit_unresolved"},
			body:   `{"error":{"message":"retry once","type":"insufficient_quota","param":null,"code":"credit_unresolved","provider_specific_fields":{"error":"credit_unresolved"}}}`},
		{name: "chat 402 free tier", fam: Chat, err: with(Payment, CodeCreditExhausted, "", "1 USD reached"), status: 402,
			header: map[string]string{HeaderHoldReason: "credit_exhausted"},
			body:   `{"error":{"message":"1 USD reached","type":"insufficient_quota","param":null,"code":"credit_exhausted","provider_specific_fields":{"error":"credit_exhausted"}}}`},
		{name: "chat 402 premium_locked", fam: Chat, err: with(PlanLocked, "", "", "paid plan"), status: 402,
			header: map[string]string{HeaderHoldReason: "premium_locked"},
			body:   `{"error":{"message":"paid plan","type":"insufficient_quota","param":null,"code":"premium_locked","provider_specific_fields":{"error":"premium_locked"}}}`},
		{name: "chat 402 without a code has no hold reason", fam: Chat, err: with(Payment, "", "", "no"), status: 402,
			body: `{"error":{"message":"no","type":"insufficient_quota","param":null,"code":null}}`},
		{name: "chat 403", fam: Chat, err: with(Forbidden, "", "", "no"), status: 403,
			body: `{"error":{"message":"no","type":"permission_error","param":null,"code":"forbidden"}}`},
		{name: "chat 404", fam: Chat, err: with(NotFound, "", "", "no route"), status: 404,
			body: `{"error":{"message":"no route","type":"not_found_error","param":null,"code":"not_found"}}`},
		{name: "chat 405 with Allow", fam: Chat, err: &Error{Kind: MethodNotAllowed, Message: "method not allowed", Allow: "POST"}, status: 405,
			header: map[string]string{"Allow": "POST"},
			body:   `{"error":{"message":"method not allowed","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}`},
		{name: "chat 408 slow body", fam: Chat, err: with(TooSlow, "", "", "too slow"), status: 408,
			body: `{"error":{"message":"too slow","type":"invalid_request_error","param":null,"code":"request_timeout"}}`},
		{name: "messages 408 slow body", fam: Messages, err: with(TooSlow, "", "", "too slow"), status: 408,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"too slow","code":"request_timeout"}}`},
		{name: "ability 408 slow body", fam: Ability, err: with(TooSlow, "", "", "too slow"), status: 408,
			body: `{"error":{"message":"too slow","type":"invalid_request_error","code":"request_timeout"}}`},
		{name: "fetch 408 slow body", fam: Fetch, err: with(TooSlow, "", "", "too slow"), status: 408,
			body: `{"error":"request_timeout","message":"too slow"}`},
		{name: "chat 413", fam: Chat, err: with(TooLarge, "", "", "too big"), status: 413,
			body: `{"error":{"message":"too big","type":"invalid_request_error","param":null,"code":"request_too_large"}}`},
		{name: "chat 429 with Retry-After", fam: Chat, err: &Error{Kind: RateLimited, Message: "slow down", RetryAfter: 30}, status: 429,
			header: map[string]string{"Retry-After": "30"},
			body:   `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{name: "chat 500 default message", fam: Chat, err: &Error{Kind: Internal}, status: 500,
			body: `{"error":{"message":"Internal Server Error","type":"api_error","param":null,"code":"internal_error"}}`},
		{name: "chat 502", fam: Chat, err: with(Upstream, "", "", "upstream failed"), status: 502,
			body: `{"error":{"message":"upstream failed","type":"api_error","param":null,"code":"upstream_error"}}`},
		{name: "chat 503 with Retry-After", fam: Chat, err: &Error{Kind: Unavailable, Message: "retry", RetryAfter: 1}, status: 503,
			header: map[string]string{"Retry-After": "1"},
			body:   `{"error":{"message":"retry","type":"api_error","param":null,"code":"service_unavailable"}}`},
		{name: "chat 504", fam: Chat, err: with(Timeout, "", "", "slow"), status: 504,
			body: `{"error":{"message":"slow","type":"api_error","param":null,"code":"timeout"}}`},
		{name: "chat 529", fam: Chat, err: with(Overloaded, "", "", "busy"), status: 529,
			body: `{"error":{"message":"busy","type":"overloaded_error","param":null,"code":"overloaded"}}`},
		{name: "chat overrides of status, type and code", fam: Chat, err: &Error{Kind: Invalid, Status: 409, Type: "conflict_error", Code: "dup", Message: "m"}, status: 409,
			body: `{"error":{"message":"m","type":"conflict_error","param":null,"code":"dup"}}`},
		{name: "chat RetryAfter 0 sends no header", fam: Chat, err: &Error{Kind: RateLimited, Message: "m", RetryAfter: 0}, status: 429,
			body: `{"error":{"message":"m","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{name: "chat Allow only on 405", fam: Chat, err: &Error{Kind: Invalid, Message: "m", Allow: "GET"}, status: 400,
			body: `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":null}}`},

		// Messages: {type:"error", error:{type,message}} with the type
		// messages-style SDKs map to their classes.
		{name: "messages 400", fam: Messages, err: with(Invalid, "", "", "max_tokens is required"), status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens is required"}}`},
		{name: "messages 401", fam: Messages, err: with(Unauthenticated, "", "", "invalid API key"), status: 401,
			body: `{"type":"error","error":{"type":"authentication_error","message":"invalid API key"}}`},
		{name: "messages 402 credit", fam: Messages, err: with(Payment, CodeCreditExhausted, "", "balance spent"), status: 402,
			header: map[string]string{HeaderHoldReason: "credit_exhausted"},
			body:   `{"type":"error","error":{"type":"billing_error","message":"balance spent","code":"credit_exhausted"}}`},
		{name: "messages 402 premium_locked", fam: Messages, err: with(PlanLocked, "", "", "paid plan"), status: 402,
			header: map[string]string{HeaderHoldReason: "premium_locked"},
			body:   `{"type":"error","error":{"type":"billing_error","message":"paid plan","code":"premium_locked"}}`},
		{name: "messages 403", fam: Messages, err: with(Forbidden, "", "", "alt serves only messages"), status: 403,
			body: `{"type":"error","error":{"type":"permission_error","message":"alt serves only messages"}}`},
		{name: "messages 404", fam: Messages, err: with(NotFound, "", "", "no route"), status: 404,
			body: `{"type":"error","error":{"type":"not_found_error","message":"no route"}}`},
		{name: "messages 413", fam: Messages, err: with(TooLarge, "", "", "too big"), status: 413,
			body: `{"type":"error","error":{"type":"request_too_large","message":"too big"}}`},
		{name: "messages 429", fam: Messages, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 5}, status: 429,
			header: map[string]string{"Retry-After": "5"},
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`},
		{name: "messages 500", fam: Messages, err: with(Internal, "", "", "boom"), status: 500,
			body: `{"type":"error","error":{"type":"api_error","message":"boom"}}`},
		{name: "messages 504", fam: Messages, err: with(Timeout, "", "", "slow"), status: 504,
			body: `{"type":"error","error":{"type":"timeout_error","message":"slow"}}`},
		{name: "messages 529", fam: Messages, err: with(Overloaded, "", "", "busy"), status: 529,
			body: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
		{name: "messages 405", fam: Messages, err: &Error{Kind: MethodNotAllowed, Message: "m", Allow: "POST"}, status: 405,
			header: map[string]string{"Allow": "POST"},
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"m"}}`},

		// Ability (transcription, speech, search): {error:{message,type,code?,param?}}.
		{name: "ability 400 only param", fam: Ability, err: with(Invalid, "", "stream", "stream is not supported"), status: 400,
			body: `{"error":{"message":"stream is not supported","type":"invalid_request_error","param":"stream"}}`},
		{name: "ability 400 unsupported_file_format", fam: Ability, err: with(Invalid, "unsupported_file_format", "file", "not audio"), status: 400,
			body: `{"error":{"message":"not audio","type":"invalid_request_error","code":"unsupported_file_format","param":"file"}}`},
		{name: "ability 400 speech provider refused", fam: Ability, err: with(Invalid, "invalid_request_error", "", "refused"), status: 400,
			body: `{"error":{"message":"refused","type":"invalid_request_error","code":"invalid_request_error"}}`},
		{name: "ability 400 search body", fam: Ability, err: with(Invalid, "", "", "only query may be sent"), status: 400,
			body: `{"error":{"message":"only query may be sent","type":"invalid_request_error"}}`},
		{name: "ability 401 no code", fam: Ability, err: with(Unauthenticated, "", "", "invalid API key"), status: 401,
			body: `{"error":{"message":"invalid API key","type":"authentication_error"}}`},
		{name: "ability 401 model not on list", fam: Ability, err: with(ModelNotAllowed, "", "", "gw-voice is not on the key's list"), status: 401,
			body: `{"error":{"message":"gw-voice is not on the key's list","type":"authentication_error"}}`},
		{name: "ability 402 premium_locked", fam: Ability, err: with(PlanLocked, "", "", "paid plan"), status: 402,
			body: `{"error":{"message":"paid plan","type":"insufficient_quota","code":"premium_locked"}}`},
		{name: "ability 402 credit_unresolved", fam: Ability, err: with(Payment, CodeCreditUnresolved, "", "retry once"), status: 402,
			body: `{"error":{"message":"retry once","type":"insufficient_quota","code":"credit_unresolved"}}`},
		{name: "ability 402 daily_cap", fam: Ability, err: with(Payment, CodeDailyCap, "", "cap"), status: 402,
			body: `{"error":{"message":"cap","type":"insufficient_quota","code":"daily_cap"}}`},
		{name: "ability 404 no code", fam: Ability, err: with(Disabled, "", "", "not switched on"), status: 404,
			body: `{"error":{"message":"not switched on","type":"not_found_error"}}`},
		{name: "ability 413 file_too_large", fam: Ability, err: with(TooLarge, "", "", "over 8 MB"), status: 413,
			body: `{"error":{"message":"over 8 MB","type":"invalid_request_error","code":"file_too_large"}}`},
		{name: "ability 429 rate_limit_error", fam: Ability, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 7}, status: 429,
			header: map[string]string{"Retry-After": "7"},
			body:   `{"error":{"message":"slow","type":"rate_limit_error","code":"rate_limit_error"}}`},
		{name: "ability 502 capability_unavailable", fam: Ability, err: with(Upstream, "", "", "failed upstream"), status: 502,
			body: `{"error":{"message":"failed upstream","type":"api_error","code":"capability_unavailable"}}`},
		{name: "ability 502 search upstream_empty", fam: Ability, err: with(Upstream, "upstream_empty", "", "no answer"), status: 502,
			body: `{"error":{"message":"no answer","type":"api_error","code":"upstream_empty"}}`},
		{name: "ability 503 capability_unavailable", fam: Ability, err: with(Unavailable, "", "", "later"), status: 503,
			body: `{"error":{"message":"later","type":"api_error","code":"capability_unavailable"}}`},
		{name: "ability 504 capability_unavailable", fam: Ability, err: with(Timeout, "", "", "took too long"), status: 504,
			body: `{"error":{"message":"took too long","type":"api_error","code":"capability_unavailable"}}`},

		// Images: permission_error on 401/403; credit holds in the detail
		// wrapper, every other 402 in the ability shape.
		{name: "images 400 no code", fam: Images, err: with(Invalid, "", "prompt", "prompt is required"), status: 400,
			body: `{"error":{"message":"prompt is required","type":"invalid_request_error","param":"prompt"}}`},
		{name: "images 400 edit_unsupported", fam: Images, err: with(Invalid, "edit_unsupported", "model", "cannot edit"), status: 400,
			body: `{"error":{"message":"cannot edit","type":"invalid_request_error","code":"edit_unsupported","param":"model"}}`},
		{name: "images 400 moderation_blocked", fam: Images, err: &Error{Kind: Invalid, Code: "moderation_blocked", Type: "image_generation_user_error", Message: "refused"}, status: 400,
			body: `{"error":{"message":"refused","type":"image_generation_user_error","code":"moderation_blocked"}}`},
		{name: "images 401 permission_error", fam: Images, err: with(Unauthenticated, "", "", "invalid API key"), status: 401,
			body: `{"error":{"message":"invalid API key","type":"permission_error","code":"permission_error"}}`},
		{name: "images 403 allowlist", fam: Images, err: with(ModelNotAllowed, "", "", "gw-image not allowed"), status: 403,
			body: `{"error":{"message":"gw-image not allowed","type":"permission_error","code":"permission_error"}}`},
		{name: "images 403 forbidden", fam: Images, err: with(Forbidden, "", "", "no"), status: 403,
			body: `{"error":{"message":"no","type":"permission_error","code":"permission_error"}}`},
		{name: "images 403 organization_must_be_verified", fam: Images, err: with(Forbidden, "organization_must_be_verified", "", "unavailable"), status: 403,
			body: `{"error":{"message":"unavailable","type":"permission_error","code":"organization_must_be_verified"}}`},
		{name: "images 402 premium_locked not in detail", fam: Images, err: with(PlanLocked, "", "", "paid plan"), status: 402,
			body: `{"error":{"message":"paid plan","type":"insufficient_quota","code":"premium_locked"}}`},
		{name: "images 402 price_exceeds_max_price not in detail", fam: Images, err: with(Payment, "price_exceeds_max_price", "", "over max_price"), status: 402,
			body: `{"error":{"message":"over max_price","type":"insufficient_quota","code":"price_exceeds_max_price"}}`},
		{name: "images 402 credit_unresolved not in detail", fam: Images, err: with(Payment, CodeCreditUnresolved, "", "retry"), status: 402,
			body: `{"error":{"message":"retry","type":"insufficient_quota","code":"credit_unresolved"}}`},
		{name: "images 402 credit_exhausted in detail", fam: Images, err: with(Payment, CodeCreditExhausted, "", "balance spent"), status: 402,
			body: `{"detail":{"error":{"code":"credit_exhausted","message":"balance spent"}}}`},
		{name: "images 402 daily_cap in detail", fam: Images, err: with(Payment, CodeDailyCap, "", "cap"), status: 402,
			body: `{"detail":{"error":{"code":"daily_cap","message":"cap"}}}`},
		{name: "images 402 monthly_cap in detail", fam: Images, err: with(Payment, CodeMonthlyCap, "", "cap"), status: 402,
			body: `{"detail":{"error":{"code":"monthly_cap","message":"cap"}}}`},
		{name: "images 404 no code", fam: Images, err: with(Disabled, "", "", "not switched on"), status: 404,
			body: `{"error":{"message":"not switched on","type":"not_found_error"}}`},
		{name: "images 502 capability_unavailable", fam: Images, err: with(Upstream, "", "", "could not be made"), status: 502,
			body: `{"error":{"message":"could not be made","type":"api_error","code":"capability_unavailable"}}`},

		// Decide: all four keys always present.
		{name: "decide 401 invalid_api_key", fam: Decide, err: with(Unauthenticated, "", "", "invalid API key"), status: 401,
			body: `{"error":{"message":"invalid API key","type":"authentication_error","code":"invalid_api_key","param":null}}`},
		{name: "decide 402 credit_unresolved", fam: Decide, err: with(Payment, CodeCreditUnresolved, "", "retry once"), status: 402,
			body: `{"error":{"message":"retry once","type":"insufficient_quota","code":"credit_unresolved","param":null}}`},
		{name: "decide 402 monthly_cap", fam: Decide, err: with(Payment, CodeMonthlyCap, "", "cap"), status: 402,
			body: `{"error":{"message":"cap","type":"insufficient_quota","code":"monthly_cap","param":null}}`},
		{name: "decide 402 without code keeps the key", fam: Decide, err: with(Payment, "", "", "no"), status: 402,
			body: `{"error":{"message":"no","type":"insufficient_quota","code":null,"param":null}}`},
		{name: "decide 403 model_not_allowed", fam: Decide, err: with(ModelNotAllowed, "", "model", "gw-decide not on list"), status: 403,
			body: `{"error":{"message":"gw-decide not on list","type":"permission_error","code":"model_not_allowed","param":"model"}}`},
		{name: "decide 403 paid_plan_required", fam: Decide, err: with(PlanLocked, "", "", "paid plan"), status: 403,
			body: `{"error":{"message":"paid plan","type":"permission_error","code":"paid_plan_required","param":null}}`},
		{name: "decide 404 not_found", fam: Decide, err: with(Disabled, "", "", "not switched on"), status: 404,
			body: `{"error":{"message":"not switched on","type":"not_found_error","code":"not_found","param":null}}`},
		{name: "decide 413 request_too_large", fam: Decide, err: with(TooLarge, "", "body", "over 13 MB"), status: 413,
			body: `{"error":{"message":"over 13 MB","type":"invalid_request_error","code":"request_too_large","param":"body"}}`},
		{name: "decide Invalid is 422 invalid_request", fam: Decide, err: with(Invalid, "", "questions", "questions must be an object"), status: 422,
			body: `{"error":{"message":"questions must be an object","type":"invalid_request_error","code":"invalid_request","param":"questions"}}`},
		{name: "decide 422 model_not_supported", fam: Decide, err: with(Unprocessable, "model_not_supported", "model", "use gw-decide"), status: 422,
			body: `{"error":{"message":"use gw-decide","type":"invalid_request_error","code":"model_not_supported","param":"model"}}`},
		{name: "decide 422 state_too_long", fam: Decide, err: with(Unprocessable, "state_too_long", "state", "over 2048 tokens"), status: 422,
			body: `{"error":{"message":"over 2048 tokens","type":"invalid_request_error","code":"state_too_long","param":"state"}}`},
		{name: "decide 422 upstream_rejected", fam: Decide, err: with(Unprocessable, "upstream_rejected", "images", "refused"), status: 422,
			body: `{"error":{"message":"refused","type":"invalid_request_error","code":"upstream_rejected","param":"images"}}`},
		{name: "decide 429 rate_limit_exceeded", fam: Decide, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 2}, status: 429,
			header: map[string]string{"Retry-After": "2"},
			body:   `{"error":{"message":"slow","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}`},
		{name: "decide 529 upstream_overloaded", fam: Decide, err: with(Overloaded, "", "", "busy"), status: 529,
			body: `{"error":{"message":"busy","type":"api_error","code":"upstream_overloaded","param":null}}`},
		{name: "decide 503 upstream_unavailable", fam: Decide, err: with(Upstream, "", "", "unreachable"), status: 503,
			body: `{"error":{"message":"unreachable","type":"api_error","code":"upstream_unavailable","param":null}}`},
		{name: "decide timeout 503 upstream_unavailable", fam: Decide, err: with(Timeout, "", "", "no answer in time"), status: 503,
			body: `{"error":{"message":"no answer in time","type":"api_error","code":"upstream_unavailable","param":null}}`},
		{name: "decide 503 capability_unavailable", fam: Decide, err: with(Unavailable, "", "", "later"), status: 503,
			body: `{"error":{"message":"later","type":"api_error","code":"capability_unavailable","param":null}}`},
		{name: "decide internal 503 capability_unavailable", fam: Decide, err: with(Internal, "", "", "later"), status: 503,
			body: `{"error":{"message":"later","type":"api_error","code":"capability_unavailable","param":null}}`},

		// Voices: {error:{message}}, fixed messages, Cache-Control: no-store.
		{name: "voices 401", fam: Voices, err: with(Unauthenticated, "", "", "missing API key"), status: 401,
			header: map[string]string{"Cache-Control": "no-store"},
			body:   `{"error":{"message":"Unauthorized"}}`},
		{name: "voices 401 model", fam: Voices, err: with(ModelNotAllowed, "", "", "x"), status: 401,
			header: map[string]string{"Cache-Control": "no-store"},
			body:   `{"error":{"message":"Unauthorized"}}`},
		{name: "voices 503", fam: Voices, err: with(Unavailable, "", "", "store down"), status: 503,
			header: map[string]string{"Cache-Control": "no-store"},
			body:   `{"error":{"message":"Voice catalogue unavailable"}}`},
		{name: "voices internal is 503", fam: Voices, err: As(errors.New("db exploded")), status: 503,
			header: map[string]string{"Cache-Control": "no-store"},
			body:   `{"error":{"message":"Voice catalogue unavailable"}}`},
		{name: "voices 405", fam: Voices, err: &Error{Kind: MethodNotAllowed, Message: "method not allowed", Allow: "GET"}, status: 405,
			header: map[string]string{"Cache-Control": "no-store", "Allow": "GET"},
			body:   `{"error":{"message":"method not allowed"}}`},

		// Fetch: flat {error:<string>, message?}.
		{name: "fetch 401 bare", fam: Fetch, err: &Error{Kind: Unauthenticated}, status: 401,
			body: `{"error":"unauthorized"}`},
		{name: "fetch 401 with message", fam: Fetch, err: with(Unauthenticated, "", "", "invalid API key"), status: 401,
			body: `{"error":"unauthorized","message":"invalid API key"}`},
		{name: "fetch 402 upgrade_required", fam: Fetch, err: with(PlanLocked, "", "", "needs a paid, cleared plan"), status: 402,
			body: `{"error":"upgrade_required","message":"needs a paid, cleared plan"}`},
		{name: "fetch 402 credit_unresolved", fam: Fetch, err: with(Payment, CodeCreditUnresolved, "", ""), status: 402,
			body: `{"error":"credit_unresolved"}`},
		{name: "fetch 402 daily_cap", fam: Fetch, err: with(Payment, CodeDailyCap, "", "cap"), status: 402,
			body: `{"error":"daily_cap","message":"cap"}`},
		{name: "fetch 404 not found", fam: Fetch, err: &Error{Kind: Disabled}, status: 404,
			body: `{"error":"not found"}`},
		{name: "fetch 400 body must be JSON", fam: Fetch, err: with(Invalid, "body must be JSON", "", ""), status: 400,
			body: `{"error":"body must be JSON"}`},
		{name: "fetch 400 url required", fam: Fetch, err: with(Invalid, "url required", "", ""), status: 400,
			body: `{"error":"url required"}`},
		{name: "fetch 400 social_blocked", fam: Fetch, err: with(Invalid, "social_blocked", "", "mass-scrape is unsupported"), status: 400,
			body: `{"error":"social_blocked","message":"mass-scrape is unsupported"}`},
		{name: "fetch 502 provider failed", fam: Fetch, err: &Error{Kind: Upstream}, status: 502,
			body: `{"error":"provider failed"}`},
		{name: "fetch timeout 502 provider failed", fam: Fetch, err: &Error{Kind: Timeout}, status: 502,
			body: `{"error":"provider failed"}`},
		{name: "fetch 503 capability_unavailable", fam: Fetch, err: with(Unavailable, "", "", "drop render"), status: 503,
			body: `{"error":"capability_unavailable","message":"drop render"}`},
		{name: "fetch 429 Retry-After", fam: Fetch, err: &Error{Kind: RateLimited, RetryAfter: 3}, status: 429,
			header: map[string]string{"Retry-After": "3"},
			body:   `{"error":"rate_limited"}`},

		// Tools and RPC: HTTP-level refusals as JSON-RPC errors.
		{name: "rpc 401", fam: RPC, err: with(Unauthenticated, "", "", "missing API key"), status: 401,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"missing API key"}}`},
		{name: "rpc 429", fam: RPC, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 4}, status: 429,
			header: map[string]string{"Retry-After": "4"},
			body:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"slow"}}`},
		{name: "rpc 405", fam: RPC, err: &Error{Kind: MethodNotAllowed, Message: "method not allowed", Allow: "POST, DELETE"}, status: 405,
			header: map[string]string{"Allow": "POST, DELETE"},
			body:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"method not allowed"}}`},
		{name: "rpc 500", fam: RPC, err: &Error{Kind: Internal}, status: 500,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal Server Error"}}`},
		{name: "stateless 401", fam: StatelessRPC, err: with(Unauthenticated, "", "", "missing API key"), status: 401,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-31401,"message":"missing API key"}}`},
		{name: "stateless 429", fam: StatelessRPC, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 4}, status: 429,
			header: map[string]string{"Retry-After": "4"},
			body:   `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"slow"}}`},
		{name: "tools 401", fam: Tools, err: with(Unauthenticated, "", "", "missing API key"), status: 401,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"missing API key"}}`},
		{name: "tools 429", fam: Tools, err: &Error{Kind: RateLimited, Message: "slow", RetryAfter: 9}, status: 429,
			header: map[string]string{"Retry-After": "9"},
			body:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32003,"message":"slow"}}`},
		{name: "tools 400", fam: Tools, err: with(Invalid, "", "", "bad"), status: 400,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad"}}`},
		{name: "tools 501", fam: Tools, err: with(NotImplemented, "", "", "not yet"), status: 501,
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"not yet"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := render(tc.fam, tc.err)
			if rec.Code != tc.status {
				t.Errorf("status = %d, want %d", rec.Code, tc.status)
			}
			if got := tc.fam.Status(tc.err); got != tc.status {
				t.Errorf("Family.Status = %d, want %d", got, tc.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			got, want := decodeJSON(t, rec.Body.String()), decodeJSON(t, tc.body)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body =\n %s\nwant\n %s", strings.TrimSpace(rec.Body.String()), tc.body)
			}
			for k, v := range tc.header {
				if got := rec.Header().Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("header %s = %q, want [%q]", k, got, v)
				}
			}
			for _, k := range holdAndCache {
				if _, set := tc.header[k]; set {
					continue
				}
				if v := rec.Header().Get(k); v != "" {
					t.Errorf("header %s = %q, want absent", k, v)
				}
			}
		})
	}
}

// TestRenderEveryFamilyAndKind renders every Kind in every Family and checks
// the invariants of each family's shape and of each status's meaning.
func TestRenderEveryFamilyAndKind(t *testing.T) {
	for _, f := range allFamilies {
		for _, k := range allKinds {
			t.Run(fmt.Sprintf("%s/%d", familyName(f), k), func(t *testing.T) {
				e := &Error{Kind: k, Message: "msg", Allow: "POST"}
				rec := render(f, e)
				if rec.Code < 400 || rec.Code > 599 {
					t.Fatalf("status %d is not an error", rec.Code)
				}
				if rec.Code != f.Status(e) {
					t.Errorf("Render status %d != Status %d", rec.Code, f.Status(e))
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
				if (k == MethodNotAllowed) != (rec.Header().Get("Allow") != "") {
					t.Errorf("Allow = %q on kind %d", rec.Header().Get("Allow"), k)
				}
				if rec.Header().Get("Retry-After") != "" {
					t.Errorf("Retry-After set without RetryAfter")
				}
				var body map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q: %v", rec.Body.String(), err)
				}
				obj, _ := body["error"].(map[string]any)
				switch f {
				case Chat:
					assertKeys(t, body, "error")
					if rec.Code == http.StatusPaymentRequired && obj["code"] != nil {
						assertKeys(t, obj, "message", "type", "param", "code", "provider_specific_fields")
					} else {
						assertKeys(t, obj, "message", "type", "param", "code")
					}
					if obj["param"] != nil {
						t.Errorf("param = %v, want null", obj["param"])
					}
				case Decide:
					assertKeys(t, body, "error")
					assertKeys(t, obj, "message", "type", "code", "param")
					if obj["code"] == nil && k != Payment {
						t.Errorf("decide kind %d has no code", k)
					}
					if rec.Code == 400 {
						t.Errorf("decide has no 400s")
					}
				case Messages:
					if body["type"] != "error" {
						t.Errorf("type = %v", body["type"])
					}
					if obj["type"] == "" || obj["message"] != "msg" {
						t.Errorf("error = %v", obj)
					}
				case Ability, Images:
					assertKeys(t, body, "error")
					if _, ok := obj["param"]; ok {
						t.Errorf("param present without Param: %v", obj)
					}
				case Voices:
					assertKeys(t, body, "error")
					assertKeys(t, obj, "message")
					if rec.Header().Get("Cache-Control") != "no-store" {
						t.Errorf("Cache-Control = %q", rec.Header().Get("Cache-Control"))
					}
				case Fetch:
					assertKeys(t, body, "error", "message")
					if s, ok := body["error"].(string); !ok || s == "" {
						t.Errorf("error = %v, want a string code", body["error"])
					}
				case Tools, RPC, StatelessRPC:
					assertKeys(t, body, "jsonrpc", "id", "error")
					assertKeys(t, obj, "code", "message")
					if body["id"] != nil || body["jsonrpc"] != "2.0" {
						t.Errorf("envelope = %v", body)
					}
					want := RPCCode(e)
					if f == StatelessRPC {
						want = StatelessRPCBase - rec.Code
					}
					if obj["code"] != float64(want) {
						t.Errorf("code = %v, want %d", obj["code"], want)
					}
				}
				if h := rec.Header().Get(HeaderHoldReason); h != "" || rec.Code == http.StatusPaymentRequired && f.Code(e) != "" && (f == Chat || f == Messages) {
					if h != f.Code(e) || rec.Code != http.StatusPaymentRequired || (f != Chat && f != Messages) {
						t.Errorf("%s = %q, status %d, code %q", HeaderHoldReason, h, rec.Code, f.Code(e))
					}
				}
			})
		}
	}
}

func assertKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	if m == nil {
		t.Errorf("object missing, want keys %v", keys)
		return
	}
	if len(m) != len(keys) {
		t.Errorf("keys of %v, want exactly %v", m, keys)
		return
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing from %v", k, m)
		}
	}
}

// TestStatusByFamily pins the status of the kinds whose status depends on
// the family.
func TestStatusByFamily(t *testing.T) {
	cases := []struct {
		fam  Family
		kind Kind
		want int
	}{
		{Chat, ModelNotAllowed, 401}, {Ability, ModelNotAllowed, 401}, {Images, ModelNotAllowed, 403},
		{Decide, ModelNotAllowed, 403}, {Voices, ModelNotAllowed, 401},
		{Chat, PlanLocked, 402}, {Messages, PlanLocked, 402}, {Ability, PlanLocked, 402}, {Images, PlanLocked, 402},
		{Fetch, PlanLocked, 402}, {Decide, PlanLocked, 403},
		{Decide, Invalid, 422}, {Chat, Invalid, 400}, {Fetch, Invalid, 400},
		{Decide, Upstream, 503}, {Decide, Timeout, 503}, {Decide, Internal, 503},
		{Fetch, Timeout, 502}, {Voices, Internal, 503}, {Voices, Unavailable, 503},
		{Chat, Overloaded, 529}, {Messages, Overloaded, 529}, {Decide, Overloaded, 529},
	}
	for _, tc := range cases {
		if got := tc.fam.Status(&Error{Kind: tc.kind}); got != tc.want {
			t.Errorf("%s kind %d: status %d, want %d", familyName(tc.fam), tc.kind, got, tc.want)
		}
	}
}

func TestRPCCode(t *testing.T) {
	want := map[Kind]int{
		Unauthenticated: RPCUnauthorized, ModelNotAllowed: RPCUnauthorized,
		RateLimited: RPCRateLimited,
		Invalid:     RPCInvalidParams, Unprocessable: RPCInvalidParams, TooLarge: RPCInvalidParams,
		NotFound: RPCMethodNotFound, MethodNotAllowed: RPCInvalidRequest,
		Internal: RPCInternal, Upstream: RPCInternal, Unavailable: RPCInternal, Timeout: RPCInternal,
		Overloaded: RPCInternal, NotImplemented: RPCInternal,
	}
	for k, code := range want {
		if got := RPCCode(&Error{Kind: k}); got != code {
			t.Errorf("RPCCode(kind %d) = %d, want %d", k, got, code)
		}
	}
	if RPCUnauthorized != -32002 || RPCRateLimited != -32003 || RPCNoSession != -32004 || RPCSessionExpired != -32005 ||
		RPCHeaderMismatch != -32001 || RPCParseError != -32700 || RPCInvalidRequest != -32600 ||
		RPCMethodNotFound != -32601 || RPCInvalidParams != -32602 || RPCInternal != -32603 {
		t.Error("JSON-RPC codes differ from the routing server's table (docs/mcp.md)")
	}
}

func TestToolObject(t *testing.T) {
	const billing = "https://billing.example/upgrade"
	cases := []struct {
		name       string
		err        *Error
		capability string
		upgradeURL string
		want       string
	}{
		{"premium_locked with upgrade_url", with(PlanLocked, "", "", "needs a paid, cleared plan"), "images", billing,
			`{"error":"premium_locked","capability":"images","retryable":false,"message":"needs a paid, cleared plan","upgrade_url":"` + billing + `"}`},
		{"premium_locked without upgrade_url", with(PlanLocked, "", "", "paid"), "speech", "",
			`{"error":"premium_locked","capability":"speech","retryable":false,"message":"paid"}`},
		{"web_fetch on a Free plan is payment_required", with(PlanLocked, "", "", "paid"), "fetch", billing,
			`{"error":"payment_required","capability":"fetch","retryable":false,"message":"paid","upgrade_url":"` + billing + `"}`},
		{"payment_required with upgrade_url", with(Payment, CodeCreditExhausted, "", "out of credit"), "search", billing,
			`{"error":"payment_required","capability":"search","retryable":false,"message":"out of credit","upgrade_url":"` + billing + `"}`},
		{"payment_required daily cap", with(Payment, CodeDailyCap, "", "cap"), "images", billing,
			`{"error":"payment_required","capability":"images","retryable":false,"message":"cap","upgrade_url":"` + billing + `"}`},
		{"credit_unresolved retryable", with(Payment, CodeCreditUnresolved, "", "balance unreadable"), "search", billing,
			`{"error":"credit_unresolved","capability":"search","retryable":true,"message":"balance unreadable"}`},
		{"capability_unavailable has reason not message", with(Upstream, "", "", "search provider down"), "search", billing,
			`{"error":"capability_unavailable","capability":"search","retryable":true,"reason":"search provider down"}`},
		{"capability_unavailable timeout", with(Timeout, "", "", "slow"), "transcription", "",
			`{"error":"capability_unavailable","capability":"transcription","retryable":true,"reason":"slow"}`},
		{"capability_unavailable not implemented", with(NotImplemented, "", "", "not yet"), "apps", "",
			`{"error":"capability_unavailable","capability":"apps","retryable":false,"reason":"not yet"}`},
		{"rate_limited with retry_after_seconds", &Error{Kind: RateLimited, Message: "slow down", RetryAfter: 12}, "speech", billing,
			`{"error":"rate_limited","capability":"speech","retryable":true,"message":"slow down","retry_after_seconds":12}`},
		{"rate_limited without retry_after_seconds", with(RateLimited, "", "", "slow down"), "speech", "",
			`{"error":"rate_limited","capability":"speech","retryable":true,"message":"slow down"}`},
		{"auth_failed", with(Unauthenticated, "", "", "invalid API key"), "fetch", billing,
			`{"error":"auth_failed","capability":"fetch","retryable":false,"message":"invalid API key"}`},
		{"forbidden allowlist", with(ModelNotAllowed, "", "", "gw-image not on list"), "images", "",
			`{"error":"forbidden","capability":"images","retryable":false,"message":"gw-image not on list"}`},
		{"forbidden", with(Forbidden, "", "", "no"), "images", "",
			`{"error":"forbidden","capability":"images","retryable":false,"message":"no"}`},
		{"ability_disabled", with(Disabled, "", "", "not switched on"), "speech", billing,
			`{"error":"ability_disabled","capability":"speech","retryable":false,"message":"not switched on"}`},
		{"too_large", with(TooLarge, "", "", "over 8 MB"), "transcription", "",
			`{"error":"too_large","capability":"transcription","retryable":false,"message":"over 8 MB"}`},
		{"invalid_request without message", &Error{Kind: Invalid}, "speech", "",
			`{"error":"invalid_request","capability":"speech","retryable":false}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(ToolObject(tc.err, tc.capability, tc.upgradeURL))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := decodeJSON(t, string(b)), decodeJSON(t, tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("ToolObject =\n %s\nwant\n %s", b, tc.want)
			}
		})
	}
	// Every kind gives one of the documented tool codes, always with error,
	// capability and retryable.
	known := map[string]bool{"premium_locked": true, "payment_required": true, "ability_disabled": true, "auth_failed": true,
		"forbidden": true, "too_large": true, "invalid_request": true, "rate_limited": true, "capability_unavailable": true,
		"apps_error": true, "credit_unresolved": true}
	for _, k := range allKinds {
		obj := ToolObject(&Error{Kind: k, Message: "m"}, "images", billing)
		code, _ := obj["error"].(string)
		if !known[code] {
			t.Errorf("kind %d: tool code %q not in the tool error table (docs/mcp.md)", k, code)
		}
		if obj["capability"] != "images" {
			t.Errorf("kind %d: capability = %v", k, obj["capability"])
		}
		if _, ok := obj["retryable"].(bool); !ok {
			t.Errorf("kind %d: retryable = %v", k, obj["retryable"])
		}
	}
}

func TestErrorHelpers(t *testing.T) {
	e := New(Payment, "balance %s", "spent").WithCode(CodeCreditExhausted).WithParam("model").WithType("billing_error")
	if e.Message != "balance spent" || e.Code != CodeCreditExhausted || e.Param != "model" || e.Type != "billing_error" {
		t.Errorf("builder = %+v", e)
	}
	if e.Error() != "credit_exhausted: balance spent" {
		t.Errorf("Error() = %q", e.Error())
	}
	if got := New(Invalid, "plain").Error(); got != "plain" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("context: %w", e)
	if As(wrapped) != e {
		t.Errorf("As did not unwrap")
	}
	other := As(errors.New("secret detail"))
	if other.Kind != Internal || other.Message != "internal error" {
		t.Errorf("As(plain) = %+v", other)
	}
	if Chat.Code(&Error{Kind: Payment}) != "" || Chat.Code(&Error{Kind: PlanLocked}) != CodePremiumLocked ||
		Fetch.Code(&Error{Kind: PlanLocked}) != CodeUpgradeRequired || Decide.Code(&Error{Kind: PlanLocked}) != CodePaidPlanRequired {
		t.Errorf("Family.Code mismatch")
	}
}
