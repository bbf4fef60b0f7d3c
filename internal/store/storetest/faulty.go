// Package storetest has test doubles for the store.
package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// ErrDown is what a Faulty store answers while it is down.
var ErrDown = errors.New("storetest: store down")

// Faulty wraps a store. While Down is set, the calls its Fail mask selects
// fail with ErrDown (Fail zero: every call).
type Faulty struct {
	store.Store
	Down atomic.Bool
	// Fail selects which calls fail while Down; zero means all.
	Fail Ops
}

// Ops is a set of store operations.
type Ops uint

// Store operations that a Faulty store can fail.
const (
	OpKeys    Ops = 1 << iota // KeyByHash and the other key calls
	OpAccount                 // Account and Org
	OpSpend                   // Spend, KeySpend and OrgSpend
	OpSettle
)

func (f *Faulty) failing(op Ops) bool {
	return f.Down.Load() && (f.Fail == 0 || f.Fail&op != 0)
}

func (f *Faulty) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if f.failing(OpKeys) {
		return store.Key{}, ErrDown
	}
	return f.Store.KeyByHash(ctx, hash)
}

func (f *Faulty) Key(ctx context.Context, id string) (store.Key, error) {
	if f.failing(OpKeys) {
		return store.Key{}, ErrDown
	}
	return f.Store.Key(ctx, id)
}

func (f *Faulty) Account(ctx context.Context, id string) (store.Account, error) {
	if f.failing(OpAccount) {
		return store.Account{}, ErrDown
	}
	return f.Store.Account(ctx, id)
}

func (f *Faulty) Spend(ctx context.Context, id string, now time.Time) (store.Spend, error) {
	if f.failing(OpSpend) {
		return store.Spend{}, ErrDown
	}
	return f.Store.Spend(ctx, id, now)
}

func (f *Faulty) KeySpend(ctx context.Context, keyID string, now time.Time) (store.Spend, error) {
	if f.failing(OpSpend) {
		return store.Spend{}, ErrDown
	}
	return f.Store.KeySpend(ctx, keyID, now)
}

func (f *Faulty) Org(ctx context.Context, id string) (store.Org, error) {
	if f.failing(OpAccount) {
		return store.Org{}, ErrDown
	}
	return f.Store.Org(ctx, id)
}

func (f *Faulty) OrgSpend(ctx context.Context, orgID string, now time.Time) (store.Spend, error) {
	if f.failing(OpSpend) {
		return store.Spend{}, ErrDown
	}
	return f.Store.OrgSpend(ctx, orgID, now)
}

func (f *Faulty) Settle(ctx context.Context, e *store.Entry) (bool, error) {
	if f.failing(OpSettle) {
		return false, ErrDown
	}
	return f.Store.Settle(ctx, e)
}

func (f *Faulty) Ping(ctx context.Context) error {
	if f.Down.Load() {
		return ErrDown
	}
	return f.Store.Ping(ctx)
}
