package routes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/pricing"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// chatPerMinute and decidePerMinute are the budgets the fixture configures.
const (
	chatPerMinute   = 5
	decidePerMinute = 2
)

type fixture struct {
	rt    *Router
	gw    *pipeline.Gateway
	base  *gwtest.Fixture
	store *storetest.Faulty
	now   time.Time
	n     atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	f.base = gwtest.New(t, gwtest.Options{Faulty: true, Now: func() time.Time { return f.now }})
	f.store, f.gw = f.base.Faulty, f.base.Gateway
	f.rt = New(f.gw, Options{ChatBudgets: []limits.Budget{{Name: "chat_requests", Limit: chatPerMinute, Period: time.Minute}},
		DecideBudgets: []limits.Budget{{Name: "decide_requests", Limit: decidePerMinute, Period: time.Minute}}})
	return f
}

// key makes an account (after prepare) and a key for it, and settles
// spent on it first.
func (f *fixture) key(t *testing.T, acc store.Account, spent pricing.Money) string {
	t.Helper()
	acc.ID = fmt.Sprintf("acc%d", f.n.Add(1))
	acc.CreatedAt = t0
	f.base.AddAccount(t, acc)
	secret := f.base.AddKey(t, store.Key{ID: store.NewID("key"), AccountID: acc.ID, CreatedAt: t0})
	if spent > 0 {
		if _, err := f.store.Settle(context.Background(), &store.Entry{RequestID: "pre-" + acc.ID, AccountID: acc.ID, Cost: spent, Time: t0}); err != nil {
			t.Fatal(err)
		}
	}
	return secret
}

func (f *fixture) do(t *testing.T, method, path, key string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader("{}"))
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	w := httptest.NewRecorder()
	if !f.rt.ServeHTTP(w, r, All) {
		t.Fatalf("%s %s: not a gateway route", method, path)
	}
	return w
}

func body(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return m
}

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ptr(m pricing.Money) *pricing.Money { return &m }

// Account states of the plan refusal rows.
var (
	paidCleared = store.Account{Plan: store.PlanPaid, Cleared: true}
	states      = map[string]struct {
		acc   store.Account
		spent pricing.Money
		down  bool
	}{
		"free":             {acc: store.Account{Plan: store.PlanFree}},
		"uncleared":        {acc: store.Account{Plan: store.PlanPaid}},
		"disabled":         {acc: with(paidCleared, func(a *store.Account) { a.Abilities = []string{} })},
		"credit_exhausted": {acc: with(paidCleared, func(a *store.Account) { a.Balance = ptr(0) })},
		"daily_cap":        {acc: with(paidCleared, func(a *store.Account) { a.DailyCap = ptr(usd("2")) }), spent: usd("2")},
		"monthly_cap":      {acc: with(paidCleared, func(a *store.Account) { a.MonthlyCap = ptr(usd("3")) }), spent: usd("3")},
		"unresolved":       {acc: paidCleared, down: true},
		"free_chat_stop":   {acc: store.Account{Plan: store.PlanFree}, spent: money.FreeChatStop},
		"ok":               {acc: paidCleared},
	}
)

func with(a store.Account, fn func(*store.Account)) store.Account { fn(&a); return a }

// abilityErr is {error:{message,type[,code]}}.
func abilityErr(typ, code string) map[string]any {
	e := map[string]any{"type": typ}
	if code != "" {
		e["code"] = code
	}
	return map[string]any{"error": e}
}

