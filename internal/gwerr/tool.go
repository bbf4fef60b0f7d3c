package gwerr

// toolCodes maps kinds to the tools server's error codes (the error field
// of the tool error object) and whether the same call can work later.
var toolCodes = map[Kind]struct {
	code      string
	retryable bool
}{
	Invalid:          {"invalid_request", false},
	Unauthenticated:  {"auth_failed", false},
	ModelNotAllowed:  {"forbidden", false},
	PlanLocked:       {CodePremiumLocked, false},
	Payment:          {CodePaymentRequired, false},
	Forbidden:        {"forbidden", false},
	Disabled:         {"ability_disabled", false},
	NotFound:         {"ability_disabled", false},
	MethodNotAllowed: {"invalid_request", false},
	TooLarge:         {"too_large", false},
	Unprocessable:    {"invalid_request", false},
	RateLimited:      {"rate_limited", true},
	Internal:         {"capability_unavailable", true},
	NotImplemented:   {"capability_unavailable", false},
	Upstream:         {"capability_unavailable", true},
	Unavailable:      {"capability_unavailable", true},
	Timeout:          {"capability_unavailable", true},
	Overloaded:       {"capability_unavailable", true},
	TooSlow:          {"invalid_request", true},
}

// CodeAppsError is the tool error of a connected app failing on its side.
const CodeAppsError = "apps_error"

// ToolObject renders e as the tools server's tool error object for the
// ability capability. upgradeURL is added on premium_locked and
// payment_required.
func ToolObject(e *Error, capability, upgradeURL string) map[string]any {
	tc := toolCodes[e.Kind]
	code := tc.code
	if code == "" {
		code = "capability_unavailable"
	}
	retryable := tc.retryable
	// web_fetch on a Free plan is payment_required, not premium_locked
	// (page reading's own 402 is upgrade_required, not premium_locked).
	if e.Kind == PlanLocked && (capability == "fetch" || capability == "web_fetch") {
		code = CodePaymentRequired
	}
	// apps_error: the app's side failed; the same call may work once more.
	if e.Code == CodeAppsError {
		code, retryable = CodeAppsError, true
	}
	// credit_unresolved keeps its own code: it can work once more.
	if e.Kind == Payment && e.Code == CodeCreditUnresolved {
		code, retryable = CodeCreditUnresolved, true
	}
	obj := map[string]any{"error": code, "capability": capability, "retryable": retryable}
	if code == "capability_unavailable" {
		obj["reason"] = e.Message
	} else if e.Message != "" {
		obj["message"] = e.Message
	}
	if e.RetryAfter > 0 {
		obj["retry_after_seconds"] = e.RetryAfter
	}
	if (code == CodePremiumLocked || code == CodePaymentRequired) && upgradeURL != "" {
		obj["upgrade_url"] = upgradeURL
	}
	return obj
}

// JSON-RPC error codes of the routing server (docs/mcp.md).
const (
	RPCParseError     = -32700
	RPCInvalidRequest = -32600
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternal       = -32603
	RPCHeaderMismatch = -32001
	RPCUnauthorized   = -32002
	RPCRateLimited    = -32003
	RPCNoSession      = -32004
	RPCSessionExpired = -32005
)

// RPCCode maps e to the routing server's JSON-RPC error code.
func RPCCode(e *Error) int {
	switch e.Kind {
	case Unauthenticated, ModelNotAllowed:
		return RPCUnauthorized
	case RateLimited:
		return RPCRateLimited
	case Invalid, Unprocessable, TooLarge, TooSlow:
		return RPCInvalidParams
	case MethodNotAllowed:
		// Not a valid request (GET on the routing server answers 405);
		// -32603 would tell the client to retry.
		return RPCInvalidRequest
	case NotFound, Disabled:
		// Nothing to call: an unknown path, or an ability (the MCP
		// gateway's) switched off for the account.
		return RPCMethodNotFound
	}
	return RPCInternal
}
