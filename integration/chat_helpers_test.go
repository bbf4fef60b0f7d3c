package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Shared helpers of the chat tests (chat_*_test.go): a gateway with both
// fake upstreams, list prices and expected costs, the ledger and account
// views of the admin API, receipt headers, and JSON comparisons.

// The keys the harness gives the gateway for its upstreams.
const (
	upstreamOpenAIKey    = "sk-upstream-openai-test"
	upstreamAnthropicKey = "sk-upstream-anthropic-test"
)

// chatEnv is one gateway with an OpenAI-style fake (OA) and an
// Anthropic-style fake (AN) behind it.
type chatEnv struct {
	*gateway
	OA, AN *fake.Upstream
	// BootKey is the bootstrap key (account "default").
	BootKey string
}

// newChatEnv starts a chat gateway; caddyfile empty means
// ../Caddyfile.example.
func newChatEnv(t *testing.T, caddyfile string) *chatEnv {
	t.Helper()
	g, oa, an, key := chatGatewayWith(t, caddyfile)
	return &chatEnv{gateway: g, OA: oa, AN: an, BootKey: key}
}

// reset forgets what both fakes recorded and queued.
func (e *chatEnv) reset() {
	e.OA.Reset()
	e.AN.Reset()
}

// account creates an account (paid and cleared unless fields say
// otherwise) with one key and returns the key.
func (e *chatEnv) account(t testing.TB, id string, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"id": id, "plan": "paid", "cleared": true}
	for k, v := range fields {
		body[k] = v
	}
	return e.newAccountKey(t, body)
}

// backend is a pinned model and the fake that serves it.
type backend struct {
	name string
	// model is the id a client sends; backing the provider's model id.
	model, backing string
	// anthropic: served by the Anthropic-style fake.
	anthropic bool
	// gemini: the provider speaks the Gemini API, which names no tool
	// call (the gateway makes their ids) and streams each call's
	// arguments whole.
	gemini bool
}

var (
	openaiBackend    = backend{name: "openai", model: "gw-pinned-gpt-4.1-mini", backing: "gpt-4.1-mini"}
	anthropicBackend = backend{name: "anthropic", model: "gw-pinned-claude-sonnet-4-5", backing: "claude-sonnet-4-5", anthropic: true}
	backends         = []backend{openaiBackend, anthropicBackend}
)

// fakeOf is the fake serving b; otherFake the other one.
func (e *chatEnv) fakeOf(b backend) *fake.Upstream {
	if b.anthropic {
		return e.AN
	}
	return e.OA
}

func (e *chatEnv) otherFake(b backend) *fake.Upstream {
	if b.anthropic {
		return e.OA
	}
	return e.AN
}

// tokenUsage is a call's usage in the gateway's terms: Input counts every
// input token, the Cached ones included.
type tokenUsage struct{ Input, Cached, Output int64 }

// Units is what the ledger records for a chat call: input + output tokens.
func (u tokenUsage) Units() int64 { return u.Input + u.Output }

// fakeUsage scripts u in a fake's own format: Anthropic counts cache reads
// on top of input_tokens, OpenAI within prompt_tokens.
func fakeUsage(anthropicFormat bool, u tokenUsage) fake.Usage {
	in := u.Input
	if anthropicFormat {
		in -= u.Cached
	}
	return fake.Usage{Input: int(in), CachedInput: int(u.Cached), Output: int(u.Output)}
}

// listPrices mirrors the model blocks of Caddyfile.example: USD per million
// input, output and cached input tokens. TestChatPricesMatchExample keeps
// the two in step.
var listPrices = map[string][3]string{
	"gpt-4.1-nano":               {"0.10", "0.40", "0.025"},
	"claude-haiku-4-5":           {"1.00", "5.00", "0.10"},
	"gpt-4.1-mini":               {"0.40", "1.60", "0.10"},
	"claude-sonnet-4-5":          {"3.00", "15.00", "0.30"},
	"o4-mini":                    {"1.10", "4.40", "0.275"},
	"claude-opus-4-1":            {"15.00", "75.00", "1.50"},
	"gemini-2.5-flash":           {"0.30", "2.50", "0.03"},
	"gemini-2.5-pro":             {"1.25", "10.00", "0.125"},
	"claude-sonnet-4-5@20250929": {"3.00", "15.00", "0.30"},
	"gemini-2.5-flash-lite":      {"0.10", "0.40", "0.01"},
	"us.anthropic.claude-sonnet-4-5-20250929-v1:0": {"3.00", "15.00", "0.30"},
	"amazon.nova-lite-v1:0":                        {"0.06", "0.24", "0.015"},
}

