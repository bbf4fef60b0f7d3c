package obs

import (
	"context"
	"testing"
	"time"
)

// TestRecord: waits add up to the record and every record it runs inside;
// failures and unpaid attempts reach the Reporter except without a reason;
// time-outs count once, on the outermost record, whichever record counts
// them; a nil record and a context without one do nothing.
func TestRecord(t *testing.T) {
	var failed, unbilled []string
	outer := &Record{}
	inner := &Record{Parent: outer, Reporter: Funcs{
		Failed:   func(p, r string) { failed = append(failed, p+"/"+r) },
		Unbilled: func(p, r string) { unbilled = append(unbilled, p+"/"+r) },
	}}
	ctx := With(context.Background(), inner)
	From(ctx).Waited(3 * time.Millisecond)
	outer.Waited(time.Millisecond)
	if inner.Upstream() != 3*time.Millisecond || outer.Upstream() != 4*time.Millisecond {
		t.Errorf("inner %s, outer %s; want 3ms and 4ms", inner.Upstream(), outer.Upstream())
	}
	inner.Fail("p", ReasonCut)
	inner.Fail("p", "")
	if len(failed) != 1 || failed[0] != "p/cut" {
		t.Errorf("failures %v, want [p/cut]", failed)
	}
	inner.Unbilled("p", UnbilledEmpty)
	inner.Unbilled("p", "")
	outer.Unbilled("p", UnbilledCut) // the outer call has no Reporter
	if len(unbilled) != 1 || unbilled[0] != "p/empty" {
		t.Errorf("unbilled %v, want [p/empty]", unbilled)
	}
	inner.TimedOut()
	outer.TimedOut()
	if inner.Timeouts() != 2 || outer.Timeouts() != 2 {
		t.Errorf("time-outs %d (inner) and %d (outer), want 2 for both: one count per client call", inner.Timeouts(), outer.Timeouts())
	}
	Funcs{}.UpstreamFailed("p", ReasonCut) // nil functions are not called
	Funcs{}.UpstreamUnbilled("p", UnbilledCut)
	inner.Served("p")
	if inner.Provider() != "p" || outer.Provider() != "p" {
		t.Errorf("providers %q and %q, want p for both (the outer call waited on it)", inner.Provider(), outer.Provider())
	}
	var none *Record = From(context.Background())
	none.Waited(time.Second)
	none.Fail("p", ReasonCut)
	none.Served("p")
	none.Unbilled("p", UnbilledCut)
	none.TimedOut()
	if none.Upstream() != 0 || none.Provider() != "" || none.Timeouts() != 0 {
		t.Error("a missing record recorded something")
	}
}
