package cached

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// reopen closes l and opens the log in dir again, returning the request
// ids it holds.
func reopen(t *testing.T, l *chargeLog, dir string) (*chargeLog, []string) {
	t.Helper()
	if l != nil {
		l.close()
	}
	l, entries, err := openLog(dir, LogFile, nil)
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

// gated holds the backend's transactions at a gate, so a test can keep
// the backend behind the log: with hold set, each transaction tells
// arrived that it is there, then waits for a token on gate; release (or
// the test's end) lets every transaction through.
type gated struct {
	*sqlite.DB
	mu      sync.Mutex
	held    bool
	gate    chan struct{}
	arrived chan struct{}
	ids     []string // the request ids settled, in order
}

func newGated(t *testing.T, db *sqlite.DB) *gated {
	g := &gated{DB: db}
	t.Cleanup(g.release)
	return g
}

// hold stops the transactions from now on at the gate.
func (g *gated) hold() (gate chan<- struct{}, arrived <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.gate, g.arrived = true, make(chan struct{}), make(chan struct{}, 16)
	return g.gate, g.arrived
}

// release lets every transaction through, those waiting too.
func (g *gated) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.gate)
	}
}

func (g *gated) SettleBatch(ctx context.Context, entries []store.Entry) ([]bool, error) {
	g.mu.Lock()
	held, gate, arrived := g.held, g.gate, g.arrived
	g.mu.Unlock()
	if held {
		arrived <- struct{}{}
		<-gate
	}
	g.mu.Lock()
	g.ids = append(g.ids, logIDs(entries)...)
	g.mu.Unlock()
	return g.DB.SettleBatch(ctx, entries)
}

// logLines counts the charges in a segment file.
func logLines(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(bytes.TrimRight(b, "\x00"), []byte("\n"))
}

// Under a load that never lets the backend catch up, the log stays small:
// the writer goes over to the other segment once its own holds
// LogTruncateSize, and the one it left is emptied once the backend holds
// it all. While the backend is behind, the segment written keeps growing
// (nothing the backend lacks is ever emptied).
func TestLogSegmentsTakeTurns(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := newGated(t, db) // the account and the first charges go through
	s, err := New(g, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		g.release() // a failed check leaves the backend held
		s.Close()
	}()
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	// Lines of about 1 KB, so a segment fills with a few hundred.
	model := strings.Repeat("m", 1000)
	next := 0
	settle := func(n int) {
		t.Helper()
		for range n {
			next++
			if ok, err := s.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%05d", next), AccountID: "a", Model: model, Cost: 1}); !ok || err != nil {
				t.Fatalf("charge %d: %v %v", next, ok, err)
			}
		}
	}
	perSegment := 0
	for s.log.size < LogTruncateSize {
		settle(1)
		perSegment++
	}
	// What was logged so far is in the backend, none of what follows.
	s.flush()
	gate, arrived := g.hold()
	settle(1) // the writer goes over to LogFile2
	if a, b := logLines(t, dir, LogFile), logLines(t, dir, LogFile2); a != perSegment || b != 1 {
		t.Fatalf("after the turn: %d and %d charges in the segments, want %d and 1", a, b, perSegment)
	}
	s.nudge()
	<-arrived // the applier holds the turn's charge at the gate
	// LogFile2 fills past its size; the writer stays with it, since
	// LogFile is not emptied yet.
	settle(perSegment + 10)
	if a, b := logLines(t, dir, LogFile), logLines(t, dir, LogFile2); a != perSegment || b != perSegment+11 {
		t.Fatalf("backend behind: %d and %d charges, want %d and %d", a, b, perSegment, perSegment+11)
	}
	gate <- struct{}{} // the turn's charge reaches the backend
	s.nudge()
	<-arrived // the applier's next transaction: it emptied LogFile first
	if a, b := logLines(t, dir, LogFile), logLines(t, dir, LogFile2); a != 0 || b != perSegment+11 {
		t.Fatalf("backend still %d charges behind: %d and %d charges, want LogFile emptied and %d", perSegment+10, a, b, perSegment+11)
	}
	g.release()
	s.flush() // the backend holds everything
	settle(1) // back to LogFile, and LogFile2 is emptied once applied
	s.flush()
	if a, b := logLines(t, dir, LogFile), logLines(t, dir, LogFile2); a != 1 || b != 0 {
		t.Fatalf("second turn: %d and %d charges, want 1 and 0", a, b)
	}
	sp, err := db.Spend(ctx, "a", time.Now())
	if err != nil || sp.Total != pricing.Money(next) {
		t.Fatalf("backend total %v %v, want %d", sp.Total, err, next)
	}
}

