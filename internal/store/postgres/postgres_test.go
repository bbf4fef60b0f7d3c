package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

func open(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.Conformance(t, func(t *testing.T) store.Store { return open(t, pg.NewDatabase(t)) })
}

func TestBatchConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.BatchConformance(t, func(t *testing.T) storetest.BatchStore { return open(t, pg.NewDatabase(t)) })
}

// Several nodes starting at once on an empty database migrate it once, and
// a node started later finds it up to date.
func TestConcurrentMigrations(t *testing.T) {
	url := testsvc.Postgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(context.Background(), url)
			if err != nil {
				errs <- err
				return
			}
			db.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db := open(t, url)
	if err := db.CreateAccount(context.Background(), store.Account{ID: "a", Plan: store.PlanFree}); err != nil {
		t.Fatal(err)
	}
}

// A bad URL is refused without repeating it (it may hold a password).
func TestOpenBadURL(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://user:s3cret@[::1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open = %v", err)
	}
}

// App links are kept per account, once each, in the order made, and are
// seen by every node (connection) on the database.
func TestAppLinks(t *testing.T) {
	url := testsvc.Postgres(t)
	a, b := open(t, url), open(t, url)
	ctx := context.Background()
	for _, l := range [][2]string{{"tracker", ""}, {"tracker", "work"}, {"mail", ""}} {
		if ok, err := a.AddLink(ctx, "acct", l[0], l[1]); !ok || err != nil {
			t.Fatalf("add %v: %v %v", l, ok, err)
		}
	}
	if ok, err := b.AddLink(ctx, "acct", "tracker", "work"); ok || err != nil {
		t.Fatalf("second add: %v %v", ok, err)
	}
	got, err := b.Links(ctx, "acct")
	if err != nil || len(got) != 3 || got[0] != [2]string{"tracker", ""} || got[1] != [2]string{"tracker", "work"} || got[2] != [2]string{"mail", ""} {
		t.Fatalf("links %v %v", got, err)
	}
	if got, _ := a.Links(ctx, "other"); len(got) != 0 {
		t.Fatalf("another account's links %v", got)
	}
}

// Batched group-commits a PostgreSQL store's charges and passes the suite
// every backend shares.
func TestBatchedConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.Conformance(t, func(t *testing.T) store.Store {
		b := cached.NewBatched(open(t, pg.NewDatabase(t)))
		return b
	})
}
