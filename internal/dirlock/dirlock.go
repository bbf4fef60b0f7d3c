// Package dirlock keeps a data folder to one process. The gateway holds
// its accounts' balances in memory and appends charges to a log in the
// folder; a second process on the same folder would keep balances of its
// own over the same files, and prepaid money could be spent twice. So the
// folder's lock file is locked exclusively (an advisory lock the kernel
// releases when the process ends, however it ends) for as long as the
// process serves from the folder.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file in the data folder. It holds the holder's
// process id, for the message a second process gives.
const FileName = "gw.lock"

// Lock is a data folder held by this process.
type Lock struct {
	f *os.File
}

// InUseError is a data folder another process holds.
type InUseError struct {
	// Dir is the folder.
	Dir string
	// PID is the holder's process id, 0 when it could not be read.
	PID int
}

func (e *InUseError) Error() string {
	by := "another process"
	if e.PID > 0 {
		by = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("the data folder %s is in use by %s: one gateway process per data folder", e.Dir, by)
}

// errHeld is what lockFile returns when another open file holds the lock.
var errHeld = errors.New("held")

// Take takes the lock of the folder dir, without waiting: a folder held
// elsewhere is an *InUseError. The lock is per open file,
// so a second Take of one folder in the same process fails too; a process
// that needs the folder from several places shares one Lock.
func Take(dir string) (*Lock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(abs, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errHeld) {
			return nil, &InUseError{Dir: abs, PID: readPID(path)}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0) // only for the message: a failure is harmless
	}
	return &Lock{f: f}, nil
}

// readPID is the process id a holder wrote in path, or 0.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// Release lets the folder go. The lock file stays (removing it would let
// a process that opened it a moment before lock a file no longer in the
// folder).
func (l *Lock) Release() error {
	return l.f.Close()
}
