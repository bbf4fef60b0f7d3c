package chat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// countFixture serves count_tokens for a model counted locally (its
// provider has no count endpoint), on a limiter whose clock stands still.
type countFixture struct {
	h  *Handler
	gw *pipeline.Gateway
	ep *pipeline.Endpoint
}

func newCountFixture(tb testing.TB, budget limits.Budget) *countFixture {
	tb.Helper()
	cat, err := catalog.New([]catalog.Provider{{Name: "o", Format: "openai", BaseURL: "http://127.0.0.1:9/v1"}},
		[]catalog.Model{{ID: "m", Provider: "o", Lane: "standard"}}, nil, nil, "")
	if err != nil {
		tb.Fatal(err)
	}
	still := time.Unix(1_700_000_000, 0)
	return &countFixture{
		h:  &Handler{Picker: &lanes.Picker{Catalog: cat, Health: lanes.NewHealth()}, CountBytes: budget},
		gw: &pipeline.Gateway{Catalog: cat, Logger: zap.NewNop(), Limits: limits.NewMemory(func() time.Time { return still })},
		ep: &pipeline.Endpoint{Name: "messages", Family: gwerr.Messages},
	}
}

// count sends body to count_tokens with key (of account "acct"); it gives
// the recorded answer and the handler's error.
func (f *countFixture) count(key string, body []byte) (*httptest.ResponseRecorder, error) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/alt/v1/messages/count_tokens", strings.NewReader(string(body)))
	c := &pipeline.Call{W: w, R: r, Endpoint: f.ep, RequestID: "r", Gateway: f.gw,
		Key: store.Key{ID: key, AccountID: "acct"}, Account: store.Account{ID: "acct", Plan: store.PlanPaid, Cleared: true}}
	return w, f.h.CountTokens(c)
}

// countBody is a count_tokens body of exactly size bytes (at least 64).
func countBody(size int) []byte {
	head, tail := `{"model":"m","messages":[{"role":"user","content":"`, `"}]}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// A key's count_tokens bodies take their length from its byte budget
// before they are read: past it, 429 with the wait for the missing bytes,
// and a malformed body costs its bytes too. Another key of the same
// account keeps its whole budget; a body larger than the budget is 413
// and takes nothing.
func TestCountTokensByteBudget(t *testing.T) {
	// 1,000 bytes a minute: 60 ms a byte.
	f := newCountFixture(t, limits.Budget{Name: "count_tokens_bytes", Limit: 1000, Period: time.Minute})
	ok := func(key string, size int) {
		t.Helper()
		body := countBody(size)
		w, err := f.count(key, body)
		want, _ := countLocal(messagesMembers, gjson.ParseBytes(body))
		var got struct {
			InputTokens int `json:"input_tokens"`
		}
		if err != nil || w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.InputTokens != want {
			t.Fatalf("%s, %d bytes: %v %d %s; want 200 with %d tokens", key, size, err, w.Code, w.Body, want)
		}
	}
	refused := func(key string, body []byte, kind gwerr.Kind, retryAfter int) {
		t.Helper()
		_, err := f.count(key, body)
		if e := gwerr.As(err); err == nil || e.Kind != kind || e.RetryAfter != retryAfter {
			t.Fatalf("%s, %d bytes: %#v; want kind %v, Retry-After %d", key, len(body), err, kind, retryAfter)
		}
	}
	ok("key_a", 400)
	ok("key_a", 400)
	// 400 bytes with 200 left: 200 bytes short, 12 s.
	refused("key_a", countBody(400), gwerr.RateLimited, 12)
	ok("key_b", 400)
	ok("key_a", 200)
	refused("key_a", countBody(64), gwerr.RateLimited, 4)

	refused("key_c", []byte("{"+strings.Repeat(" ", 998)+"x"), gwerr.Invalid, 0)
	refused("key_c", countBody(64), gwerr.RateLimited, 4)

	refused("key_d", countBody(1001), gwerr.TooLarge, 0)
	ok("key_d", 1000)
}

// Without a byte budget a body is bounded only by MaxBody.
func TestCountTokensNoByteBudget(t *testing.T) {
	f := newCountFixture(t, limits.Budget{})
	for range 3 {
		if w, err := f.count("key_a", countBody(64<<10)); err != nil || w.Code != http.StatusOK {
			t.Fatalf("64 KiB without a byte budget: %v %d", err, w.Code)
		}
	}
	if got := f.h.countBodyLimit(); got != MaxBody {
		t.Fatalf("body limit without a byte budget: %d, want %d", got, MaxBody)
	}
}

// BenchmarkCountTokens measures the local count of a count_tokens body
// (what the byte budget bounds), through the handler, in the text shapes
// that cost the o200k tokenizer the most and least per byte. MB/s is its
// throughput per second of wall time; cpu-ns/op the process's CPU time
// per body, which other work on a shared machine does not inflate.
func BenchmarkCountTokens(b *testing.B) {
	const size = 1 << 20
	f := newCountFixture(b, limits.Budget{})
	for _, s := range []struct{ name, text string }{
		{"prose", "the cat sat on the mat. "},
		{"one word", "x"},
		{"spaces", " "},
		{"digits and marks", "12345!?.,"},
		{"japanese", "猫がマットの上に座った。"},
	} {
		head, tail := `{"model":"m","messages":[{"role":"user","content":"`, `"}]}`
		body := []byte(head + strings.Repeat(s.text, size/len(s.text)) + tail)
		b.Run(fmt.Sprintf("%s/%dMiB", s.name, size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			start := cpuTime(b)
			for b.Loop() {
				if w, err := f.count("key", body); err != nil || w.Code != http.StatusOK {
					b.Fatalf("%v %d", err, w.Code)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
