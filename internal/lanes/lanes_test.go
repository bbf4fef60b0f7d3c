package lanes

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func testCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	all := []string{"vision", "tools", "json"}
	c, err := catalog.New(
		[]catalog.Provider{{Name: "o", Format: "openai", BaseURL: "http://o/v1"}, {Name: "a", Format: "anthropic", BaseURL: "http://a"}},
		[]catalog.Model{
			{ID: "fast-cheap", Provider: "o", Lane: "fast", ContextWindow: 16000, InputPrice: usd("0.1"), OutputPrice: usd("0.4")},
			{ID: "fast-vision", Provider: "a", Lane: "fast", Capabilities: all, ContextWindow: 200000, InputPrice: usd("1"), OutputPrice: usd("5")},
			{ID: "std-a", Provider: "a", Lane: "standard", Capabilities: all, ContextWindow: 200000, InputPrice: usd("3"), OutputPrice: usd("15")},
			{ID: "std-o", Provider: "o", Lane: "standard", Capabilities: all, ContextWindow: 1000000, InputPrice: usd("0.4"), OutputPrice: usd("1.6")},
			{ID: "reason", Provider: "o", Lane: "reasoning", Capabilities: all, ContextWindow: 200000, InputPrice: usd("1.1"), OutputPrice: usd("4.4")},
		}, nil, []catalog.Alias{{Name: "my-alias", Target: "gw-standard"}, {Name: "my-pin", Target: "gw-pinned-reason"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ids(ms []*catalog.Model) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestPick(t *testing.T) {
	r := &Picker{Catalog: testCatalog(t), Health: NewHealth()}
	for _, tc := range []struct {
		model  string
		needs  Needs
		lane   string
		kind   Kind
		pinned bool
		want   []string
	}{
		{"gw-fast", Needs{Text: "hi"}, "fast", "", false, []string{"fast-cheap", "std-o", "reason"}},
		{"gw-fast", Needs{Vision: true}, "fast", "", false, []string{"fast-vision", "std-o", "reason"}},
		{"gw-fast", Needs{PromptTokens: 20000}, "fast", "", false, []string{"fast-vision", "std-o", "reason"}},
		{"gw-standard", Needs{}, "standard", "", false, []string{"std-o", "reason"}},
		{"gw-reasoning", Needs{}, "reasoning", "", false, []string{"reason"}},
		{"", Needs{Text: "hello there"}, "fast", KindChat, false, []string{"fast-cheap", "std-o", "reason"}},
		{"gw-auto", Needs{Text: "Prove that the square root of 2 is irrational."}, "reasoning", KindReasoning, false, []string{"reason"}},
		{"gw-auto", Needs{Text: "Why does this fail?\n```go\nfunc main() {}\n```"}, "standard", KindCode, false, []string{"std-o", "reason"}},
		{"gw-auto", Needs{Text: "what is this?", Vision: true}, "standard", KindVision, false, []string{"std-o", "reason"}},
		{"gw-auto", Needs{Text: "weather?", Tools: true}, "standard", KindTools, false, []string{"std-o", "reason"}},
		{"gw-auto", Needs{Text: "summarise", PromptTokens: 300000}, "standard", KindLong, false, []string{"std-o"}},
		{"gw-pinned-std-a", Needs{}, "", "", true, []string{"std-a"}},
		{"std-a", Needs{}, "", "", true, []string{"std-a"}},
		{"my-alias", Needs{}, "standard", "", false, []string{"std-o", "reason"}},
		{"my-pin", Needs{}, "", "", true, []string{"reason"}},
	} {
		rt, err := r.Pick(tc.model, tc.needs)
		if err != nil {
			t.Errorf("%q: %v", tc.model, err)
			continue
		}
		if rt.Lane != tc.lane || rt.Kind != tc.kind || rt.Pinned != tc.pinned || !slices.Equal(ids(rt.Candidates), tc.want) {
			t.Errorf("%q %+v:\n got lane %q kind %q pinned %v %v\nwant lane %q kind %q pinned %v %v",
				tc.model, tc.needs, rt.Lane, rt.Kind, rt.Pinned, ids(rt.Candidates), tc.lane, tc.kind, tc.pinned, tc.want)
		}
	}
}

func TestRouteErrors(t *testing.T) {
	r := &Picker{Catalog: testCatalog(t)}
	for _, tc := range []struct {
		model string
		needs Needs
		code  string
	}{
		{"gpt-unknown", Needs{}, "model_not_found"},
		{"gw-pinned-nope", Needs{}, "model_not_found"},
		{"gw-fast", Needs{PromptTokens: 5_000_000}, ""},
	} {
		_, err := r.Pick(tc.model, tc.needs)
		var e *gwerr.Error
		if !errors.As(err, &e) || e.Kind != gwerr.Invalid || e.Code != tc.code || e.Param != "model" {
			t.Errorf("%q: %v", tc.model, err)
		}
	}
}

func TestUnhealthyModelsGoLast(t *testing.T) {
	now := time.Unix(0, 0)
	h := NewHealth()
	h.Now = func() time.Time { return now }
	r := &Picker{Catalog: testCatalog(t), Health: h}
	for range DefaultFailThreshold - 1 {
		h.Fail("std-o")
	}
	if rt, _ := r.Pick("gw-standard", Needs{}); ids(rt.Candidates)[0] != "std-o" {
		t.Fatalf("below the threshold the model must stay first: %v", ids(rt.Candidates))
	}
	h.Fail("std-o")
	if rt, _ := r.Pick("gw-standard", Needs{}); !slices.Equal(ids(rt.Candidates), []string{"std-a", "reason"}) {
		t.Fatalf("cooling down: %v", ids(rt.Candidates))
	}
	now = now.Add(DefaultCooldown)
	if rt, _ := r.Pick("gw-standard", Needs{}); ids(rt.Candidates)[0] != "std-o" {
		t.Fatalf("after the cool-down: %v", ids(rt.Candidates))
	}
	h.Fail("std-o")
	h.OK("std-o")
	h.Fail("std-o")
	h.Fail("std-o")
	if !h.Healthy("std-o") {
		t.Fatal("a success must clear earlier failures")
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Kind
	}{
		{"hello, how are you?", KindChat},
		{"Write me a haiku about autumn", KindChat},
		{"What is 17 * 23?", KindReasoning},
		{"Solve for x: 3x + 2 = 11", KindReasoning},
		{"Think step by step: a bat and a ball cost $1.10", KindReasoning},
		{"def add(a, b):\n    return a + b\nwhy is it slow", KindCode},
		{"Traceback (most recent call last):\n  File \"x.py\"", KindCode},
		{"SELECT * FROM users WHERE id = 1", KindCode},
	} {
		if got := Classify(Needs{Text: tc.text}); got != tc.want {
			t.Errorf("Classify(%q) = %s, want %s", tc.text, got, tc.want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("hello", 0)
	f.Add("```\nfunc x() {}\n```", 10)
	f.Fuzz(func(t *testing.T, text string, tokens int) {
		k := Classify(Needs{Text: text, PromptTokens: tokens})
		if laneOf[k] == "" {
			t.Fatalf("kind %q has no lane", k)
		}
	})
}

func TestDecisions(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	d := NewDecisions()
	d.Now = func() time.Time { return now }
	d.Put(Decision{ID: "a", Time: now, Chosen: "m", Latency: 1500 * time.Millisecond})
	got, ok := d.Get("a")
	if !ok || got.Chosen != "m" || got.LatencyMS != 1500 {
		t.Fatalf("%+v %v", got, ok)
	}
	now = now.Add(DecisionTTL + time.Second)
	if _, ok := d.Get("a"); ok {
		t.Fatal("an expired decision is still served")
	}
	d.Put(Decision{ID: "b", Time: now})
	if len(d.byID) != 1 || d.n != 1 {
		t.Fatalf("expired decisions kept: %d %d", len(d.byID), d.n)
	}
}

// TestDecisionsBounded: at most MaxDecisions are kept.
func TestDecisionsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	d := NewDecisions()
	d.Now = func() time.Time { return now }
	for i := range MaxDecisions + MaxDecisions/2 {
		d.Put(Decision{ID: fmt.Sprint(i), Time: now})
	}
	if len(d.byID) != MaxDecisions || d.n != MaxDecisions {
		t.Fatalf("%d kept, %d found by id", d.n, len(d.byID))
	}
	if _, ok := d.Get("0"); ok {
		t.Fatal("the oldest decision was kept")
	}
	if _, ok := d.Get(fmt.Sprint(MaxDecisions + MaxDecisions/2 - 1)); !ok {
		t.Fatal("the newest decision was dropped")
	}
}

// The estimate reserves the prompt at its bound, and its units saturate
// instead of wrapping.
func TestEstimateBoundAndSaturation(t *testing.T) {
	m := &catalog.Model{ID: "m", InputPrice: usd("1"), OutputPrice: usd("2")}
	// 1,000 tokens estimated, 4,000 at most: the bound is reserved.
	if got := EstimateCost(m, Needs{PromptTokens: 1000, PromptBound: 4000, MaxTokens: 100}); got != usd("0.0042") {
		t.Fatalf("estimate %v, want 0.0042", got)
	}
	// An output limit times answers past int64 saturates: the estimate is
	// the most Money holds, never a wrapped small number.
	if got := EstimateCost(m, Needs{MaxTokens: 1 << 62, Answers: 128}); got != math.MaxInt64 {
		t.Fatalf("huge estimate %v", got)
	}
}
