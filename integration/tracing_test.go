package integration

import (
	"cmp"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// otlpReceiver is a local OTLP/HTTP trace receiver: it keeps the spans
// exported to it and signals each export.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	arrived chan struct{}
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	select {
	case o.arrived <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// traceSpans returns the spans received of the trace with id (hex) once
// there are at least n, or fails after traceTimeout.
func (o *otlpReceiver) traceSpans(t *testing.T, id string, n int) []*tracepb.Span {
	t.Helper()
	timer := time.NewTimer(traceTimeout)
	defer timer.Stop()
	for {
		var got []*tracepb.Span
		o.mu.Lock()
		for _, s := range o.spans {
			if hex.EncodeToString(s.TraceId) == id {
				got = append(got, s)
			}
		}
		o.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-o.arrived:
		case <-timer.C:
			t.Fatalf("trace %s: %d spans exported within %s, want %d", id, len(got), traceTimeout, n)
		}
	}
}

// traceTimeout bounds the wait for the gateway's batch of spans.
const traceTimeout = 10 * time.Second

// attrs are a span's string and integer attributes, as strings.
func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

// tracedGateway is a gateway on Caddyfile.example with Caddy's tracing
// directive on, exporting every span to a local OTLP receiver, against the
// fake providers (its OpenAI one returned).
func tracedGateway(t *testing.T) (*gateway, *otlpReceiver, *fake.Upstream) {
	t.Helper()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g, rcv := traced(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	return g, rcv, oa
}

// traced starts a gateway as opts says (on Caddyfile.example when it
// names no Caddyfile) with Caddy's tracing directive on before its gw
// handler, exporting every span to the local OTLP receiver it returns.
func traced(t *testing.T, opts gwOptions) (*gateway, *otlpReceiver) {
	t.Helper()
	rcv := &otlpReceiver{arrived: make(chan struct{}, 1)}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	ex := cmp.Or(opts.Caddyfile, exampleCaddyfile(t))
	if opts.Caddyfile = strings.Replace(ex, "\t\tgw\n", "\t\ttracing {\n\t\t\tspan gw\n\t\t}\n\t\tgw\n", 1); opts.Caddyfile == ex {
		t.Fatal("the Caddyfile has no gw handler line to put tracing before")
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_TRACES_SAMPLER": "always_on"}
	for k, v := range opts.Env {
		env[k] = v
	}
	opts.Env = env
	return startGateway(t, opts), rcv
}

// TestTracing: with Caddy's tracing directive on, an escalated chat call's
// span carries the GenAI attributes (the provider and model that answered,
// the alias asked for, the tokens billed), and each upstream attempt is a
// child span of it: the failed one with its status and reason.
func TestTracing(t *testing.T) {
	t.Parallel()
	g, rcv, oa := tracedGateway(t)
	key := g.newAccountKey(t, map[string]any{"id": "traced", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	oa.Push(fake.Script{Status: http.StatusInternalServerError}, fake.Script{Text: "Escalated.", Usage: fake.Usage{Input: 70, Output: 7}})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-standard","messages":[{"role":"user","content":"hi"}]}`,
		append(bearer(key), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")...)
	if r.Status != http.StatusOK || r.Header.Get("X-Gw-Escalated") != "true" {
		t.Fatalf("chat: %d (escalated %q) %s", r.Status, r.Header.Get("X-Gw-Escalated"), r.Body)
	}
	spans := rcv.traceSpans(t, traceID, 3)
	var call *tracepb.Span
	var attempts []*tracepb.Span
	for _, s := range spans {
		switch {
		case s.Name == "gw":
			call = s
		case strings.HasPrefix(s.Name, "upstream "):
			attempts = append(attempts, s)
		}
	}
	if call == nil || len(attempts) != 2 {
		t.Fatalf("spans %v: want the call's span and two attempts", spans)
	}
	want := map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gw-standard",
		"gen_ai.response.model": "o4-mini", "gen_ai.usage.input_tokens": "70", "gen_ai.usage.output_tokens": "7",
	}
	got := attrs(call)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("call span %s = %q, want %q", k, got[k], v)
		}
	}
	var failed, served int
	for _, a := range attempts {
		if string(a.ParentSpanId) != string(call.SpanId) {
			t.Errorf("attempt span %s is not a child of the call's span", a.Name)
		}
		at := attrs(a)
		switch at["http.response.status_code"] {
		case "500":
			failed++
			if at["error.type"] != "status_5xx" || a.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("failed attempt: attributes %v, status %v", at, a.Status)
			}
		case "200":
			served++
			if at["error.type"] != "" {
				t.Errorf("served attempt has error.type %q", at["error.type"])
			}
		}
		if at["gen_ai.provider.name"] != "openai" {
			t.Errorf("attempt span provider %q, want openai", at["gen_ai.provider.name"])
		}
	}
	if failed != 1 || served != 1 {
		t.Errorf("%d failed and %d served attempts, want 1 and 1", failed, served)
	}
}

// TestToolsCallObserved: a tools-server call that makes a billed call
// inside it (image_generate) reports that call's bill on its own access
// log entry and span (the model, alias, cost, provider), with the
// attempt a child of its span, while the metrics count the money once,
// under the family of the inner call.
func TestToolsCallObserved(t *testing.T) {
	t.Parallel()
	g, rcv, _ := tracedGateway(t)
	key := g.newAccountKey(t, map[string]any{"id": "traced-tools", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	const traceID = "5cf92f3577b34da6a3ce929d0e0e4737"
	r := mcpPost(t, g, "/mcp-tools/", key, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"image_generate","arguments":{"prompt":"a fox"}}}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"isError":false`) {
		t.Fatalf("image_generate: %d %s", r.Status, r.Body)
	}
	ledger := g.ledger(t, "traced-tools")
	if len(ledger) != 1 || ledger[0].Endpoint != "images" {
		t.Fatalf("ledger %+v, want the one image", ledger)
	}
	l := ledger[0]
	id := r.Header.Get("X-Gw-Request-Id")
	le := accessLog(t, g, []string{id})[id]
	if le.Account != "traced-tools" || le.Model != "gpt-image-1" || le.Alias != "gw-image" || le.Cost != l.Cost {
		t.Errorf("tools call's access log fields %+v, want the inner image's (model gpt-image-1, alias gw-image, cost %s)", le, l.Cost)
	}
	spans := rcv.traceSpans(t, traceID, 2)
	var call, attempt *tracepb.Span
	for _, s := range spans {
		switch {
		case s.Name == "gw":
			call = s
		case strings.HasPrefix(s.Name, "upstream "):
			attempt = s
		}
	}
	if call == nil || attempt == nil {
		t.Fatalf("spans %v: want the call's span and its attempt", spans)
	}
	got := attrs(call)
	for k, v := range map[string]string{"gen_ai.operation.name": "mcp", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "gw-image", "gen_ai.response.model": "gpt-image-1"} {
		if got[k] != v {
			t.Errorf("call span %s = %q, want %q", k, got[k], v)
		}
	}
	if string(attempt.ParentSpanId) != string(call.SpanId) {
		t.Error("the inner call's attempt is not a child of the tools call's span")
	}
	m := scrape(t, g)
	if want := float64(mustUSD(t, l.Cost)) / float64(pricing.NanoPerUSD); m[`gw_cost_usd_total{family="images",model="gpt-image-1"}`] != want {
		t.Errorf("images cost %v, want %v", m[`gw_cost_usd_total{family="images",model="gpt-image-1"}`], want)
	}
	for name := range m {
		if strings.HasPrefix(name, `gw_cost_usd_total{family="mcp"`) {
			t.Errorf("%s counted: the inner call's money twice", name)
		}
	}
}
