// Package pipeline is the one way every request of the gateway takes:
// key → account and allowlist → ability switched on → plan and clearance →
// (limits and money, when the endpoint is billed) → the endpoint's handler
// → metrics. What differs per endpoint is data in an Endpoint.
package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/bodyrate"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/obs"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// AuthMode says which headers carry the key on an endpoint: Bearer on
// every one, x-api-key too where it is read.
type AuthMode int

const (
	// BearerOrAPIKey reads Authorization: Bearer, then x-api-key.
	BearerOrAPIKey AuthMode = iota
	// BearerOnly reads only Authorization: Bearer (voice list, MCP servers).
	BearerOnly
)

// Handler serves an endpoint once the pipeline's checks passed. It writes
// the success itself; an error it returns before writing anything is
// rendered in the endpoint's family.
type Handler func(c *Call) error

// Endpoint is everything that differs between the gateway's routes.
type Endpoint struct {
	// Name labels the route in metrics and logs (for example "chat").
	Name string
	// Methods the route answers; others get 405. Empty: any method.
	Methods []string
	// Family renders the route's errors.
	Family gwerr.Family
	// Auth says which headers carry the key.
	Auth AuthMode
	// Ability, when set, must be switched on for the account (404), and
	// the plan must be paid and cleared (402/403 per family).
	Ability string
	// Billing says whether the money gate applies, and as which kind of
	// spend; nil means the route is not billed.
	Billing *money.Kind
	// Budgets are the shared rate budgets each call takes one unit of.
	Budgets []limits.Budget
	// Concurrency, when set, bounds the account's calls of the route in
	// flight at once (429 beyond it), counted apart from billed calls.
	Concurrency *limits.Bound
	// Public routes skip authentication (no API route is;
	// kept for redirects).
	Public bool
	// AnswersRefusedKeys lets the handler answer a caller whose key is
	// refused (missing, unknown, revoked, expired, or not checkable): it
	// runs with Call.KeyRefusal set and no account, past every other
	// check. The tools server uses it to answer auth_failed tool results.
	AnswersRefusedKeys bool
	// RequestIDPrefix starts the request id ("req-" by default).
	RequestIDPrefix string
	// Refuse, when set, renders a refusal the pipeline makes (before or
	// instead of the handler) in place of Family's rendering, for routes
	// whose error shape depends on the request (the MCP servers' two
	// protocol eras).
	Refuse func(w http.ResponseWriter, r *http.Request, e *gwerr.Error)
	// Handler serves the route; nil answers 501 until the feature is built.
	Handler Handler
}

// Call is one request on its way through the pipeline.
type Call struct {
	W         http.ResponseWriter
	R         *http.Request
	Endpoint  *Endpoint
	RequestID string
	Key       store.Key
	Account   store.Account
	Gateway   *Gateway
	// KeyRefusal is why the key was refused, on an endpoint that
	// AnswersRefusedKeys; nil when the key was accepted.
	KeyRefusal *gwerr.Error
	hold       *money.Hold
	bills      []Bill
	cacheHit   bool
	// inner are the bills of the calls made inside this one (Invoke),
	// reported on this call's log entry and span but counted in the
	// metrics under their own family.
	innerMu sync.Mutex
	inner   []Bill
	// Made with the call: room for its first bill, what the pipeline
	// measures of it, its record of upstream attempts, its writer and what
	// it reports to the access log.
	billed     [1]Bill
	obs        observation
	rec        obs.Record
	sw         statusWriter
	annotation Annotation
}

