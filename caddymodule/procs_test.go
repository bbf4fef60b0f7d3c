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

// Where a charge's sync blocks a processor, one processor is raised to
// MinProcs, unless the GOMAXPROCS environment variable chose.
func TestRaiseProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	t.Setenv("GOMAXPROCS", "1")
	raiseProcs(zap.NewNop(), "test")
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d, want the environment's 1", n)
	}
	t.Setenv("GOMAXPROCS", "")
	raiseProcs(zap.NewNop(), "test")
	if n := runtime.GOMAXPROCS(0); n != MinProcs {
		t.Fatalf("GOMAXPROCS %d, want %d", n, MinProcs)
	}
}