// TestGateRows covers the 402, 403 and 404 rows of the routes' error tables
// for every billed route, with exact shapes and headers. Messages are
// checked to be present and then left out of the comparison.
func TestGateRows(t *testing.T) {
	chat := func(code string) map[string]any {
		return map[string]any{"error": map[string]any{"type": "insufficient_quota", "param": nil, "code": code,
			"provider_specific_fields": map[string]any{"error": code}}}
	}
	messages := func(code string) map[string]any {
		return map[string]any{"type": "error", "error": map[string]any{"type": "billing_error", "code": code}}
	}
	decide := func(status int, typ, code string) map[string]any {
		return map[string]any{"error": map[string]any{"type": typ, "code": code, "param": nil}}
	}
	detail := func(code string) map[string]any {
		return map[string]any{"detail": map[string]any{"error": map[string]any{"code": code}}}
	}
	type row struct {
		state  string
		status int
		want   map[string]any
		hold   string // X-Gw-Hold-Reason
	}
	// The three ability endpoints of the transcription, speech and search
	// tables share one set of rows.
	abilityRows := []row{
		{"free", 402, abilityErr("insufficient_quota", "premium_locked"), ""},
		{"uncleared", 402, abilityErr("insufficient_quota", "premium_locked"), ""},
		{"disabled", 404, abilityErr("not_found_error", ""), ""},
		{"credit_exhausted", 402, abilityErr("insufficient_quota", "credit_exhausted"), ""},
		{"daily_cap", 402, abilityErr("insufficient_quota", "daily_cap"), ""},
		{"monthly_cap", 402, abilityErr("insufficient_quota", "monthly_cap"), ""},
		{"unresolved", 402, abilityErr("insufficient_quota", "credit_unresolved"), ""},
		{"ok", 501, abilityErr("api_error", "not_implemented"), ""},
	}
	imageRows := []row{
		{"free", 402, abilityErr("insufficient_quota", "premium_locked"), ""},
		{"disabled", 404, abilityErr("not_found_error", ""), ""},
		{"credit_exhausted", 402, detail("credit_exhausted"), ""},
		{"daily_cap", 402, detail("daily_cap"), ""},
		{"monthly_cap", 402, detail("monthly_cap"), ""},
		{"unresolved", 402, abilityErr("insufficient_quota", "credit_unresolved"), ""},
	}
	fetchRows := []row{
		{"free", 402, map[string]any{"error": "upgrade_required"}, ""},
		{"uncleared", 402, map[string]any{"error": "upgrade_required"}, ""},
		{"disabled", 404, map[string]any{"error": "not found"}, ""},
		{"credit_exhausted", 402, map[string]any{"error": "credit_exhausted"}, ""},
		{"daily_cap", 402, map[string]any{"error": "daily_cap"}, ""},
		{"unresolved", 402, map[string]any{"error": "credit_unresolved"}, ""},
		{"ok", 501, map[string]any{"error": "not_implemented"}, ""},
	}
	decideRows := []row{
		{"free", 403, decide(403, "permission_error", "paid_plan_required"), ""},
		{"uncleared", 403, decide(403, "permission_error", "paid_plan_required"), ""},
		{"disabled", 404, decide(404, "not_found_error", "not_found"), ""},
		{"credit_exhausted", 402, decide(402, "insufficient_quota", "credit_exhausted"), ""},
		{"monthly_cap", 402, decide(402, "insufficient_quota", "monthly_cap"), ""},
		{"unresolved", 402, decide(402, "insufficient_quota", "credit_unresolved"), ""},
	}
	chatRows := []row{
		{"free_chat_stop", 402, chat("credit_exhausted"), "credit_exhausted"},
		{"credit_exhausted", 402, chat("credit_exhausted"), "credit_exhausted"},
		{"daily_cap", 402, chat("daily_cap"), "daily_cap"},
		{"monthly_cap", 402, chat("monthly_cap"), "monthly_cap"},
		{"unresolved", 402, chat("credit_unresolved"), "credit_unresolved"},
		{"free", 501, map[string]any{"error": map[string]any{"type": "api_error", "param": nil, "code": "not_implemented"}}, ""},
	}
	messagesRows := []row{
		{"free_chat_stop", 402, messages("credit_exhausted"), "credit_exhausted"},
		{"daily_cap", 402, messages("daily_cap"), "daily_cap"},
		{"unresolved", 402, messages("credit_unresolved"), "credit_unresolved"},
	}
	for _, tc := range []struct {
		path string
		rows []row
	}{
		{PathTranscription, abilityRows}, {"/audio/transcriptions", abilityRows},
		{PathSpeech, abilityRows}, {"/audio/speech", abilityRows},
		{PathSearch, abilityRows}, {"/search", abilityRows},
		{PathImageGen, imageRows}, {PathImageEdit, imageRows},
		{PathFetch, fetchRows},
		{PathDecide, decideRows}, {PathSystemOne, decideRows},
		{PathChat, chatRows}, {PathResponses, chatRows},
		{DefaultAltPrefix + PathMessages, messagesRows},
	} {
		for _, r := range tc.rows {
			t.Run(tc.path+"/"+r.state, func(t *testing.T) {
				f := newFixture(t)
				st := states[r.state]
				key := f.key(t, st.acc, st.spent)
				if st.down {
					f.store.Fail = storetest.OpSpend | storetest.OpSettle | storetest.OpAccount
					f.store.Down.Store(true)
				}
				w := f.do(t, http.MethodPost, tc.path, key)
				if w.Code != r.status {
					t.Fatalf("status %d, want %d: %s", w.Code, r.status, w.Body)
				}
				got := body(t, w)
				stripMessages(t, got)
				if !reflect.DeepEqual(got, r.want) {
					t.Fatalf("body %v\nwant %v", got, r.want)
				}
				if h := w.Header().Get("X-Gw-Hold-Reason"); h != r.hold {
					t.Fatalf("X-Gw-Hold-Reason %q, want %q", h, r.hold)
				}
				if r.state == "unresolved" && w.Header().Get("Retry-After") != "1" {
					t.Fatalf("credit_unresolved without Retry-After: 1")
				}
			})
		}
	}
}

