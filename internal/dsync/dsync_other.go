//go:build !linux

package dsync

import (
	"errors"
	"os"
)

// Syncer is unavailable outside Linux: New fails, and a nil Syncer syncs
// the plain way.
type Syncer struct{}

// New reports that there is no io_uring here.
func New() (*Syncer, error) { return nil, errors.New("dsync: io_uring is Linux only") }

// Datasync makes f's written data durable: a full fsync outside Linux.
func (*Syncer) Datasync(f *os.File) error { return plain(f) }

// plain is a full fsync.
func plain(f *os.File) error { return f.Sync() }

// Plain reports that syncs are plain here.
func (*Syncer) Plain() error { return errors.New("dsync: io_uring is Linux only") }

// OnGiveUp does nothing: there is no ring to give up.
func (*Syncer) OnGiveUp(func(error)) {}

// Close does nothing.
func (*Syncer) Close() error { return nil }
