package sqlite

import (
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
)

// The embedded store passes the suite every backend shares.
func TestConformance(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T) store.Store {
		db, _ := open(t)
		return db
	})
}

// The embedded store settles batches as every batch backend must.
func TestBatchConformance(t *testing.T) {
	storetest.BatchConformance(t, func(t *testing.T) storetest.BatchStore {
		db, _ := open(t)
		return db
	})
}
