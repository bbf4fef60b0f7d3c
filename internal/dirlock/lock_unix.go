//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes f's exclusive lock without waiting (flock: held by the
// open file, released when it is closed or the process ends).
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errHeld
		}
		return err
	}
}
