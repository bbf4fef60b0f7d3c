package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchCommits is the gateway's gw_charge_commit_seconds histogram at one
// moment (each bucket's upper bound and cumulative count, as exposed) and
// its gw_charges_committed_total: the time each batch of charges took to
// become durable, as the gateway itself measured it.
type benchCommits struct {
	bounds, counts []float64
	charges        float64
}

// commits reads the gateway's commit metrics from its admin endpoint.
func (e *benchEnv) commits(tb testing.TB) benchCommits {
	tb.Helper()
	r := e.g.adminDo(tb, http.MethodGet, "/metrics", nil)
	if r.Status != http.StatusOK {
		tb.Fatalf("GET /metrics: %d %.300s", r.Status, r.Body)
	}
	return parseCommits(tb, r.Body)
}

// parseCommits reads the histogram's buckets and the charges counter out
// of Prometheus' text format.
func parseCommits(tb testing.TB, body []byte) benchCommits {
	tb.Helper()
	var c benchCommits
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		switch {
		case strings.HasPrefix(name, `gw_charge_commit_seconds_bucket{le="`):
			le, err2 := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(name, `gw_charge_commit_seconds_bucket{le="`), `"}`), 64)
			if err != nil || err2 != nil {
				tb.Fatalf("metrics: cannot read %q", line)
			}
			c.bounds, c.counts = append(c.bounds, le), append(c.counts, v)
		case name == "gw_charges_committed_total":
			if err != nil {
				tb.Fatalf("metrics: cannot read %q", line)
			}
			c.charges = v
		}
	}
	return c
}

// since is what happened between earlier and c: the batches, the charges
// they held, and the p50 and p99 of their commit times, read from the
// buckets as Prometheus' histogram_quantile reads them (linearly within a
// bucket; a quantile in the last, unbounded bucket is its lower bound).
func (c benchCommits) since(earlier benchCommits) (batches, charges float64, p50, p99 time.Duration) {
	counts := make([]float64, len(c.counts))
	for i := range counts {
		counts[i] = c.counts[i]
		if i < len(earlier.counts) {
			counts[i] -= earlier.counts[i]
		}
	}
	if len(counts) == 0 || counts[len(counts)-1] <= 0 {
		return 0, 0, 0, 0
	}
	batches = counts[len(counts)-1]
	quantile := func(q float64) time.Duration {
		rank := q * batches
		lower, below := 0.0, 0.0
		for i, n := range counts {
			if n >= rank {
				upper := c.bounds[i]
				if math.IsInf(upper, 1) {
					return time.Duration(lower * float64(time.Second))
				}
				at := lower
				if n > below {
					at += (upper - lower) * (rank - below) / (n - below)
				}
				return time.Duration(at * float64(time.Second))
			}
			lower, below = c.bounds[i], n
		}
		return time.Duration(lower * float64(time.Second))
	}
	return batches, c.charges - earlier.charges, quantile(0.50), quantile(0.99)
}

// procCPU is the CPU time process pid has used so far: the user and
// system time of all its threads, those that ended too (the kernel's
// io_uring workers are threads of the gateway's process), from
// /proc/<pid>/stat, in clock ticks of 10 ms. ok is false where there is no
// /proc.
func procCPU(pid int) (d time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's closing parenthesis, the state first
	// (field 3): utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * (time.Second / clockTicks), true
}

// threadsCPU is the CPU time the live threads of process pid have used
// so far, in nanoseconds: the first field of each thread's
// /proc/<pid>/task/<tid>/schedstat. Finer than procCPU's clock ticks, it
// can tell the CPU of one short batch of calls from the next; a thread
// that ended takes its time with it. ok is false where there is no /proc.
func threadsCPU(pid int) (d time.Duration, ok bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/schedstat")
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(ns)
	}
	return d, len(tasks) > 0
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's times on every
// Linux architecture Go runs on.
const clockTicks = 100
