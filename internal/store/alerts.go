package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Alert event types: what a webhook subscribes to.
const (
	// EventCapThreshold: a charge took a cap's spend to 50, 80 or 100 %
	// of the cap, for the first time in the cap's period.
	EventCapThreshold = "cap.threshold"
	// EventBalanceLow: a charge took a prepaid balance below the
	// account's low-balance mark.
	EventBalanceLow = "balance.low"
	// EventKeyRevoked: a key was revoked.
	EventKeyRevoked = "key.revoked"
)

// EventTypes lists every alert event type, in the order the docs give
// them.
var EventTypes = []string{EventCapThreshold, EventBalanceLow, EventKeyRevoked}

// Thresholds are the percentages of a cap whose first crossing in a
// period raises a cap.threshold event.
var Thresholds = []int{50, 80, 100}

// Caps an alert names (its Cap): the refusal code of the cap, so an
// alert and the 402 it warns of name it alike.
const (
	CapDaily      = gwerr.CodeDailyCap
	CapMonthly    = gwerr.CodeMonthlyCap
	CapKeyDaily   = gwerr.CodeKeyDailyCap
	CapKeyMonthly = gwerr.CodeKeyMonthlyCap
	CapKeyTotal   = gwerr.CodeKeyTotalCap
	CapOrgDaily   = gwerr.CodeOrgDailyCap
	CapOrgMonthly = gwerr.CodeOrgMonthlyCap
)

// An event's id: this prefix and hex characters of a hash of what makes
// it one event.
const (
	eventIDPrefix   = "evt_"
	eventIDHexChars = 32
)

// Event is an alert: what a webhook is sent, as JSON, signed. Its ID is
// derived from what makes it one event (a threshold of a cap in a period,
// a charge that took a balance low, a revoked key), so raising it again
// is a no-op: each threshold is sent once per period.
type Event struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Time      time.Time      `json:"time"`
	Account   string         `json:"account,omitempty"`
	KeyID     string         `json:"key_id,omitempty"`
	Org       string         `json:"org,omitempty"`
	Cap       string         `json:"cap,omitempty"`
	Threshold int            `json:"threshold,omitempty"`
	Spend     *pricing.Money `json:"spend_usd,omitempty"`
	Limit     *pricing.Money `json:"limit_usd,omitempty"`
	Balance   *pricing.Money `json:"balance_usd,omitempty"`
}

// eventID is the id of the event that what names.
func eventID(what ...string) string {
	h := sha256.New()
	for _, w := range what {
		h.Write([]byte(w))
		h.Write([]byte{0})
	}
	return eventIDPrefix + hex.EncodeToString(h.Sum(nil))[:eventIDHexChars]
}

// Body is the event as a webhook receives it.
func (ev *Event) Body() []byte {
	b, _ := json.Marshal(ev) // plain strings, numbers and times: never fails
	return b
}

// ThresholdAt is the spend at which pct percent of limit is reached:
// limit·pct/100 rounded up, worked out without overflow for any cap.
func ThresholdAt(limit pricing.Money, pct int) pricing.Money {
	q, r := limit/100, limit%100
	p := pricing.Money(pct)
	return q*p + (r*p+99)/100
}

// Alerts gathers the events a settlement raises, in the order raised.
// Its zero value is ready; a backend fills it while it charges and
// stores it in the same transaction (see SQL.Raise).
type Alerts struct {
	Events []Event
}

// Capped is who a cap bounds, as its alerts name it: the account whose
// charge crossed it, and the key or the organization when the cap is
// theirs.
type Capped struct {
	Account, KeyID, Org string
}

// scope names whose cap it is: an organization's, a key's or the
// account's.
func (c Capped) scope() string {
	switch {
	case c.Org != "":
		return "org:" + c.Org
	case c.KeyID != "":
		return "key:" + c.KeyID
	}
	return c.Account
}

// Cap raises a cap.threshold event for every threshold of limit (nil: no
// cap) that a charge of cost, made at, crossed: spend before it was below
// the threshold, spend after it at or above. period is the first instant
// of the cap's period (the zero time for a cap over all time).
func (al *Alerts) Cap(who Capped, capName string, limit *pricing.Money, before, cost pricing.Money, at, period time.Time) {
	if limit == nil || cost <= 0 {
		return
	}
	after := before + cost
	for _, pct := range Thresholds {
		th := ThresholdAt(*limit, pct)
		if before >= th || after < th {
			continue
		}
		al.Events = append(al.Events, Event{
			ID:   eventID(EventCapThreshold, who.scope(), capName, strconv.Itoa(pct), strconv.FormatInt(period.UnixNano(), 10)),
			Type: EventCapThreshold, Time: at.UTC(), Account: who.Account, KeyID: who.KeyID, Org: who.Org,
			Cap: capName, Threshold: pct, Spend: CopyMoney(&after), Limit: CopyMoney(limit)})
	}
}