func mustUSD(t testing.TB, s string) pricing.Money {
	t.Helper()
	m, err := pricing.ParseUSD(s)
	if err != nil {
		t.Fatalf("ParseUSD(%q): %v", s, err)
	}
	return m
}

// listCost is what usage u on model costs at list prices (uncached input,
// cached input, output), with the pay-as-you-go markup when payg is set.
func listCost(t testing.TB, model string, u tokenUsage, payg bool) pricing.Money {
	t.Helper()
	p, ok := listPrices[model]
	if !ok {
		t.Fatalf("no list price for %s", model)
	}
	return pricing.Cost(payg,
		pricing.Line{Units: u.Input - u.Cached, Rate: pricing.PerMillion(mustUSD(t, p[0]))},
		pricing.Line{Units: u.Cached, Rate: pricing.PerMillion(mustUSD(t, p[2]))},
		pricing.Line{Units: u.Output, Rate: pricing.PerMillion(mustUSD(t, p[1]))})
}

// exactCost computes the same as listCost without the pricing package:
// the exact rational sum of the lines, times 1.12 for payg, rounded once
// (half away from zero) to nano-dollars.
func exactCost(t testing.TB, model string, u tokenUsage, payg bool) pricing.Money {
	t.Helper()
	p := listPrices[model]
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("bad price %q", s)
		}
		return r
	}
	sum := new(big.Rat)
	for _, l := range []struct {
		units int64
		price string
	}{{u.Input - u.Cached, p[0]}, {u.Cached, p[2]}, {u.Output, p[1]}} {
		sum.Add(sum, new(big.Rat).Mul(big.NewRat(l.units, 1_000_000), rat(l.price)))
	}
	return nanoDollars(sum, payg)
}

// nanoDollars is an exact amount of US dollars, times 1.12 for payg,
// rounded once (half away from zero) to nano-dollars.
func nanoDollars(sum *big.Rat, payg bool) pricing.Money {
	if payg {
		sum.Mul(sum, big.NewRat(112, 100))
	}
	nanos := new(big.Rat).Mul(sum, big.NewRat(1_000_000_000, 1))
	q, r := new(big.Int).QuoRem(nanos.Num(), nanos.Denom(), new(big.Int))
	if new(big.Int).Mul(r, big.NewInt(2)).CmpAbs(nanos.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return pricing.Money(q.Int64())
}

// TestChatPricesMatchExample: listPrices is Caddyfile.example's catalogue.
func TestChatPricesMatchExample(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`(?s)\bmodel (\S+) \{[^}]*?\bprice (\S+) (\S+) (\S+)`)
	got := map[string][3]string{}
	for _, m := range re.FindAllStringSubmatch(exampleCaddyfile(t), -1) {
		got[m[1]] = [3]string{m[2], m[3], m[4]}
	}
	if !reflect.DeepEqual(got, listPrices) {
		t.Errorf("Caddyfile.example prices %v, the chat tests assume %v", got, listPrices)
	}
	// The example of the brief: input 1,234 of which 200 cached, output
	// 567 on claude-sonnet-4-5 = (1034×3 + 200×0.30 + 567×15)/1e6 USD.
	u := tokenUsage{Input: 1234, Cached: 200, Output: 567}
	want := mustUSD(t, "0.011667")
	if c := listCost(t, "claude-sonnet-4-5", u, false); c != want || exactCost(t, "claude-sonnet-4-5", u, false) != want {
		t.Errorf("cost of %+v on claude-sonnet-4-5: %s (exact %s), want %s", u, c, exactCost(t, "claude-sonnet-4-5", u, false), want)
	}
}

// ledgerEntry is one row of GET /gw/accounts/{id}/ledger.
type ledgerEntry struct {
	RequestID string `json:"request_id"`
	Endpoint  string `json:"endpoint"`
	Model     string `json:"model"`
	Units     int64  `json:"units"`
	Unit      string `json:"unit"`
	Cost      string `json:"cost_usd"`
	Shortfall string `json:"shortfall_usd"`
	Time      string `json:"time"`
}

