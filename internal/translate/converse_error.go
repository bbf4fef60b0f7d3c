package translate

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// ConverseFault is what a Bedrock Runtime error answer means to the
// gateway.
type ConverseFault struct {
	// Type is Bedrock's error type ("ThrottlingException"): the
	// x-amzn-ErrorType header, else the body's "__type" or "code", without
	// a namespace (up to the last '#') or a URI (from the first ':'); "" when the answer
	// names none.
	Type string
	// Kind is the gateway's error kind: the type's row of
	// ConverseFaults, else what the HTTP status means from any provider.
	Kind gwerr.Kind
	// Message is Bedrock's message when the fault is the client's own
	// (Kind Invalid, TooLarge or Unprocessable), to be shown; "" for the
	// others, which the caller reports in its own words (Bedrock's may
	// name the operator's account, role or quotas).
	Message string
	// Retryable tells that another model may be tried.
	Retryable bool
	// Account tells that Bedrock refused the account the gateway calls it
	// with (a quota used up), not the request.
	Account bool
}

// ConverseFaults are Bedrock Runtime's error types (Converse and
// ConverseStream) and what each means, Message aside. The client's own
// mistake is only ValidationException; ServiceQuotaExceededException
// (Bedrock answers it with 400) is the operator's quota, not the request;
// a refused signature or access, an unknown model, a model's failure are
// the operator's setup or Bedrock's, retried on another model.
var ConverseFaults = map[string]ConverseFault{
	"ValidationException":                 {Kind: gwerr.Invalid},
	"ServiceQuotaExceededException":       {Kind: gwerr.Unavailable, Retryable: true, Account: true},
	"ThrottlingException":                 {Kind: gwerr.RateLimited, Retryable: true},
	"ModelNotReadyException":              {Kind: gwerr.Unavailable, Retryable: true},
	"ServiceUnavailableException":         {Kind: gwerr.Unavailable, Retryable: true},
	"ModelTimeoutException":               {Kind: gwerr.Timeout, Retryable: true},
	"ModelErrorException":                 {Kind: gwerr.Upstream, Retryable: true},
	"ModelStreamErrorException":           {Kind: gwerr.Upstream, Retryable: true},
	"InternalServerException":             {Kind: gwerr.Upstream, Retryable: true},
	"AccessDeniedException":               {Kind: gwerr.Upstream, Retryable: true},
	"ResourceNotFoundException":           {Kind: gwerr.Upstream, Retryable: true},
	"UnrecognizedClientException":         {Kind: gwerr.Upstream, Retryable: true},
	"InvalidSignatureException":           {Kind: gwerr.Upstream, Retryable: true},
	"IncompleteSignatureException":        {Kind: gwerr.Upstream, Retryable: true},
	"MissingAuthenticationTokenException": {Kind: gwerr.Upstream, Retryable: true},
	"ExpiredTokenException":               {Kind: gwerr.Upstream, Retryable: true},
}

// ConverseErrorTypeHeader is the header in which Bedrock names an error's
// type.
const ConverseErrorTypeHeader = "X-Amzn-Errortype"

// ConverseError reads a Bedrock Runtime error answer (its status, headers
// and body, {"message": "..."}). A type ConverseFaults lacks is judged by
// its status, as any provider's answer: 400 Invalid, 413 TooLarge, 422
// Unprocessable (the client's, not retried), 402 the account's, 429
// RateLimited, 503 Unavailable, 408 and 504 Timeout, 529 Overloaded, the
// rest Upstream.
func ConverseError(status int, h http.Header, body []byte) ConverseFault {
	typ := h.Get(ConverseErrorTypeHeader)
	var msg gjson.Result
	if r := jsonbody.Parse(body); jsonbody.Valid(body) && r.IsObject() {
		var lower, upper, typeMember, code gjson.Result
		jsonbody.Members(r, jsonbody.Member{Key: "message", To: &lower}, jsonbody.Member{Key: "Message", To: &upper},
			jsonbody.Member{Key: "__type", To: &typeMember}, jsonbody.Member{Key: "code", To: &code})
		if msg = lower; msg.Type != gjson.String {
			msg = upper
		}
		if typ == "" {
			typ = typeMember.String()
		}
		if typ == "" && code.Type == gjson.String {
			typ = code.String()
		}
	}
	typ = sanitizeErrorType(typ)
	f, ok := ConverseFaults[typ]
	if !ok {
		f = statusFault(status)
	}
	f.Type = typ
	if f.Kind == gwerr.Invalid || f.Kind == gwerr.TooLarge || f.Kind == gwerr.Unprocessable {
		f.Message = msg.String()
	}
	return f
}

// sanitizeErrorType keeps an error type's name: without what follows a
// ':' (a URI) or precedes a '#' (a namespace).
func sanitizeErrorType(typ string) string {
	typ, _, _ = strings.Cut(typ, ":")
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	return strings.TrimSpace(typ)
}

// statusOverloaded is the status of a backing service at capacity.
const statusOverloaded = 529

// statusFault is what an error status means from any provider.
func statusFault(status int) ConverseFault {
	switch status {
	case http.StatusBadRequest:
		return ConverseFault{Kind: gwerr.Invalid}
	case http.StatusRequestEntityTooLarge:
		return ConverseFault{Kind: gwerr.TooLarge}
	case http.StatusUnprocessableEntity:
		return ConverseFault{Kind: gwerr.Unprocessable}
	case http.StatusPaymentRequired:
		return ConverseFault{Kind: gwerr.Unavailable, Retryable: true, Account: true}
	case http.StatusTooManyRequests:
		return ConverseFault{Kind: gwerr.RateLimited, Retryable: true}
	case http.StatusServiceUnavailable:
		return ConverseFault{Kind: gwerr.Unavailable, Retryable: true}
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return ConverseFault{Kind: gwerr.Timeout, Retryable: true}
	case statusOverloaded:
		return ConverseFault{Kind: gwerr.Overloaded, Retryable: true}
	}
	return ConverseFault{Kind: gwerr.Upstream, Retryable: true}
}
