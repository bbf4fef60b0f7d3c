package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// fakeRoutes answers the routes the tools call, recording each request.
type fakeRoutes struct {
	got     map[string]*http.Request
	bodies  map[string][]byte
	refuse  map[string]*gwerr.Error
	answers map[string]func() *pipeline.Recorded
}

func (f *fakeRoutes) Invoke(r *http.Request) (*pipeline.Recorded, *gwerr.Error) {
	b, _ := io.ReadAll(r.Body)
	f.got[r.URL.Path], f.bodies[r.URL.Path] = r, b
	if e := f.refuse[r.URL.Path]; e != nil {
		return &pipeline.Recorded{Status: gwerr.Ability.Status(e), Header: http.Header{}}, e
	}
	return f.answers[r.URL.Path](), nil
}

// answer is a route's answer with body and the charge bill (none when nil).
func answer(status int, body string, bill *pipeline.Bill) func() *pipeline.Recorded {
	return func() *pipeline.Recorded {
		rec := &pipeline.Recorded{Status: status, Header: http.Header{}}
		if bill != nil {
			rec.Bills = []pipeline.Bill{*bill}
		}
		rec.Body.WriteString(body)
		return rec
	}
}

// charged is a bill of units at cost (millionths of a dollar).
func charged(units, cost int64) *pipeline.Bill {
	return &pipeline.Bill{Units: units, Cost: pricing.Micro(cost)}
}

func newServer() (*Server, *fakeRoutes) {
	f := &fakeRoutes{got: map[string]*http.Request{}, bodies: map[string][]byte{}, refuse: map[string]*gwerr.Error{},
		answers: map[string]func() *pipeline.Recorded{
			"/v1/fetch": answer(200, `{"markdown":"# Hi","format":"markdown","url":"https://example.com/"}`, charged(1, 2000)),
			"/v1/search": answer(200, `{"answer":"42","citations":["https://a.example/"],"searches":1,"cost_microcents":25000,"cost_usd":"0.025","extra":1}`,
				charged(1, 25000)),
			"/v1/images/generations":   answer(200, `{"created":1,"data":[{"b64_json":"aGk="}]}`, charged(1, 11200)),
			"/v1/audio/transcriptions": answer(200, `{"text":"hello"}`, charged(10, 16670)),
			"/v1/audio/speech":         answer(200, "ID3audio", charged(5, 130)),
		}}
	prices := map[string]int64{"gw-image": 10000, "gw-voice": 1667, "gw-voice-speak": 26, "search": 25000}
	return &Server{Invoker: f, States: NewMemoryStates(), UpgradeURL: "https://billing.example/upgrade",
		Prices: func(a string) (int64, bool) { p, ok := prices[a]; return p, ok }}, f
}

func call(t *testing.T, s *Server, acct store.Account, name, args string) Result {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp-tools/", nil)
	r.Header.Set("Authorization", "Bearer sk-caller")
	return s.Call(context.Background(), &pipeline.Call{R: r, Account: acct}, name, json.RawMessage(args))
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var paid = store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true}

func TestToolResults(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		route      string
		sent       string // the route's request body (JSON routes)
		want       string // structured content
	}{
		{ToolWebFetch, `{"url":"https://example.com/"}`, "/v1/fetch", `{"url":"https://example.com/"}`,
			`{"cost_microcents":2000,"format":"markdown","markdown":"# Hi","url":"https://example.com/"}`},
		{ToolWebSearch, `{"query":"meaning"}`, "/v1/search", `{"query":"meaning"}`,
			`{"answer":"42","citations":["https://a.example/"],"cost_microcents":25000,"cost_usd":"0.025","searches":1}`},
		{ToolImageGenerate, `{"prompt":"a fox"}`, "/v1/images/generations", `{"prompt":"a fox","response_format":"b64_json"}`,
			`{"cost_microcents":11200,"created":1,"data":[{"b64_json":"aGk="}]}`},
		{ToolTranscribe, `{"audio_base64":"` + base64.StdEncoding.EncodeToString([]byte("RIFFxxxxWAVE")) + `","filename":"a.wav","language":"en"}`,
			"/v1/audio/transcriptions", "", `{"billed_seconds":10,"cost_usd":"0.01667","text":"hello"}`},
		{ToolSpeak, `{"text":"hello","speed":1.5}`, "/v1/audio/speech", `{"input":"hello","model":"gw-voice-speak","response_format":"mp3","speed":1.5,"voice":"alloy"}`,
			`{"billed_chars":5,"bytes":8,"cost_usd":"0.00013","format":"mp3","mime_type":"audio/mpeg","voice":"alloy"}`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			s, f := newServer()
			res := call(t, s, paid, tc.tool, tc.args)
			if res.IsError {
				t.Fatalf("error result: %s", asJSON(t, res.Structured))
			}
			if got := asJSON(t, res.Structured); got != tc.want {
				t.Fatalf("structured = %s\nwant %s", got, tc.want)
			}
			if res.Content[0]["type"] != "text" || res.Content[0]["text"] != tc.want {
				t.Fatalf("text content = %v", res.Content[0])
			}
			r := f.got[tc.route]
			if r == nil || r.Header.Get("Authorization") != "Bearer sk-caller" {
				t.Fatalf("route %s called with %v", tc.route, r)
			}
			if tc.sent != "" {
				var sent map[string]any
				_ = json.Unmarshal(f.bodies[tc.route], &sent)
				if got := asJSON(t, sent); got != tc.sent {
					t.Fatalf("sent %s, want %s", got, tc.sent)
				}
			}
		})
	}
}

