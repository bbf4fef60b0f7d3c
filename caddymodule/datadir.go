package caddymodule

import (
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gw/caddy-gw/internal/dirlock"
)

// dataDirLocks holds the process's data folder locks, by absolute folder:
// the first config that starts on a folder takes its lock, and it is let
// go when no config uses the folder any more. A reload onto the same
// folder starts the new config (one more user) before the old one is
// cleaned up, so the lock is held throughout, never dropped and taken
// again.
var dataDirLocks = caddy.NewUsagePool()

// dataDirMode is the mode a missing data folder is made with: it holds
// keys' hashes and the ledger, for the gateway's user only.
const dataDirMode = 0o700

type heldDir struct{ *dirlock.Lock }

func (h heldDir) Destruct() error { return h.Release() }

// lockDataDir takes the data folder (the embedded store and its charge
// log, or the node's charge spool) for this process; another process on
// it is an error naming the folder.
func (a *App) lockDataDir() error {
	dir, err := filepath.Abs(a.Store.Dir)
	if err != nil {
		return err
	}
	_, _, err = dataDirLocks.LoadOrNew(dir, func() (caddy.Destructor, error) {
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return nil, err
		}
		l, err := dirlock.Take(dir)
		if err != nil {
			return nil, err
		}
		return heldDir{l}, nil
	})
	if err != nil {
		return err
	}
	a.lockKey = dir
	return nil
}
