// Package upstream sends requests to providers of both wire formats and maps
// their failures into the gateway's error vocabulary.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/caddy-gw/caddy-gw/internal/awssig"
	"github.com/caddy-gw/caddy-gw/internal/gcpauth"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/obs"
)

// Paths of the providers' endpoints, after the base URL.
const (
	PathChat        = "/chat/completions"         // openai; the base ends in /v1
	PathResponses   = "/responses"                // openai
	PathMessages    = "/v1/messages"              // anthropic; the base has no /v1
	PathCountTokens = "/v1/messages/count_tokens" // anthropic
	DefaultVersion  = "2023-06-01"                // anthropic-version when the client sent none
	maxErrorBody    = 64 << 10                    // bytes of an error answer read for its message
	headerVersion   = "anthropic-version"         // what messages-style APIs read
	headerBeta      = "anthropic-beta"            // the betas, comma-separated
	headerAltVer    = "vendor-version"            // the same header, named neutrally
	headerRetry     = "Retry-After"               // passed on from 429 and 529 answers
	headerAWSError  = "X-Amzn-Errortype"          // an AWS API's error type
	maxIdleConnsPer = 64                          // idle connections kept per provider
	// StatusOverloaded is the status of a backing service at capacity
	// (529: clients retry with backoff).
	StatusOverloaded = 529
)

// accountCodes are the error types and codes with which a provider says
// it will not serve the account the gateway calls it with: credit or
// quota used up, billing not set up, a spend limit reached.
var accountCodes = map[string]bool{
	"insufficient_quota":         true, // chat-completions style, 429
	"billing_not_active":         true, // chat-completions style, 429
	"billing_hard_limit_reached": true, // chat-completions style, 400
	"billing_error":              true, // messages style, 402
	// Bedrock's, in the x-amzn-ErrorType header: a quota of the AWS
	// account (not a rate limit, which is ThrottlingException).
	"ServiceQuotaExceededException": true,
}

// accountMessages begin (in lower case) the messages with which a
// messages-style provider says the same in a 400 invalid_request_error.
var accountMessages = []string{
	"your credit balance is too low",
	"you have reached your specified api usage limits",
	"you have reached your specified workspace api usage limits",
}

// accountRefusal reports an error answer about the provider's account
// rather than the request: any 402, a type or code of accountCodes, or a
// 4xx whose message begins as one of accountMessages.
func accountRefusal(status int, header http.Header, body []byte) bool {
	if status == http.StatusPaymentRequired {
		return true
	}
	if t, _, _ := strings.Cut(header.Get(headerAWSError), ":"); accountCodes[t] {
		return true
	}
	e := gjson.GetBytes(body, "error")
	if accountCodes[e.Get("type").String()] || accountCodes[e.Get("code").String()] {
		return true
	}
	if status/100 != 4 {
		return false
	}
	msg := strings.ToLower(strings.TrimSpace(e.Get("message").String()))
	for _, m := range accountMessages {
		if strings.HasPrefix(msg, m) {
			return true
		}
	}
	return false
}

// TLSHandshakeTimeout bounds a provider's TLS handshake.
const TLSHandshakeTimeout = 10 * time.Second

// Client holds one HTTP transport per deployment. Calls go to the
// transport directly: a provider's redirect is not followed (it answers
// as the provider's failure), and no per-call redirect bookkeeping is
// paid.
type Client struct {
	mu         sync.Mutex
	transports map[transportKey]*http.Transport
	urls       map[urlKey]*url.URL // parsed once per base URL and path
	// sets are the providers' deployments as called, states what is
	// known of each deployment (see deploy.go).
	sets   map[*catalog.Provider]*deploySet
	states map[stateKey]*deployState
	// limiter holds the deployments' per-minute limits (SetLimiter);
	// memory when none was set.
	limiter atomic.Pointer[limits.Limiter]
	memory  *limits.Memory
	// tokens are the access token sources of vertex providers, by key
	// file: each file is read once.
	tokens map[string]*gcpauth.Source
	// refused hears why a provider's own credentials failed (SetRefused);
	// the caller is told only that the provider is unavailable.
	refused atomic.Pointer[func(provider string, err error)]
}

