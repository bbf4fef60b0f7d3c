package caddymodule

import (
	"context"
	"maps"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// annotated is a request context as Caddy's server makes it: extra log
// fields and a replacer.
func annotated() (context.Context, *caddyhttp.ExtraLogFields) {
	extra := new(caddyhttp.ExtraLogFields)
	ctx := context.WithValue(context.Background(), caddyhttp.ExtraLogFieldsCtxKey, extra)
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	return ctx, extra
}

// placeholders are the gw placeholders set on ctx's replacer, by name.
func placeholders(ctx context.Context) map[string]any {
	repl := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	out := map[string]any{}
	for _, name := range []string{"request_id", "account", "key_id", "alias", "model", "cost_usd", "shortfall_usd", "input_tokens", "output_tokens"} {
		if v, ok := repl.Get("http.gw." + name); ok {
			out[name] = v
		}
	}
	return out
}

var billedCall = &pipeline.Annotation{RequestID: "req-1", Account: "acct", KeyID: "key_1", Billed: true,
	Alias: "gw-auto", Model: "gpt-4.1-mini", Cost: "0.000123", Shortfall: "0.00004", Tokens: true, InputTokens: 120, OutputTokens: 7}

// TestAnnotate: a billed call's values are in the placeholders
// ({http.gw.<name>}) and the access log's gw_<name> fields; an
// unbilled, keyless call has only its request id.
func TestAnnotate(t *testing.T) {
	ctx, _ := annotated()
	annotate(ctx, billedCall)
	want := map[string]any{"request_id": "req-1", "account": "acct", "key_id": "key_1", "alias": "gw-auto",
		"model": "gpt-4.1-mini", "cost_usd": "0.000123", "shortfall_usd": "0.00004", "input_tokens": int64(120), "output_tokens": int64(7)}
	vars := placeholders(ctx)
	for name, v := range want {
		if got := vars[name]; got != v {
			t.Errorf("{http.gw.%s} = %v (%T), want %v (%T)", name, got, got, v, v)
		}
	}
	if len(vars) != len(want) {
		t.Errorf("placeholders %v, want the %d of a billed call", vars, len(want))
	}
	enc := zapcore.NewMapObjectEncoder()
	if err := (*logFields)(billedCall).MarshalLogObject(enc); err != nil {
		t.Fatal(err)
	}
	for name, v := range want {
		if got := enc.Fields["gw_"+name]; got != v {
			t.Errorf("gw_%s = %v (%T), want %v (%T)", name, got, got, v, v)
		}
	}
	if len(enc.Fields) != len(want) {
		t.Errorf("log fields %v, want the %d of a billed call", enc.Fields, len(want))
	}
	ctx, _ = annotated()
	annotate(ctx, &pipeline.Annotation{RequestID: "req-2"})
	if vars := placeholders(ctx); len(vars) != 1 || vars["request_id"] != "req-2" {
		t.Errorf("placeholders %v, want the request id alone", vars)
	}
}

func BenchmarkAnnotate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ctx, _ := annotated()
		annotate(ctx, billedCall)
	}
}

// TestIdentify: the identity placeholders are set, and set empty for a
// refused key, so a deferred header never shows a placeholder's name.
func TestIdentify(t *testing.T) {
	for _, tc := range []struct {
		in   pipeline.Annotation
		want map[string]any
	}{
		{pipeline.Annotation{RequestID: "req-1", Account: "acct", KeyID: "key_1"}, map[string]any{"request_id": "req-1", "account": "acct", "key_id": "key_1"}},
		{pipeline.Annotation{RequestID: "req-2"}, map[string]any{"request_id": "req-2", "account": "", "key_id": ""}},
	} {
		ctx, _ := annotated()
		identify(ctx, &tc.in)
		if got := placeholders(ctx); !maps.Equal(got, tc.want) {
			t.Errorf("identify(%+v): placeholders %v, want %v", tc.in, got, tc.want)
		}
	}
}