// At start both segments are applied, the older (by its first charge's
// time) first, and emptied.
func TestLogSegmentsReplayedInOrder(t *testing.T) {
	dir := t.TempDir()
	at := func(sec int64, ids ...string) []store.Entry {
		var es []store.Entry
		for _, id := range ids {
			es = append(es, store.Entry{RequestID: id, AccountID: "a", Cost: 1, Time: time.Unix(sec, 0)})
		}
		return es
	}
	for name, es := range map[string][]store.Entry{LogFile: at(2000, "new1", "new2"), LogFile2: at(1000, "old1", "old2")} {
		l, _, err := openLog(dir, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.append(es); err != nil {
			t.Fatal(err)
		}
		l.close()
	}
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAccount(context.Background(), store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	g := newGated(t, db)
	s, err := New(g, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := fmt.Sprint(g.ids); got != "[old1 old2 new1 new2]" {
		t.Fatalf("replayed %s, want the older segment first", got)
	}
	if a, b := logLines(t, dir, LogFile), logLines(t, dir, LogFile2); a != 0 || b != 0 {
		t.Fatalf("after the replay: %d and %d charges left", a, b)
	}
}

// appendLine writes a charge's line exactly as json.Marshal does, so the
// log reads back as before, whatever the strings hold.
func FuzzAppendLine(f *testing.F) {
	f.Add("req-0123", "acct", "chat", "gpt-4.1-mini", "token", int64(88), int64(1000), int64(1764000000000000000), int64(0), "key-1", int64(80), int64(8), int64(0), int64(0), int64(0), "", "", "", "")
	f.Add("", "a\"<b>&\\", "", "\x00\x1f\x7f", "é\u2028\xff", int64(0), int64(-5), int64(-1), int64(7), "", int64(0), int64(0), int64(12), int64(-3), int64(1e9), "node-1\"x", "n1-8", "\u2028n1-9", "acme\x00")
	f.Fuzz(func(t *testing.T, id, account, endpoint, model, unit string, units, cost, at, free int64, key string, in, out, short, lm, lt int64, hold, keyHold, orgHold, org string) {
		l := logLine{RequestID: id, Account: account, Endpoint: endpoint, Model: model, Units: units, Unit: unit, Cost: cost, Time: at, Free: free,
			Key: key, Input: in, Output: out, Shortfall: short, LimitMonth: lm, LimitTotal: lt, Hold: hold,
			KeyHold: keyHold, OrgHold: orgHold, Org: org}
		want, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendLine([]byte("x"), l); string(got) != "x"+string(want) {
			t.Fatalf("appendLine:\n%s\njson.Marshal:\n%s", got[1:], want)
		}
	})
}

// A charge read back from the log is the charge written: its key and its
// tokens too, so a charge applied after a crash counts in usage figures
// as it would have; the spool's lines carry its hold records and
// organization too, the charge log's leave them out (no hold outlives
// the process there).
func TestLogKeepsEveryField(t *testing.T) {
	wrote := []store.Entry{
		{RequestID: "r1", AccountID: "a", Endpoint: "chat", Model: "m", Units: 130, Unit: "token", Cost: 7, Time: time.Unix(5, 6).UTC(),
			FreeMonthlyCredit: 9, KeyID: "key_1", InputTokens: 100, OutputTokens: 30, Shortfall: 4, Limits: store.Limits{Month: 11, Total: 12}, HoldID: "n1-7",
			KeyHoldID: "n1-8", OrgHoldID: "n1-9", OrgID: "acme"},
		{RequestID: "r2", AccountID: "b", Endpoint: "images", Model: "gpt-image-1", Units: 2, Unit: "image", Cost: 8, Time: time.Unix(7, 0).UTC(), KeyID: "key_2"},
	}
	withoutHolds := slices.Clone(wrote)
	withoutHolds[0].HoldID, withoutHolds[0].KeyHoldID, withoutHolds[0].OrgHoldID, withoutHolds[0].OrgID = "", "", "", ""
	for _, tc := range []struct {
		name  string
		holds bool
		want  []store.Entry
	}{{"charge log", false, withoutHolds}, {"spool", true, wrote}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, err := openLog(dir, LogFile, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.holds = tc.holds
			if err := l.append(wrote); err != nil {
				t.Fatal(err)
			}
			l.close()
			l, got, err := openLog(dir, LogFile, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.close()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("read back\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
