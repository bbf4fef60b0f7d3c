package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func open(t *testing.T) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dir
}

func mp(m pricing.Money) *pricing.Money { return &m }

func tp(t time.Time) *time.Time { return &t }

// fixed is a time with nanoseconds, to check exact round-trips.
var fixed = time.Date(2025, 6, 15, 12, 34, 56, 123456789, time.UTC)

func mustCreateAccount(t *testing.T, db *DB, a store.Account) {
	t.Helper()
	if err := db.CreateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// equalAccount compares accounts with time.Time.Equal for CreatedAt.
func equalAccount(t *testing.T, got, want store.Account) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("account =\n %s\nwant\n %s", dumpAccount(got), dumpAccount(want))
	}
}

func dumpAccount(a store.Account) string {
	p := func(m *pricing.Money) string {
		if m == nil {
			return "nil"
		}
		return m.String()
	}
	ab := "nil"
	if a.Abilities != nil {
		ab = fmt.Sprintf("%q", a.Abilities)
	}
	return fmt.Sprintf("{ID:%s Plan:%s Cleared:%v PAYG:%v Lane:%v Balance:%s Daily:%s Monthly:%s Abilities:%s}",
		a.ID, a.Plan, a.Cleared, a.PAYG, a.LaneBilling, p(a.Balance), p(a.DailyCap), p(a.MonthlyCap), ab)
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	tests := []struct {
		name string
		dir  string
	}{
		{"existing", base},
		{"nested new", filepath.Join(base, "a", "b", "c")},
		{"odd characters", filepath.Join(base, "sp ace?q#h%25x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(tt.dir, FileName)); err != nil {
				t.Fatalf("database file: %v", err)
			}
			var mode string
			if err := db.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode = %q, %v; want wal", mode, err)
			}
			for name, pool := range map[string]*sql.DB{"writer": db.w, "reader": db.r} {
				var fk, busy int
				if err := pool.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
					t.Errorf("%s foreign_keys = %d, %v", name, fk, err)
				}
				if err := pool.QueryRow("PRAGMA busy_timeout").Scan(&busy); err != nil || busy != 5000 {
					t.Errorf("%s busy_timeout = %d, %v", name, busy, err)
				}
			}
		})
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestReaderIsReadOnly(t *testing.T) {
	db, _ := open(t)
	if _, err := db.r.Exec(`INSERT INTO accounts (id, plan, created_at) VALUES ('x', 'free', 0)`); err == nil {
		t.Error("write through the read pool succeeded")
	}
}

