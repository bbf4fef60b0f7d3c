// Package benchsync is a Caddy handler for the hot-path bench, never for
// serving: it makes one small record durable for every request, the way
// a gateway must make a charge durable before the answer completes, so a
// bare reverse_proxy behind it costs what a bare proxy plus that one
// fsync costs, measured in the same run and the same place as the
// gateway's own (the gateway's added latency is
// reported beyond it).
//
// The record is written when the upstream's answer starts (the response
// header), before any of it reaches the client, as the gateway writes a
// charge once the upstream has answered: RecordSize bytes overwrite
// blocks the file already has (zeros written ahead at Provision), then a
// plain fdatasync(2) makes them durable. Requests take turns.
//
// It is built into bin/caddy-bench only (go run ./cmd/gwbuild -o
// bin/caddy-bench -with github.com/caddy-gw/caddy-gw/integration/benchsync):
//
//	route {
//		gw_bench_sync {
//			dir /some/folder
//		}
//		reverse_proxy 127.0.0.1:9000
//	}
package benchsync

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"golang.org/x/sys/unix"
)

// RecordSize is the bytes synced per request, about one charge's line in
// the gateway's charge log; FileSize is the region they cycle through.
const (
	RecordSize = 256
	FileSize   = 1 << 20
)

func init() {
	caddy.RegisterModule(&Sync{})
	httpcaddyfile.RegisterHandlerDirective("gw_bench_sync", parse)
}

// Sync is the handler.
type Sync struct {
	// Dir is the folder the synced file is made in (removed at Cleanup);
	// the system's temporary folder when empty.
	Dir string `json:"dir,omitempty"`

	mu     sync.Mutex
	f      *os.File
	at     int64
	record []byte
	synced int64
}

// CaddyModule returns the Caddy module information.
func (*Sync) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.gw_bench_sync", New: func() caddy.Module { return new(Sync) }}
}

// Provision makes the file and writes its zeros, synced.
func (s *Sync) Provision(caddy.Context) error {
	f, err := os.CreateTemp(s.Dir, "gw-bench-sync-*")
	if err != nil {
		return fmt.Errorf("gw_bench_sync: %w", err)
	}
	s.f = f
	if _, err := f.Write(make([]byte, FileSize)); err != nil {
		return fmt.Errorf("gw_bench_sync: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("gw_bench_sync: %w", err)
	}
	s.record = append(bytes.Repeat([]byte{'x'}, RecordSize-1), '\n')
	return nil
}

// Cleanup removes the file.
func (s *Sync) Cleanup() error {
	if s.f == nil {
		return nil
	}
	s.f.Close()
	return os.Remove(s.f.Name())
}

// ServeHTTP passes the request on; the answer's header waits for the
// request's record to be durable.
func (s *Sync) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	sw := &syncWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, s: s}
	return next.ServeHTTP(sw, r)
}

// sync writes the next record and syncs it.
func (s *Sync) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt(s.record, s.at); err != nil {
		return err
	}
	s.at = (s.at + RecordSize) % FileSize
	for {
		err := unix.Fdatasync(int(s.f.Fd()))
		if err != unix.EINTR {
			if err == nil {
				s.synced++
			}
			return err
		}
	}
}

// Synced is how many records were made durable.
func (s *Sync) Synced() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// syncWriter syncs the request's record before the answer's header (or
// its first byte, without one) goes out; a failed sync answers 500.
type syncWriter struct {
	*caddyhttp.ResponseWriterWrapper
	s      *Sync
	synced bool
	failed bool
}

func (w *syncWriter) syncOnce() bool {
	if !w.synced {
		w.synced = true
		if err := w.s.sync(); err != nil {
			w.failed = true
			w.ResponseWriterWrapper.WriteHeader(http.StatusInternalServerError)
		}
	}
	return !w.failed
}

func (w *syncWriter) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriterWrapper.WriteHeader(code) // informational: not the answer yet
		return
	}
	if w.syncOnce() {
		w.ResponseWriterWrapper.WriteHeader(code)
	}
}

func (w *syncWriter) Write(b []byte) (int, error) {
	if !w.syncOnce() {
		return 0, fmt.Errorf("gw_bench_sync: the record was not synced")
	}
	return w.ResponseWriterWrapper.Write(b)
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (w *syncWriter) Unwrap() http.ResponseWriter { return w.ResponseWriterWrapper }

// parse reads the directive (see UnmarshalCaddyfile).
func parse(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(Sync)
	if err := s.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return s, nil
}

// UnmarshalCaddyfile reads
//
//	gw_bench_sync [<matcher>] {
//		dir <folder>
//	}
//
// The folder is in a block because an argument starting with / would be
// read as a path matcher.
func (s *Sync) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "dir":
			if !d.NextArg() {
				return d.ArgErr()
			}
			s.Dir = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("gw_bench_sync: unknown subdirective %q", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Sync)(nil)
	_ caddy.CleanerUpper          = (*Sync)(nil)
	_ caddyhttp.MiddlewareHandler = (*Sync)(nil)
	_ caddyfile.Unmarshaler       = (*Sync)(nil)
)
