package dsync

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// newSyncer returns a ring, or skips where the system has none.
func newSyncer(t *testing.T) *Syncer {
	t.Helper()
	s, err := New()
	if err != nil {
		if runtime.GOOS == "linux" {
			t.Skipf("no io_uring here (%v): the plain sync is tested alone", err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDatasyncThroughRing(t *testing.T) {
	s := newSyncer(t)
	f := tempFile(t)
	for i := range 100 {
		if _, err := f.WriteAt([]byte("line\n"), int64(i*5)); err != nil {
			t.Fatal(err)
		}
		if err := s.Datasync(f); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if s.broken != nil {
		t.Fatalf("the ring failed and the plain sync took over: %v", s.broken)
	}
	if s.seq != 100 {
		t.Fatalf("%d syncs went through the ring, want 100", s.seq)
	}
}

// A sync the kernel refuses reports the kernel's error, and the ring
// stays in use.
func TestDatasyncError(t *testing.T) {
	s := newSyncer(t)
	s.OnGiveUp(func(why error) { t.Errorf("ring given up: %v", why) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	err = s.Datasync(w)
	want := plain(w)
	if want == nil {
		t.Skip("this system syncs a pipe without complaint")
	}
	if !errors.Is(err, want) {
		t.Fatalf("ring sync of a pipe: %v, the plain sync says %v", err, want)
	}
	if s.broken != nil {
		t.Fatalf("a refused sync broke the ring: %v", s.broken)
	}
	f := tempFile(t)
	if err := s.Datasync(f); err != nil {
		t.Fatalf("sync after a refused one: %v", err)
	}
}

// A nil Syncer (no io_uring) syncs the plain way.
func TestNilSyncer(t *testing.T) {
	var s *Syncer
	f := tempFile(t)
	if err := s.Datasync(f); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A ring that takes the submission but refuses the operation (as a
// sandbox may) is given up once the plain call syncs the file: the sync
// succeeds, later ones are plain, and OnGiveUp hears it once.
func TestRefusedOperationFallsBack(t *testing.T) {
	s := newSyncer(t)
	var heard []error
	s.OnGiveUp(func(why error) { heard = append(heard, why) })
	s.op = 0xff // no such operation: the completion says EINVAL
	f := tempFile(t)
	if err := s.Datasync(f); err != nil {
		t.Fatalf("sync: %v, want the plain call's success", err)
	}
	if !errors.Is(s.Plain(), unix.EINVAL) {
		t.Fatalf("Plain() = %v, want the ring given up for EINVAL", s.Plain())
	}
	seq := s.seq
	if err := s.Datasync(f); err != nil {
		t.Fatal(err)
	}
	if s.seq != seq {
		t.Fatal("a sync went to the ring after it was given up")
	}
	if len(heard) != 1 || !errors.Is(heard[0], unix.EINVAL) {
		t.Fatalf("OnGiveUp heard %v, want the EINVAL once", heard)
	}
	if err := s.Close(); err != nil || len(heard) != 1 {
		t.Fatalf("Close: %v; OnGiveUp heard %v", err, heard)
	}
}

// After Close a Syncer syncs the plain way instead of touching the
// released ring.
func TestDatasyncAfterClose(t *testing.T) {
	s := newSyncer(t)
	f := tempFile(t)
	s.Close()
	if err := s.Datasync(f); err != nil {
		t.Fatal(err)
	}
	if s.Plain() == nil {
		t.Fatal("a closed Syncer reports its ring in use")
	}
}

// tempFile is a new empty file, closed at the test's end.
func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