func TestAccountCreateGet(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	tests := []struct {
		name string
		a    store.Account
	}{
		{"minimal", store.Account{ID: "acct_min", Plan: store.PlanFree, CreatedAt: fixed}},
		{"all fields", store.Account{
			ID: "acct_all", Plan: store.PlanPaid, Cleared: true, PAYG: true, LaneBilling: true,
			Balance: mp(pricing.USD(12) + 345), DailyCap: mp(pricing.USD(5)), MonthlyCap: mp(pricing.USD(100)),
			Abilities: []string{store.AbilitySearch, store.AbilityFetch}, CreatedAt: fixed,
		}},
		{"zero money is not nil", store.Account{
			ID: "acct_zero", Plan: store.PlanPaid, Balance: mp(0), DailyCap: mp(0), MonthlyCap: mp(0), CreatedAt: fixed,
		}},
		{"negative balance", store.Account{ID: "acct_neg", Plan: store.PlanPaid, Balance: mp(-pricing.Micro(7)), CreatedAt: fixed}},
		{"abilities empty", store.Account{ID: "acct_none", Plan: store.PlanFree, Abilities: []string{}, CreatedAt: fixed}},
		{"abilities all", store.Account{ID: "acct_every", Plan: store.PlanFree, Abilities: store.AllAbilities, CreatedAt: fixed}},
		{"non-UTC created", store.Account{ID: "acct_tz", Plan: store.PlanFree, CreatedAt: fixed.In(time.FixedZone("X", 5*3600))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.CreateAccount(ctx, tt.a); err != nil {
				t.Fatal(err)
			}
			got, err := db.Account(ctx, tt.a.ID)
			if err != nil {
				t.Fatal(err)
			}
			equalAccount(t, got, tt.a)
			if got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt location = %v, want UTC", got.CreatedAt.Location())
			}
			if (got.Abilities == nil) != (tt.a.Abilities == nil) {
				t.Errorf("Abilities nil = %v, want %v", got.Abilities == nil, tt.a.Abilities == nil)
			}

			err = db.CreateAccount(ctx, store.Account{ID: tt.a.ID, Plan: store.PlanFree})
			if !errors.Is(err, store.ErrExists) {
				t.Errorf("second create: err = %v, want ErrExists", err)
			}
			again, err := db.Account(ctx, tt.a.ID)
			if err != nil {
				t.Fatal(err)
			}
			equalAccount(t, again, tt.a)
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := db.Account(ctx, "acct_missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("zero CreatedAt set to now", func(t *testing.T) {
		before := time.Now()
		mustCreateAccount(t, db, store.Account{ID: "acct_now", Plan: store.PlanFree})
		a, err := db.Account(ctx, "acct_now")
		if err != nil {
			t.Fatal(err)
		}
		if a.CreatedAt.Before(before) || a.CreatedAt.After(time.Now()) {
			t.Errorf("CreatedAt = %v, want about now", a.CreatedAt)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		if err := db.CreateAccount(ctx, store.Account{Plan: store.PlanFree}); err == nil {
			t.Error("created an account without id")
		}
	})
	t.Run("time out of range", func(t *testing.T) {
		err := db.CreateAccount(ctx, store.Account{ID: "acct_far", CreatedAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err == nil {
			t.Error("stored a time beyond 2262")
		}
	})
}

func TestUpdateAccount(t *testing.T) {
	ctx := context.Background()
	base := store.Account{
		ID: "acct_1", Plan: store.PlanFree,
		Balance: mp(pricing.USD(10)), DailyCap: mp(pricing.USD(1)), MonthlyCap: nil,
		Abilities: nil, CreatedAt: fixed,
	}
	tests := []struct {
		name string
		fn   func(*store.Account) error
		want func(store.Account) store.Account // from base
	}{
		{
			name: "flags and plan",
			fn: func(a *store.Account) error {
				a.Plan, a.Cleared, a.PAYG, a.LaneBilling = store.PlanPaid, true, true, true
				return nil
			},
			want: func(a store.Account) store.Account {
				a.Plan, a.Cleared, a.PAYG, a.LaneBilling = store.PlanPaid, true, true, true
				return a
			},
		},
		{
			name: "money non-nil to nil and nil to non-nil",
			fn: func(a *store.Account) error {
				a.Balance, a.DailyCap, a.MonthlyCap = nil, nil, mp(pricing.USD(50))
				return nil
			},
			want: func(a store.Account) store.Account {
				a.Balance, a.DailyCap, a.MonthlyCap = nil, nil, mp(pricing.USD(50))
				return a
			},
		},
		{
			name: "money changed in place",
			fn: func(a *store.Account) error {
				*a.Balance += pricing.Micro(1)
				return nil
			},
			want: func(a store.Account) store.Account {
				a.Balance = mp(pricing.USD(10) + pricing.Micro(1))
				return a
			},
		},
		{
			name: "abilities nil to empty",
			fn:   func(a *store.Account) error { a.Abilities = []string{}; return nil },
			want: func(a store.Account) store.Account { a.Abilities = []string{}; return a },
		},
		{
			name: "abilities nil to list",
			fn:   func(a *store.Account) error { a.Abilities = []string{store.AbilityImages}; return nil },
			want: func(a store.Account) store.Account { a.Abilities = []string{store.AbilityImages}; return a },
		},
		{
			name: "id and created_at changes ignored",
			fn: func(a *store.Account) error {
				a.ID, a.CreatedAt, a.Plan = "acct_other", time.Unix(0, 0), store.PlanPaid
				return nil
			},
			want: func(a store.Account) store.Account { a.Plan = store.PlanPaid; return a },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := open(t)
			mustCreateAccount(t, db, base)
			want := tt.want(base)
			got, err := db.UpdateAccount(ctx, base.ID, tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			equalAccount(t, got, want)
			stored, err := db.Account(ctx, base.ID)
			if err != nil {
				t.Fatal(err)
			}
			equalAccount(t, stored, want)
			if (stored.Abilities == nil) != (want.Abilities == nil) {
				t.Errorf("stored Abilities nil = %v, want %v", stored.Abilities == nil, want.Abilities == nil)
			}
			if _, err := db.Account(ctx, "acct_other"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("account under the changed id: err = %v, want ErrNotFound", err)
			}
		})
	}

	t.Run("empty abilities back to nil", func(t *testing.T) {
		db, _ := open(t)
		a := base
		a.Abilities = []string{}
		mustCreateAccount(t, db, a)
		got, err := db.UpdateAccount(ctx, a.ID, func(a *store.Account) error { a.Abilities = nil; return nil })
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := db.Account(ctx, a.ID)
		if got.Abilities != nil || stored.Abilities != nil {
			t.Errorf("Abilities = %#v / stored %#v, want nil", got.Abilities, stored.Abilities)
		}
	})
	t.Run("fn error aborts", func(t *testing.T) {
		db, _ := open(t)
		mustCreateAccount(t, db, base)
		boom := errors.New("boom")
		_, err := db.UpdateAccount(ctx, base.ID, func(a *store.Account) error {
			a.Balance = nil
			a.Plan = store.PlanPaid
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		stored, _ := db.Account(ctx, base.ID)
		equalAccount(t, stored, base)
	})
	t.Run("not found", func(t *testing.T) {
		db, _ := open(t)
		called := false
		_, err := db.UpdateAccount(ctx, "acct_missing", func(*store.Account) error { called = true; return nil })
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if called {
			t.Error("fn called for a missing account")
		}
	})
	t.Run("concurrent increments", func(t *testing.T) {
		db, _ := open(t)
		mustCreateAccount(t, db, store.Account{ID: "acct_c", Plan: store.PlanPaid, Balance: mp(0)})
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				_, err := db.UpdateAccount(ctx, "acct_c", func(a *store.Account) error {
					*a.Balance += pricing.USD(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		a, _ := db.Account(ctx, "acct_c")
		if *a.Balance != pricing.USD(30) {
			t.Errorf("balance = %s, want 30.00 (lost update)", a.Balance)
		}
	})
}

func equalKey(t *testing.T, got, want store.Key) {
	t.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	switch {
	case (got.ExpiresAt == nil) != (want.ExpiresAt == nil):
		t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, want.ExpiresAt)
	case got.ExpiresAt != nil && !got.ExpiresAt.Equal(*want.ExpiresAt):
		t.Errorf("ExpiresAt = %v, want %v", *got.ExpiresAt, *want.ExpiresAt)
	}
	if (got.Models == nil) != (want.Models == nil) {
		t.Errorf("Models nil = %v, want %v", got.Models == nil, want.Models == nil)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	got.ExpiresAt, want.ExpiresAt = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("key = %+v, want %+v", got, want)
	}
}

func TestKeys(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	mustCreateAccount(t, db, store.Account{ID: "acct_a", Plan: store.PlanFree})
	mustCreateAccount(t, db, store.Account{ID: "acct_b", Plan: store.PlanFree})

	keys := []store.Key{
		{ID: "key_1", AccountID: "acct_a", Name: "first", Hash: store.HashSecret("s1"), CreatedAt: fixed},
		{ID: "key_2", AccountID: "acct_a", Name: "expiring", Hash: store.HashSecret("s2"),
			Models: []string{"gpt-x", "claude-y"}, ExpiresAt: tp(fixed.Add(30 * 24 * time.Hour)), CreatedAt: fixed.Add(time.Second)},
		{ID: "key_3", AccountID: "acct_a", Name: "", Hash: store.HashSecret("s3"),
			Models: []string{}, ExpiresAt: tp(fixed.In(time.FixedZone("Y", -7*3600))), CreatedAt: fixed.Add(time.Nanosecond)},
		{ID: "key_4", AccountID: "acct_b", Name: "other", Hash: store.HashSecret("s4"), CreatedAt: fixed},
	}
	for _, k := range keys {
		if err := db.CreateKey(ctx, k); err != nil {
			t.Fatalf("CreateKey(%s): %v", k.ID, err)
		}
	}

	t.Run("create errors", func(t *testing.T) {
		tests := []struct {
			name string
			k    store.Key
			want error
		}{
			{"duplicate id", store.Key{ID: "key_1", AccountID: "acct_a", Hash: store.HashSecret("new")}, store.ErrExists},
			{"duplicate hash", store.Key{ID: "key_new", AccountID: "acct_b", Hash: store.HashSecret("s2")}, store.ErrExists},
			{"missing account", store.Key{ID: "key_orphan", AccountID: "acct_missing", Hash: store.HashSecret("o")}, store.ErrNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := db.CreateKey(ctx, tt.k); !errors.Is(err, tt.want) {
					t.Errorf("err = %v, want %v", err, tt.want)
				}
				if _, err := db.KeyByHash(ctx, tt.k.Hash); tt.want == store.ErrNotFound && !errors.Is(err, store.ErrNotFound) {
					t.Errorf("orphan key stored: %v", err)
				}
			})
		}
		if err := db.CreateKey(ctx, store.Key{ID: "key_nohash", AccountID: "acct_a"}); err == nil {
			t.Error("created a key without hash")
		}
	})

	t.Run("list oldest first", func(t *testing.T) {
		tests := []struct {
			account string
			want    []store.Key
		}{
			{"acct_a", []store.Key{keys[0], keys[2], keys[1]}},
			{"acct_b", []store.Key{keys[3]}},
			{"acct_missing", []store.Key{}},
		}
		for _, tt := range tests {
			got, err := db.Keys(ctx, tt.account)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || len(got) != len(tt.want) {
				t.Fatalf("Keys(%s) = %d keys (nil %v), want %d", tt.account, len(got), got == nil, len(tt.want))
			}
			for i := range got {
				equalKey(t, got[i], tt.want[i])
			}
		}
	})

	t.Run("lookup by hash", func(t *testing.T) {
		for _, k := range keys {
			got, err := db.KeyByHash(ctx, k.Hash)
			if err != nil {
				t.Fatalf("KeyByHash(%s): %v", k.ID, err)
			}
			equalKey(t, got, k)
		}
		if _, err := db.KeyByHash(ctx, store.HashSecret("unknown")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown hash: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := db.DeleteKey(ctx, "key_2"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.KeyByHash(ctx, keys[1].Hash); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted key still authenticates: err = %v", err)
		}
		if err := db.DeleteKey(ctx, "key_2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("second delete: err = %v, want ErrNotFound", err)
		}
		if err := db.DeleteKey(ctx, "key_missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete missing: err = %v, want ErrNotFound", err)
		}
		got, _ := db.Keys(ctx, "acct_a")
		if len(got) != 2 || got[0].ID != "key_1" || got[1].ID != "key_3" {
			t.Errorf("after delete Keys = %+v", got)
		}
		// A revoked key's id and secret are never issued again.
		if err := db.CreateKey(ctx, keys[1]); !errors.Is(err, store.ErrExists) {
			t.Errorf("re-create revoked key: %v, want ErrExists", err)
		}
	})
}

func TestSettleOnce(t *testing.T) {
	tests := []struct {
		name    string
		balance *pricing.Money
	}{
		{"prepaid", mp(pricing.USD(10))},
		{"postpaid", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := open(t)
			ctx := context.Background()
			mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid, Balance: tt.balance})
			e := store.Entry{RequestID: "req_1", AccountID: "acct", Endpoint: "/v1/chat/completions",
				Model: "m", Units: 1234, Unit: "token", Cost: pricing.Micro(1500), Time: fixed}
			ok, err := db.Settle(ctx, &e)
			if err != nil || !ok {
				t.Fatalf("first Settle = %v, %v; want true", ok, err)
			}
			e2 := e
			e2.Cost, e2.Model = pricing.USD(1), "other"
			ok, err = db.Settle(ctx, &e2)
			if err != nil || ok {
				t.Fatalf("second Settle = %v, %v; want false, nil", ok, err)
			}
			a, _ := db.Account(ctx, "acct")
			if tt.balance == nil {
				if a.Balance != nil {
					t.Errorf("postpaid balance became %s", a.Balance)
				}
			} else if want := *tt.balance - pricing.Micro(1500); a.Balance == nil || *a.Balance != want {
				t.Errorf("balance = %v, want %s", a.Balance, want)
			}
			sp, err := db.Spend(ctx, "acct", fixed)
			if err != nil {
				t.Fatal(err)
			}
			want := store.Spend{Today: pricing.Micro(1500), Month: pricing.Micro(1500), Total: pricing.Micro(1500)}
			if sp != want {
				t.Errorf("Spend = %+v, want %+v", sp, want)
			}
			entries, _ := db.Entries(ctx, "acct", 0)
			if len(entries) != 1 {
				t.Fatalf("entries = %d, want 1", len(entries))
			}
			got := entries[0]
			if !got.Time.Equal(e.Time) || got.Time.Location() != time.UTC {
				t.Errorf("entry time = %v, want %v in UTC", got.Time, e.Time)
			}
			got.Time = e.Time
			if got != e {
				t.Errorf("entry = %+v, want %+v (first settlement kept)", got, e)
			}
		})
	}
}

func TestSettleBalance(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid, Balance: mp(pricing.USD(1))})
	steps := []struct {
		cost            pricing.Money
		want            pricing.Money
		charged, unpaid pricing.Money
	}{
		{pricing.Micro(250_000), pricing.Micro(750_000), pricing.Micro(250_000), 0},
		{1, pricing.Micro(750_000) - 1, 1, 0},
		{0, pricing.Micro(750_000) - 1, 0, 0},
		// Never below zero: what the balance cannot pay is the shortfall.
		{pricing.USD(1), 0, pricing.Micro(750_000) - 1, pricing.Micro(250_000) + 1},
		{pricing.USD(1), 0, 0, pricing.USD(1)},
		{-pricing.Micro(250_000) - 1, pricing.Micro(250_000) + 1, -pricing.Micro(250_000) - 1, 0}, // a negative cost (credit) raises it
	}
	for i, s := range steps {
		e := store.Entry{RequestID: fmt.Sprintf("req_%d", i), AccountID: "acct", Cost: s.cost, Time: fixed}
		ok, err := db.Settle(ctx, &e)
		if err != nil || !ok {
			t.Fatalf("step %d: Settle = %v, %v", i, ok, err)
		}
		if e.Cost != s.charged || e.Shortfall != s.unpaid {
			t.Errorf("step %d: charged %s short %s, want %s and %s", i, e.Cost, e.Shortfall, s.charged, s.unpaid)
		}
		if es, _ := db.Entries(ctx, "acct", 1); len(es) != 1 || es[0].Cost != s.charged || es[0].Shortfall != s.unpaid {
			t.Errorf("step %d: ledger %+v, want cost %s shortfall %s", i, es, s.charged, s.unpaid)
		}
		a, err := db.Account(ctx, "acct")
		if err != nil {
			t.Fatal(err)
		}
		if *a.Balance != s.want {
			t.Errorf("step %d: balance = %s, want %s", i, a.Balance, s.want)
		}
	}

	t.Run("unknown account", func(t *testing.T) {
		ok, err := db.Settle(ctx, &store.Entry{RequestID: "req_orphan", AccountID: "acct_missing", Cost: 5})
		if ok || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Settle = %v, %v; want false, ErrNotFound", ok, err)
		}
	})
	t.Run("empty request id", func(t *testing.T) {
		if ok, err := db.Settle(ctx, &store.Entry{AccountID: "acct", Cost: 5}); ok || err == nil {
			t.Errorf("Settle = %v, %v; want an error", ok, err)
		}
	})
	t.Run("zero time is now", func(t *testing.T) {
		before := time.Now()
		if ok, err := db.Settle(ctx, &store.Entry{RequestID: "req_now", AccountID: "acct", Cost: 0}); !ok || err != nil {
			t.Fatalf("Settle = %v, %v", ok, err)
		}
		es, _ := db.Entries(ctx, "acct", 1)
		if len(es) != 1 || es[0].RequestID != "req_now" || es[0].Time.Before(before) || es[0].Time.After(time.Now()) {
			t.Errorf("newest entry = %+v, want req_now at about now", es)
		}
	})
}

func TestSpendBuckets(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid})
	mustCreateAccount(t, db, store.Account{ID: "acct_other", Plan: store.PlanPaid})
	at := func(s string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	entries := []struct {
		at   string
		cost pricing.Money
	}{
		{"2024-03-01T12:00:00Z", 1},                 // a year before
		{"2025-01-31T23:59:59.999999999Z", 10},      // January
		{"2025-02-01T00:00:00Z", 100},               // first instant of February
		{"2025-02-28T23:59:59.999999999Z", 1_000},   // last instant of February
		{"2025-03-01T00:00:00Z", 10_000},            // first instant of March
		{"2025-03-01T09:00:00+10:00", 100_000},      // = Feb 28 23:00 UTC
		{"2025-03-01T23:59:59.999999999Z", 1000000}, // last instant of March 1
		{"2025-03-02T00:00:00Z", 10_000_000},        // March 2
		{"2025-04-01T00:00:00Z", 100_000_000},       // April
	}
	var total pricing.Money
	for i, e := range entries {
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "acct", Cost: e.cost, Time: at(e.at)}); err != nil {
			t.Fatal(err)
		}
		total += e.cost
	}
	// Another account's spend never counts.
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "x", AccountID: "acct_other", Cost: 7, Time: at("2025-03-01T12:00:00Z")}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		now          string
		today, month pricing.Money
	}{
		{"2025-03-01T00:00:00Z", 10_000 + 1_000_000, 10_000 + 1_000_000 + 10_000_000},
		{"2025-03-01T10:00:00Z", 10_000 + 1_000_000, 10_000 + 1_000_000 + 10_000_000},
		{"2025-03-01T23:59:59.999999999Z", 10_000 + 1_000_000, 10_000 + 1_000_000 + 10_000_000},
		{"2025-03-02T05:00:00+08:00", 10_000 + 1_000_000, 10_000 + 1_000_000 + 10_000_000}, // = Mar 1 21:00 UTC
		{"2025-03-02T00:00:00Z", 10_000_000, 10_000 + 1_000_000 + 10_000_000},
		{"2025-02-28T23:59:59.999999999Z", 1_000 + 100_000, 100 + 1_000 + 100_000},
		{"2025-02-28T20:00:00-05:00", 10_000 + 1_000_000, 10_000 + 1_000_000 + 10_000_000}, // = Mar 1 01:00 UTC
		{"2025-02-15T00:00:00Z", 0, 100 + 1_000 + 100_000},
		{"2025-01-31T12:00:00Z", 10, 10},
		{"2025-04-01T00:00:00Z", 100_000_000, 100_000_000},
		{"2025-05-01T00:00:00Z", 0, 0},
		{"2024-03-01T00:00:00Z", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.now, func(t *testing.T) {
			got, err := db.Spend(ctx, "acct", at(tt.now))
			if err != nil {
				t.Fatal(err)
			}
			want := store.Spend{Today: tt.today, Month: tt.month, Total: total}
			if got != want {
				t.Errorf("Spend = %+v, want %+v", got, want)
			}
		})
	}
	t.Run("unknown account", func(t *testing.T) {
		got, err := db.Spend(ctx, "acct_missing", at("2025-03-01T00:00:00Z"))
		if err != nil || got != (store.Spend{}) {
			t.Errorf("Spend = %+v, %v; want zero", got, err)
		}
	})
}

