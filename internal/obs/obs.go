// Package obs carries what a call learns about its upstream attempts from
// the upstream client back to the pipeline: the time spent waiting on
// providers and each attempt that failed.
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

// Record is one call's account of its upstream attempts. Its methods are
// safe for concurrent use and do nothing on a nil Record.
type Record struct {
	upstream atomic.Int64 // nanoseconds spent waiting on providers
	mu       sync.Mutex
	served   string // the provider of the last attempt answered
	// Failed, when set, is told of each failed attempt.
	Failed Reporter
	// Parent is the record of the call this one runs inside, which waits
	// as long as it does.
	Parent *Record
	// Span is the call's span, the parent of its attempts' spans (a no-op
	// span when the call is not traced); nil: the context's.
	Span trace.Span
	// Owner is what the host of the call keeps with its record.
	Owner any
}

// Reporter is told of each failed attempt: the provider's name and one of
// the Reason constants.
type Reporter interface {
	UpstreamFailed(provider, reason string)
}

// ReporterFunc is a Reporter of a function.
type ReporterFunc func(provider, reason string)

// UpstreamFailed implements Reporter.
func (f ReporterFunc) UpstreamFailed(provider, reason string) { f(provider, reason) }

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
	if r != nil && r.Failed != nil && reason != "" {
		r.Failed.UpstreamFailed(provider, reason)
	}
}