// SetRefused has fn told why a provider's own credentials failed (a key
// file unread, a token refused, a signature that cannot be made), for
// the operator's log; the caller gets a 503 that says no more.
func (c *Client) SetRefused(fn func(provider string, err error)) { c.refused.Store(&fn) }

// urlKey names an upstream address: a provider's base URL and a path.
type urlKey struct{ base, path string }

// address returns the parsed URL of path under base, parsed on first use;
// the caller gets a copy of its own.
func (c *Client) address(base, path string) (*url.URL, error) {
	key := urlKey{base, path}
	c.mu.Lock()
	u, ok := c.urls[key]
	c.mu.Unlock()
	if !ok {
		var err error
		if u, err = url.Parse(base + path); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if len(c.urls) >= maxURLs {
			clear(c.urls) // addresses of configs long gone
		}
		c.urls[key] = u
		c.mu.Unlock()
	}
	cp := *u
	return &cp, nil
}

// maxURLs bounds the parsed addresses kept (each provider has a few paths;
// reloads with new base URLs add more).
const maxURLs = 1024

// transportKey names a provider's transport. The time-outs are part of
// it: a reload that changes them gets a transport with the new ones
// (in-flight calls keep the old one).
type transportKey struct {
	name, baseURL         string
	dial, responseHeaders time.Duration
}

// New returns a client; transports are made per deployment on first use.
func New() *Client {
	return &Client{transports: map[transportKey]*http.Transport{}, urls: map[urlKey]*url.URL{},
		sets: map[*catalog.Provider]*deploySet{}, states: map[stateKey]*deployState{}, memory: limits.NewMemory(nil)}
}

