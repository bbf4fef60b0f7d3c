package caddymodule

import (
	"context"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// annotate puts a gateway call's values on Caddy's access log entry (as
// gw_<name>) and on the request's replacer as placeholders
// ({http.gw.<name>}, as reverse_proxy sets {http.reverse_proxy.*}): the request
// id; the account and key id of a call with a key; the alias, model and
// cost_usd of a billed call; shortfall_usd of one the account could not
// pay in full; input_tokens and output_tokens of one billed by the token. It runs once a call, on the hot path: the log entry gets
// one inline field that writes them all when the entry is written.
func annotate(ctx context.Context, a *pipeline.Annotation) {
	if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set(placeholderRequestID, a.RequestID)
		if a.Account != "" {
			repl.Set(placeholderAccount, a.Account)
			repl.Set(placeholderKeyID, a.KeyID)
		}
		if a.Billed {
			repl.Set(placeholderAlias, a.Alias)
			repl.Set(placeholderModel, a.Model)
			repl.Set(placeholderCost, a.Cost)
		}
		if a.Shortfall != "" {
			repl.Set(placeholderShortfall, a.Shortfall)
		}
		if a.Tokens {
			repl.Set(placeholderInputTokens, a.InputTokens)
			repl.Set(placeholderOutputTokens, a.OutputTokens)
		}
	}
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.Inline((*logFields)(a)))
	}
}

// identify puts a call's request id, account and key id on the
// request's replacer as soon as the key is checked (the account and key
// id empty when the key was refused), so a deferred header (`header
// >X-Account {http.gw.account}`) can use them.
func identify(ctx context.Context, a *pipeline.Annotation) {
	if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set(placeholderRequestID, a.RequestID)
		repl.Set(placeholderAccount, a.Account)
		repl.Set(placeholderKeyID, a.KeyID)
	}
}

// The placeholders of a gateway call, set on the request's replacer (the
// identity once the key is checked, the rest once the call ends) for the
// access log, log_append, deferred headers and handlers after it.
const (
	placeholderRequestID    = "http.gw.request_id"
	placeholderAccount      = "http.gw.account"
	placeholderKeyID        = "http.gw.key_id"
	placeholderAlias        = "http.gw.alias"
	placeholderModel        = "http.gw.model"
	placeholderCost         = "http.gw.cost_usd"
	placeholderShortfall    = "http.gw.shortfall_usd"
	placeholderInputTokens  = "http.gw.input_tokens"
	placeholderOutputTokens = "http.gw.output_tokens"
)

// logFields writes an annotation's values as the access log's gw_*
// fields.
type logFields pipeline.Annotation

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (a *logFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("gw_request_id", a.RequestID)
	if a.Account != "" {
		enc.AddString("gw_account", a.Account)
		enc.AddString("gw_key_id", a.KeyID)
	}
	if a.Billed {
		enc.AddString("gw_alias", a.Alias)
		enc.AddString("gw_model", a.Model)
		enc.AddString("gw_cost_usd", a.Cost)
	}
	if a.Shortfall != "" {
		enc.AddString("gw_shortfall_usd", a.Shortfall)
	}
	if a.Tokens {
		enc.AddInt64("gw_input_tokens", a.InputTokens)
		enc.AddInt64("gw_output_tokens", a.OutputTokens)
	}
	return nil
}
