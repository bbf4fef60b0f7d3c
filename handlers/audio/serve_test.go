package audio_test

// The audio routes served through the real route table and pipeline, in
// process, over a store that can fail: what the built gateway cannot be
// made to do from outside (a ledger that fails at settlement, a store
// that cannot check the key), and how much memory one upload costs.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-gw/caddy-gw/handlers/audio"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
	"github.com/caddy-gw/caddy-gw/routes"
)

// served is a route table with the audio handler over a Faulty store, and
// a provider that answers every transcription "ok" (reading the whole
// upload, keeping nothing) and every speech with a few bytes of audio.
type served struct {
	rt    *routes.Router
	fx    *gwtest.Fixture
	store *storetest.Faulty
	key   string
	// uploads counts the provider's transcription requests, speeches its
	// speech requests.
	uploads, speeches atomic.Int64
}

func newServed(tb testing.TB) *served {
	tb.Helper()
	s := &served{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/audio/transcriptions":
			s.uploads.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"text":"ok"}`)
		case "/v1/audio/speech":
			s.speeches.Add(1)
			w.Header().Set("Content-Type", "audio/mpeg")
			_, _ = w.Write([]byte("some audio"))
		default:
			http.NotFound(w, r)
		}
	}))
	tb.Cleanup(up.Close)
	price, speakPrice := int64(1667), int64(26)
	cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, BaseURL: up.URL + "/v1"}}, nil,
		[]catalog.Ability{
			{Alias: audio.AliasVoice, Provider: "p", Model: "voice-1", PriceMicrocents: &price},
			{Alias: audio.AliasSpeak, Provider: "p", Model: "speak-1", PriceMicrocents: &speakPrice,
				Voices: []catalog.Voice{{ID: "alloy"}, {ID: "verse"}}},
		}, nil, "")
	if err != nil {
		tb.Fatal(err)
	}
	h, err := audio.New(upstream.New(), cat, audio.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	s.fx = gwtest.New(tb, gwtest.Options{Catalog: cat, Faulty: true})
	s.store, s.key = s.fx.Faulty, s.fx.Key
	s.rt = routes.New(s.fx.Gateway, routes.Options{Audio: h})
	return s
}

func (s *served) serve(tb testing.TB, r *http.Request) *httptest.ResponseRecorder {
	tb.Helper()
	r.Header.Set("Authorization", "Bearer "+s.key)
	w := httptest.NewRecorder()
	if !s.rt.ServeHTTP(w, r, routes.All) {
		tb.Fatalf("%s: not a gateway route", r.URL.Path)
	}
	return w
}

func (s *served) ledger(tb testing.TB) int {
	tb.Helper()
	e, err := s.store.Entries(context.Background(), "a", 100)
	if err != nil {
		tb.Fatal(err)
	}
	return len(e)
}

// wav is a valid 8-bit mono WAV of n bytes of audio at 8 kHz.
func wav(n int) []byte {
	b := make([]byte, 44+n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], 8000)
	binary.LittleEndian.PutUint32(b[28:], 8000)
	binary.LittleEndian.PutUint16(b[32:], 1)
	binary.LittleEndian.PutUint16(b[34:], 8)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(n))
	return b
}

// uploadBody is a transcription upload of file.
func uploadBody(file []byte) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write(file)
	_ = mw.WriteField("model", "gw-voice")
	_ = mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

func transcriptionRequest(body []byte, contentType string, knownLength bool) *http.Request {
	var rd io.Reader = bytes.NewReader(body)
	if !knownLength {
		rd = io.MultiReader(rd) // hides the length: a chunked upload
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", rd)
	if !knownLength {
		r.ContentLength = -1
	}
	r.Header.Set("Content-Type", contentType)
	return r
}

// TestSettlementFailsUnbilled: the ledger fails when the charge lands
// (after the provider answered, before the client's answer): 402
// credit_unresolved with Retry-After, nothing billed, for both routes.
func TestSettlementFailsUnbilled(t *testing.T) {
	s := newServed(t)
	body, ct := uploadBody(wav(8000))
	s.store.Fail = storetest.OpSettle
	s.store.Down.Store(true)
	for _, r := range []*http.Request{
		transcriptionRequest(body, ct, true),
		httptest.NewRequest(http.MethodPost, "/v1/audio/speech", strings.NewReader(`{"input":"hello","voice":"alloy"}`)),
	} {
		w := s.serve(t, r)
		var got struct {
			Error struct{ Type, Code, Message string }
		}
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != http.StatusPaymentRequired || got.Error.Code != "credit_unresolved" || got.Error.Type != "insufficient_quota" ||
			got.Error.Message == "" || w.Header().Get("Retry-After") != "1" || w.Header().Get("X-Gw-Cost-Usd") != "" {
			t.Errorf("%s: %d %v %s", r.URL.Path, w.Code, w.Header(), w.Body)
		}
	}
	s.store.Down.Store(false)
	if n := s.ledger(t); n != 0 {
		t.Fatalf("%d ledger entries, want none", n)
	}
	// Once the store is back the same calls are billed.
	if w := s.serve(t, transcriptionRequest(body, ct, true)); w.Code != 200 || s.ledger(t) != 1 {
		t.Fatalf("after recovery: %d %s", w.Code, w.Body)
	}
}

// TestSpeechBillsInstructions: a speech call is billed for the characters
// of its instructions on top of its input's (the input's divided by a
// speed below 1, the instructions' as they are), in the receipt and the
// ledger; a prepaid balance that covers the input alone is refused before
// the provider is called.
func TestSpeechBillsInstructions(t *testing.T) {
	s := newServed(t)
	// 12 characters of input at speed 0.5 are 24; the instructions are 14
	// characters (the emoji one).
	const body = `{"input":"Hello, wörld","voice":"alloy","speed":0.5,"instructions":"Speak calmly 🙂"}`
	cost := func(chars int64) pricing.Money {
		return pricing.Cost(false, pricing.Line{Units: chars, Rate: pricing.PerUnit(pricing.Micro(26))})
	}
	w := s.serve(t, httptest.NewRequest(http.MethodPost, "/v1/audio/speech", strings.NewReader(body)))
	if w.Code != 200 || w.Header().Get("X-Gw-Billed-Chars") != "38" || w.Header().Get("X-Gw-Cost-Usd") != cost(38).String() {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	entries, err := s.store.Entries(context.Background(), "a", 10)
	if err != nil || len(entries) != 1 || entries[0].Units != 38 || entries[0].Unit != pricing.UnitCharacter || entries[0].Cost != cost(38) {
		t.Fatalf("ledger %+v %v", entries, err)
	}
	// A balance of 37 characters: the 24 of the input fit, the whole call
	// does not.
	balance := cost(37)
	s.fx.AddAccount(t, store.Account{ID: "p", Plan: store.PlanPaid, Cleared: true, Balance: &balance})
	r := httptest.NewRequest(http.MethodPost, "/v1/audio/speech", strings.NewReader(body))
	s.key = s.fx.AddKey(t, store.Key{ID: "kp", AccountID: "p"})
	w = s.serve(t, r)
	var refusal struct {
		Error struct{ Type, Code, Message string }
	}
	_ = json.Unmarshal(w.Body.Bytes(), &refusal)
	if w.Code != http.StatusPaymentRequired || refusal.Error.Type != "insufficient_quota" || refusal.Error.Code != "credit_exhausted" ||
		refusal.Error.Message == "" || w.Header().Get("X-Gw-Cost-Usd") != "" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if n := s.speeches.Load(); n != 1 {
		t.Fatalf("the provider was called %d times, want once", n)
	}
}

// TestVoicesStoreDown: a voice list that cannot check the key is 503
// "Voice catalogue unavailable" with Cache-Control: no-store.
func TestVoicesStoreDown(t *testing.T) {
	s := newServed(t)
	if w := s.serve(t, httptest.NewRequest(http.MethodGet, "/v1/audio/voices", nil)); w.Code != 200 ||
		!strings.Contains(w.Body.String(), `"id":"verse"`) {
		t.Fatalf("voices: %d %s", w.Code, w.Body)
	}
	s.store.Down.Store(true)
	for _, path := range []string{"/v1/audio/voices", "/audio/voices"} {
		w := s.serve(t, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusServiceUnavailable || strings.TrimSpace(w.Body.String()) != `{"error":{"message":"Voice catalogue unavailable"}}` ||
			w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("ETag") != "" {
			t.Errorf("%s: %d %v %s", path, w.Code, w.Header(), w.Body)
		}
	}
}

// allocatedBy is the bytes the process allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestUploadHeldOnce: an upload just under the 8 MB limit allocates its
// size once (the buffer it is read into, which also goes upstream), not
// twice, with or without a Content-Length; the total is everything the
// process allocated for the call, the provider's side included.
func TestUploadHeldOnce(t *testing.T) {
	s := newServed(t)
	file := wav(audio.MaxFileBytes - 44)
	body, ct := uploadBody(file)
	// A first call warms the connection and the store up.
	if w := s.serve(t, transcriptionRequest(body, ct, true)); w.Code != 200 {
		t.Fatalf("warm-up: %d %s", w.Code, w.Body)
	}
	for _, known := range []bool{true, false} {
		var w *httptest.ResponseRecorder
		n := allocatedBy(func() { w = s.serve(t, transcriptionRequest(body, ct, known)) })
		if w.Code != 200 || w.Header().Get("X-Gw-Billed-Seconds") != "1049" {
			t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
		}
		ratio := float64(n) / float64(len(file))
		t.Logf("8 MiB upload (Content-Length known: %v): %d bytes allocated, %.3f× the file", known, n, ratio)
		if ratio > 1.25 {
			t.Errorf("an upload of %d bytes allocated %d (%.2f×): the file is held more than once", len(file), n, ratio)
		}
	}
	if n := s.uploads.Load(); n != 3 {
		t.Fatalf("provider saw %d uploads, want 3", n)
	}
}

// BenchmarkTranscriptionUpload: one 1 MB and one 8 MB upload through the
// route table, pipeline and store to an in-process provider; B/op is the
// memory one upload costs.
func BenchmarkTranscriptionUpload(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"1MB", 1 << 20}, {"8MB", audio.MaxFileBytes - 44}} {
		b.Run(size.name, func(b *testing.B) {
			s := newServed(b)
			body, ct := uploadBody(wav(size.bytes))
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for range b.N {
				if w := s.serve(b, transcriptionRequest(body, ct, true)); w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
