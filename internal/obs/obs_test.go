package obs

import (
	"context"
	"testing"
	"time"
)

// TestRecord: waits add up to the record and every record it runs inside;
// failures reach Failed except a client's leaving (no reason); a nil
// record and a context without one do nothing.
func TestRecord(t *testing.T) {
	var failed []string
	outer := &Record{}
	inner := &Record{Parent: outer, Failed: ReporterFunc(func(p, r string) { failed = append(failed, p+"/"+r) })}
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
	inner.Served("p")
	if inner.Provider() != "p" || outer.Provider() != "p" {
		t.Errorf("providers %q and %q, want p for both (the outer call waited on it)", inner.Provider(), outer.Provider())
	}
	var none *Record = From(context.Background())
	none.Waited(time.Second)
	none.Fail("p", ReasonCut)
	none.Served("p")
	if none.Upstream() != 0 || none.Provider() != "" {
		t.Error("a missing record recorded something")
	}
}