func TestEntries(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid})
	mustCreateAccount(t, db, store.Account{ID: "acct_other", Plan: store.PlanPaid})
	// 105 entries, settled out of time order; r_050 and r_051 share a time.
	for i := range 105 {
		ts := fixed.Add(time.Duration((i*37)%105) * time.Microsecond)
		if i == 51 {
			ts = fixed.Add(time.Duration((50*37)%105) * time.Microsecond)
		}
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r_%03d", i), AccountID: "acct", Cost: pricing.Money(i), Time: ts}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "other", AccountID: "acct_other", Cost: 1, Time: fixed.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		limit, want int
	}{{0, 100}, {-1, 100}, {1, 1}, {10, 10}, {104, 104}, {500, 105}}
	for _, tt := range tests {
		t.Run(fmt.Sprint("limit ", tt.limit), func(t *testing.T) {
			es, err := db.Entries(ctx, "acct", tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != tt.want {
				t.Fatalf("len = %d, want %d", len(es), tt.want)
			}
			for i, e := range es {
				if e.AccountID != "acct" {
					t.Fatalf("entry of %s", e.AccountID)
				}
				if i > 0 && e.Time.After(es[i-1].Time) {
					t.Fatalf("entry %d (%v) newer than entry %d (%v)", i, e.Time, i-1, es[i-1].Time)
				}
			}
		})
	}

	es, _ := db.Entries(ctx, "acct", 500)
	for i := 1; i < len(es); i++ {
		if es[i].Time.Equal(es[i-1].Time) {
			if es[i-1].RequestID != "r_051" || es[i].RequestID != "r_050" {
				t.Errorf("tie broken as %s then %s, want the later-settled r_051 first", es[i-1].RequestID, es[i].RequestID)
			}
		}
	}
	if none, err := db.Entries(ctx, "acct_missing", 10); err != nil || none == nil || len(none) != 0 {
		t.Errorf("Entries(missing) = %#v, %v; want empty", none, err)
	}
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	acct := store.Account{ID: "acct", Plan: store.PlanPaid, Cleared: true, Balance: mp(pricing.USD(3)),
		MonthlyCap: mp(pricing.USD(20)), Abilities: []string{}, CreatedAt: fixed}
	key := store.Key{ID: store.NewID("key"), AccountID: "acct", Name: "k", Hash: store.HashSecret("secret"),
		Models: []string{"a"}, ExpiresAt: tp(fixed.Add(time.Hour)), CreatedAt: fixed}
	mustCreateAccount(t, db, acct)
	if err := db.CreateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "r1", AccountID: "acct", Cost: pricing.USD(1), Time: fixed}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	acct.Balance = mp(pricing.USD(2))
	equalAccount(t, got, acct)
	if got.Abilities == nil {
		t.Error("empty abilities came back nil")
	}
	k, err := db.KeyByHash(ctx, key.Hash)
	if err != nil {
		t.Fatal(err)
	}
	equalKey(t, k, key)
	sp, _ := db.Spend(ctx, "acct", fixed)
	if sp.Total != pricing.USD(1) || sp.Today != pricing.USD(1) {
		t.Errorf("Spend = %+v", sp)
	}
	if ok, err := db.Settle(ctx, &store.Entry{RequestID: "r1", AccountID: "acct", Cost: pricing.USD(1)}); ok || err != nil {
		t.Errorf("re-settle after reopen = %v, %v; want false", ok, err)
	}
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version = %d, %v", v, err)
	}
}

