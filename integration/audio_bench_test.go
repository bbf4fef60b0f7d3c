package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestAudioBenchReport measures the audio routes against a bare Caddy
// reverse_proxy to the same fake provider, in one process and one run,
// interleaving the two request by request (alternating which goes first):
//
//   - a transcription upload of a 1 MB WAV (the gateway reads the whole
//     multipart body, sniffs the format, reads the length, re-frames it
//     for the provider and bills it; the proxy streams it through);
//   - a speech stream of 256 KiB of audio in 8 flushed chunks (first byte
//     and last byte).
//
// Then the gateway process's memory: its resident set before and its
// peak while 8 uploads of 8 MiB (just under the limit) run at once, and
// while 8 run one after another (Linux /proc; the peak is reset first).
// It asserts no timing. Skipped unless GW_BENCH=1; GW_BENCH_N requests
// per target (200), GW_BENCH_OUT also writes the table to
// $GW_BENCH_OUT.audio.md.
//
//	GW_BENCH=1 go test -count=1 -run TestAudioBenchReport -v ./integration
func TestAudioBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 200)
	speech := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	oa.Default = fake.Script{Text: "a one megabyte clip", Audio: speech, Chunks: 8}
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	bare := "127.0.0.1:" + freePorts(t, 1)[0]
	config := exampleCaddyfile(t) + fmt.Sprintf("\nhttp://%s {\n\treverse_proxy %s\n}\n", bare, benchHostOf(t, oa.URL))
	g := startGateway(t, gwOptions{Caddyfile: config, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)

	// The per-minute budget of an account is 60 calls shared by the two
	// routes: the gateway's calls rotate over fresh accounts, 25 each.
	accounts := 0
	var key string
	keyFor := func(i int) string {
		if i%25 == 0 {
			accounts++
			key = g.newAccountKey(t, map[string]any{"id": fmt.Sprintf("bench-audio-%d", accounts), "plan": "paid", "cleared": true})
		}
		return key
	}

	clip := wavOf(16000, 65) // 1,040,044 bytes, 65 s
	gwUpload, gwType := multipartBody(t, "clip.wav", clip, "model", "gw-voice")
	baseUpload, baseType := multipartBody(t, "audio.wav", clip, "model", "gpt-4o-transcribe")
	type sample struct{ first, last time.Duration }
	send := func(url, contentType, auth, body, want string) sample {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+auth)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var s sample
		var got bytes.Buffer
		buf := make([]byte, 32<<10)
		for {
			k, err := resp.Body.Read(buf)
			if k > 0 && s.first == 0 {
				s.first = time.Since(start)
			}
			got.Write(buf[:k])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", url, err)
			}
		}
		s.last = time.Since(start)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(got.Bytes(), []byte(want)) {
			t.Fatalf("%s: %d %.300s", url, resp.StatusCode, got.Bytes())
		}
		return s
	}
	const upstreamKey = "sk-upstream-openai-test"
	type scenario struct {
		name     string
		gw, base func(i int) sample
		stream   bool
	}
	speechWant := string(speech[len(speech)-16:])
	scenarios := []scenario{
		{name: "transcription 1 MB",
			gw: func(i int) sample {
				return send(g.BaseURL+"/v1/audio/transcriptions", gwType, keyFor(i), gwUpload, "a one megabyte clip")
			},
			base: func(int) sample {
				return send("http://"+bare+"/v1/audio/transcriptions", baseType, upstreamKey, baseUpload, "a one megabyte clip")
			}},
		{name: "speech 256 KiB stream", stream: true,
			gw: func(i int) sample {
				return send(g.BaseURL+"/v1/audio/speech", "application/json", keyFor(i), `{"input":"Read this aloud, please.","voice":"alloy"}`, speechWant)
			},
			base: func(int) sample {
				return send("http://"+bare+"/v1/audio/speech", "application/json", upstreamKey,
					`{"model":"gpt-4o-mini-tts","input":"Read this aloud, please.","voice":"alloy"}`, speechWant)
			}},
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		slices.Sort(d)
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	var md strings.Builder
	fmt.Fprintf(&md, "### Audio: gateway vs bare reverse_proxy (same fake provider, same process, same run)\n\n")
	fmt.Fprintf(&md, "%d requests per target, one at a time, interleaved; loopback; %s/%s, %d CPUs, %s.\n\n", n, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&md, "| scenario | measure | bare p50 µs | gateway p50 µs | ratio | bare p99 µs | gateway p99 µs | ratio |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, sc := range scenarios {
		// Warm both up.
		for i := range 5 {
			sc.base(i)
			sc.gw(i)
		}
		oa.Reset()
		var bf, bl, gf, gl []time.Duration
		for i := range n {
			order := []bool{i%2 == 0, i%2 != 0}
			for _, gwFirst := range order {
				if gwFirst {
					s := sc.gw(i)
					gf, gl = append(gf, s.first), append(gl, s.last)
				} else {
					s := sc.base(i)
					bf, bl = append(bf, s.first), append(bl, s.last)
				}
			}
			if i%20 == 19 {
				oa.Reset() // the fake keeps every request it saw
			}
		}
		row := func(measure string, b, g []time.Duration) {
			b50, b99, g50, g99 := pct(b, 0.5), pct(b, 0.99), pct(g, 0.5), pct(g, 0.99)
			fmt.Fprintf(&md, "| %s | %s | %d | %d | %.2f× | %d | %d | %.2f× |\n", sc.name, measure, b50.Microseconds(), g50.Microseconds(),
				float64(g50)/float64(b50), b99.Microseconds(), g99.Microseconds(), float64(g99)/float64(b99))
		}
		if sc.stream {
			row("first byte", bf, gf)
			row("last byte", bl, gl)
		} else {
			row("latency", bl, gl)
		}
	}

	// Memory of the gateway process per 8 MiB upload.
	pid := g.pid(t)
	big := wavOf(16000, 524) // 8,384,044 bytes, under 8 MiB
	bigBody, bigType := multipartBody(t, "big.wav", big, "model", "gw-voice")
	memKey := g.newAccountKey(t, map[string]any{"id": "bench-audio-memory", "plan": "paid", "cleared": true})
	upload := func() { send(g.BaseURL+"/v1/audio/transcriptions", bigType, memKey, bigBody, "a one megabyte clip") }
	upload() // warm
	oa.Reset()
	fmt.Fprintf(&md, "\n| 8 MiB uploads (file %s bytes) | gateway RSS before | peak RSS | peak − before | per upload |\n|---|--:|--:|--:|--:|\n", strconv.Itoa(len(big)))
	for _, parallel := range []bool{true, false} {
		before, ok := procMemKB(t, pid, "VmRSS", true)
		if !ok {
			t.Log("no /proc: memory not measured")
			break
		}
		if parallel {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(upload)
			}
			wg.Wait()
		} else {
			for range 8 {
				upload()
			}
		}
		peak, _ := procMemKB(t, pid, "VmHWM", false)
		oa.Reset()
		what := "8 one after another"
		per := peak - before
		if parallel {
			what = "8 at once"
			per = (peak - before) / 8
		}
		fmt.Fprintf(&md, "| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB |\n", what, float64(before)/1024, float64(peak)/1024,
			float64(peak-before)/1024, float64(per)/1024)
	}
	fmt.Print("\n" + md.String() + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".audio.md", []byte(md.String()), 0o644)
	}
}

// procMemKB reads a field (VmRSS, VmHWM) of /proc/<pid>/status in KiB;
// reset first clears the peak (VmHWM) to the current resident set.
func procMemKB(t *testing.T, pid int, field string, reset bool) (int64, bool) {
	t.Helper()
	if reset {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return 0, false
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseInt(f[0], 10, 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}
