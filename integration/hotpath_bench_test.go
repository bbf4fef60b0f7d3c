package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestFsyncReport measures what one durable charge cannot avoid: a small
// write and its fsync, in the file system of the gateway's data folder
// (GW_BENCH_FSYNC_DIR, else the system's temporary folder), so the
// hot path's added latency can be read beside it. It asserts no timing.
// Skipped unless GW_BENCH=1.
func TestFsyncReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	dir := os.Getenv("GW_BENCH_FSYNC_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := bytes.Repeat([]byte{'x'}, 4096)
	n := benchEnvInt(t, "GW_BENCH_N", 2000)
	d := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if _, err := f.WriteAt(page, int64(i%64)*4096); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	line := fmt.Sprintf("fsync (4 KB write + fsync in %s): p50 %.0f µs, p99 %.0f µs over %d", filepath.Dir(f.Name()),
		benchMicros(d[n/2]), benchMicros(d[n*99/100]), n)
	fmt.Println("\n" + line + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".fsync.md", []byte(line+"\n"), 0o644)
	}
}

// TestStreamsRSSReport holds 1,000 chat streams open through the gateway
// at once (the fake provider pauses each after its first content event)
// and reports the gateway process's resident memory before, with all
// 1,000 open, and after they end. It asserts no figure. Skipped unless
// GW_BENCH=1; GW_BENCH_STREAMS sets the count.
func TestStreamsRSSReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n := benchEnvInt(t, "GW_BENCH_STREAMS", 1000)
	gate := make(chan struct{})
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	oa.Default = fake.Script{Text: benchText, Chunks: benchChunks, Usage: fake.Usage{Input: 24, Output: 64}, Gate: gate}
	cfg := withGW(t, fmt.Sprintf("\t\tlimits {\n\t\t\tchat_requests_per_minute %d\n\t\t\tmax_in_flight %d\n\t\t}", 10*n, 2*n))
	g := startGateway(t, gwOptions{Caddyfile: cfg, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "streams", "plan": "paid", "cleared": true})
	pid := g.pid(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0, DisableCompression: true}, Timeout: time.Minute}
	body := `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
	post := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		return client.Do(req)
	}
	// Warm up with a finished stream, so the baseline holds what one
	// call builds once.
	oa.Push(fake.Script{Text: benchText, Chunks: benchChunks, Usage: fake.Usage{Input: 24, Output: 64}})
	if resp, err := post(); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	before, _ := procMemKB(t, pid, "VmRSS", false)

	var open, done sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		open.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := post()
			if err != nil {
				errs <- err
				open.Done()
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			// The first content event has arrived: the stream is open.
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					errs <- fmt.Errorf("status %d: %v", resp.StatusCode, err)
					open.Done()
					return
				}
				if strings.Contains(line, `"content"`) {
					break
				}
			}
			open.Done()
			rest, err := io.ReadAll(r)
			if err != nil || !bytes.Contains(rest, []byte("[DONE]")) {
				errs <- fmt.Errorf("stream end: %v %.200s", err, rest)
			}
		}()
	}
	open.Wait()
	peak, _ := procMemKB(t, pid, "VmRSS", false)
	close(gate)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after, _ := procMemKB(t, pid, "VmRSS", false)
	line := fmt.Sprintf("%d concurrent streams: gateway RSS %d MB before, %d MB with all open (+%d MB), %d MB after they ended",
		n, before/1024, peak/1024, (peak-before)/1024, after/1024)
	fmt.Println("\n" + line + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".streams.md", []byte(line+"\n"), 0o644)
	}
}
