package integration

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// billed is one billed call as the test made it: who, with which key, and
// the tokens the fake provider reported.
type billed struct {
	id, account, keyID string
	in, out            int64
}

// usageLedger is what the ledgers say of the calls: request id → entry.
func usageLedger(t *testing.T, g *gateway, accounts ...string) map[string]ledgerEntry {
	t.Helper()
	out := map[string]ledgerEntry{}
	for _, a := range accounts {
		for _, e := range g.ledger(t, a) {
			out[e.RequestID] = e
		}
	}
	return out
}

// expectedUsage sums the calls as a usage query grouped by groups would,
// with each call's model, cost and day from its ledger entry.
func expectedUsage(t *testing.T, calls []billed, ledger map[string]ledgerEntry, groups []string, account string) usage.Report {
	t.Helper()
	type key struct{ day, model, account, keyID string }
	sums := map[key]*usage.Row{}
	var keys []key
	rep := usage.Report{Object: "list", Data: []usage.Row{}}
	for _, c := range calls {
		if account != "" && c.account != account {
			continue
		}
		e, ok := ledger[c.id]
		if !ok {
			t.Fatalf("call %s has no ledger entry", c.id)
		}
		at, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			t.Fatal(err)
		}
		var k key
		for _, g := range groups {
			switch g {
			case "day":
				k.day = at.UTC().Format(usage.DateLayout)
			case "model":
				k.model = e.Model
			case "account":
				k.account = c.account
			case "key":
				k.keyID = c.keyID
			}
		}
		r := sums[k]
		if r == nil {
			r = &usage.Row{}
			for _, g := range groups {
				switch g {
				case "day":
					r.Day = &k.day
				case "model":
					r.Model = &k.model
				case "account":
					r.Account = &k.account
				case "key":
					r.KeyID = &k.keyID
				}
			}
			sums[k] = r
			keys = append(keys, k)
		}
		cost := mustUSD(t, e.Cost)
		r.Requests++
		r.InputTokens += c.in
		r.OutputTokens += c.out
		r.Cost += cost
		rep.Total.Requests++
		rep.Total.Cost += cost
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.day, b.day), strings.Compare(a.model, b.model), strings.Compare(a.account, b.account), strings.Compare(a.keyID, b.keyID))
	})
	for _, k := range keys {
		rep.Data = append(rep.Data, *sums[k])
	}
	return rep
}

// sameReport compares an answer with the expected report, exactly.
func sameReport(t *testing.T, what string, got []byte, want usage.Report) {
	t.Helper()
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(string(got), string(w)) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, w)
	}
}

// groupings are every non-empty combination of the groupings.
func groupings(names ...string) [][]string {
	var out [][]string
	for mask := 1; mask < 1<<len(names); mask++ {
		var g []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				g = append(g, n)
			}
		}
		out = append(out, g)
	}
	return out
}

// usageCalls makes billed calls of two accounts through the fake
// providers (chat and its stream on both providers, the messages-style
// path, an image) and a failed one, taking turns over the nodes given, and
// returns the billed ones.
func usageCalls(t *testing.T, nodes []*gateway, oa, an *fake.Upstream) (calls []billed, keys map[string]string) {
	t.Helper()
	g := nodes[0]
	keys = map[string]string{}
	ids := map[string]string{}
	for _, a := range []struct{ account, keys string }{{"alpha", "k1,k2"}, {"beta", "k3"}} {
		g.createAccount(t, map[string]any{"id": a.account, "plan": "paid", "cleared": true, "balance_usd": "50.00"})
		for _, name := range strings.Split(a.keys, ",") {
			keys[name], ids[name] = g.createKey(t, a.account, map[string]any{"name": name})
		}
	}
	call := func(account, keyName string, up *fake.Upstream, in, out int64, path, body string, header ...string) {
		t.Helper()
		if up != nil {
			up.Push(fake.Script{Text: "counted", Usage: fake.Usage{Input: int(in), Output: int(out)}})
		}
		if header == nil {
			header = bearer(keys[keyName])
		}
		r := nodes[len(calls)%len(nodes)].do(t, http.MethodPost, path, body, header...)
		if r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", path, body, r.Status, r.Body)
		}
		calls = append(calls, billed{id: r.Header.Get("X-Gw-Request-Id"), account: account, keyID: ids[keyName], in: in, out: out})
	}
	chat := func(model string, stream bool) string {
		return `{"model":"` + model + `","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	}
	call("alpha", "k1", oa, 1000, 500, "/v1/chat/completions", chat("gw-pinned-gpt-4.1-mini", false))
	call("alpha", "k1", oa, 300, 200, "/v1/chat/completions", chat("gw-pinned-gpt-4.1-mini", true))
	call("alpha", "k2", an, 2000, 100, "/v1/chat/completions", chat("gw-pinned-claude-sonnet-4-5", false))
	call("alpha", "k2", an, 50, 60, "/alt/v1/messages", `{"model":"gw-pinned-claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
		apiKey(keys["k2"])...)
	call("alpha", "k2", nil, 0, 0, "/v1/images/generations", `{"prompt":"a fox"}`)
	call("beta", "k3", oa, 10, 20, "/v1/chat/completions", chat("gw-pinned-gpt-4.1-mini", false))
	call("beta", "k3", an, 7, 9, "/v1/chat/completions", chat("gw-pinned-claude-sonnet-4-5", true))
	// A failed call costs nothing and counts nowhere.
	oa.Push(fake.Script{Status: http.StatusBadRequest})
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", chat("gw-pinned-gpt-4.1-mini", false), bearer(keys["k1"])...); r.Status == http.StatusOK {
		t.Fatalf("the failing call answered %d", r.Status)
	}
	return calls, keys
}

