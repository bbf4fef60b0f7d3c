package benchsync

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func provisioned(t *testing.T) *Sync {
	t.Helper()
	s := &Sync{Dir: t.TempDir()}
	if err := s.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cleanup() })
	return s
}

// TestRecordSyncedBeforeTheHeader: each request's record is in the file,
// synced, before the handler behind it gets its header out.
func TestRecordSyncedBeforeTheHeader(t *testing.T) {
	s := provisioned(t)
	var seen []int64
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		before := s.Synced()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusAccepted)
		seen = append(seen, before, s.Synced())
		_, err := w.Write([]byte("ok"))
		return err
	})
	for range 2 {
		rec := httptest.NewRecorder()
		if err := s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil), next); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusAccepted || rec.Body.String() != "ok" || rec.Header().Get("Content-Type") != "text/plain" {
			t.Fatalf("answer %d %q %v", rec.Code, rec.Body, rec.Header())
		}
	}
	if want := []int64{0, 1, 1, 2}; !slicesEqual(seen, want) {
		t.Fatalf("synced before/after each header: %v, want %v", seen, want)
	}
	data, err := os.ReadFile(s.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != FileSize {
		t.Fatalf("file is %d bytes, want %d", len(data), FileSize)
	}
	want := append(bytes.Repeat(s.record, 2), make([]byte, RecordSize)...)
	if !bytes.Equal(data[:3*RecordSize], want) {
		t.Fatalf("the file's first records are not the two synced ones")
	}
	name := s.f.Name()
	if err := s.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("%s after Cleanup: %v", filepath.Base(name), err)
	}
	s.f = nil
}

// TestWriteWithoutHeader: a body written without a header syncs too.
func TestWriteWithoutHeader(t *testing.T) {
	s := provisioned(t)
	rec := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, err := w.Write([]byte("ok"))
		return err
	})
	if err := s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil), next); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Body.String() != "ok" || s.Synced() != 1 {
		t.Fatalf("answer %d %q, synced %d", rec.Code, rec.Body, s.Synced())
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestUnmarshalCaddyfile: the folder comes in a block; arguments, other
// subdirectives and a dir of other than one value are refused.
func TestUnmarshalCaddyfile(t *testing.T) {
	for _, c := range []struct {
		text, dir string
		ok        bool
	}{
		{"gw_bench_sync", "", true},
		{"gw_bench_sync {\n}", "", true},
		{"gw_bench_sync {\n\tdir /tmp/x\n}", "/tmp/x", true},
		{"gw_bench_sync {\n\tdir \"a b\"\n}", "a b", true},
		{"gw_bench_sync /tmp/x", "", false},
		{"gw_bench_sync {\n\tdir\n}", "", false},
		{"gw_bench_sync {\n\tdir a b\n}", "", false},
		{"gw_bench_sync {\n\tfolder a\n}", "", false},
	} {
		var s Sync
		err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.text))
		if (err == nil) != c.ok || (c.ok && s.Dir != c.dir) {
			t.Errorf("%q: dir %q, err %v; want dir %q, ok %v", c.text, s.Dir, err, c.dir, c.ok)
		}
	}
}

// FuzzUnmarshalCaddyfile: the directive never panics, and a folder it
// takes is the token after a dir.
func FuzzUnmarshalCaddyfile(f *testing.F) {
	for _, s := range []string{"gw_bench_sync", "gw_bench_sync /tmp", "gw_bench_sync {\n\tdir /tmp/x\n}", "gw_bench_sync {\n\tdir `a\nb`\n}", "gw_bench_sync {\n}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		tokens, err := caddyfile.Tokenize([]byte(text), "Caddyfile")
		if err != nil || len(tokens) == 0 {
			return
		}
		var s Sync
		if s.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)) != nil || s.Dir == "" {
			return
		}
		for i := 1; i+1 < len(tokens); i++ {
			if tokens[i].Text == "dir" && tokens[i+1].Text == s.Dir {
				return
			}
		}
		t.Fatalf("%q: dir %q is no dir's value", text, s.Dir)
	})
}
