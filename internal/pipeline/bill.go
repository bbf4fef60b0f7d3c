package pipeline

import (
	"errors"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Tokens are a call's billed tokens by kind. Input excludes the tokens
// read from or written to the provider's cache, which are counted apart.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// AllInput is every input token: uncached, read from and written to the
// cache.
func (t Tokens) AllInput() int64 { return t.Input + t.CacheRead + t.CacheWrite }

// Bill is one charge of a call: what the ledger records, and what the
// metrics, the access log and the receipt read.
type Bill struct {
	// ID is the ledger id; empty means the call's request id (a second
	// charge of the same call takes another, as <request id>-so).
	ID string
	// Units and Unit are what was billed (tokens, seconds, images, ...).
	Units int64
	Unit  string
	// Model is the concrete model (or service) that served; Alias is the
	// name the client asked for (Model when empty).
	Model, Alias string
	// Routed: the gateway chose Model for the name asked (a chat-style
	// answer's X-Gw-Routed).
	Routed bool
	// Escalated: a stronger model than the one chosen served.
	Escalated bool
	// Lane is the lane a gw-auto call was billed at under lane billing;
	// empty otherwise.
	Lane string
	// Cost is the amount charged: Charge sets it to what the account could
	// still pay, and Shortfall to what the call cost beyond that.
	Cost, Shortfall pricing.Money
	// Tokens are the billed tokens of a call billed by the token.
	Tokens Tokens
	// Receipt names the receipt headers Charge sets from the bill once the
	// charge landed (with the cost charged): for an answer whose headers
	// are not yet sent. NoReceipt leaves them to WriteReceipt.
	Receipt Receipt
}

// Charge settles b into the ledger, records it on the call for the
// metrics, the access log and Invoke's caller, and sets its receipt
// headers when b names them.
// It returns what was charged, which is less than b.Cost when the account
// could not pay it all (the rest is the bill's Shortfall): the receipt,
// the record and every cost field the caller writes show that. A ledger
// id settled before charges nothing new and counts nothing (b.Cost is
// returned, as the receipt of the first settlement showed).
func (c *Call) Charge(b Bill) (charged pricing.Money, err error) {
	if c.hold == nil || c.hold.Done() {
		return 0, errors.New("pipeline: settle without a reservation")
	}
	id := b.ID
	if id == "" {
		id = c.RequestID
	}
	e := store.Entry{RequestID: id, Endpoint: c.Endpoint.Name, KeyID: c.Key.ID,
		Model: b.Model, Units: b.Units, Unit: b.Unit, Cost: b.Cost, InputTokens: b.Tokens.AllInput(), OutputTokens: b.Tokens.Output}
	ok, err := c.hold.Settle(c.R.Context(), &e)
	if err != nil {
		return 0, err
	}
	if ok {
		b.Cost, b.Shortfall = e.Cost, e.Shortfall
		c.bills = append(c.bills, b)
	}
	if b.Receipt != NoReceipt {
		c.WriteReceipt(b)
	}
	return b.Cost, nil
}

// Bills are the charges the call made so far.
func (c *Call) Bills() []Bill { return c.bills }

// CacheHit marks the call as answered from a cache.
func (c *Call) CacheHit() { c.cacheHit = true }
