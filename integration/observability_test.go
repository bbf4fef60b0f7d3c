package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// serverTiming is the Server-Timing value of every answer.
var serverTiming = regexp.MustCompile(`^gw;dur=\d+\.\d, upstream;dur=(\d+\.\d)$`)

// scrape reads the admin endpoint's /metrics: each sample's value by its
// name and labels as printed (labels in name order).
func scrape(t *testing.T, g *gateway) map[string]float64 {
	t.Helper()
	r := g.adminDo(t, http.MethodGet, "/metrics", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.Status, r.Body)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(l, "gw_") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// accessEntry is the gateway's part of one access log line.
type accessEntry struct {
	Msg          string `json:"msg"`
	RequestID    string `json:"gw_request_id"`
	Account      string `json:"gw_account"`
	KeyID        string `json:"gw_key_id"`
	Alias        string `json:"gw_alias"`
	Model        string `json:"gw_model"`
	Cost         string `json:"gw_cost_usd"`
	Shortfall    string `json:"gw_shortfall_usd"`
	InputTokens  *int64 `json:"gw_input_tokens"`
	OutputTokens *int64 `json:"gw_output_tokens"`
	Resp         struct {
		Headers http.Header `json:"resp_headers"`
	}
}

// accessLog waits for the access log lines of ids and returns them by id.
func accessLog(t *testing.T, g *gateway, ids []string) map[string]accessEntry {
	t.Helper()
	got := map[string]accessEntry{}
	g.waitLog(t, func(log string) bool {
		for _, l := range strings.Split(log, "\n") {
			if !strings.Contains(l, `"handled request"`) {
				continue
			}
			var e accessEntry
			if json.Unmarshal([]byte(l), &e) == nil && e.RequestID != "" {
				got[e.RequestID] = e
			}
		}
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	}, "the access log lines of the workload")
	return got
}

// TestObservability runs a workload of plain, streamed, cut, escalated,
// cached, abandoned and refused chat calls, then reads the metrics and the
// access log: the money and tokens counted are exactly the ledger's, each
// failed upstream attempt is counted with its reason (and the cut stream,
// paid only for what it delivered, as unpaid), every answer carries
// Server-Timing, every access log line carries the gateway's fields and
// never a key; a reload keeps the counts.
func TestObservability(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, cacheCaddyfile(t)) // the example (with its access log), with the answer cache on
	const account = "observed"
	key := e.account(t, account, map[string]any{"balance_usd": "50.00"})
	brokeKey := e.account(t, "observed-broke", map[string]any{"balance_usd": "0.00"})
	model := openaiBackend.model

	var ids []string
	call := func(what, path, body string, want int, header ...string) response {
		t.Helper()
		r := e.do(t, http.MethodPost, path, body, header...)
		if r.Status != want {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, want)
		}
		if st := r.Header.Get("Server-Timing"); !serverTiming.MatchString(st) {
			t.Errorf("%s: Server-Timing %q", what, st)
		}
		ids = append(ids, r.Header.Get("X-Gw-Request-Id"))
		return r
	}
	path, plainBody := rawChat(chatClient, model, false)
	_, streamBody := rawChat(chatClient, model, true)

	e.OA.Push(fake.Script{Text: "Plain.", Usage: fakeUsage(false, tokenUsage{Input: 900, Cached: 100, Output: 80})})
	plain := call("plain", path, plainBody, http.StatusOK, bearer(key)...)
	e.OA.Push(fake.Script{Text: "A streamed answer.", Usage: fakeUsage(false, tokenUsage{Input: 300, Output: 40})})
	call("stream", path, streamBody, http.StatusOK, bearer(key)...)
	e.OA.Push(fake.Script{Text: midStreamText, Chunks: 4, MidStreamError: true, Usage: fakeUsage(false, tokenUsage{Input: 50, Output: 20})})
	call("cut stream", path, streamBody, http.StatusOK, bearer(key)...)
	e.OA.Push(fake.Script{Status: http.StatusInternalServerError}, fake.Script{Text: "Escalated.", Usage: fakeUsage(false, tokenUsage{Input: 70, Output: 7})})
	_, escalatedBody := rawChat(chatClient, "gw-standard", false)
	if r := call("escalated", path, escalatedBody, http.StatusOK, bearer(key)...); r.Header.Get("X-Gw-Escalated") != "true" {
		t.Fatalf("escalated: X-Gw-Escalated %q", r.Header.Get("X-Gw-Escalated"))
	}
	cached := cacheBody(chatClient, model, 0)
	call("to be cached", path, cached, http.StatusOK, bearer(key)...)
	hit := call("cache hit", path, cached, http.StatusOK, bearer(key)...)
	if hit.Header.Get("X-Gw-Cache") != "hit" {
		t.Fatalf("second call: X-Gw-Cache %q, want hit", hit.Header.Get("X-Gw-Cache"))
	}
	if m := serverTiming.FindStringSubmatch(hit.Header.Get("Server-Timing")); m == nil || m[1] != "0.0" {
		t.Errorf("cache hit: Server-Timing %q, want no upstream time", hit.Header.Get("Server-Timing"))
	}
	refused := call("refused", path, plainBody, http.StatusPaymentRequired, bearer(brokeKey)...)

	// A client that leaves mid-stream: the answer is read to its end,
	// billed and counted once.
	gate := make(chan struct{})
	e.OA.Push(fake.Script{Text: "an answer nobody waits for", Usage: fake.Usage{Input: 400, Output: 500}, Gate: gate})
	resp, sc := streamRequest(t, e.gateway, key, model)
	if st := resp.Header.Get("Server-Timing"); !serverTiming.MatchString(st) {
		t.Errorf("abandoned stream: Server-Timing %q", st)
	}
	ids = append(ids, resp.Header.Get("X-Gw-Request-Id"))
	if !sc.Scan() {
		t.Fatal("abandoned stream: no first line")
	}
	resp.Body.Close()
	close(gate)

	logs := accessLog(t, e.gateway, ids)
	ledger := e.ledger(t, account)
	if len(ledger) != 6 {
		t.Fatalf("ledger has %d entries, want 6 (plain, stream, cut, escalated, cached, abandoned): %+v", len(ledger), ledger)
	}
	check := func(m map[string]float64) {
		t.Helper()
		// Money and tokens: per model, exactly the ledger's.
		cost := map[string]pricing.Money{}
		units := map[string]int64{}
		for _, l := range ledger {
			cost[l.Model] += mustUSD(t, l.Cost)
			units[l.Model] += l.Units
		}
		for mod, c := range cost {
			if got, want := m[`gw_cost_usd_total{family="chat",model="`+mod+`"}`], float64(c)/float64(pricing.NanoPerUSD); got != want {
				t.Errorf("gw_cost_usd_total of %s = %v, want the ledger's %v", mod, got, want)
			}
			var tokens float64
			for _, kind := range []string{"input", "output", "cache_read", "cache_write"} {
				tokens += m[`gw_tokens_total{family="chat",kind="`+kind+`",model="`+mod+`"}`]
			}
			if tokens != float64(units[mod]) {
				t.Errorf("gw_tokens_total of %s = %v, want the ledger's %d", mod, tokens, units[mod])
			}
		}
		var costSeries int
		for name := range m {
			if strings.HasPrefix(name, "gw_cost_usd_total{") {
				costSeries++
			}
		}
		if costSeries != len(cost) {
			t.Errorf("%d gw_cost_usd_total series, want %d (one per model billed)", costSeries, len(cost))
		}
		for name, want := range map[string]float64{
			`gw_tokens_total{family="chat",kind="cache_read",model="gpt-4.1-mini"}`:         100,
			`gw_requests_total{code="200",family="chat"}`:                                   7,
			`gw_requests_total{code="402",family="chat"}`:                                   1,
			`gw_request_duration_seconds_count{family="chat"}`:                              8,
			`gw_overhead_seconds_count{family="chat"}`:                                      8,
			`gw_refusals_total{code="credit_exhausted",family="chat"}`:                      1,
			`gw_cache_hits_total{family="chat"}`:                                            1,
			`gw_upstream_errors_total{family="chat",provider="openai",reason="status_5xx"}`: 1,
			`gw_upstream_errors_total{family="chat",provider="openai",reason="cut"}`:        1,
			`gw_upstream_unbilled_total{family="chat",provider="openai",reason="cut"}`:      1,
			`gw_time_to_first_token_seconds_count{family="chat",model="gpt-4.1-mini"}`:      3,
		} {
			if m[name] != want {
				t.Errorf("%s = %v, want %v", name, m[name], want)
			}
		}
		var upstreamErrors, unbilled float64
		for name, v := range m {
			if strings.HasPrefix(name, "gw_upstream_errors_total{") {
				upstreamErrors += v
			}
			if strings.HasPrefix(name, "gw_upstream_unbilled_total{") {
				unbilled += v
			}
		}
		if upstreamErrors != 2 {
			t.Errorf("%v failed upstream attempts counted, want 2 (the 500 and the cut)", upstreamErrors)
		}
		if unbilled != 1 {
			// The 500 was not billed; the abandoned stream was read to
			// its end and paid for whole.
			t.Errorf("%v unpaid upstream attempts counted, want 1 (the cut)", unbilled)
		}
	}
	check(scrape(t, e.gateway))

	// The access log: the gateway's fields on every line, the receipt's
	// values, and never a key.
	byID := map[string]ledgerEntry{}
	for _, l := range ledger {
		byID[l.RequestID] = l
	}
	for _, id := range ids {
		le := logs[id]
		if id == refused.Header.Get("X-Gw-Request-Id") {
			if le.Account != "observed-broke" || le.KeyID == "" || le.Cost != "" || le.Model != "" {
				t.Errorf("refused call's access log fields %+v, want its account and key id and no bill", le)
			}
			continue
		}
		if id == hit.Header.Get("X-Gw-Request-Id") {
			if le.Account != account || le.Cost != "" {
				t.Errorf("cache hit's access log fields %+v, want its account and no bill", le)
			}
			continue
		}
		l, ok := byID[id]
		if !ok {
			t.Errorf("no ledger entry for %s", id)
			continue
		}
		if le.Account != account || le.KeyID == "" || le.Model != l.Model || le.Cost != l.Cost || le.InputTokens == nil || le.OutputTokens == nil ||
			*le.InputTokens+*le.OutputTokens != l.Units {
			t.Errorf("access log fields of %s: %+v, want the ledger's %+v", id, le, l)
		}
	}
	if le := logs[plain.Header.Get("X-Gw-Request-Id")]; le.Alias != model || le.Cost != plain.Header.Get("X-Gw-Cost-Usd") ||
		*le.InputTokens != 900 || *le.OutputTokens != 80 {
		t.Errorf("plain call's access log fields %+v, want alias %s, cost %s, 900 input and 80 output tokens", le, model, plain.Header.Get("X-Gw-Cost-Usd"))
	}
	for _, secret := range []string{key, brokeKey, e.BootKey, upstreamOpenAIKey, upstreamAnthropicKey} {
		if strings.Contains(e.log.String(), secret) {
			t.Errorf("a key secret reached the log")
		}
	}

	// A reload keeps the collectors and their counts.
	e.reload(t)
	check(scrape(t, e.gateway))
}