// stripMessages checks every nested error object (one with a code) carries a non-empty message (the
// fetch family's is optional) and removes it, leaving the shape.
func stripMessages(t *testing.T, m map[string]any) {
	t.Helper()
	var walk func(v map[string]any, top bool)
	walk = func(v map[string]any, top bool) {
		if msg, ok := v["message"]; ok {
			if s, _ := msg.(string); s == "" {
				t.Errorf("empty message in %v", v)
			}
			delete(v, "message")
		} else if _, isErr := v["code"]; isErr && !top {
			t.Errorf("no message in %v", v)
		}
		for k, x := range v {
			if sub, ok := x.(map[string]any); ok && k != "provider_specific_fields" {
				walk(sub, false)
			}
		}
	}
	walk(m, true)
}

// TestUnbilledRoutesIgnoreMoney: the model list and count_tokens work on
// an account with nothing left.
func TestUnbilledRoutesIgnoreMoney(t *testing.T) {
	f := newFixture(t)
	key := f.key(t, states["credit_exhausted"].acc, 0)
	if w := f.do(t, http.MethodGet, PathModels, key); w.Code != 200 {
		t.Fatalf("models: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, http.MethodPost, DefaultAltPrefix+PathCountTokens, key); w.Code != 501 {
		t.Fatalf("count_tokens: %d %s", w.Code, w.Body)
	}
}

// TestStoreDownOnAuth: a store that cannot answer while checking the key
// refuses with credit_unresolved on billed routes and 503 elsewhere.
func TestStoreDownOnAuth(t *testing.T) {
	f := newFixture(t)
	key := f.key(t, paidCleared, 0)
	f.store.Down.Store(true)
	if w := f.do(t, http.MethodPost, PathSearch, key); w.Code != 402 || body(t, w)["error"].(map[string]any)["code"] != "credit_unresolved" {
		t.Fatalf("search: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, http.MethodGet, PathModels, key); w.Code != 503 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("models: %d %s", w.Code, w.Body)
	}
	f.store.Down.Store(false)
	if w := f.do(t, http.MethodGet, PathModels, key); w.Code != 200 {
		t.Fatalf("models after recovery: %d %s", w.Code, w.Body)
	}
}

// TestSharedRequestBudget: transcription, speech and search share 60
// requests a minute per account; the 61st gets 429 with Retry-After in
// the ability shape; another account and image calls are unaffected.
func TestSharedRequestBudget(t *testing.T) {
	f := newFixture(t)
	key := f.key(t, paidCleared, 0)
	paths := []string{PathTranscription, PathSpeech, PathSearch}
	for i := range limits.RequestsPerMinute {
		if w := f.do(t, http.MethodPost, paths[i%3], key); w.Code != 501 {
			t.Fatalf("call %d: %d %s", i, w.Code, w.Body)
		}
	}
	for _, p := range paths {
		w := f.do(t, http.MethodPost, p, key)
		if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("%s: %d Retry-After %q", p, w.Code, w.Header().Get("Retry-After"))
		}
		got := body(t, w)
		stripMessages(t, got)
		if want := abilityErr("rate_limit_error", "rate_limit_error"); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v, want %v", p, got, want)
		}
	}
	if w := f.do(t, http.MethodPost, PathImageGen, key); w.Code != 501 {
		t.Fatalf("images count against the shared budget: %d", w.Code)
	}
	other := f.key(t, paidCleared, 0)
	if w := f.do(t, http.MethodPost, PathSearch, other); w.Code != 501 {
		t.Fatalf("another account: %d", w.Code)
	}
	f.now = f.now.Add(time.Second)
	if w := f.do(t, http.MethodPost, PathSearch, key); w.Code != 501 {
		t.Fatalf("after a second: %d", w.Code)
	}
}

