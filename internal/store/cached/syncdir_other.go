//go:build !linux

package cached

// syncDir is a no-op outside Linux (a folder cannot be synced everywhere).
func syncDir(string) error { return nil }
