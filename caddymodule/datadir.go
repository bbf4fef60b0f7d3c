package caddymodule

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/caddy-gw/caddy-gw/internal/dirlock"
)

// dataDirMode is the mode a missing data folder is made with: it holds
// keys' hashes and the ledger, for the gateway's user only.
const dataDirMode = 0o700

// dataDirs holds the process's data folder locks, by absolute folder, with
// how many configs use each: the first config that starts on a folder takes
// its lock, and the last one cleaned up lets it go. A reload onto the same
// folder starts the new config (one more user) before the old one is
// cleaned up, so the lock is held throughout, never dropped and taken
// again. Taking and letting go happen under one mutex, so a config that
// comes back to a folder never races the release of its lock.
var dataDirs = struct {
	sync.Mutex
	held map[string]*heldDir
}{held: map[string]*heldDir{}}

type heldDir struct {
	lock  *dirlock.Lock
	users int
}

// lockDataDir takes the data folder (the embedded store and its charge
// log, or the node's charge spool) for this process, making it when it is
// missing; another process on it is an error naming the folder.
func (a *App) lockDataDir() error {
	dir, err := filepath.Abs(a.Store.Dir)
	if err != nil {
		return err
	}
	dataDirs.Lock()
	defer dataDirs.Unlock()
	if h := dataDirs.held[dir]; h != nil {
		h.users++
		a.lockKey = dir
		return nil
	}
	if err := os.MkdirAll(dir, dataDirMode); err != nil {
		return err
	}
	l, err := dirlock.Take(dir)
	if err != nil {
		return err
	}
	dataDirs.held[dir] = &heldDir{lock: l, users: 1}
	a.lockKey = dir
	return nil
}

// unlockDataDir drops one config's use of the data folder dir, letting
// its lock go after the last.
func unlockDataDir(dir string) error {
	dataDirs.Lock()
	defer dataDirs.Unlock()
	h := dataDirs.held[dir]
	if h == nil {
		return nil
	}
	if h.users--; h.users > 0 {
		return nil
	}
	delete(dataDirs.held, dir)
	return h.lock.Release()
}