// TestObservabilityPlaceholders: the gateway's values are Caddy
// placeholders {http.gw.*}, here appended to the access log by
// log_append; a refused call has its account and key but no bill.
func TestObservabilityPlaceholders(t *testing.T) {
	t.Parallel()
	names := []string{"request_id", "account", "key_id", "alias", "model", "cost_usd", "input_tokens", "output_tokens"}
	var appends strings.Builder
	for _, n := range names {
		appends.WriteString("\t\tlog_append ph_" + n + " {http.gw." + n + "}\n")
	}
	ex := exampleCaddyfile(t)
	cfg := strings.Replace(ex, "\t\tgw\n", appends.String()+"\t\tgw\n", 1)
	if cfg == ex {
		t.Fatal("Caddyfile.example has no gw handler line to put log_append before")
	}
	e := newChatEnv(t, cfg)
	key := e.account(t, "placeholders", map[string]any{"balance_usd": "5.00"})
	brokeKey := e.account(t, "placeholders-broke", map[string]any{"balance_usd": "0.00"})
	path, body := rawChat(chatClient, openaiBackend.model, false)
	e.OA.Push(fake.Script{Text: "Hi.", Usage: fakeUsage(false, tokenUsage{Input: 30, Output: 4})})
	ok := e.do(t, http.MethodPost, path, body, bearer(key)...)
	refused := e.do(t, http.MethodPost, path, body, bearer(brokeKey)...)
	if ok.Status != http.StatusOK || refused.Status != http.StatusPaymentRequired {
		t.Fatalf("statuses %d and %d, want 200 and 402", ok.Status, refused.Status)
	}
	// Every answer of the gateway carries Server-Timing, refusals too.
	for _, r := range []response{ok, refused, e.do(t, http.MethodPost, path, body), e.do(t, http.MethodGet, "/v1/nothing", "", bearer(key)...),
		e.do(t, http.MethodGet, path, "", bearer(key)...)} {
		if st := r.Header.Get("Server-Timing"); !serverTiming.MatchString(st) {
			t.Errorf("answer %d: Server-Timing %q", r.Status, st)
		}
	}
	lines := map[string]map[string]any{}
	okID, refusedID := ok.Header.Get("X-Gw-Request-Id"), refused.Header.Get("X-Gw-Request-Id")
	e.waitLog(t, func(log string) bool {
		for _, l := range strings.Split(log, "\n") {
			var m map[string]any
			if strings.Contains(l, `"handled request"`) && json.Unmarshal([]byte(l), &m) == nil {
				if id, _ := m["gw_request_id"].(string); id != "" {
					lines[id] = m
				}
			}
		}
		return lines[okID] != nil && lines[refusedID] != nil
	}, "the access log lines of both calls")
	for _, n := range names {
		if got, want := lines[okID]["ph_"+n], lines[okID]["gw_"+n]; got == nil || want == nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("placeholder gw.%s = %v, want the field gw_%s %v", n, got, n, want)
		}
	}
	if got := lines[okID]["ph_cost_usd"]; got != ok.Header.Get("X-Gw-Cost-Usd") {
		t.Errorf("placeholder gw.cost_usd = %v, want the receipt's %s", got, ok.Header.Get("X-Gw-Cost-Usd"))
	}
	if got := lines[refusedID]["ph_account"]; got != "placeholders-broke" {
		t.Errorf("refused call: placeholder gw.account = %v, want placeholders-broke", got)
	}
	if got := lines[refusedID]["ph_cost_usd"]; got != "" && got != nil {
		t.Errorf("refused call: placeholder gw.cost_usd = %v, want none", got)
	}
}

