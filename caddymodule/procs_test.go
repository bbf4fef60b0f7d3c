package caddymodule

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"testing"
	"time"

	"go.uber.org/zap"
)

// After each collection the floor sets GOGC so the next one waits for
// the floor's worth of new heap: its percentage of the live heap, and
// never under Go's default of 100.
func TestGCFloor(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	live := func() uint64 {
		s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		rtmetrics.Read(s)
		return s[0].Value.Uint64()
	}
	gogc := func() uint64 {
		s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
		rtmetrics.Read(s)
		return s[0].Value.Uint64()
	}
	runtime.GC()
	for _, tc := range []struct {
		floor uint64
		want  func(live uint64) uint64
	}{
		{floor: 1 << 40, want: func(l uint64) uint64 { return (1 << 40) * 100 / l }},
		{floor: 1, want: func(uint64) uint64 { return 100 }},
	} {
		f := newGCFloor(tc.floor)
		f.tune()
		if got, want := gogc(), tc.want(live()); got != want {
			t.Errorf("floor %d, live heap %d: GOGC %d, want %d", tc.floor, live(), got, want)
		}
	}

	// Armed, it tunes after every collection, not only the first.
	tuned := make(chan int, 1)
	f := newGCFloor(1 << 40)
	f.onTune = func(p int) {
		select {
		case tuned <- p:
		default:
		}
	}
	f.arm()
	for i := range 2 {
		runtime.GC()
		select {
		case p := <-tuned:
			if p <= 100 {
				t.Fatalf("collection %d: GOGC %d", i, p)
			}
		case <-time.After(time.Minute):
			t.Fatalf("collection %d: not tuned", i)
		}
	}
	f.off.Store(true)
}

// min_procs raises GOMAXPROCS, unless the GOMAXPROCS environment
// variable chose; a config without it gives GOMAXPROCS back to Go.
func TestMinProcs(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	runtime.GOMAXPROCS(1)
	const want = 3
	a := &App{logger: zap.NewNop(), Runtime: &RuntimeConfig{MinProcs: want}}
	t.Setenv("GOMAXPROCS", "1")
	tuneProcess(a)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d, want the environment's 1", n)
	}
	untuneProcess(a)
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(1)
	tuneProcess(a)
	if n := runtime.GOMAXPROCS(0); n != want {
		t.Fatalf("GOMAXPROCS %d, want %d", n, want)
	}
	// A reload without the option gives it back.
	next := &App{logger: zap.NewNop()}
	tuneProcess(next)
	if n, def := runtime.GOMAXPROCS(0), defaultProcs(t); n != def {
		t.Fatalf("after a config without min_procs: GOMAXPROCS %d, want Go's default %d", n, def)
	}
	// The old config's stop leaves the new one's settings alone.
	untuneProcess(a)
	if tuning.owner != next {
		t.Fatal("the old config's stop took the tuning from the new one")
	}
	untuneProcess(next)
}

// defaultProcs is the GOMAXPROCS Go chooses itself.
func defaultProcs(t *testing.T) int {
	t.Helper()
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	n := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev)
	return n
}

// Without a runtime block nothing is tuned: the collector's percentage
// and GOMAXPROCS stay as they were. With gc_floor the floor is armed
// (unless GOGC or GOMEMLIMIT is set), and a config without it, or the
// stop of the config that set it, disarms it and gives the percentage
// back.
func TestGCFloorOption(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(137))
	procs := runtime.GOMAXPROCS(0)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	bare := &App{logger: zap.NewNop()}
	tuneProcess(bare)
	if tuning.floor != nil || gogcPercent() != 137 || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("no runtime block: floor %v, GOGC %d, GOMAXPROCS %d; want none, 137, %d", tuning.floor, gogcPercent(), runtime.GOMAXPROCS(0), procs)
	}
	a := &App{logger: zap.NewNop(), Runtime: &RuntimeConfig{GCFloor: 1 << 40}}
	tuneProcess(a)
	if tuning.floor == nil || tuning.floor.floor != 1<<40 {
		t.Fatalf("gc_floor: floor %v, want one of %d bytes", tuning.floor, 1<<40)
	}
	runtime.GC()
	untuneProcess(a)
	if tuning.floor != nil || gogcPercent() != 137 {
		t.Fatalf("after stop: floor %v, GOGC %d; want none, 137", tuning.floor, gogcPercent())
	}
	t.Setenv("GOGC", "137")
	tuneProcess(a)
	if tuning.floor != nil {
		t.Fatal("GOGC set: the floor was armed")
	}
	untuneProcess(a)
}

// gogcPercent is the collector's percentage now.
func gogcPercent() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}