// checkUsage checks GET /gw/usage on admin and GET /v1/usage on site
// (two nodes, or one gateway twice) against the ledger for every grouping.
func checkUsage(t *testing.T, admin, site *gateway, calls []billed, keys map[string]string) {
	t.Helper()
	ledger := usageLedger(t, admin, "alpha", "beta")
	var sum pricing.Money
	for _, e := range ledger {
		sum += mustUSD(t, e.Cost)
	}
	if len(ledger) != len(calls) {
		t.Fatalf("%d ledger entries, %d billed calls", len(ledger), len(calls))
	}
	for _, c := range calls {
		if e := ledger[c.id]; e.Unit == "token" && e.Units != c.in+c.out {
			t.Errorf("ledger %s: %d tokens, the provider reported %d", c.id, e.Units, c.in+c.out)
		}
	}
	for _, g := range groupings("day", "model", "account", "key") {
		by := strings.Join(g, ",")
		r := admin.adminJSON(t, http.MethodGet, "/gw/usage?group_by="+by, nil, http.StatusOK)
		want := expectedUsage(t, calls, ledger, g, "")
		sameReport(t, "GET /gw/usage?group_by="+by, r.Body, want)
		if want.Total.Cost != sum || want.Total.Requests != int64(len(ledger)) {
			t.Fatalf("the expected total %+v is not the ledger's %s in %d entries", want.Total, sum, len(ledger))
		}
		r = admin.adminJSON(t, http.MethodGet, "/gw/usage?account=beta&group_by="+by, nil, http.StatusOK)
		sameReport(t, "GET /gw/usage?account=beta&group_by="+by, r.Body, expectedUsage(t, calls, ledger, g, "beta"))
	}
	// A key sees its own account's figures, never another's, by either
	// header; whichever key of the account asks.
	for _, g := range groupings("day", "model", "key") {
		by := strings.Join(g, ",")
		for _, k := range []struct {
			account string
			header  []string
		}{{"alpha", bearer(keys["k1"])}, {"alpha", apiKey(keys["k2"])}, {"beta", bearer(keys["k3"])}} {
			r := site.do(t, http.MethodGet, "/v1/usage?group_by="+url.QueryEscape(by), "", k.header...)
			if r.Status != http.StatusOK {
				t.Fatalf("GET /v1/usage as %s: %d %s", k.account, r.Status, r.Body)
			}
			sameReport(t, "GET /v1/usage?group_by="+by+" as "+k.account, r.Body, expectedUsage(t, calls, ledger, g, k.account))
		}
	}
	// Reading usage costs nothing.
	if after := usageLedger(t, admin, "alpha", "beta"); len(after) != len(ledger) {
		t.Fatalf("reading usage added ledger entries: %d, was %d", len(after), len(ledger))
	}
}

// TestUsageEqualsLedger: after real billed calls through the fake
// providers (both providers, streams, the messages-style path, an image,
// a failed call), the usage figures of every grouping add up to the
// ledger exactly, per account and in all, after a crash and a restart; a
// key reads only its own account's figures.
func TestUsageEqualsLedger(t *testing.T) {
	t.Parallel()
	g, oa, an, _ := chatGateway(t)
	calls, keys := usageCalls(t, []*gateway{g}, oa, an)
	// A crash right after the answers: the charges still in the charge
	// log are applied at the next start, keys and tokens included.
	g.kill(t)
	g.start(t)
	checkUsage(t, g, g, calls, keys)

	// A restart keeps them too.
	g.restart(t)
	checkUsage(t, g, g, calls, keys)
}