// TestObservabilitySpeechCut: a speech stream its provider cuts after the
// first audio is cut short for the client too; it is still counted once,
// billed as the ledger says, logged with its bill, and the cut is a failed
// upstream attempt.
func TestObservabilitySpeechCut(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "observed-talker", nil)
	audio := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	e.OA.Push(fake.Script{Audio: audio, Chunks: 4, MidStreamError: true})
	req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/audio/speech", strings.NewReader(`{"model":"gw-voice-speak","voice":"alloy","input":"cut"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil || len(got) != len(audio)/4 {
		t.Fatalf("speech: %d, %d bytes, error %v; want 200, the first chunk, then a cut", resp.StatusCode, len(got), err)
	}
	if st := resp.Header.Get("Server-Timing"); !serverTiming.MatchString(st) {
		t.Errorf("Server-Timing %q", st)
	}
	id := resp.Header.Get("X-Gw-Request-Id")
	le := accessLog(t, e.gateway, []string{id})[id]
	ledger := e.ledger(t, "observed-talker")
	if len(ledger) != 1 || ledger[0].RequestID != id {
		t.Fatalf("ledger %+v, want the one speech call", ledger)
	}
	l := ledger[0]
	if le.Account != "observed-talker" || le.Model != l.Model || le.Cost != l.Cost || le.Alias != "gw-voice-speak" || le.InputTokens != nil {
		t.Errorf("access log fields %+v, want the ledger's %+v under alias gw-voice-speak, no tokens", le, l)
	}
	m := scrape(t, e.gateway)
	for name, want := range map[string]float64{
		`gw_requests_total{code="200",family="audio"}`:                                 1,
		`gw_request_duration_seconds_count{family="audio"}`:                            1,
		`gw_upstream_errors_total{family="audio",provider="openai",reason="cut"}`:      1,
		`gw_cost_usd_total{family="audio",model="` + l.Model + `"}`:                    float64(mustUSD(t, l.Cost)) / float64(pricing.NanoPerUSD),
		`gw_time_to_first_token_seconds_count{family="audio",model="` + l.Model + `"}`: 0,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
}

