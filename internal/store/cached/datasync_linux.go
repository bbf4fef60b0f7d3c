package cached

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes f's written data durable (fdatasync): the file's blocks
// and length are as they were, so no metadata needs writing.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// syncDir makes the entries of folder dir durable (a new file's name).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
