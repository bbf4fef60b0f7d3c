package pipeline

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/obs"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// HeaderServerTiming carries the gateway's own time and the time spent
// waiting on upstreams, in milliseconds, on every answer.
const HeaderServerTiming = "Server-Timing"

// Route families as the metrics label them.
const (
	familyChat      = "chat"
	familyMessages  = "messages"
	familyResponses = "responses"
	familyAudio     = "audio"
	familyMCP       = "mcp"
)

// familyOf is the metrics' family of a call of ep on path: the route's
// name, with the audio routes as one family, the MCP servers as one, the
// responses route apart from chat, and an unknown path under the family
// its error is shaped in.
func familyOf(ep *Endpoint, path string) string {
	switch ep.Name {
	case "transcription", "speech", "voices":
		return familyAudio
	case "mcp_routing", "mcp_tools", "apps", "mcp_gateway":
		return familyMCP
	case "chat":
		if strings.HasSuffix(path, "/responses") {
			return familyResponses
		}
		return familyChat
	case "not_found":
		if ep.Family == gwerr.Messages {
			return familyMessages
		}
		return familyChat
	}
	return ep.Name
}

// Annotation is what a finished call reports to its host's access log
// entry and placeholders: the request id, and the account and key id of a
// call with a key; the alias, model and cost of a billed call (Billed);
// the input and output tokens of one billed by the token (Tokens); the
// shortfall of one the account could not pay in full ("" when none).
type Annotation struct {
	RequestID, Account, KeyID string
	Billed                    bool
	Alias, Model, Cost        string
	Shortfall                 string
	Tokens                    bool
	InputTokens, OutputTokens int64
}

// tokenKinds label the kinds of Tokens, in the order of its fields.
var tokenKinds = [...]string{"input", "output", "cache_read", "cache_write"}

// observation is what the pipeline measures of one call.
type observation struct {
	family  string
	start   time.Time
	metrics *Metrics
	// catalog declares the provider names the metrics label.
	catalog *catalog.Catalog
	rec     *obs.Record
	// nested: the call runs inside another call of the gateway (Invoke),
	// whose own answer and log entry report it; outer is that call when
	// it was served by the pipeline.
	nested bool
	outer  *Call
}

// serverTiming is the Server-Timing value at this moment.
func (o *observation) serverTiming() string {
	up := o.rec.Upstream()
	total := time.Since(o.start)
	b := make([]byte, 0, 48)
	b = append(b, "gw;dur="...)
	b = millis(b, max(total-up, 0))
	b = append(b, ", upstream;dur="...)
	return string(millis(b, up))
}

// millis appends d (not negative) in milliseconds with one decimal,
// rounded half up.
func millis(b []byte, d time.Duration) []byte {
	tenths := (d + 50*time.Microsecond) / (100 * time.Microsecond)
	b = strconv.AppendInt(b, int64(tenths/10), 10)
	return append(b, '.', byte('0'+tenths%10))
}

