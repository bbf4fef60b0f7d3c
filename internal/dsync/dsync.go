// Package dsync makes a file's written data durable (fdatasync) without
// holding a Go processor while the disk works.
//
// A plain fdatasync is a blocking system call: the goroutine's processor
// (P) stays with it until the runtime's monitor notices, tens of
// microseconds or more later, and hands the processor to another thread.
// A gateway that syncs every batch of charges loses that time on every
// batch, and its threads switch in and out for each hand-over. On Linux a
// Syncer submits the sync to an io_uring instead (the kernel runs it on
// its io_uring worker thread) and waits for its completion on an eventfd
// in the runtime's network poller, as a socket read waits: the processor
// runs other calls meanwhile, and is never handed to another thread.
//
// Where io_uring is missing or refused (an older kernel, a container's
// seccomp profile, another system), New reports an error and a nil
// Syncer syncs the plain way; so does a Syncer whose ring failed (Plain
// says why).
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
