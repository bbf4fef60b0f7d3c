package caddymodule

import (
	"context"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// annotate puts a gateway call's values on Caddy's access log entry (as
// gw_<name>) and in its placeholders ({http.vars.gw.<name>}): the request
// id; the account and key id of a call with a key; the alias, model and
// cost_usd of a billed call; shortfall_usd of one the account could not
// pay in full; input_tokens and output_tokens of one billed by the token. It runs once a call, on the hot path: the log entry gets
// one inline field that writes them all when the entry is written.
func annotate(ctx context.Context, a *pipeline.Annotation) {
	if vars, ok := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		vars["gw.request_id"] = a.RequestID
		if a.Account != "" {
			vars["gw.account"], vars["gw.key_id"] = a.Account, a.KeyID
		}
		if a.Billed {
			vars["gw.alias"], vars["gw.model"], vars["gw.cost_usd"] = a.Alias, a.Model, a.Cost
		}
		if a.Shortfall != "" {
			vars["gw.shortfall_usd"] = a.Shortfall
		}
		if a.Tokens {
			vars["gw.input_tokens"], vars["gw.output_tokens"] = a.InputTokens, a.OutputTokens
		}
	}
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.Inline((*logFields)(a)))
	}
}

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
