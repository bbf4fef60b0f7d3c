package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A folder is taken once: a second Take fails naming the folder and the
// holder, and succeeds again once the first lock is released.
func TestTakeOnce(t *testing.T) {
	dir := t.TempDir()
	l, err := Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("lock file holds %q (%v), want this process's id", b, err)
	}
	_, err = Take(dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.Dir != dir || inUse.PID != os.Getpid() {
		t.Fatalf("second Take: %v, want an *InUseError for %s by %d", err, dir, os.Getpid())
	}
	want := "the data folder " + dir + " is in use by process " + strconv.Itoa(os.Getpid())
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q, want it to start %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Take(dir)
	if err != nil {
		t.Fatalf("Take after Release: %v", err)
	}
	if err := l2.Release(); err != nil {
		t.Fatal(err)
	}
}

// A relative folder is named by its absolute path.
func TestTakeRelative(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("data", 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := Take("data")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	_, err = Take("./data/")
	abs, _ := filepath.Abs("data")
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.Dir != abs {
		t.Fatalf("second Take: %v, want an *InUseError for %s", err, abs)
	}
}

// A folder that is not there is not made.
func TestTakeMissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nowhere")
	if _, err := Take(dir); err == nil {
		t.Fatal("Take of a missing folder succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the folder was made (%v)", err)
	}
}

// A holder whose id cannot be read is "another process".
func TestInUseWithoutPID(t *testing.T) {
	e := &InUseError{Dir: "/srv/gw"}
	if got := e.Error(); got != "the data folder /srv/gw is in use by another process: one gateway process per data folder" {
		t.Fatalf("message %q", got)
	}
}
