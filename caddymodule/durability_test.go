package caddymodule

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// The durability of the JSON config: sync by default, an interval within
// its bounds, anything else refused with a message naming it.
func TestDurabilityConfig(t *testing.T) {
	for _, tc := range []struct {
		json string
		want time.Duration
		err  string
	}{
		{`{}`, 0, ""},
		{`{"mode":"sync"}`, 0, ""},
		{`{"mode":"interval","interval":"5ms"}`, 5 * time.Millisecond, ""},
		{`{"mode":"interval","interval":1000000000}`, time.Second, ""},
		{`{"mode":"interval"}`, 0, "durability interval: want a duration greater than 0 and at most 1s, got 0s"},
		{`{"mode":"interval","interval":"-1ms"}`, 0, "durability interval: want a duration greater than 0 and at most 1s, got -1ms"},
		{`{"mode":"interval","interval":"2s"}`, 0, "durability interval: want a duration greater than 0 and at most 1s, got 2s"},
		{`{"mode":"sync","interval":"5ms"}`, 0, "durability sync: takes no interval (got 5ms)"},
		{`{"interval":"5ms"}`, 0, "durability sync: takes no interval (got 5ms)"},
		{`{"mode":"fast"}`, 0, `durability: mode "fast": want sync or interval`},
	} {
		var d DurabilityConfig
		if err := json.Unmarshal([]byte(tc.json), &d); err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		got, err := d.syncInterval()
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.json, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.json, got, err, tc.want)
		}
	}
}

// `caddy validate` refuses a JSON config whose interval is out of bounds,
// and takes one within them.
func TestDurabilityValidate(t *testing.T) {
	for iv, want := range map[string]string{`"5ms"`: "", `"1500ms"`: "durability interval: want a duration greater than 0 and at most 1s, got 1.5s"} {
		cfg := new(caddy.Config)
		src := `{"apps":{"gw":{"durability":{"mode":"interval","interval":` + iv + `}}}}`
		if err := caddy.StrictUnmarshalJSON([]byte(src), cfg); err != nil {
			t.Fatal(err)
		}
		err := caddy.Validate(cfg)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("interval %s: validate says %v, want %q", iv, err, want)
		}
	}
}

// Caddyfile.example reads its durability from GW_DURABILITY, sync unless
// set; "interval 5ms" is two words of the option, and an interval out of
// bounds stops the adapt.
func TestExampleDurability(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]DurabilityConfig{
		"":             {Mode: DurabilitySync},
		"sync":         {Mode: DurabilitySync},
		"interval 5ms": {Mode: DurabilityInterval, Interval: caddy.Duration(5 * time.Millisecond)},
		"interval 2s":  {},
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GW_DURABILITY", env)
			if env == "" {
				os.Unsetenv("GW_DURABILITY")
			}
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": "Caddyfile.example"})
			if want.Mode == "" {
				if err == nil || !strings.Contains(err.Error(), "durability interval: want a duration greater than 0 and at most 1s, got 2s") {
					t.Fatalf("adapt with GW_DURABILITY=%q: %v", env, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var cfg struct {
				Apps struct {
					GW App `json:"gw"`
				} `json:"apps"`
			}
			if err := json.Unmarshal(out, &cfg); err != nil {
				t.Fatal(err)
			}
			if got := cfg.Apps.GW.Durability; got != want {
				t.Fatalf("durability %+v, want %+v", got, want)
			}
		})
	}
}

// syncRecorder is a store that records the sync intervals it is given.
type syncRecorder struct {
	store.Store
	set   []time.Duration
	syncs int
}

func (r *syncRecorder) Sync() error {
	r.syncs++
	return nil
}

func (r *syncRecorder) SetSyncInterval(d time.Duration) error {
	r.set = append(r.set, d)
	return nil
}

// Each config that starts gives the pooled store its own durability: a
// reload to interval mode and back to sync changes the store each time.
func TestSetDurability(t *testing.T) {
	var r syncRecorder
	for _, d := range []DurabilityConfig{{Mode: DurabilityInterval, Interval: caddy.Duration(5 * time.Millisecond)}, {}} {
		a := &App{Durability: d}
		iv, err := d.syncInterval()
		if err != nil {
			t.Fatal(err)
		}
		a.syncInterval = iv
		if err := a.setDurability(&r); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(r.set) != "[5ms 0s]" {
		t.Fatalf("the store was given %v, want [5ms 0s]", r.set)
	}
}

// A reload that fails once the new config started (another app of it did
// not start) stops that config: the config serving again gives the store
// its own durability back.
func TestStopGivesDurabilityBack(t *testing.T) {
	var r syncRecorder
	old := &App{syncInterval: 0, durable: &r, prev: new(atomic.Pointer[App]), stopped: new(atomic.Bool)}
	failed := &App{syncInterval: 5 * time.Millisecond, durable: &r, prev: new(atomic.Pointer[App]), stopped: new(atomic.Bool)}
	if err := failed.setDurability(&r); err != nil {
		t.Fatal(err)
	}
	current.Store(failed)
	failed.prev.Store(old)
	t.Cleanup(func() { current.Store(nil) })
	if err := failed.Stop(); err != nil {
		t.Fatal(err)
	}
	if current.Load() != old || fmt.Sprint(r.set) != "[5ms 0s]" || r.syncs != 0 {
		t.Fatalf("the store was given %v and synced %d times, want [5ms 0s] and none", r.set, r.syncs)
	}
	// A config stopped after a reload that worked gives nothing back at
	// the process's exit, where the last config syncs what is left.
	next := &App{syncInterval: 5 * time.Millisecond, durable: &r, prev: new(atomic.Pointer[App]), stopped: new(atomic.Bool)}
	next.prev.Store(old)
	current.Store(next)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := next.Stop(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.set) != "[5ms 0s]" || r.syncs != 1 {
		t.Fatalf("the store was given %v and synced %d times after a reload and an exit, want nothing more and one sync", r.set, r.syncs)
	}
}