// transcribe sends the audio as the route's multipart upload.
func TestTranscribeUpload(t *testing.T) {
	s, f := newServer()
	res := call(t, s, paid, ToolTranscribe, `{"audio_base64":"`+base64.StdEncoding.EncodeToString([]byte("OggS-audio"))+`","filename":"voice.m4a","prompt":"names"}`)
	if res.IsError {
		t.Fatal(asJSON(t, res.Structured))
	}
	r := f.got["/v1/audio/transcriptions"]
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	form, err := multipart.NewReader(strings.NewReader(string(f.bodies["/v1/audio/transcriptions"])), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	fh := form.File["file"]
	if len(fh) != 1 || fh[0].Filename != "voice.m4a" || form.Value["prompt"][0] != "names" || form.Value["response_format"][0] != "json" {
		t.Fatalf("upload: files %v values %v", form.File, form.Value)
	}
}

// speak returns an audio content block with the route's bytes.
func TestSpeakAudioBlock(t *testing.T) {
	s, _ := newServer()
	res := call(t, s, paid, ToolSpeak, `{"text":"hi","format":"wav","voice":"nova"}`)
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("result %+v", res)
	}
	want := map[string]any{"type": "audio", "data": base64.StdEncoding.EncodeToString([]byte("ID3audio")), "mimeType": "audio/wav"}
	if !reflect.DeepEqual(res.Content[1], want) || res.Structured["voice"] != "nova" || res.Structured["mime_type"] != "audio/wav" {
		t.Fatalf("audio block %v, structured %v", res.Content[1], res.Structured)
	}
}