// Gateway holds what every request needs.
type Gateway struct {
	Store   store.Store
	Catalog *catalog.Catalog
	Logger  *zap.Logger
	Metrics *Metrics
	// Annotate, when set, puts a finished call's values on the host
	// server's access log entry and in its placeholders.
	Annotate func(ctx context.Context, a *Annotation)
	// Identify, when set, puts the request id, account and key id of a
	// call in the host's placeholders as soon as the key is checked, so
	// that what the host writes with the answer (a deferred header) can
	// use them. Annotate reports the rest once the call ends.
	Identify func(ctx context.Context, a *Annotation)
	Money    *money.Gate
	Limits   limits.Limiter
	// InFlight counts each account's billed calls in flight; nil: no
	// bound. MaxInFlight is the bound (limits.DefaultMaxInFlight when 0).
	InFlight    *limits.InFlight
	MaxInFlight int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BodyRate is the rule every request body is read under: a body that
	// falls behind it is refused with TooSlow (408) and its connection
	// closed (the package's defaults when zero).
	BodyRate bodyrate.Limits
}

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Serve runs r through the pipeline for ep.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, ep *Endpoint) {
	if ep.Refuse != nil {
		g.serve(w, r, ep, func(sw *statusWriter, e *gwerr.Error) { ep.Refuse(sw, r, e) })
		return
	}
	g.serve(w, r, ep, func(sw *statusWriter, e *gwerr.Error) { gwerr.Render(sw, ep.Family, e) })
}

// serve runs r through the pipeline for ep and hands a refusal made before
// anything was written to refuse. It returns the call, ended.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, ep *Endpoint, refuse func(*statusWriter, *gwerr.Error)) *Call {
	outer := obs.From(r.Context())
	c := &Call{W: w, Endpoint: ep, Gateway: g, RequestID: NewRequestID(ep.RequestIDPrefix)}
	c.bills = c.billed[:0]
	o := &c.obs
	*o = observation{family: familyOf(ep, r.URL.Path), start: time.Now(), nested: outer != nil, metrics: g.Metrics, catalog: g.Catalog, rec: &c.rec}
	if outer != nil {
		o.outer, _ = outer.Owner.(*Call)
	}
	c.rec.Parent, c.rec.Reporter, c.rec.Owner = outer, o, c
	c.rec.Span = trace.SpanFromContext(r.Context())
	r = r.WithContext(obs.With(r.Context(), &c.rec))
	c.R = r
	w.Header().Set(HeaderRequestID, c.RequestID)
	body := bodyrate.Wrap(w, r, g.BodyRate)
	sw := &c.sw
	*sw = statusWriter{ResponseWriter: w, obs: o}
	c.W = sw
	var err error
	// Deferred, so that an answer cut short (Abort) is counted and logged
	// too. A whole answer leaves once the call is counted, before Caddy
	// writes its access log entry.
	defer func() {
		g.finish(c, o, sw, err)
		sw.flushWhole()
	}()
	defer func() { c.hold.Release(r.Context()) }() // a call that did not settle costs nothing, even if it panics
	err = g.run(c)
	if err != nil {
		e := gwerr.As(err)
		if body.TooSlow() {
			// However the handler took the failed read, the client was
			// too slow.
			e = slowBody(body.Rule())
			err = e
		}
		if e.Kind == gwerr.Internal {
			g.Logger.Error("request failed", zap.String("route", ep.Name), zap.String("request_id", c.RequestID), zap.Error(err))
		}
		if sw.status == 0 {
			refuse(sw, e)
		}
	}
	return c
}

// slowBody is the refusal of a body that fell behind the rule l.
func slowBody(l bodyrate.Limits) *gwerr.Error {
	return gwerr.New(gwerr.TooSlow, "the request body arrived slower than %s a second after the first %s",
		humanize.IBytes(uint64(l.MinRate)), l.Grace)
}

// Recorded is an answer Invoke collected.
type Recorded struct {
	Status int
	Header http.Header
	Body   bytes.Buffer
	// Aborted is true when the handler cut its answer short after it had
	// begun (Call.Abort): Body holds only part of it.
	Aborted bool
	// Bills are the charges the call made (Call.Bills): what its receipt
	// shows, read without parsing a header.
	Bills []Bill
}

// Cost is what the call charged in all: the cost its receipt shows.
func (rec *Recorded) Cost() pricing.Money {
	var total pricing.Money
	for _, b := range rec.Bills {
		total += b.Cost
	}
	return total
}

// Model is the model that served the call's first charge; empty when it
// charged nothing (a refusal, a cache hit).
func (rec *Recorded) Model() string {
	if len(rec.Bills) == 0 {
		return ""
	}
	return rec.Bills[0].Model
}