// TestObservabilityAbilityFailures: an ability's answer that fails after
// the provider's 2xx (no image, a stream's error event, an unfinished
// search, a cut transcript, speech with no audio) is a failed attempt of
// its family, a cut; speech that stalls past its first-audio clock is a
// timeout. Only the image stream's preview, delivered before the error,
// is charged.
func TestObservabilityAbilityFailures(t *testing.T) {
	t.Parallel()
	cfg := exampleCaddyfile(t)
	const marker = "verbose_model whisper-1"
	if !strings.Contains(cfg, marker) {
		t.Fatalf("Caddyfile.example has no %q line to add test time-outs to", marker)
	}
	cfg = strings.Replace(cfg, marker, marker+"\n\t\t\tfirst_audio_timeout 1s", 1)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Caddyfile: cfg, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL,
		"GW_ANTHROPIC_BASE_URL": an.URL, "GW_SEARCH_BASE_URL": oa.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "observed-abilities", "plan": "paid", "cleared": true, "balance_usd": "10.00"})
	wav, wavType := multipartBody(t, "x.wav", fixture(t, "tone.wav"), "model", "gw-voice")
	stalled := make(chan struct{})
	defer close(stalled)
	var streamID string
	for _, tc := range []struct {
		name, path, body, contentType string
		script                        fake.Script
		status                        int
		metric                        string
	}{
		{"no image", "/v1/images/generations", `{"prompt":"p"}`, "", fake.Script{Images: -1}, 502,
			`gw_upstream_errors_total{family="images",provider="openai",reason="cut"}`},
		{"image stream error event", "/v1/images/generations", `{"prompt":"p","stream":true,"partial_images":1}`, "",
			fake.Script{MidStreamError: true}, 200, `gw_upstream_errors_total{family="images",provider="openai",reason="cut"}`},
		{"unfinished search", "/v1/search", `{"query":"q"}`, "",
			fake.Script{Text: "cut", Finish: "length", Usage: fake.Usage{Input: 5, Output: 5}}, 502,
			`gw_upstream_errors_total{family="search",provider="search",reason="cut"}`},
		{"transcript cut", "/v1/audio/transcriptions", wav, wavType, fake.Script{MidStreamError: true}, 502,
			`gw_upstream_errors_total{family="audio",provider="openai",reason="cut"}`},
		{"speech without audio", "/v1/audio/speech", `{"model":"gw-voice-speak","voice":"alloy","input":"x"}`, "",
			fake.Script{EmptyAudio: true}, 502, `gw_upstream_errors_total{family="audio",provider="openai",reason="cut"}`},
		{"speech stalled", "/v1/audio/speech", `{"model":"gw-voice-speak","voice":"alloy","input":"x"}`, "",
			fake.Script{EmptyAudio: true, Gate: stalled}, 504, `gw_upstream_errors_total{family="audio",provider="openai",reason="timeout"}`},
	} {
		before := scrape(t, g)
		oa.Push(tc.script)
		ct := tc.contentType
		if ct == "" {
			ct = "application/json"
		}
		r := g.do(t, http.MethodPost, tc.path, tc.body, append(bearer(key), "Content-Type", ct)...)
		if r.Status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.Status, r.Body, tc.status)
		}
		if tc.status == http.StatusOK {
			streamID = r.Header.Get("X-Gw-Request-Id")
		}
		after := scrape(t, g)
		if d := after[tc.metric] - before[tc.metric]; d != 1 {
			t.Errorf("%s: %s moved by %v, want 1", tc.name, tc.metric, d)
		}
		for name, v := range after {
			if strings.HasPrefix(name, "gw_upstream_errors_total") && name != tc.metric && v != before[name] {
				t.Errorf("%s: %s moved too (%v → %v)", tc.name, name, before[name], v)
			}
		}
	}
	if l := ledgerOf(t, g, "observed-abilities"); len(l) != 1 || l[streamID] == 0 {
		t.Errorf("ledger %v, want the streamed image (%s) alone", l, streamID)
	}
}
