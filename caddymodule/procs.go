package caddymodule

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// RuntimeConfig tunes the Go runtime of the whole Caddy process, which
// every other module of the binary shares. Nothing is tuned unless the
// config asks; the GOGC, GOMEMLIMIT and GOMAXPROCS environment variables
// tune the same things without the gw app (docs/configuration.md).
type RuntimeConfig struct {
	// GCFloor, in bytes, is the least the heap grows between two garbage
	// collections: after each collection the collector's percentage
	// (GOGC) is set so that the next one waits for GCFloor of new heap,
	// whatever the live heap, and the resident memory can grow by about
	// as much. Left to Go when the GOGC or GOMEMLIMIT environment variable
	// is set. Default: 0, Go's own collector settings.
	GCFloor int64 `json:"gc_floor,omitempty"`
	// MinProcs is the fewest Go processors (GOMAXPROCS) the process runs
	// on: where the charge log's fsync blocks a processor (no io_uring,
	// see internal/dsync), a second one lets the other calls go on
	// meanwhile. Left to Go when the GOMAXPROCS environment variable is
	// set. Default: 0, Go's own choice.
	MinProcs int `json:"min_procs,omitempty"`
}

// tuning is what the gw app has set in the runtime, and which app set
// it: a reload applies its own config's tuning, and undoes the last
// one's when it asks for none.
var tuning struct {
	mu    sync.Mutex
	owner *App
	floor *gcFloor // armed; nil when none
	// gcPercent is the collector's percentage before the floor.
	gcPercent int
	// procs is what MinProcs raised GOMAXPROCS to; 0 when it did not.
	procs int
}

// tuneProcess applies a's runtime options to the process, undoing what
// an earlier config set and a does not ask for.
func tuneProcess(a *App) {
	var rc RuntimeConfig
	if a.Runtime != nil {
		rc = *a.Runtime
	}
	tuning.mu.Lock()
	defer tuning.mu.Unlock()
	tuning.owner = a
	setGCFloor(a.logger, uint64(rc.GCFloor))
	setMinProcs(a.logger, rc.MinProcs)
}

// untuneProcess undoes the runtime tuning when a set it last: the config
// that follows a has no gw app, or the process stops.
func untuneProcess(a *App) {
	tuning.mu.Lock()
	defer tuning.mu.Unlock()
	if tuning.owner != a {
		return
	}
	tuning.owner = nil
	setGCFloor(a.logger, 0)
	setMinProcs(a.logger, 0)
}

// setGCFloor arms a floor of floor bytes, or none for 0, in place of the
// one armed. tuning.mu is held.
func setGCFloor(logger *zap.Logger, floor uint64) {
	if f := tuning.floor; f != nil {
		if f.floor == floor {
			return
		}
		f.mu.Lock() // a tune under way ends first, so it cannot undo this
		f.off.Store(true)
		debug.SetGCPercent(tuning.gcPercent)
		f.mu.Unlock()
		tuning.floor = nil
	}
	if floor == 0 {
		return
	}
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		logger.Info("gc_floor left unset: the GOGC or GOMEMLIMIT environment variable rules the collector")
		return
	}
	tuning.gcPercent = debug.SetGCPercent(100)
	tuning.floor = newGCFloor(floor)
	tuning.floor.arm()
	logger.Info("set a floor under the heap's growth between collections", zap.Uint64("bytes", floor))
}

// setMinProcs raises GOMAXPROCS to n, or for 0 gives it back to Go's
// default, unless the GOMAXPROCS environment variable chose. tuning.mu
// is held.
func setMinProcs(logger *zap.Logger, n int) {
	if tuning.procs != 0 && tuning.procs != n {
		runtime.SetDefaultGOMAXPROCS()
		tuning.procs = 0
	}
	if n == 0 || tuning.procs == n {
		return
	}
	if os.Getenv("GOMAXPROCS") != "" {
		logger.Info("min_procs left unset: the GOMAXPROCS environment variable chose")
		return
	}
	if from := runtime.GOMAXPROCS(0); from < n {
		runtime.GOMAXPROCS(n)
		tuning.procs = n
		logger.Info("raised GOMAXPROCS", zap.Int("from", from), zap.Int("to", n))
	}
}

// syncsPlainProcs is the fewest Go processors with which a charge log
// whose fsync blocks a processor leaves the other calls one to run on.
const syncsPlainProcs = 2

// warnSyncsPlain tells the operator, where the charge log's fsync blocks
// a processor (why says what refused io_uring) and the process runs on
// one, that the calls wait for each sync: min_procs or GOMAXPROCS gives
// them a second processor on the same CPU.
func warnSyncsPlain(logger *zap.Logger, why error) {
	if n := runtime.GOMAXPROCS(0); n < syncsPlainProcs {
		logger.Warn("the charge log's fsync blocks the only Go processor; set min_procs 2 in the gw runtime block, or GOMAXPROCS=2",
			zap.Int("gomaxprocs", n), zap.NamedError("why", why))
	}
}

// gcFloor sets the collector's percentage (GOGC) after every collection,
// so that the next one waits for floor bytes of new heap at least.
type gcFloor struct {
	floor  uint64
	live   []rtmetrics.Sample
	onTune func(percent int) // tests: told of each setting
	off    atomic.Bool       // stop after the next collection
	// mu orders a tune's setting against the floor's removal, which
	// restores the percentage it found.
	mu sync.Mutex
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off.Load() {
		return
	}
	debug.SetGCPercent(percent)
	if f.onTune != nil {
		f.onTune(percent)
	}
}