// Abort ends an answer that has begun but cannot be finished (its
// upstream broke off mid-stream): the connection is cut, so the client
// sees an incomplete body rather than a clean end (as Caddy's
// reverse_proxy does). An answer collected by Invoke is marked Aborted
// instead.
func (c *Call) Abort() {
	if sw, ok := c.W.(*statusWriter); ok {
		if rec, ok := sw.ResponseWriter.(recorder); ok {
			rec.Aborted = true
			return
		}
	}
	_ = http.NewResponseController(c.W).Flush()
	panic(http.ErrAbortHandler)
}

// WriteHeader implements http.ResponseWriter.
func (rec *Recorded) WriteHeader(code int) {
	if rec.Status == 0 {
		rec.Status = code
	}
}

// Write implements http.ResponseWriter.
func (rec *Recorded) Write(b []byte) (int, error) {
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	return rec.Body.Write(b)
}

// Invoke serves r through ep exactly as Serve does (the same key, checks,
// limits and billing), for a caller inside the gateway such as the tools
// server: the answer is collected instead of sent, and a refusal comes
// back as its *gwerr.Error instead of being rendered in ep's family. The
// error is nil when the endpoint wrote an answer (check Status: a handler
// may write a failure of its own, e.g. after a stream began).
func (g *Gateway) Invoke(r *http.Request, ep *Endpoint) (*Recorded, *gwerr.Error) {
	rec := &recorder{Recorded: &Recorded{Header: http.Header{}}}
	var refused *gwerr.Error
	c := g.serve(rec, r, ep, func(sw *statusWriter, e *gwerr.Error) {
		refused = e
		sw.status = ep.Family.Status(e) // for the metrics
		rec.Status = sw.status
	})
	rec.Bills = c.Bills()
	return rec.Recorded, refused
}

// recorder adapts Recorded to http.ResponseWriter.
type recorder struct{ *Recorded }

func (rec recorder) Header() http.Header { return rec.Recorded.Header }

// Flush is a no-op: Invoke collects the whole answer.
func (rec recorder) Flush() {}

func (g *Gateway) run(c *Call) error {
	ep := c.Endpoint
	if len(ep.Methods) > 0 && !methodAllowed(ep.Methods, c.R.Method) {
		return &gwerr.Error{Kind: gwerr.MethodNotAllowed, Message: "method not allowed", Allow: strings.Join(ep.Methods, ", ")}
	}
	if !ep.Public {
		err := g.authenticate(c)
		g.identify(c)
		if err != nil {
			if !ep.AnswersRefusedKeys || ep.Handler == nil {
				return err
			}
			// No account: no ability, budget or money check applies.
			c.KeyRefusal = gwerr.As(err)
			return ep.Handler(c)
		}
		if ep.Ability != "" {
			if !c.Account.HasAbility(ep.Ability) {
				return gwerr.New(gwerr.Disabled, "%s is not switched on for this account", ep.Ability)
			}
			if !c.Account.PaidCleared() {
				return gwerr.New(gwerr.PlanLocked, "%s needs a paid plan with a cleared payment", ep.Ability)
			}
		}
	}
	for _, b := range ep.Budgets {
		if err := c.Take(b, 1); err != nil {
			return err
		}
	}
	if ep.Billing != nil && g.InFlight != nil && !ep.Public {
		most := g.MaxInFlight
		if most <= 0 {
			most = limits.DefaultMaxInFlight
		}
		release, ok := g.InFlight.Acquire(c.Account.ID, most)
		if !ok {
			return tooManyInFlight()
		}
		defer release()
	}
	if b := ep.Concurrency; b != nil && g.InFlight != nil && !ep.Public {
		release, ok := g.InFlight.Acquire(b.Key(c.Account.ID), b.Max)
		if !ok {
			return tooManyInFlight()
		}
		defer release()
	}
	if ep.Handler == nil {
		// A billed route not built yet still gives its money refusals; a
		// built one checks the money by reserving its estimate (c.Reserve),
		// once, before any upstream work.
		if ep.Billing != nil {
			if err := g.Money.Check(c.R.Context(), c.Payer(), *ep.Billing); err != nil {
				return err
			}
		}
		return gwerr.New(gwerr.NotImplemented, "%s is not available on this gateway yet", c.R.URL.Path)
	}
	return ep.Handler(c)
}

