package caddymodule

import (
	"errors"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/dirlock"
)

// Configs of one process share the data folder's lock: it is taken by the
// first and held until the last lets go, never dropped in between.
func TestDataDirLockShared(t *testing.T) {
	dir := t.TempDir()
	old, next := &App{Store: StoreConfig{Dir: dir}}, &App{Store: StoreConfig{Dir: dir}}
	if err := old.lockDataDir(); err != nil {
		t.Fatal(err)
	}
	if err := next.lockDataDir(); err != nil {
		t.Fatalf("a second config of the process: %v", err)
	}
	held := func(want bool) {
		t.Helper()
		l, err := dirlock.Take(dir)
		var inUse *dirlock.InUseError
		if got := errors.As(err, &inUse); got != want {
			t.Fatalf("held = %v (%v), want %v", got, err, want)
		}
		if l != nil {
			l.Release()
		}
	}
	held(true)
	if err := unlockDataDir(old.lockKey); err != nil {
		t.Fatal(err)
	}
	held(true)
	if err := unlockDataDir(next.lockKey); err != nil {
		t.Fatal(err)
	}
	held(false)
}
