// Package bodyrate ends request bodies that arrive too slowly. A client
// gets Grace to start; from then on its body must have arrived at MinRate
// bytes a second on average, counted from the first read, or the read
// ends with ErrTooSlow. The rule is the connection's read deadline
// (http.ResponseController), moved on by every byte received, so a client
// that stalls is cut off at the deadline, not at its next byte, and one
// connection can no longer be held open by a body trickled a byte at a
// time. Every endpoint reads its body through it: JSON bodies and
// multipart uploads alike.
package bodyrate

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Defaults of Limits.
const (
	// DefaultGrace is how long any body may take before the rate counts.
	DefaultGrace = 10 * time.Second
	// DefaultMinRate is the least average rate of a body, in bytes a
	// second, once the grace has passed.
	DefaultMinRate = 1 << 10
)

// Limits is the rule a body is read under.
type Limits struct {
	// Grace is how long a body may take before MinRate counts
	// (DefaultGrace when 0).
	Grace time.Duration
	// MinRate is the least average rate, in bytes a second since the
	// first read (DefaultMinRate when 0).
	MinRate int64
}

func (l Limits) withDefaults() Limits {
	if l.Grace <= 0 {
		l.Grace = DefaultGrace
	}
	if l.MinRate <= 0 {
		l.MinRate = DefaultMinRate
	}
	return l
}

// ErrTooSlow is what a read returns once the body has fallen behind the
// rule.
var ErrTooSlow = errors.New("the request body arrived too slowly")

// Body is a request body read under Limits.
type Body struct {
	io.ReadCloser
	rc *http.ResponseController
	l  Limits
	// latest is the server's own deadline for the request (its
	// ReadTimeout), which the rule never moves later; zero when none.
	latest time.Time
	start  time.Time
	n      int64
	// over: the rule no longer applies (end of body, an error, or a
	// connection without read deadlines).
	over bool
	slow atomic.Bool
}

// Wrap replaces r.Body with a Body reading under l and returns it (nil
// for a request without a body).
func Wrap(w http.ResponseWriter, r *http.Request, l Limits) *Body {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &Body{ReadCloser: r.Body, rc: http.NewResponseController(w), l: l.withDefaults()}
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 {
		b.latest = time.Now().Add(srv.ReadTimeout)
	}
	r.Body = b
	return b
}

// Read reads under the rule: the connection's read deadline is the start
// plus the grace plus the time the bytes so far are allowed at MinRate.
func (b *Body) Read(p []byte) (int, error) {
	if b.slow.Load() {
		return 0, ErrTooSlow
	}
	if b.over {
		return b.ReadCloser.Read(p)
	}
	if b.start.IsZero() {
		b.start = time.Now()
	}
	allowed := time.Duration(float64(b.n) / float64(b.l.MinRate) * float64(time.Second))
	deadline := b.start.Add(b.l.Grace + allowed)
	if !b.latest.IsZero() && deadline.After(b.latest) {
		deadline = b.latest
	}
	if err := b.rc.SetReadDeadline(deadline); err != nil {
		b.over = true // this connection has no read deadline to set
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err == nil {
		return n, nil
	}
	b.over = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The connection stays past its deadline: the server then
		// closes it rather than wait for the rest of the body.
		b.slow.Store(true)
		return n, ErrTooSlow
	}
	// The end of the body (or a broken connection): the deadline ends with
	// it, so no later read of the connection is held to the body's rule.
	_ = b.rc.SetReadDeadline(time.Time{})
	return n, err
}

// TooSlow reports whether the body fell behind the rule (b may be nil).
func (b *Body) TooSlow() bool { return b != nil && b.slow.Load() }

// Rule returns the limits b reads under, defaults applied.
func (b *Body) Rule() Limits { return b.l }