func (c *Client) transport(p *catalog.Provider) *http.Transport {
	key := transportKey{p.Name, p.BaseURL, p.DialTimeout, p.HeaderTimeout}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.transports[key]; ok {
		return t
	}
	d := &net.Dialer{Timeout: key.dial, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 nil, // never an environment proxy
		DialContext:           d.DialContext,
		ResponseHeaderTimeout: key.responseHeaders,
		TLSHandshakeTimeout:   TLSHandshakeTimeout,
		MaxIdleConnsPerHost:   maxIdleConnsPer,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	c.transports[key] = t
	return t
}

// Request is one upstream call.
type Request struct {
	Provider *catalog.Provider
	// Path after the base URL (PathChat, PathMessages, ...).
	Path string
	// Method is the HTTP method (POST when empty).
	Method string
	// ContentType of Body (application/json when empty; a multipart
	// writer's FormDataContentType for uploads).
	ContentType string
	Body        []byte
	// Parts, when set, are sent one after another in place of Body, so a
	// large upload is framed without being copied into one buffer.
	Parts [][]byte
	// Client is the client's request, whose version header is forwarded
	// to messages-style providers.
	Client *http.Request
	// Betas are sent to a messages-style provider in its beta header; the
	// caller has checked them.
	Betas []string
	// Tokens is the caller's estimate of the prompt's tokens, counted
	// against a deployment's tokens per minute (0: not counted).
	Tokens int64
}

// MaxTimeouts bounds the attempts that time out in one client call, over
// every deployment and every model it tries together (escalation
// included): each waited a whole time-out, and the provider may bill it.
// Once they are spent no further attempt is made. Failures that come fast
// (a refused connection, a 5xx, a 429) do not count: every deployment is
// tried for them.
const MaxTimeouts = 2

// Do sends r and returns the provider's successful response, whose body
// enforces the provider's idle time-out between reads. The call goes to
// one of the provider's deployments (see choose); one that fails before
// answering (no connection, a time-out, 5xx, 429, 529, a refused key or
// account) rests for the provider's cooldown and the call goes on to
// another, each tried at most once, until one answers, every one failed
// or the client's call has waited out MaxTimeouts attempts (then the last
// failure is returned); a request the provider calls faulty (400, 413,
// 422) is not sent again. The time-outs are counted on the call's record
// (obs.From(ctx)), across every Do of the call: a call that has spent them
// sends nothing (TimeoutsSpent). A failure is a *gwerr.Error; Retryable
// tells whether another model may be tried.
func (c *Client) Do(ctx context.Context, r Request) (*http.Response, error) {
	p := r.Provider
	rec := obs.From(ctx)
	if rec == nil { // a call outside the pipeline counts for itself
		rec = new(obs.Record)
		ctx = obs.With(ctx, rec)
	}
	if rec.Timeouts() >= MaxTimeouts {
		return nil, &Error{Err: gwerr.New(gwerr.Timeout, "provider %s was not asked: the call already waited out %d time-outs", p.Name, MaxTimeouts)}
	}
	set := c.deployments(p)
	var tried uint64
	var last, unchecked error
	var wait time.Duration // until the first deployment refused by its limits fits
	for rec.Timeouts() < MaxTimeouts {
		now := time.Now().UnixNano()
		i := set.choose(now, tried)
		if i < 0 {
			break
		}
		tried |= 1 << i
		if ok, after, err := set.admit(ctx, c.limits(), i, r.Tokens, now); !ok {
			if err != nil {
				unchecked = err
			} else if wait == 0 || after < wait {
				wait = after
			}
			continue
		}
		resp, err := c.attempt(ctx, r, &set.views[i], set.states[i])
		if err == nil {
			return resp, nil
		}
		last = err
		if ctx.Err() != nil || !Retryable(err) {
			return nil, err
		}
		if gwerr.As(err).Kind == gwerr.Timeout {
			rec.TimedOut()
		}
		set.rest(i, time.Now().UnixNano(), restFor(err, p.Cooldown))
	}
	switch {
	case last != nil:
		return nil, last
	case unchecked != nil:
		// The limits are shared by every node: unchecked, they are not
		// passed (the gateway's other limits fail closed the same way).
		return nil, &Error{Err: gwerr.New(gwerr.Unavailable, "the limits of provider %s could not be checked; retry later", p.Name)}
	}
	g := gwerr.New(gwerr.RateLimited, "provider %s is at its configured limits; retry later", p.Name)
	if full := set.fullWait(time.Now().UnixNano()); full > 0 && (wait == 0 || full < wait) {
		wait = full
	}
	g.RetryAfter = limits.RetryAfterSeconds(wait)
	return nil, &Error{Err: g, Retryable: true}
}

// TimeoutsSpent reports whether the client's call of ctx has waited out
// MaxTimeouts attempts: it makes no further attempt (Do sends nothing),
// and its caller stops trying other models.
func TimeoutsSpent(ctx context.Context) bool {
	return obs.From(ctx).Timeouts() >= MaxTimeouts
}

// restFor is how long a deployment rests after err: the wait a 429 or
// 529 names (at most maxRest), else the provider's cooldown.
func restFor(err error, cooldown time.Duration) time.Duration {
	var e *Error
	if errors.As(err, &e) && (e.Status == http.StatusTooManyRequests || e.Status == StatusOverloaded) && e.Err.RetryAfter > 0 {
		return min(time.Duration(e.Err.RetryAfter)*time.Second, maxRest)
	}
	if cooldown <= 0 {
		return catalog.DefaultCooldown
	}
	return cooldown
}

// attempt sends r once to p, one deployment of r.Provider whose state is
// st.
func (c *Client) attempt(ctx context.Context, r Request, p *catalog.Provider, st *deployState) (*http.Response, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	ctx, sent := traceSent(ctx)
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	u, err := c.address(p.BaseURL, r.Path)
	if err != nil {
		cancel()
		return nil, gwerr.New(gwerr.Internal, "building the upstream request: %v", err)
	}
	// An empty address parses at no cost; the one parsed before goes in.
	req, err := http.NewRequestWithContext(ctx, method, "", bytes.NewReader(r.Body))
	if err != nil {
		cancel()
		return nil, gwerr.New(gwerr.Internal, "building the upstream request: %v", err)
	}
	req.URL, req.Host = u, strings.TrimSuffix(u.Host, ":") // as NewRequest sets it
	if len(r.Parts) > 0 {
		req.ContentLength = 0
		for _, part := range r.Parts {
			req.ContentLength += int64(len(part))
		}
		req.GetBody = func() (io.ReadCloser, error) {
			rs := make([]io.Reader, len(r.Parts))
			for i, part := range r.Parts {
				rs[i] = bytes.NewReader(part)
			}
			return io.NopCloser(io.MultiReader(rs...)), nil
		}
		req.Body, _ = req.GetBody()
	}
	contentType := r.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Content-Type", contentType)
	setHeaders(req.Header, p, r)
	if err := c.sign(req, p, r.Body); err != nil {
		cancel()
		return nil, err
	}
	rec := obs.From(parent)
	span := startAttempt(parent, rec, p, r.Path)
	st.inflight.Add(1)
	began := time.Now()
	resp, err := c.transport(p).RoundTrip(req)
	if err != nil {
		st.inflight.Add(-1)
		rec.Waited(time.Since(began))
		cancel()
		err = transportError(parent, p, err)
		reason := failReason(parent, err, 0)
		rec.Fail(p.Name, reason)
		if sent.Load() {
			rec.Unbilled(p.Name, unbilledReason(parent, err))
		}
		endAttempt(span, 0, reason)
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		st.inflight.Add(-1)
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		rec.Waited(time.Since(began))
		reason := failReason(parent, nil, resp.StatusCode)
		rec.Fail(p.Name, reason)
		endAttempt(span, resp.StatusCode, reason)
		return nil, statusError(p, resp, b)
	}
	waited := time.Since(began)
	st.observe(waited)
	rec.Waited(waited)
	rec.Served(p.Name)
	ib := newIdleBody(resp.Body, p.IdleTimeout, cancel)
	ib.parent, ib.rec, ib.provider, ib.span, ib.status, ib.state = parent, rec, p.Name, span, resp.StatusCode, st
	resp.Body = ib
	return resp, nil
}

// traceSent returns ctx for a request that notes, in the flag returned,
// that it was written whole to the provider: from then on the provider
// may bill it.
func traceSent(ctx context.Context) (context.Context, *atomic.Bool) {
	sent := new(atomic.Bool)
	trace := &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			sent.Store(true)
		}
	}}
	return httptrace.WithClientTrace(ctx, trace), sent
}

