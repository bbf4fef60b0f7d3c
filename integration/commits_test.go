package integration

import (
	"testing"
	"time"
)

// The bench reads the gateway's commit times from two snapshots of its
// metrics, as Prometheus' histogram_quantile would.
func TestBenchCommitsSince(t *testing.T) {
	before := parseCommits(t, []byte(`# HELP gw_charge_commit_seconds x
gw_charge_commit_seconds_bucket{le="0.0001"} 10
gw_charge_commit_seconds_bucket{le="0.0002"} 10
gw_charge_commit_seconds_bucket{le="0.0003"} 10
gw_charge_commit_seconds_bucket{le="+Inf"} 10
gw_charge_commit_seconds_sum 0.001
gw_charge_commit_seconds_count 10
gw_charges_committed_total 25
`))
	after := parseCommits(t, []byte(`gw_charge_commit_seconds_bucket{le="0.0001"} 10
gw_charge_commit_seconds_bucket{le="0.0002"} 110
gw_charge_commit_seconds_bucket{le="0.0003"} 208
gw_charge_commit_seconds_bucket{le="+Inf"} 210
gw_charges_committed_total 825
`))
	batches, charges, p50, p99 := after.since(before)
	// 200 batches: 100 in (100, 200] µs, 98 in (200, 300], 2 beyond. The
	// 100th is the last of the first bucket; the 198th the last of the
	// second.
	if batches != 200 || charges != 800 || p50 != 200*time.Microsecond || p99 != 300*time.Microsecond {
		t.Fatalf("since: %v batches, %v charges, p50 %v, p99 %v; want 200, 800, 200µs, 300µs", batches, charges, p50, p99)
	}
	// Half way into a bucket, and nothing new at all.
	if _, _, p50, _ := parseCommits(t, []byte("gw_charge_commit_seconds_bucket{le=\"0.0001\"} 0\ngw_charge_commit_seconds_bucket{le=\"0.0002\"} 4\ngw_charge_commit_seconds_bucket{le=\"+Inf\"} 4\n")).since(benchCommits{}); p50 != 150*time.Microsecond {
		t.Fatalf("p50 %v, want 150µs", p50)
	}
	if batches, _, _, _ := before.since(before); batches != 0 {
		t.Fatalf("no change: %v batches", batches)
	}
}
