package chat

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// reserveFixture is a chat call of one account on the hot path's store
// (memory in front of SQLite), for the reservation's tests and benchmarks.
type reserveFixture struct {
	fx  *gwtest.Fixture
	gw  *pipeline.Gateway
	ep  *pipeline.Endpoint
	m   *catalog.Model
	cat *catalog.Catalog
}

func newReserveFixture(tb testing.TB) *reserveFixture {
	tb.Helper()
	cat, err := catalog.New([]catalog.Provider{{Name: "o", Format: "openai", BaseURL: "http://127.0.0.1:9/v1"}},
		[]catalog.Model{{ID: "m", Provider: "o", Lane: "standard", InputPrice: pricing.USD(1) / 2, OutputPrice: pricing.USD(2)}}, nil, nil, "")
	if err != nil {
		tb.Fatal(err)
	}
	chatSpend := money.Chat
	m, _ := cat.Model("m")
	fx := gwtest.New(tb, gwtest.Options{Catalog: cat, Cached: true})
	return &reserveFixture{fx: fx, cat: cat, m: m, ep: &pipeline.Endpoint{Name: "chat", Family: gwerr.Chat, Billing: &chatSpend}, gw: fx.Gateway}
}

// call is a chat call of account with body, parsed.
func (f *reserveFixture) call(tb testing.TB, account, body string) *call {
	tb.Helper()
	req, err := parse([]byte(body), ChatCompletions)
	if err != nil {
		tb.Fatal(err)
	}
	acc, err := f.gw.Store.Account(context.Background(), account)
	if err != nil {
		tb.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
	c := &pipeline.Call{W: httptest.NewRecorder(), R: r, Endpoint: f.ep, RequestID: "r", Account: acc, Gateway: f.gw}
	return &call{Call: c, format: ChatCompletions, body: []byte(body), req: req}
}

func (f *reserveFixture) account(tb testing.TB, id string, balance *pricing.Money) {
	tb.Helper()
	f.fx.AddAccount(tb, store.Account{ID: id, Plan: store.PlanPaid, Cleared: true, Balance: balance})
}

const reserveBody = `{"model":"m","messages":[{"role":"user","content":"Name one fish."}]}`

// TestFit: the lowered output limit is the most that the room covers with
// the prompt, never below MinOutputTokens; a client's own limit is priced
// as it is.
func TestFit(t *testing.T) {
	f := newReserveFixture(t) // account "a": paid, cleared, billed afterwards
	cl := f.call(t, "a", reserveBody)
	const prompt = 100
	perOut := pricing.Cost(false, pricing.Line{Units: 1, Rate: pricing.PerMillion(f.m.OutputPrice)})
	promptCost := pricing.Cost(false, pricing.Line{Units: prompt, Rate: pricing.PerMillion(f.m.InputPrice)})
	for _, tc := range []struct {
		room   pricing.Money
		out    int
		fitted bool
	}{
		{promptCost + 1000*perOut, 1000, true},
		{promptCost + 1000*perOut + perOut - 1, 1000, true},
		{promptCost + MinOutputTokens*perOut, MinOutputTokens, true},
		{promptCost + MinOutputTokens*perOut - 1, 0, false},
		{pricing.USD(1), lanes.DefaultMaxTokens, true},
	} {
		est, out, ok := cl.fit(f.m, prompt, tc.room)
		if ok != tc.fitted || out != tc.out || ok && (est > tc.room || est != promptCost+pricing.Money(out)*perOut) {
			t.Errorf("room %s: est %s out %d ok %t, want out %d ok %t", tc.room, est, out, ok, tc.out, tc.fitted)
		}
	}
	set := f.call(t, "a", `{"model":"m","max_completion_tokens":500,"messages":[{"role":"user","content":"hi"}]}`)
	if _, out, ok := set.fit(f.m, prompt, promptCost+499*perOut); ok || out != 500 {
		t.Errorf("a client's limit that does not fit: out %d ok %t", out, ok)
	}
}

// BenchmarkReserve measures the reservation of a chat call: the worst
// case's reservation alone (what every call did before the tightening
// existed), the reservation as it is now with plentiful money (the same
// work: the tightening does not run), and the tightened reservation of a
// call whose worst case does not fit (prompt counted, limit lowered).
func BenchmarkReserve(b *testing.B) {
	f := newReserveFixture(b)
	f.account(b, "rich", nil)
	tight := pricing.Cost(false, pricing.Line{Units: 1000, Rate: pricing.PerMillion(f.m.OutputPrice)})
	f.account(b, "tight", &tight)
	b.Run("worst-case-only", func(b *testing.B) {
		cl := f.call(b, "rich", reserveBody)
		for b.Loop() {
			if err := cl.Reserve(pricing.Cost(false, lanes.EstimateLines(f.m, cl.req.needs)...)); err != nil {
				b.Fatal(err)
			}
			cl.Release()
		}
	})
	b.Run("plentiful", func(b *testing.B) {
		cl := f.call(b, "rich", reserveBody)
		for b.Loop() {
			if limit, err := cl.reserve(f.m); err != nil || limit != 0 {
				b.Fatal(limit, err)
			}
			cl.Release()
		}
	})
	b.Run("tightened", func(b *testing.B) {
		cl := f.call(b, "tight", reserveBody)
		for b.Loop() {
			if limit, err := cl.reserve(f.m); err != nil || limit == 0 {
				b.Fatal(limit, err)
			}
			cl.Release()
		}
	})
}

// TestPromptBound: the tightened count bounds the provider's from above,
// whatever member of the format's table carries the prompt: text, tool
// calls and results, tool and legacy function definitions, every schema
// (response_format, output_format, output_config, text.format),
// instructions, a member the table does not know; an image part counts
// its ceiling, not its inline data; an inline document counts nothing
// (its pages are added apart); members billed no tokens count nothing.
func TestPromptBound(t *testing.T) {
	big := strings.Repeat("word ", 3000)
	n := tokens.Count(big)
	for _, tc := range []struct {
		f               Format
		body            string
		atLeast, atMost int
	}{
		{ChatCompletions, `{"messages":[{"role":"user","content":"` + big + `"}]}`, n, n + 30},
		{ChatCompletions, `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"` + big + `"}}]}]}`, n, n + 60},
		{Responses, `{"input":[{"type":"function_call_output","call_id":"c","output":"` + big + `"}]}`, n, n + 40},
		{ChatCompletions, `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"description":"` + big + `"}}}}`, n, n + 60},
		{ChatCompletions, `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f","description":"` + big + `","parameters":{}}]}`, n, n + 60},
		{ChatCompletions, `{"messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"` + big + `"}}`, n, n + 60},
		{Messages, `{"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":{"description":"` + big + `"}}}`, n, n + 60},
		{Messages, `{"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":{"description":"` + big + `"}}}}`, n, n + 60},
		{Responses, `{"input":"hi","instructions":"` + big + `"}`, n, n + 20},
		{Responses, `{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"description":"` + big + `"}}}}`, n, n + 60},
		{Messages, `{"messages":[{"role":"user","content":"hi"}],"a_member_not_known":"` + big + `"}`, n, n + 30},
		{ChatCompletions, `{"messages":[{"role":"user","content":"hi"}],"metadata":{"note":"` + big + `"},"user":"` + big + `","model":"` + big + `"}`, 0, 30},
		{ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUJD", 50000) + `"}}]}]}`, ImageTokenCeiling, ImageTokenCeiling + 40},
		{ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,` + strings.Repeat("QUJD", 50000) + `"}}]}]}`, 0, 40},
		{Messages, `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + strings.Repeat("QUJD", 50000) + `"}}]}]}`, 0, 60},
		{Responses, `{"input":[{"role":"user","content":[{"type":"input_file","file_data":"` + strings.Repeat("QUJD", 50000) + `"}]}]}`, 0, 40},
	} {
		if got := promptBoundTokens(tc.f.spec().billing, gjson.Parse(tc.body)); got < int64(tc.atLeast) || got > int64(tc.atMost) {
			t.Errorf("%.100s: %d tokens, want %d to %d", tc.body, got, tc.atLeast, tc.atMost)
		}
	}
}