// unbilledReason is why an attempt sent to the provider that failed
// without an answer (err) is left unpaid: the client left (ctx cancelled),
// or it timed out; "" for any other failure (the provider could not take
// the request).
func unbilledReason(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return obs.UnbilledClientLeft
	case gwerr.As(err).Kind == gwerr.Timeout:
		return obs.UnbilledTimeout
	}
	return ""
}

// tracerName names the instrumentation of the gateway's attempt spans.
const tracerName = "github.com/caddy-gw/caddy-gw/internal/upstream"

// startAttempt starts the span of one attempt on p, a child of the call's
// span (the call's own no-op span when the call is not traced): rec's, or
// else ctx's.
func startAttempt(ctx context.Context, rec *obs.Record, p *catalog.Provider, path string) trace.Span {
	var parent trace.Span
	if rec != nil {
		parent = rec.Span
	}
	if parent == nil {
		parent = trace.SpanFromContext(ctx)
	}
	if !parent.IsRecording() {
		return parent
	}
	_, span := parent.TracerProvider().Tracer(tracerName).Start(ctx, "upstream "+p.Name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.provider.name", p.Name), attribute.String("url.path", path)))
	return span
}

// endAttempt ends an attempt's span with the provider's status (0: none)
// and, for a failed attempt, its reason.
func endAttempt(span trace.Span, status int, reason string) {
	if !span.IsRecording() {
		return
	}
	if status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if reason != "" {
		span.SetAttributes(attribute.String("error.type", reason))
		span.SetStatus(codes.Error, reason)
	}
	span.End()
}

// failReason is the metrics' reason for a failed attempt: its status,
// or for a transport failure err whether it timed out or could not
// connect. A client that left is no failure of the provider: "".
func failReason(ctx context.Context, err error, status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return obs.ReasonStatus429
	case status/100 == 4:
		return obs.ReasonStatus4xx
	case status != 0:
		return obs.ReasonStatus5xx
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ""
	case gwerr.As(err).Kind == gwerr.Timeout:
		return obs.ReasonTimeout
	}
	return obs.ReasonConnect
}