// ledger returns the account's ledger, newest first.
func (g *gateway) ledger(t testing.TB, account string) []ledgerEntry {
	t.Helper()
	r := g.adminJSON(t, http.MethodGet, "/gw/accounts/"+account+"/ledger?limit=1000", nil, http.StatusOK)
	var l struct {
		Data []ledgerEntry `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil || l.Data == nil {
		t.Fatalf("ledger of %s: %s (%v)", account, r.Body, err)
	}
	return l.Data
}

// expectLedger checks the account's entry under want.RequestID: exactly
// want, apart from its time. An empty want.Endpoint is not compared.
func (g *gateway) expectLedger(t testing.TB, account string, want ledgerEntry) {
	t.Helper()
	var found []ledgerEntry
	for _, e := range g.ledger(t, account) {
		if e.RequestID == want.RequestID {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Errorf("ledger of %s: %d entries under %q, want 1", account, len(found), want.RequestID)
		return
	}
	got := found[0]
	if got.Time == "" {
		t.Errorf("ledger entry %q has no time", got.RequestID)
	}
	got.Time = ""
	if want.Endpoint == "" {
		got.Endpoint = ""
	}
	if want.Shortfall == "" {
		want.Shortfall = "0"
	}
	if got != want {
		t.Errorf("ledger entry %+v\nwant         %+v", got, want)
	}
}

// accountMoney is an account's total spend and its balance ("" when it has
// none).
func (g *gateway) accountMoney(t testing.TB, account string) (spend pricing.Money, balance string) {
	t.Helper()
	a := g.getAccount(t, account)
	sp, _ := a["spend"].(map[string]any)
	total, _ := sp["total_usd"].(string)
	spend = mustUSD(t, total)
	balance, _ = a["balance_usd"].(string)
	return spend, balance
}

// anyValue, as a wanted header value, is any non-empty value.
const anyValue = "<any>"

// expectGwHeaders checks that the X-Gw-* headers of h are exactly want.
func expectGwHeaders(t testing.TB, h http.Header, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for k, vs := range h {
		if k = http.CanonicalHeaderKey(k); strings.HasPrefix(k, "X-Gw-") {
			got[k] = strings.Join(vs, ", ")
		}
	}
	var diffs []string
	for k, w := range want {
		g, ok := got[http.CanonicalHeaderKey(k)]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s missing (want %q)", k, w))
		case w == anyValue && g == "", w != anyValue && g != w:
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s: %q", k, g))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("X-Gw-* headers:\n  %s", strings.Join(diffs, "\n  "))
	}
}

// receipts is the X-Gw-* set of a non-streaming, uncached chat answer
// (docs/chat.md), X-Gw-Escalated absent.
func receipts(served, requested string, routed bool, cost pricing.Money) map[string]string {
	return map[string]string{
		"X-Gw-Model":          served,
		"X-Gw-Original-Model": requested,
		"X-Gw-Routed":         fmt.Sprint(routed),
		"X-Gw-Request-Id":     anyValue,
		"X-Gw-Cost-Usd":       cost.String(),
		"X-Gw-Routed-Model":   served,
	}
}

// streamHeaders is the X-Gw-* set of a streamed chat answer: the alias
// among the routing headers, and the request id.
func streamHeaders(requested string) map[string]string {
	return map[string]string{"X-Gw-Alias": requested, "X-Gw-Request-Id": anyValue}
}

// captureBody is SDK middleware (openai-go and anthropic-sdk-go share the
// signature) that keeps a copy of the request body in *dst.
func captureBody(dst *[]byte) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				return nil, err
			}
			*dst = b
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		}
		return next(r)
	}
}

// decodeJSON decodes JSON text into a generic value.
func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON (%v): %q", err, s)
	}
	return v
}

// mustJSONText is the JSON text of v.
func mustJSONText(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// contentText is the text of a message content value: a string, or the
// text of its parts/blocks.
func contentText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// get walks a decoded JSON value along keys (strings) and indexes (ints).
func get(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[p]
		case int:
			a, ok := v.([]any)
			if !ok || p >= len(a) {
				return nil
			}
			v = a[p]
		}
	}
	return v
}

// sameFormatBody is what a same-format upstream must receive for the
// client's body sent: the body untouched but for the model, and, on
// responses, store false (nothing is kept at the provider).
func sameFormatBody(t testing.TB, k clientKind, sent []byte, b backend) []byte {
	t.Helper()
	want := bytes.Replace(sent, []byte(`"model":"`+b.model+`"`), []byte(`"model":"`+b.backing+`"`), 1)
	if bytes.Equal(want, sent) {
		t.Fatalf("the client's body %s has no model %q", sent, b.model)
	}
	if k == responsesClient {
		var err error
		if want, err = sjson.SetBytes(want, "store", false); err != nil {
			t.Fatal(err)
		}
	}
	return want
}
