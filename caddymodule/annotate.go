package caddymodule

import (
	"context"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// annotate puts one of a gateway call's values on Caddy's access log entry
// (as gw_<name>) and in its placeholders ({http.vars.gw.<name>}).
func annotate(ctx context.Context, name string, v any) {
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(zap.Any("gw_"+name, v))
	}
	caddyhttp.SetVar(ctx, "gw."+name, v)
}
