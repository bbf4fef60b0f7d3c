package cached

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// errPowerOut is what a file or backend answers once the power is cut.
var errPowerOut = errors.New("injected: the power is out")

// powerFile is a log file in a machine whose power can be cut. Writes go
// to the real file (a reopen reads them, as the kernel's cache would
// serve them); a sync records the file as it is then as what survives a
// power cut; cut puts back the synced image, with whatever sectors of the
// unsynced writes keep says reached the disk anyway, and from then on
// every write and sync fails (the machine is off).
type powerFile struct {
	logFile
	path string

	mu      sync.Mutex
	durable []byte // the file as of its last sync
	out     bool
	syncs   int
	// syncErr, when set, fails every sync (a failing disk).
	syncErr error
}

func newPowerFile(t *testing.T, f logFile, path string) *powerFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &powerFile{logFile: f, path: path, durable: data}
}

func (p *powerFile) WriteAt(b []byte, off int64) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out {
		return 0, errPowerOut
	}
	return p.logFile.WriteAt(b, off)
}

func (p *powerFile) Truncate(size int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out {
		return errPowerOut
	}
	return p.logFile.Truncate(size)
}

func (p *powerFile) Sync() error     { return p.snapshot() }
func (p *powerFile) Datasync() error { return p.snapshot() }

// snapshot is a sync: what the file holds now survives a power cut.
func (p *powerFile) snapshot() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out {
		return errPowerOut
	}
	if p.syncErr != nil {
		return p.syncErr
	}
	data, err := os.ReadFile(p.path)
	if err != nil {
		return err
	}
	p.durable, p.syncs = data, p.syncs+1
	return nil
}

func (p *powerFile) syncCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncs
}

// sectorSize is the unit a disk writes whole.
const sectorSize = 512

// cut cuts the power: the file on disk becomes its last synced image,
// except the sectors of later writes for which keep is true (a disk
// writes back what it has in whatever order; keep(-1) says whether a new
// length reached it).
func (p *powerFile) cut(keep func(sector int) bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = true
	cur, err := os.ReadFile(p.path)
	if err != nil {
		return err
	}
	n := len(p.durable)
	if len(cur) > n && keep(-1) {
		n = len(cur)
	}
	img := make([]byte, n)
	copy(img, p.durable)
	for at := 0; at < min(n, len(cur)); at += sectorSize {
		end := min(at+sectorSize, n, len(cur))
		if !slices.Equal(img[at:end], cur[at:end]) && keep(at/sectorSize) {
			copy(img[at:end], cur[at:end])
		}
	}
	return os.WriteFile(p.path, img, 0o600)
}

// cutBackend is the embedded store of a machine whose power can be cut:
// from then on it takes no charge (what it committed before stays, as
// SQLite's synced commits do).
type cutBackend struct {
	*sqlite.DB
	out atomic.Bool
}

func (b *cutBackend) SettleBatch(ctx context.Context, entries []store.Entry) ([]bool, error) {
	if b.out.Load() {
		return nil, errPowerOut
	}
	return b.DB.SettleBatch(ctx, entries)
}

// powered is a store on a machine whose power a test cuts: both segments
// of its charge log are powerFiles, and its syncer's interval passes only
// when the test fires it.
type powered struct {
	s       *Store
	b       *cutBackend
	dir     string
	files   []*powerFile
	waits   chan time.Duration // each wait the syncer asks for
	fire    chan time.Time     // ends the syncer's wait
	synced  chan struct{}      // each sync the syncer made
	initial pricing.Money      // account a's balance at the start
}

// openPowered opens the embedded store in a new folder, with account "a"
// holding a prepaid balance, in interval mode when interval > 0.
func openPowered(t *testing.T, interval time.Duration) *powered {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &powered{b: &cutBackend{DB: db}, dir: dir, waits: make(chan time.Duration, 64), fire: make(chan time.Time),
		synced: make(chan struct{}, 64), initial: usd("1000")}
	s, err := newStore(p.b, dir)
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	for l, name := range map[*chargeLog]string{s.log: LogFile, s.prev: LogFile2} {
		pf := newPowerFile(t, l.f, filepath.Join(dir, name))
		l.f = pf
		p.files = append(p.files, pf)
	}
	s.syncer.after = func(d time.Duration) <-chan time.Time {
		p.waits <- d
		return p.fire
	}
	s.syncer.synced = func() { p.synced <- struct{}{} }
	if err := s.SetSyncInterval(interval); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(func() { s.Close() })
	if err := s.CreateAccount(context.Background(), store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(p.initial)}); err != nil {
		t.Fatal(err)
	}
	return p
}