// headerFunc sets the headers a provider reads of every call r to it.
type headerFunc func(h http.Header, p *catalog.Provider, r Request)

// providerFormat is what each catalogue format of provider reads of every
// call: the key, in the header of its own way (auth) unless the provider
// names another, the other headers of its format, and for a format that
// authenticates a request by itself (an access token, a signature) its
// signing, done last on the request as it will be sent.
type providerFormat struct {
	auth    string
	headers headerFunc
	sign    func(c *Client, req *http.Request, p *catalog.Provider, body []byte) error
	// setup reports an error answer about the gateway's own account at
	// the provider (its key, project, billing or API switched off)
	// whatever its status: refused as the account's (503), never the
	// caller's 400.
	setup func(body []byte) bool
}

// providerFormats are the rows of providerFormat by catalogue format.
var providerFormats = map[string]providerFormat{
	catalog.FormatOpenAI:    {auth: catalog.AuthBearer},
	catalog.FormatAnthropic: {auth: authXAPIKey, headers: messagesHeaders},
	catalog.FormatGemini:    {auth: authGoogAPIKey, setup: googleSetup},
	catalog.FormatVertex:    {auth: catalog.AuthNone, sign: (*Client).vertexToken, setup: googleSetup},
	catalog.FormatBedrock:   {auth: catalog.AuthNone, sign: (*Client).awsSign},
}

// authXAPIKey is the messages style's own way to send the key, and
// authGoogAPIKey the Gemini API's: each the header that carries it.
const (
	authXAPIKey    = "x-api-key"
	authGoogAPIKey = "x-goog-api-key"
)

// keyHeaders send a key in the way of their auth.
var keyHeaders = map[string]func(h http.Header, key string){
	catalog.AuthBearer: func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
	catalog.AuthAPIKey: func(h http.Header, key string) { h.Set("api-key", key) },
	authXAPIKey:        func(h http.Header, key string) { h.Set(authXAPIKey, key) },
	authGoogAPIKey:     func(h http.Header, key string) { h.Set(authGoogAPIKey, key) },
	catalog.AuthNone:   func(http.Header, string) {},
}

// googleSetup reports a Google API's error about the gateway's key,
// project or billing (the Gemini API answers a bad key 400).
func googleSetup(body []byte) bool {
	e, ok := translate.ReadGeminiError(body)
	return ok && e.Setup()
}

// sign authenticates req to p as its format does by itself, when it does.
func (c *Client) sign(req *http.Request, p *catalog.Provider, body []byte) error {
	f := providerFormats[p.Format]
	if f.sign == nil {
		return nil
	}
	if err := f.sign(c, req, p, body); err != nil {
		if fn := c.refused.Load(); fn != nil {
			(*fn)(p.Name, err)
		}
		// The gateway's own credentials for the provider failed: the
		// provider is out of reach for every caller, as when it refuses
		// the account.
		return &Error{Err: gwerr.New(gwerr.Unavailable, "%s cannot be reached: its credentials were refused", p.Name), Account: true}
	}
	return nil
}

