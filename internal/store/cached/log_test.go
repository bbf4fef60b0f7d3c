package cached

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// reopen closes l and opens the log in dir again, returning the request
// ids it holds.
func reopen(t *testing.T, l *chargeLog, dir string) (*chargeLog, []string) {
	t.Helper()
	if l != nil {
		l.close()
	}
	l, entries, err := openLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.close() })
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.RequestID)
	}
	return l, ids
}

func logEntries(prefix string, n int) []store.Entry {
	es := make([]store.Entry, n)
	for i := range es {
		es[i] = store.Entry{RequestID: fmt.Sprintf("%s%d", prefix, i), AccountID: "a", Cost: 1, Time: time.Unix(1, 0)}
	}
	return es
}

func logIDs(es []store.Entry) []string {
	var s []string
	for _, e := range es {
		s = append(s, e.RequestID)
	}
	return s
}

// The log is written with zeros ahead of its lines, keeps what was
// synced, drops and zeroes a torn tail (with anything a crash left past
// it), grows past its first length, and is zeroed when emptied.
func TestLogPreallocated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LogFile)
	l, got := reopen(t, nil, dir)
	if fi, err := os.Stat(path); err != nil || fi.Size() != LogPrealloc || len(got) != 0 {
		t.Fatalf("new log: %v %v, holds %v", fi.Size(), err, got)
	}
	first := logEntries("x", 3)
	if err := l.append(first); err != nil {
		t.Fatal(err)
	}
	l, got = reopen(t, l, dir)
	if !slices.Equal(got, logIDs(first)) {
		t.Fatalf("after a reopen: %v", got)
	}

	// A crash in the middle of a batch: its first sector not written, a
	// later one written whole (a line that parses), and a cut line.
	end := l.size
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(`{"id":"ghost","a":"a","c":1,"t":0}`+"\n"), end+600)
	f.WriteAt([]byte(`{"id":"torn","a":"a","c":1`), end+1200)
	f.Close()
	l, got = reopen(t, l, dir)
	if !slices.Equal(got, logIDs(first)) {
		t.Fatalf("after a torn batch: %v", got)
	}
	b, _ := os.ReadFile(path)
	if tail := bytes.Trim(b[end:], "\x00"); len(tail) != 0 || int64(len(b)) != LogPrealloc {
		t.Fatalf("after the torn batch's start: %q, length %d", tail, len(b))
	}

	// Past the first length: the file grows and keeps every line.
	var more []store.Entry
	for l.size < LogPrealloc+LogPrealloc/2 {
		es := logEntries(fmt.Sprintf("m%d-", len(more)), 100)
		if err := l.append(es); err != nil {
			t.Fatal(err)
		}
		more = append(more, es...)
	}
	l, got = reopen(t, l, dir)
	if want := append(logIDs(first), logIDs(more)...); !slices.Equal(got, want) {
		t.Fatalf("after growing: %d lines, want %d", len(got), len(want))
	}
	if fi, _ := os.Stat(path); fi.Size() <= l.size {
		t.Fatalf("grown to %d for %d bytes of lines", fi.Size(), l.size)
	}

	if err := l.truncate(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != LogPrealloc {
		t.Fatalf("emptied, the grown log is %d bytes long", fi.Size())
	}
	if err := l.append(logEntries("y", 1)); err != nil {
		t.Fatal(err)
	}
	_, got = reopen(t, l, dir)
	if !slices.Equal(got, []string{"y0"}) {
		t.Fatalf("after emptying: %v", got)
	}
}

// faultyFile fails the log file's next datasyncs (after a WriteAt has
// put the bytes in place) while failDatasync is above zero.
type faultyFile struct {
	logFile
	failDatasync int
}

func (f *faultyFile) Datasync() error {
	if f.failDatasync > 0 {
		f.failDatasync--
		return errors.New("injected: datasync failed")
	}
	return f.logFile.Datasync()
}

// A refused batch (its sync failed) is zeroed again, so no later start
// charges it, and the next batch follows the last answered one; when even
// that fails, the log takes no more charges.
func TestLogRefusedBatchTakenBack(t *testing.T) {
	dir := t.TempDir()
	l, _ := reopen(t, nil, dir)
	kept := logEntries("kept", 1)
	if err := l.append(kept); err != nil {
		t.Fatal(err)
	}
	ff := &faultyFile{logFile: l.f, failDatasync: 1}
	l.f = ff
	if err := l.append(logEntries("ra", 3)); err == nil {
		t.Fatal("a failed sync was reported as durable")
	}
	// A line as long as the first refused one: the other refused lines
	// would follow it whole.
	later := logEntries("rb", 1)
	if err := l.append(later); err != nil {
		t.Fatal(err)
	}
	l.f = ff.logFile
	l, got := reopen(t, l, dir)
	if want := append(logIDs(kept), logIDs(later)...); !slices.Equal(got, want) {
		t.Fatalf("after a refused batch: %v, want %v", got, want)
	}

	ff = &faultyFile{logFile: l.f, failDatasync: 2} // the batch's sync and its undo's
	l.f = ff
	if err := l.append(logEntries("refused2-", 1)); err == nil {
		t.Fatal("a failed sync was reported as durable")
	}
	if err := l.append(logEntries("after", 1)); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("a log that could not take a batch back took another: %v", err)
	}
}

// Emptying that fails part way still writes the next lines where a start
// reads them.
func TestLogTruncateFailsPartWay(t *testing.T) {
	dir := t.TempDir()
	l, _ := reopen(t, nil, dir)
	if err := l.append(logEntries("applied", 50)); err != nil {
		t.Fatal(err)
	}
	ff := &faultyFile{logFile: l.f, failDatasync: 1}
	l.f = ff
	if err := l.truncate(); err == nil {
		t.Fatal("a failed sync of the zeros was not reported")
	}
	l.f = ff.logFile
	answered := logEntries("answered", 2)
	if err := l.append(answered); err != nil {
		t.Fatal(err)
	}
	if _, got := reopen(t, l, dir); !slices.Equal(got, logIDs(answered)) {
		t.Fatalf("after a failed emptying: %v, want %v", got, logIDs(answered))
	}
}