// settle charges account a once per id, one after the other, each
// answered as charged.
func (p *powered) settle(t *testing.T, model string, ids ...string) {
	t.Helper()
	for i, id := range ids {
		e := &store.Entry{RequestID: id, AccountID: "a", Model: model, Unit: "token", Cost: usd("0.001") * pricing.Money(1+i%7)}
		if ok, err := p.s.Settle(context.Background(), e); !ok || err != nil {
			t.Fatalf("charge %s: %v %v", id, ok, err)
		}
	}
}

// syncs counts the syncs of both segments.
func (p *powered) syncs() int {
	n := 0
	for _, f := range p.files {
		n += f.syncCount()
	}
	return n
}

// tick lets the syncer's interval pass and waits for its sync.
func (p *powered) tick(t *testing.T) {
	t.Helper()
	p.fire <- time.Now()
	<-p.synced
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// In interval mode an answer waits for no sync: many charges are answered
// with none made, the syncer asks to wait at most the interval from the
// first of them, and then one sync covers them all. In sync mode each
// answer waits for a sync of its own.
func TestIntervalAnswersWithoutSync(t *testing.T) {
	const interval = 50 * time.Millisecond
	p := openPowered(t, interval)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := &store.Entry{RequestID: fmt.Sprintf("c%d", i), AccountID: "a", Cost: usd("0.01")}
			if ok, err := p.s.Settle(context.Background(), e); !ok || err != nil {
				t.Errorf("charge %d: %v %v", i, ok, err)
			}
		})
	}
	wg.Wait()
	if got := p.syncs(); got != 0 {
		t.Fatalf("%d syncs before the interval passed: an answer waited for one", got)
	}
	if d := <-p.waits; d <= 0 || d > interval {
		t.Fatalf("the syncer waits %s, want at most the interval %s", d, interval)
	}
	p.tick(t)
	if got := p.syncs(); got != 1 {
		t.Fatalf("%d syncs for %d charges of one interval, want 1", got, n)
	}
	if _, charges := p.s.Batches(); charges != n {
		t.Fatalf("%d charges written, want %d", charges, n)
	}

	q := openPowered(t, 0)
	q.settle(t, "", ids("s", 5)...)
	if got := q.syncs(); got != 5 {
		t.Fatalf("sync mode: %d syncs for 5 charges one after the other, want 5", got)
	}
}

// The background syncer syncs, on its own, within the interval of the
// first write it has not synced.
func TestIntervalSyncerSyncsOnItsOwn(t *testing.T) {
	p := openPowered(t, 5*time.Millisecond)
	p.s.syncer.after = time.After // the real clock
	p.settle(t, "", "on-time")
	select {
	case <-p.synced:
	case <-time.After(time.Minute):
		t.Fatal("no sync a minute after the charge")
	}
	if !strings.Contains(string(p.files[0].durableCopy()), `"id":"on-time"`) && !strings.Contains(string(p.files[1].durableCopy()), `"id":"on-time"`) {
		t.Fatal("the sync did not make the charge durable")
	}
}

// After a background sync fails, interval mode syncs each batch again
// before its answer until a background sync succeeds: a disk that fails
// for a moment leaves no charge answered and undurable past the interval
// that failed, and one that keeps failing refuses the next charge, which
// is then not charged.
func TestIntervalAfterAFailedSync(t *testing.T) {
	p := openPowered(t, 50*time.Millisecond)
	failing := func(err error) {
		for _, f := range p.files {
			f.mu.Lock()
			f.syncErr = err
			f.mu.Unlock()
		}
	}
	failing(errors.New("the disk failed"))
	p.settle(t, "", "before")
	p.tick(t) // fails
	failing(nil)
	synced := p.syncs()
	p.settle(t, "", "after")
	if got := p.syncs(); got != synced+1 {
		t.Fatalf("%d syncs for a charge after a failed background sync, want its own", got-synced)
	}
	p.tick(t) // succeeds
	synced = p.syncs()
	p.settle(t, "", "again")
	if got := p.syncs(); got != synced {
		t.Fatalf("%d syncs for a charge once a background sync succeeded, want none", got-synced)
	}

	q := openPowered(t, 50*time.Millisecond)
	p = q
	failing(errors.New("the disk failed"))
	q.settle(t, "", "before")
	q.tick(t)
	e := &store.Entry{RequestID: "refused", AccountID: "a", Unit: "token", Cost: usd("0.001")}
	if ok, err := q.s.Settle(context.Background(), e); ok || err == nil {
		t.Fatalf("a charge on a disk that keeps failing: %v %v, want refused", ok, err)
	}
	acc, err := q.s.Account(context.Background(), "a")
	if err != nil || *acc.Balance != q.initial-usd("0.001") {
		t.Fatalf("balance %v (%v), want the first charge alone taken", acc.Balance, err)
	}
}

