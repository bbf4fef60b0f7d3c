// Package dsync makes a file's written data durable (fdatasync) without
// holding a Go processor while the disk works.
//
// A plain fdatasync is a blocking system call: the goroutine's processor
// (P) stays with it until the runtime's monitor notices, tens of
// microseconds or more later, and hands the processor to another thread.
// A gateway that syncs every batch of charges loses that time on every
// batch, and its threads switch in and out for each hand-over. On Linux a
// Syncer submits the sync to an io_uring instead and waits for its
// completion on an eventfd in the runtime's network poller, as a socket
// read waits: the processor runs other calls meanwhile, and no thread is
// handed over.
//
// Where io_uring is missing or refused (an older kernel, a container's
// seccomp profile, another system), New reports an error and callers sync
// the plain way.
package dsync

import "sync"

// Available reports whether a Syncer can be had here (probed once).
var Available = sync.OnceValue(func() bool {
	s, err := New()
	if err != nil {
		return false
	}
	s.Close()
	return true
})