// TestChatRateLimit: the configured chat budget answers 429 in the chat
// shape with the wait in Retry-After.
func TestChatRateLimit(t *testing.T) {
	f := newFixture(t)
	key := f.key(t, paidCleared, 0)
	for i := range chatPerMinute {
		if w := f.do(t, http.MethodPost, PathChat, key); w.Code != 501 {
			t.Fatalf("call %d: %d", i, w.Code)
		}
	}
	w := f.do(t, http.MethodPost, DefaultAltPrefix+PathMessages, key)
	if w.Code != 429 || w.Header().Get("Retry-After") != fmt.Sprint(60/chatPerMinute) {
		t.Fatalf("messages: %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	got := body(t, w)
	stripMessages(t, got)
	if want := map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	w = f.do(t, http.MethodPost, PathChat, key)
	got = body(t, w)
	stripMessages(t, got)
	if want := map[string]any{"error": map[string]any{"type": "rate_limit_error", "code": "rate_limit_exceeded", "param": nil}}; w.Code != 429 || !reflect.DeepEqual(got, want) {
		t.Fatalf("chat: %d %v", w.Code, got)
	}
}

// TestDecideRateLimit: decision mode's 429 rate_limit_exceeded with
// Retry-After, in its four-field shape.
func TestDecideRateLimit(t *testing.T) {
	f := newFixture(t)
	key := f.key(t, paidCleared, 0)
	for i := range decidePerMinute {
		if w := f.do(t, http.MethodPost, PathDecide, key); w.Code != 501 {
			t.Fatalf("call %d: %d", i, w.Code)
		}
	}
	w := f.do(t, http.MethodPost, PathSystemOne, key)
	got := body(t, w)
	stripMessages(t, got)
	want := map[string]any{"error": map[string]any{"type": "rate_limit_error", "code": "rate_limit_exceeded", "param": nil}}
	if w.Code != 429 || w.Header().Get("Retry-After") != fmt.Sprint(60/decidePerMinute) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d Retry-After %q %v", w.Code, w.Header().Get("Retry-After"), got)
	}
}