func (p *powerFile) durableCopy() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.durable)
}

// A power cut loses at most the charges written since the last sync
// (interval mode) and none in sync mode; a killed process (the kernel's
// cache survives) loses none in either. None is charged twice, and after
// the log is replayed the balance is the start less the surviving ledger
// entries, and the journal checks. The first charges fill more than a
// segment, so they span both.
func TestPowerCut(t *testing.T) {
	all := func(int) bool { return true }
	none := func(int) bool { return false }
	type cutCase struct {
		name     string
		interval time.Duration
		keep     func() func(int) bool
		// lossless: nothing answered may be lost; dropped: every
		// unsynced charge is.
		lossless, dropped bool
	}
	cases := []cutCase{
		{name: "sync", keep: func() func(int) bool { return none }, lossless: true},
		{name: "interval, power cut", interval: 5 * time.Millisecond, keep: func() func(int) bool { return none }, dropped: true},
		{name: "interval, process killed", interval: 5 * time.Millisecond, keep: func() func(int) bool { return all }, lossless: true},
	}
	for seed := range uint64(4) {
		cases = append(cases, cutCase{name: fmt.Sprintf("interval, torn write-back %d", seed), interval: 5 * time.Millisecond,
			keep: func() func(int) bool {
				r := rand.New(rand.NewPCG(seed, 42))
				return func(int) bool { return r.IntN(20) != 0 } // most sectors reach the disk
			}})
	}
	model := strings.Repeat("m", 1000) // lines of about 1 KB
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := openPowered(t, tc.interval)
			ctx := context.Background()
			// More than a segment holds: the writer turns to the other.
			synced := ids("s", LogTruncateSize/1000+40)
			p.settle(t, model, synced[:len(synced)/2]...)
			p.s.flush() // some in the backend already, the rest only in the log
			p.settle(t, model, synced[len(synced)/2:]...)
			if tc.interval > 0 {
				<-p.waits
				p.tick(t)
			}
			// The applier takes nothing from here on: the cut comes
			// before its next transaction.
			p.b.out.Store(true)
			unsynced := ids("u", 60)
			p.settle(t, model, unsynced...)
			keep := tc.keep()
			for _, f := range p.files {
				if err := f.cut(keep); err != nil {
					t.Fatal(err)
				}
			}
			_ = p.s.Close() // the machine is off: its syncs fail

			db, err := sqlite.Open(p.dir)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(db, p.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ledger, err := s.Entries(ctx, "a", 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			var sum pricing.Money
			for _, e := range ledger {
				if seen[e.RequestID] {
					t.Fatalf("%s is in the ledger twice", e.RequestID)
				}
				seen[e.RequestID] = true
				sum += e.Cost
			}
			for _, id := range synced {
				if !seen[id] {
					t.Fatalf("%s was synced before the cut and is lost", id)
				}
			}
			// What survives of the unsynced charges is the start of
			// them (the log is read up to its first hole).
			kept := 0
			for kept < len(unsynced) && seen[unsynced[kept]] {
				kept++
			}
			if len(ledger) != len(synced)+kept {
				t.Fatalf("%d ledger entries: %d synced and the first %d unsynced, and %d others",
					len(ledger), len(synced), kept, len(ledger)-len(synced)-kept)
			}
			switch {
			case tc.lossless && kept != len(unsynced):
				t.Fatalf("%d of %d answered charges lost", len(unsynced)-kept, len(unsynced))
			case tc.dropped && kept != 0:
				t.Fatalf("%d unsynced charges survived a cut that kept nothing unsynced", kept)
			}
			acc, err := s.Account(ctx, "a")
			if err != nil || acc.Balance == nil || *acc.Balance != p.initial-sum {
				t.Fatalf("balance %v (%v), want %s less the ledger's %s", acc.Balance, err, p.initial, sum)
			}
			if sp, err := s.Spend(ctx, "a", time.Now()); err != nil || sp.Total != sum {
				t.Fatalf("spend %+v (%v), want %s", sp, err, sum)
			}
			if problems, err := s.CheckJournal(ctx); err != nil || len(problems) != 0 {
				t.Fatalf("journal check: %+v %v", problems, err)
			}
			t.Logf("%d synced charges kept, %d of %d unsynced", len(synced), kept, len(unsynced))
		})
	}
}