func TestConcurrentSettle(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	start := pricing.USD(1000)
	mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid, Balance: mp(start)})

	const n = 50
	var (
		wg  sync.WaitGroup
		sum pricing.Money
	)
	for i := range n {
		cost := pricing.Micro(int64(1000+i*37)) + pricing.Money(i) // distinct, odd nano amounts
		sum += cost
		wg.Go(func() {
			ok, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("req_%d", i), AccountID: "acct", Cost: cost, Time: fixed})
			if err != nil || !ok {
				t.Errorf("Settle %d = %v, %v", i, ok, err)
			}
			// Readers run alongside the writers.
			if _, err := db.Spend(ctx, "acct", fixed); err != nil {
				t.Error(err)
			}
			if _, err := db.Account(ctx, "acct"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	a, err := db.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	if *a.Balance != start-sum {
		t.Errorf("balance = %s, want %s", a.Balance, start-sum)
	}
	sp, err := db.Spend(ctx, "acct", fixed)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Total != sum || sp.Today != sum || sp.Month != sum {
		t.Errorf("Spend = %+v, want all %s", sp, sum)
	}
	if es, _ := db.Entries(ctx, "acct", 1000); len(es) != n {
		t.Errorf("entries = %d, want %d", len(es), n)
	}
}

func TestConcurrentSettleSameRequest(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	mustCreateAccount(t, db, store.Account{ID: "acct", Plan: store.PlanPaid, Balance: mp(pricing.USD(5))})

	const n = 20
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range n {
		wg.Go(func() {
			ok, err := db.Settle(ctx, &store.Entry{RequestID: "req_same", AccountID: "acct", Cost: pricing.USD(1), Time: fixed})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d settlements reported true, want 1", wins)
	}
	a, _ := db.Account(ctx, "acct")
	if *a.Balance != pricing.USD(4) {
		t.Errorf("balance = %s, want 4.00", a.Balance)
	}
	sp, _ := db.Spend(ctx, "acct", fixed)
	if sp.Total != pricing.USD(1) {
		t.Errorf("Spend.Total = %s, want 1.00", sp.Total)
	}
}

func TestContextCanceled(t *testing.T) {
	db, _ := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.CreateAccount(ctx, store.Account{ID: "acct", Plan: store.PlanFree}); err == nil {
		t.Error("CreateAccount with a canceled context succeeded")
	}
	if _, err := db.Account(context.Background(), "acct"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("account stored despite canceled context: %v", err)
	}
}

// TestTwoHandlesOneFile opens the same database twice, as two processes
// would, and settles through both at once: BEGIN IMMEDIATE and the busy
// timeout must serialise them without lost updates or SQLITE_BUSY.
func TestTwoHandlesOneFile(t *testing.T) {
	db1, dir := open(t)
	db2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	ctx := context.Background()
	mustCreateAccount(t, db1, store.Account{ID: "acct", Plan: store.PlanPaid, Balance: mp(pricing.USD(100)), DailyCap: mp(pricing.USD(1000))})

	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		db := db1
		if i%2 == 1 {
			db = db2
		}
		wg.Go(func() {
			ok, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("req_%d", i%(n/2)), AccountID: "acct", Cost: pricing.USD(1), Time: fixed})
			if err != nil {
				t.Errorf("Settle %d: %v (ok %v)", i, err, ok)
			}
			_, err = db.UpdateAccount(ctx, "acct", func(a *store.Account) error {
				*a.DailyCap++
				return nil
			})
			if err != nil {
				t.Errorf("UpdateAccount %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	a, err := db2.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	if *a.Balance != pricing.USD(100-n/2) {
		t.Errorf("balance = %s, want %d.00", a.Balance, 100-n/2)
	}
	if *a.DailyCap != pricing.USD(1000)+n {
		t.Errorf("daily cap counter = %d, want 1000 USD and %d", *a.DailyCap, n)
	}
}

// The database and its WAL files are readable by their owner only, even a
// file an older version created more open.
func TestFileMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateAccount(context.Background(), store.Account{ID: "a", Plan: store.PlanFree}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FileName, FileName + "-wal", FileName + "-shm"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != FileMode {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode().Perm(), os.FileMode(FileMode))
		}
	}
}
