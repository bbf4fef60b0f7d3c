// Package alerts sends the alert events the store's outbox holds to their
// webhooks: signed, at least once, retried with backoff until a 2xx, one
// account's events to a webhook in their order.
//
// The outbox is the store's (store.Webhooks), written in the transactions
// that raise the events, so an event is never lost to a crash between its
// cause and its sending. Every node runs a Sender over the shared store; a
// delivery is claimed for one attempt at a time (a lease the length of an
// attempt), so nodes do not send it twice unless one dies mid-attempt.
package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// Headers of a delivery.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the
	// body keyed with the webhook's secret.
	SignatureHeader = "X-Gw-Signature"
	// EventHeader carries the event's type.
	EventHeader = "X-Gw-Event"
	// EventIDHeader carries the event's id: a receiver that has seen it
	// has a repeated delivery.
	EventIDHeader = "X-Gw-Event-Id"
)

// Defaults of a Sender's knobs.
const (
	DefaultPoll     = time.Second
	DefaultTimeout  = 10 * time.Second
	DefaultRetryMin = time.Second
	DefaultRetryMax = 10 * time.Minute
)

// Bounds of a Sender's work.
const (
	// DueBatch is how many due deliveries one look at the outbox takes.
	DueBatch = 64
	// MaxInFlight is how many attempts run at once.
	MaxInFlight = 16
	// LeaseSlack is added to an attempt's time-out for its claim: past
	// it, another node may try the delivery again.
	LeaseSlack = 5 * time.Second
	// maxAnswer is how much of a refusing receiver's answer the delivery
	// log keeps.
	maxAnswer = 256
)

// Sign is the X-Gw-Signature value of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Sender delivers the outbox. Set its fields, then Start; Stop ends it.
type Sender struct {
	// Store holds the webhooks and their outbox.
	Store store.Webhooks
	// Client sends the deliveries; nil: one that follows no redirect.
	Client *http.Client
	// Poll is how often the outbox is read when nothing wakes the
	// sender; Timeout bounds one attempt; RetryMin and RetryMax bound
	// the wait before another attempt, which doubles each time from
	// RetryMin. Zero: the defaults.
	Poll, Timeout, RetryMin, RetryMax time.Duration
	// Log hears of failed attempts; nil: a no-op logger.
	Log *zap.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// OnAttempt, when set, hears of each attempt once it is recorded: d
	// with its outcome (Delivered set, or LastStatus and LastError and
	// the NextAt of the next attempt).
	OnAttempt func(d store.Delivery)

	wake     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	mu       sync.Mutex
	inflight map[int64]bool
	wg       sync.WaitGroup
}

// Start sends in the background until Stop.
func (s *Sender) Start() {
	if s.Client == nil {
		s.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	s.Poll = or(s.Poll, DefaultPoll)
	s.Timeout = or(s.Timeout, DefaultTimeout)
	s.RetryMin = or(s.RetryMin, DefaultRetryMin)
	s.RetryMax = max(or(s.RetryMax, DefaultRetryMax), s.RetryMin)
	s.wake = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	s.inflight = map[int64]bool{}
	go s.run()
}

// or is d, or def when d is not above zero.
func or(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Stop ends the sender: attempts under way are cut short and recorded as
// due again at once, so the next sender (this node's next config, or
// another node) makes them. Nothing leaves the outbox undelivered.
func (s *Sender) Stop() {
	if s.stop == nil {
		return
	}
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// Wake makes the sender read the outbox now rather than at its next
// poll.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// run reads the outbox at each poll or wake, until Stop.
func (s *Sender) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			cancel() // attempts under way end now, to be made again
			s.wg.Wait()
			return
		case <-t.C:
		case <-s.wake:
		}
		s.pass(ctx)
		t.Reset(s.Poll)
	}
}