func TestToolErrors(t *testing.T) {
	free := store.Account{ID: "f", Plan: store.PlanFree}
	for _, tc := range []struct {
		name, tool, args string
		acct             store.Account
		refuse           *gwerr.Error // what the route answers
		want             string
	}{
		{"unknown tool", "nope", `{}`, paid, nil, `{"capability":"","error":"invalid_request","message":"unknown tool \"nope\"","retryable":false}`},
		{"arguments not an object", ToolWebSearch, `[1]`, paid, nil, `{"capability":"search","error":"invalid_request","message":"arguments must be a JSON object","retryable":false}`},
		{"missing query", ToolWebSearch, `{}`, paid, nil, `{"capability":"search","error":"invalid_request","message":"query is required","retryable":false}`},
		{"query too long", ToolWebSearch, `{"query":"` + strings.Repeat("é", MaxSearchQueryChars+1) + `"}`, paid, nil,
			`{"capability":"search","error":"too_large","message":"query is longer than 2000 characters","retryable":false}`},
		{"speak too long", ToolSpeak, `{"text":"` + strings.Repeat("a", MaxSpeakChars+1) + `"}`, paid, nil,
			`{"capability":"speech","error":"too_large","message":"text is longer than 1000 characters","retryable":false}`},
		{"speak format", ToolSpeak, `{"text":"a","format":"ogg"}`, paid, nil,
			`{"capability":"speech","error":"invalid_request","message":"format must be mp3 or wav","retryable":false}`},
		{"transcribe both sources", ToolTranscribe, `{"audio_url":"https://a.example/x.mp3","audio_base64":"AA=="}`, paid, nil,
			`{"capability":"transcription","error":"invalid_request","message":"give exactly one of audio_url and audio_base64","retryable":false}`},
		{"transcribe plain http", ToolTranscribe, `{"audio_url":"http://a.example/x.mp3"}`, paid, nil,
			`{"capability":"transcription","error":"invalid_request","message":"audio_url must be a public https URL","retryable":false}`},
		{"premium locked", ToolImageGenerate, `{"prompt":"x"}`, free, gwerr.New(gwerr.PlanLocked, "images needs a paid plan"),
			`{"capability":"images","error":"premium_locked","message":"images needs a paid plan","price_microcents":10000,"retryable":false,"upgrade_url":"https://billing.example/upgrade"}`},
		{"fetch on free", ToolWebFetch, `{"url":"https://example.com/"}`, free, gwerr.New(gwerr.PlanLocked, "fetch needs a paid plan"),
			`{"capability":"fetch","error":"payment_required","message":"fetch needs a paid plan","retryable":false,"upgrade_url":"https://billing.example/upgrade"}`},
		{"rate limited", ToolWebSearch, `{"query":"q"}`, paid, &gwerr.Error{Kind: gwerr.RateLimited, Message: "too many calls", RetryAfter: 7},
			`{"capability":"search","error":"rate_limited","message":"too many calls","retry_after_seconds":7,"retryable":true}`},
		{"upstream failed", ToolWebSearch, `{"query":"q"}`, paid, gwerr.New(gwerr.Upstream, "search unavailable"),
			`{"capability":"search","error":"capability_unavailable","reason":"search unavailable","retryable":true}`},
		{"out of credit", ToolSpeak, `{"text":"a"}`, paid, gwerr.New(gwerr.Payment, "balance spent").WithCode(gwerr.CodeCreditExhausted),
			`{"capability":"speech","error":"payment_required","message":"balance spent","retryable":false,"upgrade_url":"https://billing.example/upgrade"}`},
		{"switched off", ToolSpeak, `{"text":"a"}`, paid, gwerr.New(gwerr.Disabled, "speech is not switched on"),
			`{"capability":"speech","error":"ability_disabled","message":"speech is not switched on","retryable":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, f := newServer()
			for _, tool := range catalogue {
				f.refuse[tool.Route] = tc.refuse
			}
			res := call(t, s, tc.acct, tc.tool, tc.args)
			if !res.IsError {
				t.Fatalf("not an error: %v", res.Structured)
			}
			if got := asJSON(t, res.Structured); got != tc.want {
				t.Fatalf("error object %s\nwant %s", got, tc.want)
			}
		})
	}
}

func names(ts []Tool) string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return strings.Join(n, ",")
}

// The paid-tool listing states: a Free-plan refusal keeps the tool for one
// more listing, the next drops it, and a paid cleared plan lists it again.
func TestPaidToolStates(t *testing.T) {
	s, f := newServer()
	ctx := context.Background()
	free := store.Account{ID: "f", Plan: store.PlanFree}
	all := "list_capabilities,web_fetch,web_search,image_generate,transcribe,speak"
	if got := names(s.List(ctx, free)); got != all {
		t.Fatalf("first listing %s", got)
	}
	f.refuse["/v1/images/generations"] = gwerr.New(gwerr.PlanLocked, "paid plan needed")
	if res := call(t, s, free, ToolImageGenerate, `{"prompt":"x"}`); res.Structured["error"] != "premium_locked" {
		t.Fatalf("refusal %v", res.Structured)
	}
	if got := names(s.List(ctx, free)); got != all {
		t.Fatalf("listing after the refusal %s", got)
	}
	without := "list_capabilities,web_fetch,web_search,transcribe,speak"
	for i := range 2 {
		if got := names(s.List(ctx, free)); got != without {
			t.Fatalf("listing %d after the refusal: %s", i+2, got)
		}
	}
	if got := names(s.List(ctx, store.Account{ID: "other", Plan: store.PlanFree})); got != all {
		t.Fatalf("another account: %s", got)
	}
	nowPaid := free
	nowPaid.Plan, nowPaid.Cleared = store.PlanPaid, true
	if got := names(s.List(ctx, nowPaid)); got != all {
		t.Fatalf("paid and cleared: %s", got)
	}
	if got := names(s.List(ctx, free)); got != all {
		t.Fatalf("back on free after a reset: %s", got)
	}
}

// Tools of abilities switched off are not listed; paid tools say their plan
// and cost.
func TestListAbilitiesAndDescriptions(t *testing.T) {
	s, _ := newServer()
	acct := paid
	acct.Abilities = []string{store.AbilitySearch}
	ts := s.List(context.Background(), acct)
	if names(ts) != "list_capabilities,web_search" {
		t.Fatalf("listed %s", names(ts))
	}
	if d := ts[1].Description; !strings.Contains(d, "paid plan") || !strings.Contains(d, "25000 microcents (0.025 USD)") {
		t.Fatalf("description %q", d)
	}
	for _, tool := range ts {
		var v map[string]any
		if err := json.Unmarshal(tool.InputSchema, &v); err != nil || v["type"] != "object" {
			t.Fatalf("%s schema %s", tool.Name, tool.InputSchema)
		}
	}
}

func TestListCapabilities(t *testing.T) {
	s, f := newServer()
	acct := store.Account{ID: "f", Plan: store.PlanFree, Abilities: []string{store.AbilityImages, store.AbilitySearch, store.AbilityFetch}}
	res := call(t, s, acct, ToolListCapabilities, ``)
	want := `{"enabled":{"fetch":{"est_microcents":null,"premium":true},"images":{"est_microcents":10000,"premium":true},"search":{"est_microcents":25000,"premium":true}},"premium_unlocked":false,"tier":"free"}`
	if res.IsError || asJSON(t, res.Structured) != want {
		t.Fatalf("list_capabilities = %s\nwant %s", asJSON(t, res.Structured), want)
	}
	if len(f.got) != 0 {
		t.Fatalf("list_capabilities called routes: %v", f.got)
	}
}

// Every paid tool says what its advisory cost assumes, and only paid tools
// carry a cost.
func TestPaidToolsCostBasis(t *testing.T) {
	for _, tool := range append(Tools(), appsTools...) {
		if tool.Paid != (tool.CostBasis != "") {
			t.Errorf("%s: paid %v, cost basis %q", tool.Name, tool.Paid, tool.CostBasis)
		}
	}
}

// A refused key: every tool, known or not, answers auth_failed without
// calling a route; a key that could not be checked is worth a retry.
func TestRefusedKey(t *testing.T) {
	for _, tc := range []struct {
		refusal    *gwerr.Error
		tool, want string
	}{
		{gwerr.New(gwerr.Unauthenticated, "missing API key"), ToolWebSearch,
			`{"capability":"search","error":"auth_failed","message":"missing API key","retryable":false}`},
		{gwerr.New(gwerr.Unauthenticated, "API key expired"), ToolListCapabilities,
			`{"capability":"","error":"auth_failed","message":"API key expired","retryable":false}`},
		{gwerr.New(gwerr.Unauthenticated, "invalid API key"), "nope",
			`{"capability":"","error":"auth_failed","message":"invalid API key","retryable":false}`},
		{&gwerr.Error{Kind: gwerr.Unavailable, Message: "the key could not be checked; retry", RetryAfter: 1}, ToolSpeak,
			`{"capability":"speech","error":"capability_unavailable","reason":"the key could not be checked; retry","retry_after_seconds":1,"retryable":true}`},
	} {
		s, f := newServer()
		r := httptest.NewRequest(http.MethodPost, "/mcp-tools/", nil)
		res := s.Call(context.Background(), &pipeline.Call{R: r, KeyRefusal: tc.refusal}, tc.tool, json.RawMessage(`{"query":"q","text":"hi"}`))
		if got := asJSON(t, res.Structured); !res.IsError || got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.tool, got, tc.want)
		}
		if len(f.got) != 0 {
			t.Errorf("%s: routes called %v", tc.tool, f.got)
		}
	}
}

// TestKnown: the tools a server offers are known, the apps tools only
// when apps are offered, and nothing else.
func TestKnown(t *testing.T) {
	bare, withApps := &Server{}, &Server{Apps: &Apps{}}
	for _, tc := range []struct {
		name        string
		bare, withA bool
	}{
		{ToolWebSearch, true, true},
		{ToolListCapabilities, true, true},
		{ToolAppsList, false, true},
		{"no_such_tool", false, false},
	} {
		if got := bare.Known(tc.name); got != tc.bare {
			t.Errorf("without apps, Known(%q) = %v", tc.name, got)
		}
		if got := withApps.Known(tc.name); got != tc.withA {
			t.Errorf("with apps, Known(%q) = %v", tc.name, got)
		}
	}
}
