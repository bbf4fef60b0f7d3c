//go:build !unix && !windows

package dirlock

import (
	"errors"
	"os"
)

// lockFile cannot lock here: the gateway does not serve a data folder it
// cannot keep to itself.
func lockFile(*os.File) error { return errors.ErrUnsupported }