// Charge raises the cap.threshold events of a charge of e.Cost made with
// key (nil: no caps to cross) by an account a of organization org (nil:
// none, or none with caps), whose spends before it were sp, ksp and osp.
func (al *Alerts) Charge(e *Entry, a *Account, sp Spend, key *Key, ksp Spend, org *Org, osp Spend) {
	if e.Cost <= 0 {
		return
	}
	day, _ := DayOf(e.Time)
	month, _ := MonthOf(e.Time)
	who := Capped{Account: e.AccountID}
	al.Cap(who, CapDaily, a.DailyCap, sp.Today, e.Cost, e.Time, day)
	al.Cap(who, CapMonthly, a.MonthlyCap, sp.Month, e.Cost, e.Time, month)
	if key != nil {
		who := Capped{Account: e.AccountID, KeyID: e.KeyID}
		al.Cap(who, CapKeyDaily, key.DailyCap, ksp.Today, e.Cost, e.Time, day)
		al.Cap(who, CapKeyMonthly, key.MonthlyCap, ksp.Month, e.Cost, e.Time, month)
		al.Cap(who, CapKeyTotal, key.TotalCap, ksp.Total, e.Cost, e.Time, time.Time{})
	}
	if org != nil && a.Org != "" {
		who := Capped{Account: e.AccountID, Org: a.Org}
		al.Cap(who, CapOrgDaily, org.DailyCap, osp.Today, e.Cost, e.Time, day)
		al.Cap(who, CapOrgMonthly, org.MonthlyCap, osp.Month, e.Cost, e.Time, month)
	}
}

// Balance raises a balance.low event when a charge (request id) took
// account's prepaid balance from before to after across its low-balance
// mark low (nil: none): before at or above it, after below.
func (al *Alerts) Balance(account, requestID string, low *pricing.Money, before, after pricing.Money, at time.Time) {
	if low == nil || before < *low || after >= *low {
		return
	}
	al.Events = append(al.Events, Event{ID: eventID(EventBalanceLow, account, requestID), Type: EventBalanceLow,
		Time: at.UTC(), Account: account, Balance: CopyMoney(&after), Limit: CopyMoney(low)})
}

// KeyRevoked is the key.revoked event of key k, revoked at.
func KeyRevoked(k *Key, at time.Time) Event {
	return Event{ID: eventID(EventKeyRevoked, k.ID), Type: EventKeyRevoked, Time: at.UTC(), Account: k.AccountID, KeyID: k.ID}
}

// Webhook is a subscription to alert events: each event of its Events is
// POSTed to URL, signed with Secret.
type Webhook struct {
	ID     string
	URL    string
	Secret string
	Events []string
	// CreatedAt is when it was made.
	CreatedAt time.Time
}

// Delivery is an event on its way to one webhook: a row of the outbox,
// and once delivered a line of the webhook's delivery log.
type Delivery struct {
	// Seq orders the outbox: one account's events reach a webhook in
	// this order.
	Seq       int64
	WebhookID string
	EventID   string
	Type      string
	Account   string
	Body      []byte
	CreatedAt time.Time
	// NextAt is when it is tried next (pending) or was claimed last.
	NextAt    time.Time
	Attempts  int
	Delivered *time.Time
	// LastStatus is the HTTP status of the last attempt (0: none or no
	// answer) and LastError what went wrong with it ("" for a 2xx).
	LastStatus int
	LastError  string
	// URL and Secret are the webhook's, filled by Due.
	URL, Secret string
}

// Webhooks stores alert subscriptions and the outbox of their events.
// The events themselves are raised by the writes that cause them, in
// their transactions (Settle, DeleteKey), so an event is stored exactly
// when its cause is.
type Webhooks interface {
	// CreateWebhook stores a subscription; ErrExists if the id is taken.
	CreateWebhook(ctx context.Context, w Webhook) error
	// ListWebhooks returns every subscription, oldest first.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// DeleteWebhook deletes a subscription and its outbox; ErrNotFound if
	// none.
	DeleteWebhook(ctx context.Context, id string) error
	// Due returns at most limit deliveries whose time has come, oldest
	// first, each the oldest undelivered one of its webhook and account
	// (so one account's events go out in order).
	Due(ctx context.Context, now time.Time, limit int) ([]Delivery, error)
	// Claim takes d for one attempt until lease: false when another
	// claimed or settled it since Due read it.
	Claim(ctx context.Context, d *Delivery, lease time.Time) (bool, error)
	// Attempted records an attempt's end: delivered at when next is the
	// zero time, else tried again at next. status and msg are what the
	// receiver answered.
	Attempted(ctx context.Context, seq int64, at, next time.Time, status int, msg string) error
	// Deliveries returns a webhook's deliveries, newest first, at most
	// limit; ErrNotFound if no such webhook.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error)
}