// pass starts an attempt for each due delivery it can claim, up to
// MaxInFlight at once.
func (s *Sender) pass(ctx context.Context) {
	now := s.now()
	due, err := s.Store.Due(ctx, now, DueBatch)
	if err != nil {
		s.Log.Debug("webhook outbox unread", zap.Error(err))
		return
	}
	for _, d := range due {
		s.mu.Lock()
		busy := s.inflight[d.Seq] || len(s.inflight) >= MaxInFlight
		s.mu.Unlock()
		if busy {
			continue
		}
		ok, err := s.Store.Claim(ctx, &d, now.Add(s.Timeout+LeaseSlack))
		if err != nil {
			s.Log.Debug("webhook delivery unclaimed", zap.Int64("seq", d.Seq), zap.Error(err))
			return
		}
		if !ok {
			continue // another node's
		}
		s.mu.Lock()
		s.inflight[d.Seq] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.attempt(ctx, d)
			s.mu.Lock()
			delete(s.inflight, d.Seq)
			s.mu.Unlock()
			s.Wake() // the account's next event may be due
		}()
	}
}

// attempt sends d once and records how it went: delivered on a 2xx,
// else due again after the backoff of its attempts. What it logs follows
// the record, so a log line is a recorded attempt.
func (s *Sender) attempt(ctx context.Context, d store.Delivery) {
	status, msg := s.send(ctx, &d)
	at, next := s.now(), time.Time{}
	switch {
	case delivered(status):
	case ctx.Err() != nil:
		next, msg = at, "the sender stopped before an answer"
	default:
		next = at.Add(s.Backoff(d.Attempts))
	}
	// The record outlives a stopping sender: its attempt was made.
	if err := s.Store.Attempted(context.WithoutCancel(ctx), d.Seq, at, next, status, msg); err != nil {
		s.Log.Warn("webhook delivery unrecorded; it will be sent again", zap.String("event", d.EventID), zap.Error(err))
		return
	}
	d.LastStatus, d.LastError = status, msg
	if next.IsZero() {
		d.Delivered = &at
	} else {
		d.NextAt = next
	}
	if s.OnAttempt != nil {
		s.OnAttempt(d)
	}
	if d.Delivered != nil {
		s.Log.Info("webhook delivered", zap.String("webhook", d.WebhookID), zap.String("event", d.EventID),
			zap.String("type", d.Type), zap.Int("attempt", d.Attempts))
		return
	}
	s.Log.Warn("webhook delivery failed", zap.String("webhook", d.WebhookID), zap.String("event", d.EventID),
		zap.Int("attempt", d.Attempts), zap.Int("status", status), zap.String("error", msg), zap.Time("next_attempt", next))
}

// send POSTs d's body, signed, and returns the answer's status (0 for
// none) and, unless it is a 2xx, what went wrong.
func (s *Sender) send(ctx context.Context, d *store.Delivery) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(SignatureHeader, Sign(d.Secret, d.Body))
	req.Header.Set(EventHeader, d.Type)
	req.Header.Set(EventIDHeader, d.EventID)
	res, err := s.Client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return 0, fmt.Sprintf("no answer within %s", s.Timeout)
		}
		// The URL's own words (its path may hold a token) stay out of the
		// log: what failed is enough.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err.Error()
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if delivered(res.StatusCode) {
		return res.StatusCode, ""
	}
	msg := fmt.Sprintf("HTTP %d", res.StatusCode)
	if answer = bytes.TrimSpace(answer); len(answer) > 0 {
		// Valid UTF-8 without control or format characters, as the
		// delivery log and a terminal take it.
		msg += ": " + printable.Escape(string(answer))
	}
	return res.StatusCode, msg
}

// Outcomes of an attempt (the outcome label of gw_webhook_attempts_total).
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
)

// Outcome is how the attempt that left d as it is went.
func Outcome(d store.Delivery) string {
	if d.Delivered != nil {
		return OutcomeDelivered
	}
	return OutcomeFailed
}

// UserAgent is the User-Agent of every delivery.
const UserAgent = "caddy-gw-webhooks"

// delivered reports whether a receiver's answer status delivers an event:
// any 2xx.
func delivered(status int) bool { return status >= 200 && status <= 299 }

// Backoff is the wait after a delivery's attempt-th failed attempt:
// RetryMin doubled each attempt after the first, at most RetryMax.
func (s *Sender) Backoff(attempt int) time.Duration {
	d := s.RetryMin
	for i := 1; i < attempt && d < s.RetryMax; i++ {
		d *= 2
	}
	return min(d, s.RetryMax)
}
