package fake

import "net/http"

// The answers a provider gives when the account the gateway calls it with
// is out of credit or quota, word for word as the providers send them (a
// Script to Push, or a count endpoint's CountError).

// OpenAIInsufficientQuota is OpenAI's 429 for an organisation whose
// credit or monthly quota is used up: type and code insufficient_quota.
func OpenAIInsufficientQuota() Script {
	return Script{Status: http.StatusTooManyRequests, ErrorType: "insufficient_quota",
		ErrorMessage: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}
}

// OpenAIBillingNotActive is OpenAI's 429 for an organisation whose billing
// is not set up or was cancelled: type and code billing_not_active.
func OpenAIBillingNotActive() Script {
	return Script{Status: http.StatusTooManyRequests, ErrorType: "billing_not_active",
		ErrorMessage: "Your account is not active, please check your billing details on our website."}
}

// OpenAIBillingHardLimit is OpenAI's 400 for an organisation past the
// spend limit it set itself (the image endpoints answer it): an
// invalid_request_error with code billing_hard_limit_reached.
func OpenAIBillingHardLimit() Script {
	return Script{Status: http.StatusBadRequest, ErrorType: "invalid_request_error", ErrorCode: "billing_hard_limit_reached",
		ErrorMessage: "Billing hard limit has been reached"}
}

// AnthropicCreditTooLow is Anthropic's 400 invalid_request_error for an
// organisation whose prepaid credit is spent.
func AnthropicCreditTooLow() Script {
	return Script{Status: http.StatusBadRequest, ErrorType: "invalid_request_error",
		ErrorMessage: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}
}

// AnthropicUsageLimit is Anthropic's 400 invalid_request_error for an
// organisation past the spend limit it set itself.
func AnthropicUsageLimit() Script {
	return Script{Status: http.StatusBadRequest, ErrorType: "invalid_request_error",
		ErrorMessage: "You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."}
}

// AnthropicBillingError is Anthropic's 402 billing_error: a problem with
// the organisation's billing or payment information.
func AnthropicBillingError() Script {
	return Script{Status: http.StatusPaymentRequired, ErrorType: "billing_error",
		ErrorMessage: "There is an issue with your billing or payment information. Please update them in Plans & Billing."}
}