// tooManyInFlight refuses a call over an account's bound of calls in
// flight.
func tooManyInFlight() error {
	return &gwerr.Error{Kind: gwerr.RateLimited, Message: "too many calls of this account are in flight; retry when one has finished",
		RetryAfter: limits.InFlightRetryAfter}
}

// Take takes n units of budget b from the call's account, or refuses with
// 429 and Retry-After.
func (c *Call) Take(b limits.Budget, n int64) error {
	return c.take(c.Account.ID, b, n)
}

// TakeKey takes n units of budget b from the call's key (each key of an
// account has its own), or refuses with 429 and Retry-After.
func (c *Call) TakeKey(b limits.Budget, n int64) error {
	return c.take(c.Key.ID, b, n)
}

// take takes n units of budget b from owner's (an account's or a key's).
func (c *Call) take(owner string, b limits.Budget, n int64) error {
	d, err := c.Gateway.Limits.Allow(c.R.Context(), owner, b, n)
	if err != nil {
		return c.Gateway.storeDown(c, err)
	}
	if !d.Allowed {
		return &gwerr.Error{Kind: gwerr.RateLimited, Message: "too many calls: " + b.Name + " budget used; retry later",
			RetryAfter: limits.RetryAfterSeconds(d.RetryAfter)}
	}
	return nil
}

// AllowModel refuses a model id the key's allowlist lacks (401 or 403 per
// family: decision mode 403 model_not_allowed, images 403
// permission_error, speech and transcription 401).
func (c *Call) AllowModel(id string) error {
	if catalog.Allowed(c.Key.Models, id) {
		return nil
	}
	return gwerr.New(gwerr.ModelNotAllowed, "this key may not use model %s", id)
}

// Reserve holds the call's estimated cost through the money gate. A call
// holds one reservation at a time (a second one only after the first was
// settled); the pipeline releases the hold unless Settle charged it.
func (c *Call) Reserve(est pricing.Money) error {
	if c.hold != nil && !c.hold.Done() {
		return errors.New("pipeline: the call already holds a reservation")
	}
	h, err := c.Gateway.Money.ReserveFor(c.R.Context(), c.Payer(), c.kind(), est)
	if err != nil {
		return err
	}
	c.hold = h
	return nil
}

// Payer is who the call's spend counts against: its account, and the key
// it was made with, whose caps bound it too.
func (c *Call) Payer() money.Payer { return money.Payer{Account: c.Account.ID, Key: c.Key.ID} }

// kind is the spend the call's route is billed as.
func (c *Call) kind() money.Kind {
	if c.Endpoint.Billing != nil {
		return *c.Endpoint.Billing
	}
	return money.Ability
}

// Room is the most the call's account could reserve now, or the money
// refusal when nothing is left (money.Gate.Room): for a call that sizes
// itself to what is left before it reserves.
func (c *Call) Room() (pricing.Money, error) {
	return c.Gateway.Money.Room(c.R.Context(), c.Payer(), c.kind())
}

// AbilityCost prices units of an ability alias (gw-image, gw-voice-fast,
// ...) for the call's account: the alias's plan price per unit through
// pricing.Cost, with the pay-as-you-go markup once. ok is false when the
// alias is unknown or its price unpublished: such a call must be refused
// (502 capability_unavailable), never served free.
func (c *Call) AbilityCost(alias string, units int64) (cost pricing.Money, ok bool) {
	a := c.Gateway.Catalog.Abilities[alias]
	if a == nil || a.PriceMicrocents == nil {
		return 0, false
	}
	return pricing.Cost(c.Account.PAYG, pricing.Line{Units: units, Rate: pricing.PerUnit(pricing.Micro(*a.PriceMicrocents))}), true
}

// Release drops the call's reservation without charging (before a new
// one, as when a call moves to a dearer model).
func (c *Call) Release() { c.hold.Release(c.R.Context()) }

