package cached

import "os"

// syncDir makes the entries of folder dir durable (a new file's name).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
