package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestImagesBenchReport measures an edit with a 10 MB reference image (a
// real PNG padded to just under 10 MiB) through the gateway against a bare
// Caddy reverse_proxy to the same fake provider, in one process and one
// run, interleaved request by request; then the gateway process's peak
// memory per request while 4 such edits run at once and one after
// another. It asserts no timing. Skipped unless GW_BENCH=1; GW_BENCH_N
// edits per target (100).
//
//	GW_BENCH=1 go test -count=1 -run TestImagesBenchReport -v ./integration
func TestImagesBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 100)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	bare := "127.0.0.1:" + freePorts(t, 1)[0]
	config := exampleCaddyfile(t) + fmt.Sprintf("\nhttp://%s {\n\treverse_proxy %s\n}\n", bare, benchHostOf(t, oa.URL))
	g := startGateway(t, gwOptions{Caddyfile: config, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "bench-images", "plan": "paid", "cleared": true})
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)

	ref := imageFixture(t, "red.png")
	ref = append(ref, make([]byte, 10<<20-len(ref)-1)...)
	gwBody, gwType := multipartImages(t, "image[]", [][]byte{ref}, "prompt", "make it night")
	baseBody, baseType := multipartImages(t, "image[]", [][]byte{ref}, "prompt", "make it night", "model", "gpt-image-1")
	send := func(url, ctype, auth, body string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", "Bearer "+auth)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != 200 || !bytes.Contains(b, []byte(fake.ImageData(0))) {
			t.Fatalf("%s: %d %.300s", url, resp.StatusCode, b)
		}
		return d
	}
	gw := func() time.Duration { return send(g.BaseURL+"/v1/images/edits", gwType, key, gwBody) }
	base := func() time.Duration {
		return send("http://"+bare+"/v1/images/edits", baseType, "sk-upstream-openai-test", baseBody)
	}
	for range 3 {
		gw()
		base()
	}
	var bd, gd []time.Duration
	for i := range n {
		if i%2 == 0 {
			gd, bd = append(gd, gw()), append(bd, base())
		} else {
			bd, gd = append(bd, base()), append(gd, gw())
		}
		if i%10 == 9 {
			oa.Reset()
		}
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		slices.Sort(d)
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	var md strings.Builder
	fmt.Fprintf(&md, "%d edits per target, one at a time, interleaved; loopback; %s/%s, %d CPUs, %s.\n\n", n, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&md, "| edit, 10 MB reference | bare p50 µs | gateway p50 µs | ratio | bare p99 µs | gateway p99 µs | ratio |\n|---|--:|--:|--:|--:|--:|--:|\n")
	b50, b99, g50, g99 := pct(bd, 0.5), pct(bd, 0.99), pct(gd, 0.5), pct(gd, 0.99)
	fmt.Fprintf(&md, "| latency | %d | %d | %.2f× | %d | %d | %.2f× |\n", b50.Microseconds(), g50.Microseconds(), float64(g50)/float64(b50),
		b99.Microseconds(), g99.Microseconds(), float64(g99)/float64(b99))

	pid := g.pid(t)
	fmt.Fprintf(&md, "\n| 10 MB edits | gateway RSS before | peak RSS | peak − before | per edit |\n|---|--:|--:|--:|--:|\n")
	for _, parallel := range []bool{true, false} {
		oa.Reset()
		before, ok := procMemKB(t, pid, "VmRSS", true)
		if !ok {
			t.Log("no /proc: memory not measured")
			break
		}
		what, per := "4 one after another", int64(1)
		if parallel {
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { gw() })
			}
			wg.Wait()
			what, per = "4 at once", 4
		} else {
			for range 4 {
				gw()
			}
		}
		peak, _ := procMemKB(t, pid, "VmHWM", false)
		fmt.Fprintf(&md, "| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n", what, float64(before)/1024, float64(peak)/1024,
			float64(peak-before)/1024, float64(peak-before)/1024/float64(per))
	}
	fmt.Print("\n" + md.String() + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".images.md", []byte(md.String()), 0o644)
	}
}
