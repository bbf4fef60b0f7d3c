// Package gwtest builds what the gateway's in-process tests run on: a
// store (SQLite in the test's temporary folder, behind the hot path's
// cache or a storetest.Faulty when asked), an account with a key, and a
// pipeline.Gateway with its money gate and rate budgets over that store.
package gwtest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
)

// Default names of the account and key New creates.
const (
	AccountID = "a"
	KeyID     = "k"
)

// Options say how New builds a Fixture; the zero value is a paid, cleared
// account "a" with key "k" on SQLite, under an empty catalogue.
type Options struct {
	// Catalog is the gateway's catalogue; nil is an empty one.
	Catalog *catalog.Catalog
	// Account is the account New creates with key "k": an empty ID is
	// "a", an empty Plan paid and cleared.
	Account store.Account
	// Cached puts the hot path's store (accounts, keys and totals in
	// memory, charges group-committed) in front of SQLite.
	Cached bool
	// Faulty wraps the store in a storetest.Faulty the test can take down
	// (Fixture.Faulty).
	Faulty bool
	// Now is the clock of the gateway, its money gate and its rate
	// budgets; nil is time.Now.
	Now func() time.Time
}

// Fixture is a gateway over a store holding one account with a key.
type Fixture struct {
	// DB is the SQLite store underneath.
	DB *sqlite.DB
	// Store is what the gateway uses: DB, the cache in front of it, or
	// Faulty.
	Store store.Store
	// Faulty is Store when Options.Faulty asked for it, else nil.
	Faulty *storetest.Faulty
	// Gateway serves calls over Store.
	Gateway *pipeline.Gateway
	// Account is the account New created, Key the secret of its key.
	Account store.Account
	Key     string
}

// New builds the fixture o describes; the test's end closes it.
func New(tb testing.TB, o Options) *Fixture {
	tb.Helper()
	db, err := sqlite.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	f := &Fixture{DB: db, Store: db}
	if o.Cached {
		c, err := cached.New(db, tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		f.Store = c
	}
	if o.Faulty {
		f.Faulty = &storetest.Faulty{Store: f.Store}
		f.Store = f.Faulty
	}
	cat := o.Catalog
	if cat == nil {
		if cat, err = catalog.New(nil, nil, nil, nil, ""); err != nil {
			tb.Fatal(err)
		}
	}
	f.Gateway = &pipeline.Gateway{Store: f.Store, Catalog: cat, Logger: zap.NewNop(), Now: o.Now,
		Money: &money.Gate{Store: f.Store, Locks: money.NewMemoryLocks(), Now: o.Now}, Limits: limits.NewMemory(o.Now)}
	f.Account = o.Account
	if f.Account.ID == "" {
		f.Account.ID = AccountID
	}
	if f.Account.Plan == "" {
		f.Account.Plan, f.Account.Cleared = store.PlanPaid, true
	}
	f.AddAccount(tb, f.Account)
	f.Key = f.AddKey(tb, store.Key{ID: KeyID, AccountID: f.Account.ID})
	return f
}

// AddAccount creates a, failing the test when the store refuses it.
func (f *Fixture) AddAccount(tb testing.TB, a store.Account) {
	tb.Helper()
	if err := f.Store.CreateAccount(context.Background(), a); err != nil {
		tb.Fatal(err)
	}
}

// AddKey issues k with a new secret (its Hash is set) and returns the
// secret, failing the test when the store refuses it.
func (f *Fixture) AddKey(tb testing.TB, k store.Key) string {
	tb.Helper()
	secret, err := store.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	k.Hash = store.HashSecret(secret)
	if err := f.Store.CreateKey(context.Background(), k); err != nil {
		tb.Fatal(err)
	}
	return secret
}
