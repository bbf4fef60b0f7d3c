package cached

import "github.com/caddy-gw/caddy-gw/internal/store/sqlite"

// Open opens the embedded store in dir: the SQLite file under its hot
// path, with what the charge log beside it still holds applied. Only one
// process may hold dir (the caller takes its lock).
func Open(dir string) (*Store, error) {
	db, err := sqlite.Open(dir)
	if err != nil {
		return nil, err
	}
	c, err := New(db, dir)
	if err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}
