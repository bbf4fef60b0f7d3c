package caddymodule

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"

	"github.com/caddy-gw/caddy-gw/internal/dsync"
	"go.uber.org/zap"
)

// MinProcs is the fewest Go processors (GOMAXPROCS) the gateway runs on
// where its charge log's fsync blocks a processor (no io_uring, see
// internal/dsync): a processor whose goroutine waits in a syscall runs
// nothing else until the runtime takes it back, so a second one lets the
// other calls go on meanwhile, on the same CPU. Where the sync waits in
// the poller instead, one processor per CPU does best, and Go's own
// choice stands. Set the GOMAXPROCS environment variable to choose
// otherwise.
const MinProcs = 2

// GCFloor is the least the heap grows between two garbage collections.
// The gateway's live heap is a few megabytes, so Go's default (collect
// when the heap has doubled) collects after every few megabytes of
// garbage: several times a second under load, and each collection's mark
// phase shares the CPU with the calls of that moment (at one connection it
// made the slowest call in a hundred twice as slow). With the floor a
// collection waits for GCFloor of new heap, whatever the live heap, so the
// resident memory can grow by about as much. Setting the GOGC or
// GOMEMLIMIT environment variable leaves the collector as they say.
const GCFloor = 64 << 20

var tuned sync.Once

// tuneProcess applies GCFloor to the process, and MinProcs where this
// system has no io_uring, once.
func tuneProcess(logger *zap.Logger) {
	tuned.Do(func() {
		if !dsync.Available() {
			raiseProcs(logger, "no io_uring here")
		}
		if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
			newGCFloor(GCFloor).arm()
		}
	})
}

// raiseProcs applies MinProcs (unless the GOMAXPROCS environment variable
// chose): the charge log's fsync blocks a processor, for the reason why.
func raiseProcs(logger *zap.Logger, why string) {
	if n := runtime.GOMAXPROCS(0); n < MinProcs && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(MinProcs)
		logger.Info("raised GOMAXPROCS so an fsync does not idle the only processor",
			zap.Int("from", n), zap.Int("to", MinProcs), zap.String("why", why))
	}
}

// gcFloor sets the collector's percentage (GOGC) after every collection,
// so that the next one waits for floor bytes of new heap at least.
type gcFloor struct {
	floor  uint64
	live   []rtmetrics.Sample
	onTune func(percent int) // tests: told of each setting
	off    atomic.Bool       // tests: stop after the next collection
}

func newGCFloor(floor uint64) *gcFloor {
	return &gcFloor{floor: floor, live: []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// gcCycle is garbage at once: its finalizer runs after the next collection.
type gcCycle struct{ f *gcFloor }

// arm has tune run after the next collection, and arm again.
func (f *gcFloor) arm() {
	runtime.SetFinalizer(&gcCycle{f}, func(c *gcCycle) {
		if c.f.off.Load() {
			return
		}
		c.f.tune()
		c.f.arm()
	})
}

// tune sets the percentage for the live heap the last collection found.
func (f *gcFloor) tune() {
	rtmetrics.Read(f.live)
	live := f.live[0].Value.Uint64()
	if live == 0 {
		return
	}
	percent := int(max(100, f.floor*100/live))
	debug.SetGCPercent(percent)
	if f.onTune != nil {
		f.onTune(percent)
	}
}
