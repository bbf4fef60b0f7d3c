package chat

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func TestBetasForCall(t *testing.T) {
	table := DefaultBetas(Betas{"double-2099-01-01": {InputPercent: 200, OutputPercent: 150}, "prompt-caching-2024-07-31": refused})
	for _, tc := range []struct {
		header, value string
		names         []string
		in, out       int64
		param         string // the refusal's, "" when accepted
	}{
		{"anthropic-beta", "structured-outputs-2025-11-13", []string{"structured-outputs-2025-11-13"}, 100, 100, ""},
		{"anthropic-beta", " interleaved-thinking-2025-05-14 ,, token-efficient-tools-2025-02-19,interleaved-thinking-2025-05-14", []string{"interleaved-thinking-2025-05-14", "token-efficient-tools-2025-02-19"}, 100, 100, ""},
		{"vendor-beta", "fast-mode-2026-02-01", []string{"fast-mode-2026-02-01"}, 600, 600, ""},
		{"anthropic-beta", "fast-mode-2026-02-01,double-2099-01-01", []string{"fast-mode-2026-02-01", "double-2099-01-01"}, 1200, 900, ""},
		{"anthropic-beta", "context-1m-2025-08-07", nil, 0, 0, "anthropic-beta"},
		{"anthropic-beta", "prompt-caching-2024-07-31", nil, 0, 0, "anthropic-beta"}, // trimmed by the operator
		{"vendor-beta", "output-128k-2025-02-19,no-such-beta", nil, 0, 0, "vendor-beta"},
		{"anthropic-beta", strings.Repeat("pdfs-2024-09-25,", 100), []string{"pdfs-2024-09-25"}, 100, 100, ""},
	} {
		h := http.Header{}
		h.Add(tc.header, tc.value)
		cb, err := table.forCall(h)
		if tc.param != "" {
			var e *gwerr.Error
			if !errors.As(err, &e) || e.Param != tc.param || e.Kind != gwerr.Invalid {
				t.Errorf("%s: %s = %v, want a 400 on %s", tc.header, tc.value, err, tc.param)
			}
			continue
		}
		if err != nil || !slices.Equal(cb.names, tc.names) || cb.inPct != tc.in || cb.outPct != tc.out {
			t.Errorf("%s: %s = %+v %v", tc.header, tc.value, cb, err)
		}
	}

	var many []string
	for i := range MaxBetas + 1 {
		name := fmt.Sprintf("b-%d", i)
		table[name] = neutral
		many = append(many, name)
	}
	if _, err := table.forCall(http.Header{"Anthropic-Beta": {strings.Join(many, ",")}}); gwerr.As(err).Kind != gwerr.Invalid {
		t.Errorf("%d betas: %v", len(many), err)
	}
}

// A call's betas price the model that forwards them, and the lane price
// it may be billed at, never a chat-completions-style model (which drops
// them).
func TestBetasPriced(t *testing.T) {
	cat := &catalog.Catalog{Providers: map[string]*catalog.Provider{"a": {Format: catalog.FormatAnthropic}, "o": {Format: catalog.FormatOpenAI}}}
	claude := &catalog.Model{ID: "c", Provider: "a", InputPrice: pricing.USD(3), OutputPrice: pricing.USD(15), CachedPrice: pricing.Micro(300_000)}
	gpt := &catalog.Model{ID: "g", Provider: "o", InputPrice: pricing.USD(1), OutputPrice: pricing.USD(2)}
	cb := &callBetas{names: []string{"x"}, inPct: 200, outPct: 150}
	p := cb.priced(cat, claude, claude)
	if p.InputPrice != pricing.USD(6) || p.OutputPrice != pricing.Micro(22_500_000) || p.CachedPrice != pricing.Micro(600_000) || p.CacheWritePrice != 0 || p.ID != "c" {
		t.Errorf("priced %+v", p)
	}
	if claude.InputPrice != pricing.USD(3) {
		t.Errorf("the catalogue's model changed: %+v", claude)
	}
	if got := cb.priced(cat, claude, gpt); got.InputPrice != pricing.USD(2) || got.OutputPrice != pricing.USD(3) {
		t.Errorf("lane price %+v", got)
	}
	if got := cb.priced(cat, gpt, gpt); got != gpt {
		t.Errorf("a translated call priced %+v", got)
	}
	if cb.forwarded(cat, gpt) != nil || !slices.Equal(cb.forwarded(cat, claude), []string{"x"}) {
		t.Errorf("forwarded %v and %v", cb.forwarded(cat, gpt), cb.forwarded(cat, claude))
	}
	var none *callBetas
	if none.priced(cat, claude, claude) != claude || none.forwarded(cat, claude) != nil {
		t.Error("no betas changed the call")
	}
}

// FuzzBetaHeader: any header value is either refused as a 400 naming the
// header, or read as distinct betas of the table, none refused, at most
// MaxBetas of them, at percentages within bounds.
func FuzzBetaHeader(f *testing.F) {
	for _, s := range []string{"", "structured-outputs-2025-11-13", "a,b", " fast-mode-2026-02-01 , fast-mode-2026-02-01", ",,,", "context-1m-2025-08-07", "\x00,\xff"} {
		f.Add(s)
	}
	table := DefaultBetas(nil)
	f.Fuzz(func(t *testing.T, v string) {
		cb, err := table.forCall(http.Header{"Vendor-Beta": {v}})
		if err != nil {
			if e := gwerr.As(err); e.Kind != gwerr.Invalid || e.Param != "vendor-beta" {
				t.Fatalf("%q: %v", v, err)
			}
			return
		}
		if len(cb.names) > MaxBetas || cb.inPct < 100 || cb.outPct < 100 || cb.inPct > MaxBetaPercent || cb.outPct > MaxBetaPercent {
			t.Fatalf("%q: %+v", v, cb)
		}
		for i, n := range cb.names {
			if p, ok := table[n]; !ok || p.Refused || slices.Contains(cb.names[:i], n) || n != strings.TrimSpace(n) || n == "" {
				t.Fatalf("%q: name %q", v, n)
			}
		}
	})
}
