package lanes

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// A record comes back as it was put, every field of it.
func TestDecisionRoundTrip(t *testing.T) {
	d := NewDecisions()
	dec := Decision{ID: "req-1", AccountID: "acct", Time: time.Unix(1_700_000_000, 123).UTC(), Requested: "gw-auto",
		Kind: Kind("code"), Lane: "reasoning", Vision: true, Escalated: true, Prompt: 1234,
		Candidates: []string{"a", "bb", "ccc"}, Chosen: "bb", Cost: pricing.Money(987654321), Latency: 2500 * time.Millisecond}
	d.Now = func() time.Time { return dec.Time }
	d.Put(dec)
	got, ok := d.Get("req-1")
	want := dec
	want.LatencyMS = 2500
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v\nwant %+v", got, ok, want)
	}
	// The same id again replaces it (numbers below zero read back too).
	dec.Chosen, dec.Cost = "ccc", -7
	d.Put(dec)
	if got, _ := d.Get("req-1"); got.Chosen != "ccc" || got.Cost != -7 {
		t.Fatalf("after a second put: %q %d", got.Chosen, got.Cost)
	}
	if _, ok := d.Get("req-2"); ok {
		t.Fatal("an id never put is found")
	}
}

// In a ring smaller than the records put, records of every size wrap
// around it: the newest are kept, each found by its id and read whole,
// the oldest dropped, and nothing is found that was dropped.
func TestDecisionsRingWraps(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	d := newDecisions(4096)
	d.Now = func() time.Time { return now }
	put := func(i int) {
		d.Put(Decision{ID: fmt.Sprintf("req-%d", i), Time: now, Chosen: strings.Repeat("m", i%300), Candidates: []string{"x", fmt.Sprint(i)}})
	}
	for i := range 5000 {
		put(i)
		if _, ok := d.Get(fmt.Sprintf("req-%d", i)); !ok {
			t.Fatalf("record %d not found right after its put", i)
		}
		if len(d.byID) != d.n {
			t.Fatalf("after %d: %d found by id, %d kept", i, len(d.byID), d.n)
		}
	}
	kept := 0
	for i := range 5000 {
		dec, ok := d.Get(fmt.Sprintf("req-%d", i))
		if !ok {
			if kept > 0 {
				t.Fatalf("record %d dropped after a newer one was kept", i)
			}
			continue
		}
		kept++
		if dec.Chosen != strings.Repeat("m", i%300) || !reflect.DeepEqual(dec.Candidates, []string{"x", fmt.Sprint(i)}) {
			t.Fatalf("record %d read back as %+v", i, dec)
		}
	}
	if kept != d.n || kept < 10 {
		t.Fatalf("%d found, %d kept", kept, d.n)
	}
}