// awsSign signs req to p, with its body, with AWS Signature Version 4
// (service bedrock), every header being set.
func (c *Client) awsSign(req *http.Request, p *catalog.Provider, body []byte) error {
	s := awssig.Signer{Key: awssig.Key{AccessKeyID: p.AccessKeyID, SecretAccessKey: p.SecretAccessKey, SessionToken: p.SessionToken}, Region: p.Region}
	return s.Sign(req.Context(), req, body, time.Now())
}

// tokenWait bounds the wait for an access token.
const tokenWait = 10 * time.Second

// vertexToken sends the access token of p's key file, made and renewed
// from the file (read once, on the first call).
func (c *Client) vertexToken(req *http.Request, p *catalog.Provider, _ []byte) error {
	c.mu.Lock()
	src := c.tokens[p.CredentialsFile]
	c.mu.Unlock()
	if src == nil {
		var err error
		if src, err = gcpauth.Load(p.CredentialsFile, &http.Client{Timeout: tokenWait}); err != nil {
			return err
		}
		c.mu.Lock()
		if c.tokens == nil {
			c.tokens = map[string]*gcpauth.Source{}
		}
		if kept := c.tokens[p.CredentialsFile]; kept != nil {
			src = kept
		} else {
			c.tokens[p.CredentialsFile] = src
		}
		c.mu.Unlock()
	}
	tok, err := src.Token()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// setHeaders sets what p reads of every call r: its key in the way of
// its auth (the format's own by default; a bearer token for a format not
// listed, only in a catalogue made by hand) and its format's headers.
func setHeaders(h http.Header, p *catalog.Provider, r Request) {
	f, ok := providerFormats[p.Format]
	if !ok {
		f.auth = catalog.AuthBearer
	}
	auth := p.Auth
	if auth == "" {
		auth = f.auth
	}
	if set := keyHeaders[auth]; set != nil && p.APIKey != "" {
		set(h, p.APIKey)
	}
	if f.headers != nil {
		f.headers(h, p, r)
	}
}

// messagesHeaders sends the client's version (or DefaultVersion) and the
// call's checked betas (messages style).
func messagesHeaders(h http.Header, _ *catalog.Provider, r Request) {
	h.Set(headerVersion, DefaultVersion)
	if r.Client != nil {
		if v := first(r.Client.Header, headerVersion, headerAltVer); v != "" {
			h.Set(headerVersion, v)
		}
	}
	if len(r.Betas) > 0 {
		h.Set(headerBeta, strings.Join(r.Betas, ","))
	}
}

func first(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// Error is an upstream failure: the error to answer with, and whether
// another model may be tried (nothing reached the client yet).
type Error struct {
	Err       *gwerr.Error
	Retryable bool
	// Status and ProviderCode are the provider's HTTP status and its
	// error.code, when it answered with an error (never shown as they
	// are: a handler maps the ones it knows).
	Status       int
	ProviderCode string
	// Account: the provider refused the account the gateway calls it
	// with (credit, quota, billing), not the request.
	Account bool
}

// AccountRefused reports whether err is a provider refusing the account
// the gateway calls it with (an Unavailable error in the gateway's words).
func AccountRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Account
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether err is an upstream failure another model may
// be tried for.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable
}

func transportError(ctx context.Context, p *catalog.Provider, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return &Error{Err: gwerr.New(gwerr.Unavailable, "request cancelled")}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Err: gwerr.New(gwerr.Timeout, "provider %s took too long to answer", p.Name), Retryable: true}
	}
	return &Error{Err: gwerr.New(gwerr.Upstream, "provider %s could not be reached", p.Name), Retryable: true}
}