// authenticate finds the key and its account.
func (g *Gateway) authenticate(c *Call) error {
	secret := keyFrom(c.R, c.Endpoint.Auth)
	if secret == "" {
		return gwerr.New(gwerr.Unauthenticated, "missing API key")
	}
	ctx := c.R.Context()
	k, err := g.Store.KeyByHash(ctx, store.HashSecret(secret))
	if errors.Is(err, store.ErrNotFound) {
		return gwerr.New(gwerr.Unauthenticated, "invalid API key")
	}
	if err != nil {
		return g.storeDown(c, err)
	}
	if k.ExpiresAt != nil && !g.now().Before(*k.ExpiresAt) {
		return gwerr.New(gwerr.Unauthenticated, "API key expired")
	}
	a, err := g.Store.Account(ctx, k.AccountID)
	if errors.Is(err, store.ErrNotFound) {
		return gwerr.New(gwerr.Unauthenticated, "invalid API key")
	}
	if err != nil {
		return g.storeDown(c, err)
	}
	c.Key, c.Account = k, a
	return nil
}

// identify hands the call's identity to Identify; a call made inside
// another (Invoke) leaves the outer call's alone.
func (g *Gateway) identify(c *Call) {
	if g.Identify == nil || c.obs.nested {
		return
	}
	c.annotation = Annotation{RequestID: c.RequestID, Account: c.Account.ID, KeyID: c.Key.ID}
	g.Identify(c.R.Context(), &c.annotation)
}

// StoreRetryAfter is the Retry-After, in seconds, when the store cannot
// answer.
const StoreRetryAfter = 1

// storeDown is the refusal when the store cannot answer: on a billed route
// 402 credit_unresolved (never a free pass, never a 500),
// elsewhere 503.
func (g *Gateway) storeDown(c *Call, err error) error {
	ctx := c.R.Context()
	if ctx.Err() != nil {
		return gwerr.New(gwerr.Unavailable, "request cancelled")
	}
	g.Logger.Error("store unavailable", zap.String("route", c.Endpoint.Name), zap.Error(err))
	if c.Endpoint.Billing != nil {
		return money.Unresolved()
	}
	return &gwerr.Error{Kind: gwerr.Unavailable, Message: "the key could not be checked; retry", RetryAfter: StoreRetryAfter}
}

// keyFrom returns the key a request carries under mode, or "".
func keyFrom(r *http.Request, mode AuthMode) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		if mode == BearerOnly {
			return ""
		}
	}
	if mode == BearerOrAPIKey {
		return strings.TrimSpace(r.Header.Get("X-Api-Key"))
	}
	return ""
}

func methodAllowed(methods []string, m string) bool {
	for _, x := range methods {
		if x == m || (x == http.MethodGet && m == http.MethodHead) {
			return true
		}
	}
	return false
}

// DefaultRequestIDPrefix starts request ids unless an endpoint says otherwise.
const DefaultRequestIDPrefix = "req-"

// NewRequestID returns prefix followed by 32 hex digits: the time in
// milliseconds since 1970 (12 digits), then 20 random ones. The ledger is
// keyed by request id, so ids that grow with time are appended at the end
// of its index instead of all over it, and a write touches few pages; 80
// random bits keep ids of the same millisecond apart.
func NewRequestID(prefix string) string {
	if prefix == "" {
		prefix = DefaultRequestIDPrefix
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	id := make([]byte, len(prefix)+hex.EncodedLen(len(b)))
	hex.Encode(id[copy(id, prefix):], b[:])
	return string(id)
}

// statusWriter remembers the status so the pipeline knows whether a
// response has started; Unwrap keeps http.ResponseController working.
type statusWriter struct {
	http.ResponseWriter
	status int
	// obs stamps Server-Timing on the answer; firstByte is when its body
	// began.
	obs       *observation
	firstByte time.Time
	// wrote counts the body's bytes.
	wrote int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.stampTiming()
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.stampTiming()
		w.status = http.StatusOK
	}
	if w.firstByte.IsZero() && len(b) > 0 {
		w.firstByte = time.Now()
	}
	n, err := w.ResponseWriter.Write(b)
	w.wrote += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
