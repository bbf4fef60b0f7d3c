// Package gwerr is the gateway's one error vocabulary. Every refusal is an
// *Error of a Kind (what went wrong, independent of the endpoint); each
// family of endpoints renders it in its own shape, status and codes. The
// per-family differences live in the tables of family.go, not in handlers.
package gwerr

import (
	"errors"
	"fmt"
)

// Kind is what went wrong, independent of the endpoint that reports it.
type Kind int

const (
	// Invalid: the request is refused as it stands (400).
	Invalid Kind = iota + 1
	// Unauthenticated: key missing, unknown, revoked or expired (401).
	Unauthenticated
	// ModelNotAllowed: the key's allowlist lacks the model (401 or 403 per family).
	ModelNotAllowed
	// PlanLocked: the plan lacks a paid ability (402 premium_locked,
	// upgrade_required for page reading, 403 paid_plan_required for decision mode).
	PlanLocked
	// Payment: a money check refused (402 with a money code in Code).
	Payment
	// Forbidden: the key or account may not use this route (403).
	Forbidden
	// Disabled: the ability is not switched on for the account (404).
	Disabled
	// NotFound: no such route (404).
	NotFound
	// MethodNotAllowed: the route exists for other methods (405).
	MethodNotAllowed
	// TooLarge: input over a limit (413).
	TooLarge
	// Unprocessable: well formed, content refused (422).
	Unprocessable
	// RateLimited: too many calls or shared budget used (429).
	RateLimited
	// Internal: the gateway failed (500).
	Internal
	// NotImplemented: the route is a known one but not built yet (501).
	NotImplemented
	// Upstream: the backing service failed (502).
	Upstream
	// Unavailable: temporarily unavailable (503).
	Unavailable
	// Timeout: the backing service took too long (504).
	Timeout
	// Overloaded: the backing service is at capacity (529).
	Overloaded
	// TooSlow: the client sent its request body too slowly (408).
	TooSlow
)

// Money and plan codes shared across families (docs/money.md).
const (
	CodeCreditExhausted  = "credit_exhausted"
	CodeDailyCap         = "daily_cap"
	CodeMonthlyCap       = "monthly_cap"
	CodeKeyDailyCap      = "key_daily_cap"
	CodeKeyMonthlyCap    = "key_monthly_cap"
	CodeKeyTotalCap      = "key_total_cap"
	CodeOrgDailyCap      = "org_daily_cap"
	CodeOrgMonthlyCap    = "org_monthly_cap"
	CodeCreditUnresolved = "credit_unresolved"
	CodePremiumLocked    = "premium_locked"
	CodeUpgradeRequired  = "upgrade_required"
	CodePaidPlanRequired = "paid_plan_required"
	CodePaymentRequired  = "payment_required"
)

// Codes of the ability tables (transcription, speech, images).
const (
	// CodeUnsupportedFileFormat: an upload that is not in a listed format
	// (400, param file).
	CodeUnsupportedFileFormat = "unsupported_file_format"
	// CodeFileTooLarge: an upload over its size limit (413).
	CodeFileTooLarge = "file_too_large"
	// CodeCapabilityUnavailable: the ability's backing service failed
	// (502) or took too long (504).
	CodeCapabilityUnavailable = "capability_unavailable"
	// CodeInvalidRequestError: the backing service refused a request that
	// passed the gateway's own checks (speech 400).
	CodeInvalidRequestError = "invalid_request_error"
)

// CodeRequestTimeout is the code of TooSlow: a request body that arrived
// slower than the gateway's minimum rate.
const CodeRequestTimeout = "request_timeout"

// Error is one refusal. Kind selects the status and the family's default
// type and code; the other fields refine it.
type Error struct {
	Kind Kind
	// Code overrides the family's default code for the kind (for example a
	// money code on Payment, or "edit_unsupported" on Invalid).
	Code string
	// Type overrides the family's default error type.
	Type string
	// Param names the offending field, when one does.
	Param string
	// Message is plain text for people. It never repeats request content.
	Message string
	// RetryAfter, in whole seconds, is sent as Retry-After when positive.
	RetryAfter int
	// Status overrides the family's status for the kind (rarely needed).
	Status int
	// Allow lists the methods of the route, for MethodNotAllowed.
	Allow string
}

// New returns an error of kind with a message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// WithCode sets Code and returns e.
func (e *Error) WithCode(code string) *Error { e.Code = code; return e }

// WithParam sets Param and returns e.
func (e *Error) WithParam(param string) *Error { e.Param = param; return e }

// WithType sets Type and returns e.
func (e *Error) WithType(typ string) *Error { e.Type = typ; return e }

// Error implements error.
func (e *Error) Error() string {
	if e.Code != "" {
		return e.Code + ": " + e.Message
	}
	return e.Message
}

// As returns err as an *Error, wrapping anything else as Internal.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: Internal, Message: "internal error"}
}