// Close syncs what interval mode left unsynced: charges the backend
// refused (kept in the log for the next start) survive a power cut right
// after it.
func TestCloseSyncsPending(t *testing.T) {
	p := openPowered(t, MaxSyncInterval)
	p.b.out.Store(true) // the backend takes nothing: the log keeps it all
	pending := ids("p", 20)
	p.settle(t, "", pending...)
	if got := p.syncs(); got != 0 {
		t.Fatalf("%d syncs before Close", got)
	}
	if err := p.s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range p.files {
		if err := f.cut(func(int) bool { return false }); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sqlite.Open(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, p.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledger, err := s.Entries(context.Background(), "a", 1<<20)
	if err != nil || len(ledger) != len(pending) {
		t.Fatalf("%d ledger entries (%v), want the %d charges Close synced", len(ledger), err, len(pending))
	}
}

// The sync interval is 0 (sync mode) up to MaxSyncInterval.
func TestCheckSyncInterval(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: true, time.Nanosecond: true, 5 * time.Millisecond: true, MaxSyncInterval: true,
		-time.Nanosecond: false, MaxSyncInterval + 1: false} {
		if err := CheckSyncInterval(d); (err == nil) != ok {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// The spool takes the same choice: in interval mode a charge PostgreSQL
// could not take is settled once written to the spool, synced by the
// spool's syncer (at the latest when the node stops), so the charges
// survive a power cut after Close; in sync mode each is synced before its
// answer.
func TestSpoolSyncInterval(t *testing.T) {
	for _, interval := range []time.Duration{0, MaxSyncInterval} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			ctx := context.Background()
			dbDir, dir := t.TempDir(), t.TempDir()
			db, err := sqlite.Open(dbDir)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
				t.Fatal(err)
			}
			// The backend refuses every charge named bad: each waits in
			// the spool.
			b, err := NewSpooled(&failing{DB: db}, dir)
			if err != nil {
				t.Fatal(err)
			}
			pf := newPowerFile(t, b.spool.log.f, filepath.Join(dir, SpoolFile))
			b.spool.log.f = pf
			b.spool.sync.after = func(time.Duration) <-chan time.Time { return nil } // the interval never passes
			if err := b.SetSyncInterval(interval); err != nil {
				t.Fatal(err)
			}
			spooled := ids("bad-", 5)
			for _, id := range spooled {
				if ok, err := b.Settle(ctx, &store.Entry{RequestID: id, AccountID: "a", Cost: usd("0.01")}); !ok || err != nil {
					t.Fatalf("settle %s: %v %v", id, ok, err)
				}
			}
			want := 0
			if interval == 0 {
				want = len(spooled)
			}
			if got := pf.syncCount(); got != want {
				t.Fatalf("%d syncs of the spool for %d charges, want %d", got, len(spooled), want)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := pf.cut(func(int) bool { return false }); err != nil {
				t.Fatal(err)
			}
			db2, err := sqlite.Open(dbDir)
			if err != nil {
				t.Fatal(err)
			}
			b2, err := NewSpooled(&failing{DB: db2}, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			if got := b2.Spooled(); got != len(spooled) {
				t.Fatalf("%d charges in the spool after a power cut that followed Close, want %d", got, len(spooled))
			}
		})
	}
}

// Going back to sync mode (a reload) syncs at once what interval mode
// wrote, without waiting for the interval; from then on each answer waits
// for its own sync.
func TestSyncModeAgainSyncsAtOnce(t *testing.T) {
	p := openPowered(t, MaxSyncInterval)
	p.settle(t, "", "written")
	<-p.waits // the syncer waits for the interval, which never passes here
	if err := p.s.SetSyncInterval(0); err != nil {
		t.Fatal(err)
	}
	<-p.synced
	if got := p.syncs(); got != 1 {
		t.Fatalf("%d syncs after going back to sync mode, want 1", got)
	}
	p.settle(t, "", "synced")
	if got := p.syncs(); got != 2 {
		t.Fatalf("%d syncs after a charge in sync mode, want 2", got)
	}
	if err := p.s.SetSyncInterval(MaxSyncInterval + 1); err == nil {
		t.Fatal("an interval past MaxSyncInterval was taken")
	}
}

// Sync, what a stopping process does, makes every charge written so far
// durable at once, before the interval has passed.
func TestSyncNow(t *testing.T) {
	p := openPowered(t, MaxSyncInterval)
	p.b.out.Store(true) // the backend takes nothing: the log keeps it all
	pending := ids("n", 5)
	p.settle(t, "", pending...)
	if got := p.syncs(); got != 0 {
		t.Fatalf("%d syncs before Sync", got)
	}
	if err := p.s.Sync(); err != nil {
		t.Fatal(err)
	}
	durable := string(p.files[0].durableCopy()) + string(p.files[1].durableCopy())
	for _, id := range pending {
		if !strings.Contains(durable, `"id":"`+id+`"`) {
			t.Fatalf("charge %s is not durable after Sync", id)
		}
	}
}
