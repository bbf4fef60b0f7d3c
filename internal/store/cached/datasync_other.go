//go:build !linux

package cached

import "os"

// datasync makes f's written data durable; outside Linux it is a full
// fsync.
func datasync(f *os.File) error { return f.Sync() }