// TestUsageRefusals: bad parameters are 400s naming them (the admin
// shape on the admin endpoint, the chat shape on /v1/usage), an unknown
// account is 404, a key never names an account, and /v1/usage needs a key.
func TestUsageRefusals(t *testing.T) {
	t.Parallel()
	g, _, _, bootstrap := chatGateway(t)
	today := time.Now().UTC().Format(usage.DateLayout)
	for _, c := range []struct{ query, msg string }{
		{"from=2026-02-30", `from: "2026-02-30" is not a date of the form YYYY-MM-DD`},
		{"from=" + today + "&to=2020-01-01", "from: " + today + " is after to (2020-01-01)"},
		{"from=2020-01-01&to=2021-01-01", "from: 2020-01-01 to 2021-01-01 spans 367 days; at most 366"},
		{"group_by=day,week", `group_by: "week" is not a grouping (known: day, model, account, key, org, comma-separated)`},
		{"group_by=model,model", "group_by: model given twice"},
		{"acount=default", "acount: unknown parameter (known: account, org, from, to, group_by)"},
		{"to=2026-01-01&to=2026-01-02", "to: given 2 times; give it once"},
	} {
		r := g.adminJSON(t, http.MethodGet, "/gw/usage?"+c.query, nil, http.StatusBadRequest)
		if want := `{"error":` + mustJSONText(t, c.msg) + `}`; !sameJSON(string(r.Body), want) {
			t.Errorf("GET /gw/usage?%s: %s, want %s", c.query, r.Body, want)
		}
	}
	if r := g.adminJSON(t, http.MethodGet, "/gw/usage?account=nobody", nil, http.StatusNotFound); !sameJSON(string(r.Body), `{"error":"not found"}`) {
		t.Errorf("unknown account: %s", r.Body)
	}
	for _, c := range []struct{ query, param, msg string }{
		{"account=default", "account", "account: a key reads its own account's usage only; leave account out"},
		{"group_by=day,account", "group_by", "group_by: a key reads its own account's usage only, so account is no grouping here (known: day, model, key)"},
		{"to=yesterday", "to", `to: "yesterday" is not a date of the form YYYY-MM-DD`},
	} {
		r := g.do(t, http.MethodGet, "/v1/usage?"+c.query, "", bearer(bootstrap)...)
		want := `{"error":{"message":` + mustJSONText(t, c.msg) + `,"type":"invalid_request_error","param":"` + c.param + `","code":null}}`
		if r.Status != http.StatusBadRequest || !sameJSON(string(r.Body), want) {
			t.Errorf("GET /v1/usage?%s: %d %s, want 400 %s", c.query, r.Status, r.Body, want)
		}
	}
	r := g.do(t, http.MethodGet, "/v1/usage", "")
	if r.Status != http.StatusUnauthorized || gjson.GetBytes(r.Body, "error.type").String() != "authentication_error" {
		t.Errorf("GET /v1/usage without a key: %d %s", r.Status, r.Body)
	}
	if r := g.do(t, http.MethodPost, "/v1/usage", "{}", bearer(bootstrap)...); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/usage: %d %s", r.Status, r.Body)
	}
	// An account without charges has an empty list and a zero total.
	r = g.do(t, http.MethodGet, "/v1/usage?group_by=model", "", apiKey(bootstrap)...)
	if r.Status != http.StatusOK || !sameJSON(string(r.Body), `{"object":"list","data":[],"total":{"requests":0,"cost_usd":"0.00"}}`) {
		t.Errorf("GET /v1/usage of a new account: %d %s", r.Status, r.Body)
	}
}

// TestNodesUsage: on PostgreSQL, calls billed on two nodes add up in the
// usage figures of either, exactly as the one ledger has them.
func TestNodesUsage(t *testing.T) {
	t.Parallel()
	e := newNodes(t, 2, "")
	calls, keys := usageCalls(t, e.nodes, e.OA, e.AN)
	checkUsage(t, e.nodes[0], e.nodes[1], calls, keys)
	checkUsage(t, e.nodes[1], e.nodes[0], calls, keys)
}