// statusError maps a provider's error answer. The client's own mistakes
// (400, 413, 422) keep the provider's message and are not retried on
// another model; the provider's failures are. A refusal of the gateway's
// own account with the provider is the provider's failure, whatever its
// status: 503 in the gateway's words (the caller neither caused it nor
// may learn of it).
func statusError(p *catalog.Provider, resp *http.Response, body []byte) error {
	msg := gjson.GetBytes(body, "error.message").String()
	if msg == "" {
		msg = gjson.GetBytes(body, "message").String() // an AWS API's
	}
	if msg == "" {
		msg = fmt.Sprintf("provider %s answered %d", p.Name, resp.StatusCode)
	}
	g := &gwerr.Error{Message: msg}
	e := &Error{Err: g, Status: resp.StatusCode, ProviderCode: gjson.GetBytes(body, "error.code").String()}
	setup := providerFormats[p.Format].setup
	switch s := resp.StatusCode; {
	case accountRefusal(s, resp.Header, body) || (setup != nil && setup(body)):
		g.Kind, e.Retryable, e.Account = gwerr.Unavailable, true, true
		g.Message = fmt.Sprintf("provider %s is unavailable; retry later", p.Name)
	case s == http.StatusBadRequest:
		g.Kind = gwerr.Invalid
		g.Param = gjson.GetBytes(body, "error.param").String()
	case s == http.StatusRequestEntityTooLarge:
		g.Kind = gwerr.TooLarge
	case s == http.StatusUnprocessableEntity:
		g.Kind = gwerr.Unprocessable
	case s == http.StatusTooManyRequests:
		// The provider's words name the operator's organisation and its
		// limits: the gateway says it in its own.
		g.Kind, e.Retryable = gwerr.RateLimited, true
		g.RetryAfter, _ = strconv.Atoi(resp.Header.Get(headerRetry))
		g.Message = fmt.Sprintf("provider %s is rate limiting; retry later", p.Name)
	case s == StatusOverloaded:
		g.Kind, e.Retryable = gwerr.Overloaded, true
		g.RetryAfter, _ = strconv.Atoi(resp.Header.Get(headerRetry))
		g.Message = fmt.Sprintf("provider %s is at capacity; retry later", p.Name)
	case s == http.StatusGatewayTimeout || s == http.StatusRequestTimeout:
		g.Kind, e.Retryable = gwerr.Timeout, true
		g.Message = fmt.Sprintf("provider %s took too long to answer", p.Name)
	case s == http.StatusServiceUnavailable:
		g.Kind, e.Retryable = gwerr.Unavailable, true
		g.Message = fmt.Sprintf("provider %s is unavailable; retry later", p.Name)
	default: // 401/403/404 (the gateway's own upstream setup) and 5xx
		// The provider's own words stay out: they may name the gateway's
		// account or key.
		g.Kind, e.Retryable = gwerr.Upstream, true
		g.Message = fmt.Sprintf("provider %s failed (%d)", p.Name, resp.StatusCode)
	}
	return e
}

// idleBody ends a response whose provider sends nothing for longer than
// idle between two reads.
type idleBody struct {
	io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	mu     sync.Mutex
	fired  bool
	// parent is the call's context, rec its record (the time Read waits
	// and a cut), provider the name a cut is reported under.
	parent   context.Context
	rec      *obs.Record
	provider string
	cut      bool
	closed   bool // the gateway closed it: a read after is no cut
	// paid: the caller was charged for the whole answer (Paid); a failure
	// after is not unpaid.
	paid bool
	// left: a failure was reported once the call's context was done (the
	// client left): unless a report that counts anyway comes (Stalled),
	// Close counts the attempt as unpaid for the client's leaving.
	left bool
	// span is the attempt's span, ended at Close with the reason of a
	// failure reported before; status is the provider's.
	span   trace.Span
	status int
	reason string
	// state is the deployment's, whose call stays in flight until Close.
	state *deployState
}

// ErrIdle is the read error after the idle time-out ended a stream.
var ErrIdle = errors.New("upstream sent nothing within its idle time-out")

func newIdleBody(rc io.ReadCloser, idle time.Duration, cancel context.CancelFunc) *idleBody {
	b := &idleBody{ReadCloser: rc, idle: idle, cancel: cancel}
	if idle > 0 {
		b.timer = time.AfterFunc(idle, func() {
			b.mu.Lock()
			b.fired = true
			b.mu.Unlock()
			cancel()
		})
		b.timer.Stop()
	}
	return b
}

