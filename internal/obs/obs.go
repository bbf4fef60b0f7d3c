// Package obs carries what a call learns about its upstream attempts from
// the upstream client back to the pipeline: the time spent waiting on
// providers, each attempt that failed, each attempt the provider may bill
// that the caller does not pay for, and how many attempts timed out.
package obs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Reasons an upstream attempt failed, as the metrics label them.
const (
	ReasonStatus4xx = "status_4xx" // the provider answered 4xx (not 429)
	ReasonStatus429 = "status_429" // the provider rate limited
	ReasonStatus5xx = "status_5xx" // the provider answered 5xx, or any other non-2xx status
	ReasonTimeout   = "timeout"    // no answer in time
	ReasonConnect   = "connect"    // the provider could not be reached
	ReasonCut       = "cut"        // the answer broke off midway
)

// Reasons an attempt that reached the provider, which may bill it, is not
// paid for by the caller, as the metrics label them.
const (
	// UnbilledTimeout: no answer came in time after the request was sent
	// (its headers within the header time-out, or the caller's own
	// deadline), or a begun answer fell silent past the idle time-out.
	UnbilledTimeout = "timeout"
	// UnbilledCut: the answer began and broke off, or could not be served,
	// before the caller got it whole (a stream that delivered part of it is
	// billed for that part at most).
	UnbilledCut = "cut"
	// UnbilledEmpty: the answer came whole with nothing in it and was set
	// aside (a stronger model may be tried).
	UnbilledEmpty = "empty"
	// UnbilledClientLeft: the client left, after the request was sent and
	// before its answer was settled.
	UnbilledClientLeft = "client_left"
)

// Record is one call's account of its upstream attempts. Its methods are
// safe for concurrent use and do nothing on a nil Record.
type Record struct {
	upstream atomic.Int64 // nanoseconds spent waiting on providers
	mu       sync.Mutex
	served   string // the provider of the last attempt answered
	// timeouts counts the attempts that timed out (on the outermost
	// record: see TimedOut).
	timeouts atomic.Int32
	// Reporter, when set, is told of each failed attempt and of each
	// attempt left unpaid.
	Reporter Reporter
	// Parent is the record of the call this one runs inside, which waits
	// as long as it does.
	Parent *Record
	// Span is the call's span, the parent of its attempts' spans (a no-op
	// span when the call is not traced); nil: the context's.
	Span trace.Span
	// Owner is what the host of the call keeps with its record.
	Owner any
}

// Reporter is told of each failed attempt (the provider's name and one of
// the Reason constants) and of each attempt the provider may bill that the
// caller does not pay for (the provider's name and one of the Unbilled
// constants).
type Reporter interface {
	UpstreamFailed(provider, reason string)
	UpstreamUnbilled(provider, reason string)
}

// Funcs is a Reporter of two functions; a nil one is not called.
type Funcs struct {
	Failed, Unbilled func(provider, reason string)
}

// UpstreamFailed implements Reporter.
func (f Funcs) UpstreamFailed(provider, reason string) {
	if f.Failed != nil {
		f.Failed(provider, reason)
	}
}

// UpstreamUnbilled implements Reporter.
func (f Funcs) UpstreamUnbilled(provider, reason string) {
	if f.Unbilled != nil {
		f.Unbilled(provider, reason)
	}
}

type ctxKey struct{}

// With returns ctx carrying rec.
func With(ctx context.Context, rec *Record) context.Context {
	return context.WithValue(ctx, ctxKey{}, rec)
}

// From returns the Record ctx carries, or nil.
func From(ctx context.Context) *Record {
	rec, _ := ctx.Value(ctxKey{}).(*Record)
	return rec
}

// Waited adds d to the time spent waiting on providers.
func (r *Record) Waited(d time.Duration) {
	for ; r != nil; r = r.Parent {
		r.upstream.Add(int64(d))
	}
}

// Upstream is the time spent waiting on providers so far.
func (r *Record) Upstream() time.Duration {
	if r == nil {
		return 0
	}
	return time.Duration(r.upstream.Load())
}

// Served notes that provider answered an attempt with a success, for this
// call and the calls it runs inside.
func (r *Record) Served(provider string) {
	for ; r != nil; r = r.Parent {
		r.mu.Lock()
		r.served = provider
		r.mu.Unlock()
	}
}

// Provider is the provider that last answered an attempt with a success,
// or "".
func (r *Record) Provider() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

// Fail reports a failed attempt on provider for reason; an empty reason
// (the client left) is none.
func (r *Record) Fail(provider, reason string) {
	if r != nil && r.Reporter != nil && reason != "" {
		r.Reporter.UpstreamFailed(provider, reason)
	}
}

// Unbilled reports an attempt on provider that the provider may bill and
// the caller does not pay for, for reason (one of the Unbilled
// constants); an empty reason is none.
func (r *Record) Unbilled(provider, reason string) {
	if r != nil && r.Reporter != nil && reason != "" {
		r.Reporter.UpstreamUnbilled(provider, reason)
	}
}

// outermost is the record of the call r runs inside, or r.
func (r *Record) outermost() *Record {
	for r.Parent != nil {
		r = r.Parent
	}
	return r
}

// TimedOut counts an attempt of the call that timed out. A call made
// inside another (Parent) counts on the outer call's record: the client
// made one call, and its attempts share one count.
func (r *Record) TimedOut() {
	if r != nil {
		r.outermost().timeouts.Add(1)
	}
}

// Timeouts is how many attempts timed out so far, in the client's call
// (the outermost record) and every call made inside it.
func (r *Record) Timeouts() int {
	if r == nil {
		return 0
	}
	return int(r.outermost().timeouts.Load())
}