// finish records the ended call c in the metrics and in the request's
// access log entry and placeholders. err is what the run returned.
func (g *Gateway) finish(c *Call, o *observation, sw *statusWriter, err error) {
	d := time.Since(o.start)
	m := g.Metrics
	status := sw.status
	if m != nil {
		m.observe(o.family, status, d)
	}
	c.innerMu.Lock()
	all := append(slices.Clip(c.bills), c.inner...)
	c.innerMu.Unlock()
	var total, short pricing.Money
	var tokens Tokens
	var model, alias string
	for _, b := range all {
		total += b.Cost
		short += b.Shortfall
		tokens.Input += b.Tokens.Input
		tokens.Output += b.Tokens.Output
		tokens.CacheRead += b.Tokens.CacheRead
		tokens.CacheWrite += b.Tokens.CacheWrite
		if model == "" {
			model, alias = b.Model, b.Alias
		}
	}
	if m != nil {
		m.family(o.family).overhead.Observe(max(d-o.rec.Upstream(), 0).Seconds())
		for _, b := range c.bills {
			label := g.modelLabel(b.Model)
			m.Cost.Add(o.family, label, b.Cost)
			if b.Shortfall > 0 {
				m.Shortfall.Add(o.family, label, b.Shortfall)
			}
			for i, n := range [...]int64{b.Tokens.Input, b.Tokens.Output, b.Tokens.CacheRead, b.Tokens.CacheWrite} {
				if n > 0 {
					m.model(o.family, label).tokens[i].Add(float64(n))
				}
			}
		}
		if c.cacheHit {
			m.CacheHits.WithLabelValues(o.family).Inc()
		}
		if err != nil && status/100 == 4 {
			e := gwerr.As(err)
			code := c.Endpoint.Family.Code(e)
			if code == "" {
				code = "status_" + strconv.Itoa(status)
			}
			m.Refusals.WithLabelValues(o.family, code).Inc()
		}
		if !sw.firstByte.IsZero() && strings.HasPrefix(sw.Header().Get("Content-Type"), "text/event-stream") {
			ttftModel := ""
			if len(c.bills) > 0 {
				ttftModel = c.bills[0].Model
			}
			if ttftModel == "" {
				ttftModel = sw.Header().Get(HeaderRoutedModel)
			}
			if ttftModel != "" {
				m.model(o.family, g.modelLabel(ttftModel)).ttft.Observe(sw.firstByte.Sub(o.start).Seconds())
			}
		}
	}
	if o.nested {
		if o.outer != nil {
			o.outer.innerMu.Lock()
			o.outer.inner = append(o.outer.inner, all...)
			o.outer.innerMu.Unlock()
		}
		return
	}
	ctx := c.R.Context()
	if span := o.rec.Span; span != nil && span.IsRecording() {
		span.SetAttributes(genAI(o.family, o.rec.Provider(), alias, model, tokens, len(all) > 0)...)
	}
	if g.Annotate == nil {
		return
	}
	a := &c.annotation
	*a = Annotation{RequestID: c.RequestID, Account: c.Account.ID, KeyID: c.Key.ID}
	if len(all) > 0 {
		if alias == "" {
			alias = model
		}
		a.Billed, a.Alias, a.Model, a.Cost = true, alias, model, total.String()
		if short > 0 {
			a.Shortfall = short.String()
		}
		if tokens != (Tokens{}) {
			a.Tokens, a.InputTokens, a.OutputTokens = true, tokens.AllInput(), tokens.Output
		}
	}
	g.Annotate(ctx, a)
}

// modelLabel is the metrics' model label of model: model itself when the
// catalogue declares it or a server listed it (Metrics.Admit), LabelOther
// otherwise.
func (g *Gateway) modelLabel(model string) string {
	if g.Catalog.Declares(model) || g.Metrics.admitted(model) {
		return model
	}
	return LabelOther
}

// providerLabel is the metrics' provider label of provider: itself when
// the catalogue declares it, LabelOther otherwise.
func (o *observation) providerLabel(provider string) string {
	if o.catalog.DeclaresProvider(provider) {
		return provider
	}
	return LabelOther
}

// genAI is the OpenTelemetry GenAI attributes of a call of family: the
// provider that served, the model asked for and the one that answered,
// and, when it was billed, its tokens.
func genAI(family, provider, alias, model string, t Tokens, billed bool) []attribute.KeyValue {
	op := family
	switch family {
	case familyChat, familyMessages, familyResponses:
		op = "chat"
	}
	kv := []attribute.KeyValue{attribute.String("gen_ai.operation.name", op)}
	if provider != "" {
		kv = append(kv, attribute.String("gen_ai.provider.name", provider))
	}
	if alias == "" {
		alias = model
	}
	if alias != "" {
		kv = append(kv, attribute.String("gen_ai.request.model", alias))
	}
	if model != "" {
		kv = append(kv, attribute.String("gen_ai.response.model", model))
	}
	if billed {
		kv = append(kv, attribute.Int64("gen_ai.usage.input_tokens", t.AllInput()), attribute.Int64("gen_ai.usage.output_tokens", t.Output))
	}
	return kv
}

// UpstreamFailed counts a failed upstream attempt of the call.
func (o *observation) UpstreamFailed(provider, reason string) {
	if o.metrics != nil {
		o.metrics.UpstreamErrors.WithLabelValues(o.family, o.providerLabel(provider), reason).Inc()
	}
}

// UpstreamUnbilled counts an attempt of the call that the provider may
// bill and the caller does not pay for.
func (o *observation) UpstreamUnbilled(provider, reason string) {
	if o.metrics != nil {
		o.metrics.UpstreamUnbilled.WithLabelValues(o.family, o.providerLabel(provider), reason).Inc()
	}
}

// stampTiming sets the Server-Timing header once, before the answer's
// first byte.
func (w *statusWriter) stampTiming() {
	if w.obs != nil && w.status == 0 {
		w.ResponseWriter.Header()[HeaderServerTiming] = []string{w.obs.serverTiming()} // the name is canonical
	}
}

var _ http.ResponseWriter = (*statusWriter)(nil)