// Read waits for the provider at most idle. The clock runs only while
// Read waits: time the gateway spends elsewhere (blocked writing to a slow
// client) is not the provider's silence.
func (b *idleBody) Read(p []byte) (int, error) {
	if b.timer != nil {
		b.timer.Reset(b.idle)
	}
	began := time.Now()
	n, err := b.ReadCloser.Read(p)
	b.rec.Waited(time.Since(began))
	if b.timer != nil {
		b.timer.Stop()
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		fired := b.fired
		b.mu.Unlock()
		if fired {
			b.report(obs.ReasonTimeout, obs.UnbilledTimeout, false)
		} else {
			b.report(obs.ReasonCut, obs.UnbilledCut, false)
		}
		if fired {
			return n, ErrIdle
		}
	}
	return n, err
}

// Broke reports the answer body of Do as failed after it began (an error
// event, an early end, an answer that cannot be read), once per attempt
// however often it is reported, a broken read included. A failure is
// also an attempt the provider may bill and the caller does not pay for
// (unless Paid came first). Once the call's context is done (the client
// left) it is not a failure of the provider: the attempt is counted as
// unpaid for the client's leaving when the body is closed.
func Broke(body io.Reader) {
	if b, ok := body.(*idleBody); ok {
		b.report(obs.ReasonCut, obs.UnbilledCut, false)
	}
}

// Empty reports the answer body of Do as read whole with nothing in it,
// and set aside: a failed attempt (a cut, for the failures' count) that
// the provider may bill, reported as Broke does.
func Empty(body io.Reader) {
	if b, ok := body.(*idleBody); ok {
		b.report(obs.ReasonCut, obs.UnbilledEmpty, false)
	}
}

// Stalled reports the answer body of Do as ended by the caller's own
// clock: the provider sent too little in time. It is reported though that
// clock cancelled the call's context, and counts as an attempt that timed
// out.
func Stalled(body io.Reader) {
	if b, ok := body.(*idleBody); ok {
		b.report(obs.ReasonTimeout, obs.UnbilledTimeout, true)
	}
}

// Failed reports the answer body of Do, read under ctx, as failed after
// it began: a timeout when ctx ran out of time, otherwise as Broke does
// (the client's leaving when ctx was cancelled).
func Failed(ctx context.Context, body io.Reader) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		Stalled(body)
		return
	}
	Broke(body)
}

// Paid notes that the caller was charged for the whole answer of body (an
// answer of Do): a failure reported after it is still a failed attempt,
// but not an unpaid one.
func Paid(body io.Reader) {
	if b, ok := body.(*idleBody); ok {
		b.mu.Lock()
		b.paid = true
		b.mu.Unlock()
	}
}

// report reports, once, an answer that failed: for reason (the failures'
// count) and unbilled (the unpaid attempts'). Unless always, a failure
// reported once the call's context is done (the client left, or the
// caller's own clock cancelled it) is left to Close. A timeout counts
// against the call's time-outs.
func (b *idleBody) report(reason, unbilled string, always bool) {
	if b.rec == nil { // a body made outside Do
		return
	}
	b.mu.Lock()
	first := !b.cut && !b.closed
	live := always || b.parent.Err() == nil
	paid := b.paid
	switch {
	case first && live:
		b.cut, b.reason = true, reason
	case first:
		b.left = true
	}
	b.mu.Unlock()
	if !first || !live {
		return
	}
	b.rec.Fail(b.provider, reason)
	if reason == obs.ReasonTimeout {
		b.rec.TimedOut()
	}
	if !paid {
		b.rec.Unbilled(b.provider, unbilled)
	}
}

func (b *idleBody) Close() error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	reason := b.reason
	left := first && b.left && !b.cut && !b.paid
	b.mu.Unlock()
	if left {
		b.rec.Unbilled(b.provider, obs.UnbilledClientLeft)
	}
	if first && b.span != nil {
		endAttempt(b.span, b.status, reason)
	}
	if first && b.state != nil {
		b.state.inflight.Add(-1)
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
