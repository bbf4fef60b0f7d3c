package integration

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// The money rules as properties: a few hundred calls of every billed kind
// (chat whole and streamed in the three client formats on both providers,
// streams the client leaves, answers without usage, streams that break,
// images whole and streamed, transcriptions) and top-ups, drawn from a
// seeded generator and run concurrently against prepaid, capped and free
// accounts, one of them with a second key under its own daily cap, two
// of them in an organization with a daily cap over both, on models of
// every provider format (the Gemini API, Vertex AI's Gemini and Claude,
// Bedrock's Claude besides the two chat formats).
// Whatever the interleaving, no balance goes below zero, every receipt is
// exactly one ledger entry, nothing refused is charged, no cap (the key's
// included) or free stop is passed, and the ledger, the spend and the
// journal agree.

// Knobs of the property run.
const (
	// propDefaultOps is the number of operations when GW_PROPERTY_OPS is
	// unset.
	propDefaultOps = 400
	// propWorkers is how many operations run at once.
	propWorkers = 8
	// propSettleTimeout bounds the wait for every call to be finished and
	// the ledgers to stop changing.
	propSettleTimeout = 30 * time.Second
	// propRequestTimeout bounds one operation's HTTP exchange.
	propRequestTimeout = 30 * time.Second
	// propFreeChatStop is the lifetime chat spend at which a free account
	// stops.
	propFreeChatStop = "1.00"
	// propOrg is the organization two of the accounts are in, and
	// propOrgDailyCap its daily cap over both.
	propOrg         = "prop-org"
	propOrgDailyCap = "0.45"
	// propLowBalance is prop-prepaid-a's low-balance mark, and
	// propHookSecret the secret of the webhook that hears every alert.
	propLowBalance = "0.06"
	propHookSecret = "property-run-webhook-secret"
)

// propAccount is one account of the run and how it pays.
type propAccount struct {
	id string
	// fields are the creation fields beyond id.
	fields map[string]any
	// prepaid: the account has a balance (initial is its start).
	prepaid bool
	initial string
	// free: a free-plan account, which only chats.
	free bool
	// dailyCap and monthlyCap are "" when not set.
	dailyCap, monthlyCap string
	key                  string
	// keyDailyCap, when set, gives the account a second key with that
	// daily cap (cappedKey, its id cappedKeyID), which its odd-numbered
	// operations use.
	keyDailyCap            string
	cappedKey, cappedKeyID string
}

// keyOf is the key operation o is made with.
func (o *propOp) keyOf() string {
	if a := o.account; a.cappedKey != "" && o.n%2 == 1 {
		return a.cappedKey
	}
	return o.account.key
}

// The kinds of operation.
const (
	opChat        = "chat"         // non-streamed chat
	opStream      = "stream"       // streamed chat read to its end
	opAbandon     = "abandon"      // streamed chat left after the first event
	opImage       = "image"        // image generation
	opImageStream = "image-stream" // streamed image generation
	opTranscribe  = "transcribe"   // transcription of a WAV
	opTopUp       = "top-up"       // PATCH add_balance_usd
)

// propOp is one operation: what was asked (fixed by the seed) and what
// happened (filled in by the worker that ran it).
type propOp struct {
	n       int
	kind    string
	account *propAccount

	// Chat.
	prompt  string
	client  clientKind
	model   string // also the transcription alias
	backing string // the provider's model of a chat call
	// pdf is an inline PDF of pages pages sent with the prompt (base64;
	// "" none).
	pdf   string
	pages int
	limit int // output limit the client sets; 0 none
	// script is what the fake answers (chat and images).
	script fake.Script
	// gate, when set, holds the fake's stream after its first event
	// until the worker, done with the answer, closes it.
	gate chan struct{}

	// Images.
	quality, size string
	images        int
	partials      int
	hangUp        bool // leave an image stream after its first event

	// Transcription: the WAV's length.
	seconds int

	// Top-up amount.
	amount pricing.Money

	// Outcome.
	status      int
	requestID   string
	receipt     string // the cost the client was shown; "" none
	outputLimit string // X-Gw-Output-Limit
	sawEvent    bool   // a stream delivered at least one event
	completed   bool   // a stream reached its terminal event
	errorEvent  bool   // a stream carried an error event
	body        string // a refusal's body, for reports
	err         string // a transport or protocol failure
}

func (o *propOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d %s on %s", o.n, o.kind, o.account.id)
	switch o.kind {
	case opChat, opStream, opAbandon:
		fmt.Fprintf(&b, " [%s → %s, limit %d, usage %d/%d, %d pages", o.client, o.model, o.limit, o.script.Usage.Input, o.script.Usage.Output, o.pages)
		if o.script.NoUsage {
			b.WriteString(", no usage")
		}
		if o.script.MidStreamError {
			b.WriteString(", mid-stream error")
		}
		b.WriteString("]")
	case opImage, opImageStream:
		fmt.Fprintf(&b, " [quality %q size %q n %d partials %d hang-up %t no-usage %t]", o.quality, o.size, o.images, o.partials, o.hangUp, o.script.Usage.Input < 0)
	case opTranscribe:
		fmt.Fprintf(&b, " [%s, %d s WAV]", o.model, o.seconds)
	case opTopUp:
		fmt.Fprintf(&b, " [%s USD]", o.amount)
	}
	fmt.Fprintf(&b, " → status %d, request %q", o.status, o.requestID)
	if o.receipt != "" {
		fmt.Fprintf(&b, ", receipt %s", o.receipt)
	}
	if o.outputLimit != "" {
		fmt.Fprintf(&b, ", output limit %s", o.outputLimit)
	}
	if o.kind != opChat && o.kind != opImage && o.kind != opTranscribe && o.kind != opTopUp {
		fmt.Fprintf(&b, ", event %t completed %t error-event %t", o.sawEvent, o.completed, o.errorEvent)
	}
	if o.body != "" {
		fmt.Fprintf(&b, ", body %.200s", o.body)
	}
	if o.err != "" {
		fmt.Fprintf(&b, ", failure: %s", o.err)
	}
	return b.String()
}

// propMarker tags a request's text with its operation, so the fakes give
// each concurrent request its own script.
var propMarker = regexp.MustCompile(`\[op-(\d+)\]`)

// propWords make prompts and answers.
var propWords = strings.Fields("the sea river stone lantern quiet harbour orange window market bridge winter garden copper " +
	"letter morning signal forest meadow engine ladder violet compass island thunder")

// propText is n random words.
func propText(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = propWords[r.IntN(len(propWords))]
	}
	return strings.Join(w, " ")
}

// propSeed is GW_PROPERTY_SEED, else the time.
func propSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("GW_PROPERTY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("GW_PROPERTY_SEED %q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// propOps is GW_PROPERTY_OPS, else propDefaultOps.
func propOps(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("GW_PROPERTY_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("GW_PROPERTY_OPS %q: want a positive count", s)
		}
		return n
	}
	return propDefaultOps
}

// propModels are the pinned models chat operations use; the free account
// also uses the dearest, so that it reaches its stop.
var (
	propPaidModels = []backend{openaiBackend, anthropicBackend, geminiFlash, vertexClaude, vertexGemini, bedrockClaude}
	propOpus       = backend{name: "anthropic", model: "gw-pinned-claude-opus-4-1", backing: "claude-opus-4-1", anthropic: true}
	propFreeModels = []backend{openaiBackend, anthropicBackend, propOpus, geminiFlash, bedrockClaude}
)

// propGenerate draws the operations of a run.
func propGenerate(r *rand.Rand, n int, accounts []*propAccount) []*propOp {
	ops := make([]*propOp, n)
	for i := range ops {
		a := accounts[r.IntN(len(accounts))]
		o := &propOp{n: i, account: a}
		ops[i] = o
		type weighted struct {
			kind string
			w    int
		}
		kinds := []weighted{{opChat, 30}, {opStream, 20}, {opAbandon, 10}}
		if !a.free {
			kinds = append(kinds, weighted{opImage, 12}, weighted{opImageStream, 10}, weighted{opTranscribe, 12})
		}
		if a.prepaid {
			kinds = append(kinds, weighted{opTopUp, 10})
		}
		total := 0
		for _, k := range kinds {
			total += k.w
		}
		pick := r.IntN(total)
		for _, k := range kinds {
			if pick < k.w {
				o.kind = k.kind
				break
			}
			pick -= k.w
		}

		switch o.kind {
		case opChat, opStream, opAbandon:
			models := propPaidModels
			if a.free {
				models = propFreeModels
			}
			b := models[r.IntN(len(models))]
			o.model, o.backing = b.model, b.backing
			o.client = clientKinds[r.IntN(len(clientKinds))]
			if o.client == messagesClient {
				o.limit = []int{256, 1024, 4096}[r.IntN(3)]
			} else if r.IntN(10) < 3 {
				o.limit = []int{64, 512, 2048}[r.IntN(3)]
			}
			// A real model reports the prompt it read (mostly well
			// under the gateway's count of it, sometimes up to three
			// times the worst case of a token a byte: a provider that
			// counts more than was reserved) and stops at its output
			// limit.
			o.prompt = fmt.Sprintf("[op-%d] %s", i, propText(r, 10+r.IntN(30)))
			in := max(1, len(o.prompt)/10)
			switch r.IntN(6) {
			case 0:
				in = len(o.prompt)
			case 1:
				in = 3 * len(o.prompt)
			}
			// Sometimes a document, which the provider bills by its
			// pages (here 2,400 to 4,000 tokens a page), sent in the
			// client's own format to a model of that format.
			if (o.client == messagesClient) == b.anthropic && r.IntN(8) == 0 {
				o.pages = 1 + r.IntN(4)
				in += o.pages * (2400 + r.IntN(1601))
			}
			o.script = fake.Script{
				Text:      propText(r, 3+r.IntN(20)),
				Usage:     fake.Usage{Input: in, Output: 50 + r.IntN(3000)},
				CapOutput: true,
			}
			if o.kind != opAbandon && r.IntN(8) == 0 {
				o.script.NoUsage = true
			}
			if o.kind == opStream && r.IntN(8) == 0 {
				o.script.MidStreamError = true
			}
			if o.kind == opAbandon {
				o.gate = make(chan struct{})
				o.script.Gate = o.gate
			}
		case opImage, opImageStream:
			o.quality = []string{"low", "medium", "high", "auto", ""}[r.IntN(5)]
			o.size = []string{"1024x1024", "1024x1536", "1536x1024", ""}[r.IntN(4)]
			o.images = 1 + r.IntN(2)
			if r.IntN(6) == 0 {
				o.script.Usage.Input = -1 // an answer without usage
			}
			if o.kind == opImageStream && r.IntN(4) != 0 {
				o.partials = 1 + r.IntN(2)
				if r.IntN(2) == 0 {
					o.hangUp = true
					o.gate = make(chan struct{})
					o.script.Gate = o.gate
				}
			}
		case opTranscribe:
			o.seconds = 3 + r.IntN(38)
			o.model = []string{"gw-voice", "gw-voice-fast", "gw-voice-accurate"}[r.IntN(3)]
		case opTopUp:
			o.amount = pricing.Micro(int64(r.IntN(20)+1) * 10_000) // 0.01 to 0.20 USD
		}
	}
	return ops
}

// TestMoneyProperties runs a seeded random mix of billed calls and top-ups
// concurrently and checks the money properties once every call is settled
// (GW_PROPERTY_SEED replays a run's operations, GW_PROPERTY_OPS sizes it):
// on one node with the embedded store, and spread over two nodes sharing
// PostgreSQL and Redis.
func TestMoneyProperties(t *testing.T) {
	t.Parallel()
	t.Run("one node", func(t *testing.T) {
		t.Parallel()
		oa, an := fake.NewOpenAI(), fake.NewAnthropic()
		t.Cleanup(oa.Close)
		t.Cleanup(an.Close)
		clouds, env := newClouds(t)
		env["GW_OPENAI_BASE_URL"], env["GW_ANTHROPIC_BASE_URL"] = oa.URL, an.URL
		g := startGateway(t, gwOptions{BootstrapKey: "sk-prop-bootstrap-0123456789abcdefghijklmn", Caddyfile: withAccessLog(t), Env: env})
		propTest(t, []*gateway{g}, append([]*fake.Upstream{oa, an}, clouds...))
	})
	t.Run("two nodes", func(t *testing.T) {
		t.Parallel()
		clouds, env := newClouds(t)
		s := startSharedNodesWith(t, 2, 100000, env)
		propTest(t, s.nodes, append([]*fake.Upstream{s.oa, s.an}, clouds...))
	})
}

// propTest is one run of the property test on nodes (which share their
// store), the fakes ups behind them; operation i goes to node i mod
// len(nodes).
func propTest(t *testing.T, nodes []*gateway, ups []*fake.Upstream) {
	seed := propSeed(t)
	nOps := propOps(t)
	t.Logf("seed %d, %d operations (replay: GW_PROPERTY_SEED=%d GW_PROPERTY_OPS=%d)", seed, nOps, seed, nOps)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: replay with GW_PROPERTY_SEED=%d GW_PROPERTY_OPS=%d", seed, seed, nOps)
		}
	})
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	accounts := []*propAccount{
		{id: "prop-prepaid-a", prepaid: true, initial: "0.12", fields: map[string]any{"low_balance_usd": propLowBalance}},
		{id: "prop-prepaid-b", prepaid: true, initial: "0.30", fields: map[string]any{"org": propOrg}},
		{id: "prop-prepaid-c", prepaid: true, initial: "0.05"},
		{id: "prop-prepaid-payg", prepaid: true, initial: "0.20", fields: map[string]any{"payg": true}},
		{id: "prop-capped-day", dailyCap: "0.60", monthlyCap: "5.00", keyDailyCap: "0.15"},
		{id: "prop-capped-month", dailyCap: "2.00", monthlyCap: "0.50", fields: map[string]any{"payg": true, "org": propOrg}},
		{id: "prop-free", free: true},
	}
	ops := propGenerate(r, nOps, accounts)
	wavs := map[int][]byte{}
	pdfs := map[int]string{}
	for _, o := range ops {
		if o.kind == opTranscribe && wavs[o.seconds] == nil {
			wavs[o.seconds] = wavOf(8000, o.seconds)
		}
		if o.pages > 0 {
			if pdfs[o.pages] == "" {
				pdfs[o.pages] = base64.StdEncoding.EncodeToString(pdftest.Make(o.pages, pdftest.Options{Text: "Figures of the quarter."}))
			}
			o.pdf = pdfs[o.pages]
		}
	}

	choose := func(body []byte) (fake.Script, bool) {
		m := propMarker.FindSubmatch(body)
		if m == nil {
			return fake.Script{}, false
		}
		i, err := strconv.Atoi(string(m[1]))
		if err != nil || i >= len(ops) {
			return fake.Script{}, false
		}
		return ops[i].script, true
	}
	for _, u := range ups {
		u.Choose = choose
	}

	g := nodes[0]
	hooks := newHookReceiver(t, propHookSecret, nil)
	hook := g.adminJSON(t, http.MethodPost, "/gw/webhooks", map[string]any{"url": hooks.url(), "secret": propHookSecret,
		"events": []string{"cap.threshold", "balance.low"}}, http.StatusCreated).JSON(t)
	g.adminJSON(t, http.MethodPost, "/gw/orgs", map[string]any{"id": propOrg, "daily_cap_usd": propOrgDailyCap}, http.StatusCreated)
	for _, a := range accounts {
		body := map[string]any{"id": a.id, "plan": "paid", "cleared": true}
		if a.free {
			body["plan"], body["cleared"] = "free", false
		}
		if a.prepaid {
			body["balance_usd"] = a.initial
		}
		if a.dailyCap != "" {
			body["daily_cap_usd"] = a.dailyCap
		}
		if a.monthlyCap != "" {
			body["monthly_cap_usd"] = a.monthlyCap
		}
		for k, v := range a.fields {
			body[k] = v
		}
		a.key = g.newAccountKey(t, body)
		if a.keyDailyCap != "" {
			a.cappedKey, a.cappedKeyID = g.createKey(t, a.id, map[string]any{"name": "capped", "daily_cap_usd": a.keyDailyCap})
		}
	}

	client := &http.Client{
		Timeout:   propRequestTimeout,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2 * propWorkers},
	}
	t.Cleanup(client.CloseIdleConnections)
	started := time.Now()
	work := make(chan *propOp)
	var wg sync.WaitGroup
	for range propWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				propRun(nodes[o.n%len(nodes)], client, o, wavs)
			}
		}()
	}
	for _, o := range ops {
		work <- o
	}
	close(work)
	wg.Wait()
	t.Logf("%d operations ran in %s", len(ops), time.Since(started).Round(time.Millisecond))

	failed := false
	for _, o := range ops {
		if o.err != "" {
			t.Errorf("%s", o)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}

	ledgers := propSettle(t, nodes, accounts, ops)
	propCheck(t, g, accounts, ops, ledgers)
	propShortfalls(t, nodes, accounts, ops, ledgers)
	propAlerts(t, nodes, accounts, ledgers, hooks, hook["id"].(string))
	// Every provider, the clouds' included, served calls of the run.
	for _, u := range ups {
		if len(u.Requests()) == 0 {
			t.Errorf("the fake at %s served no call of the run", u.URL)
		}
	}
	propStats(t, ops)
}

// propAlerts checks the alerts of the run: each threshold of each cap
// that the final spend reached (the accounts', the capped key's and the
// organization's), and each fall of the low-balance account's balance
// below its mark in its journal, was raised once and delivered once,
// signed, and nothing else was.
func propAlerts(t *testing.T, nodes []*gateway, accounts []*propAccount, ledgers map[string][]ledgerEntry, hooks *hookReceiver, hookID string) {
	t.Helper()
	g := nodes[0]
	want := map[string]int{}
	reached := func(capName, who, limit string, spent pricing.Money) {
		cap := mustUSD(t, limit)
		for _, pct := range store.Thresholds {
			if spent >= store.ThresholdAt(cap, pct) {
				want[fmt.Sprintf("%s %s %d", capName, who, pct)]++
			}
		}
	}
	var orgSpent pricing.Money
	for _, a := range accounts {
		var spent pricing.Money
		for _, l := range ledgers[a.id] {
			spent += mustUSD(t, l.Cost)
		}
		if a.dailyCap != "" {
			reached("daily_cap", a.id, a.dailyCap, spent)
		}
		if a.monthlyCap != "" {
			reached("monthly_cap", a.id, a.monthlyCap, spent)
		}
		if a.fields["org"] == propOrg {
			orgSpent += spent
		}
		if a.keyDailyCap != "" {
			k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+a.cappedKeyID, nil, http.StatusOK).JSON(t)
			today, _ := k["spend"].(map[string]any)["today_usd"].(string)
			reached("key_daily_cap", a.cappedKeyID, a.keyDailyCap, mustUSD(t, today))
		}
		if low, ok := a.fields["low_balance_usd"].(string); ok {
			mark := mustUSD(t, low)
			journal := g.adminJSON(t, http.MethodGet, "/gw/accounts/"+a.id+"/journal?limit=1000", nil, http.StatusOK)
			var j struct {
				Data []struct {
					Kind    string `json:"kind"`
					Amount  string `json:"amount_usd"`
					Balance string `json:"balance_usd"`
				} `json:"data"`
			}
			if err := json.Unmarshal(journal.Body, &j); err != nil {
				t.Fatal(err)
			}
			for i := len(j.Data) - 1; i >= 0; i-- { // oldest first
				after := mustUSD(t, j.Data[i].Balance)
				if j.Data[i].Kind == "charge" && after < mark && after-mustUSD(t, j.Data[i].Amount) >= mark {
					want["balance.low "+a.id]++
				}
			}
		}
	}
	reached("org_daily_cap", propOrg, propOrgDailyCap, orgSpent)

	name := func(ev hookEvent) string {
		switch {
		case ev.Type == "balance.low":
			return "balance.low " + ev.Account
		case ev.Org != "":
			return fmt.Sprintf("%s %s %d", ev.Cap, ev.Org, ev.Threshold)
		case ev.KeyID != "":
			return fmt.Sprintf("%s %s %d", ev.Cap, ev.KeyID, ev.Threshold)
		}
		return fmt.Sprintf("%s %s %d", ev.Cap, ev.Account, ev.Threshold)
	}
	count := func(evs []hookEvent) map[string]int {
		m := map[string]int{}
		for _, ev := range evs {
			m[name(ev)]++
		}
		return m
	}
	n := 0
	for _, c := range want {
		n += c
	}
	var raised []hookEvent
	for _, d := range g.deliveries(t, hookID) {
		raised = append(raised, d.Event)
	}
	if got := count(raised); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alerts raised %v, want %v", got, want)
	}
	delivered := hooks.waitAccepted(t, n)
	if got := count(delivered); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alerts delivered %v, want %v", got, want)
	}
	t.Logf("%d alerts raised and delivered: %v", n, want)
}

// propShortfalls checks what the accounts could not pay: no entry is below
// zero, a chat call whose usage the provider reported is in the ledger at
// the provider's figure at list prices (cost and shortfall together), and
// the nodes' gw_shortfall_usd_total adds up to the ledger's shortfalls.
func propShortfalls(t *testing.T, nodes []*gateway, accounts []*propAccount, ops []*propOp, ledgers map[string][]ledgerEntry) {
	t.Helper()
	byID := map[string]ledgerEntry{}
	var short pricing.Money
	for _, a := range accounts {
		for _, l := range ledgers[a.id] {
			byID[l.RequestID] = l
			s := mustUSD(t, l.Shortfall)
			if s < 0 {
				t.Errorf("%s: entry %+v has a shortfall below zero", a.id, l)
			}
			short += s
		}
	}
	checked, documents := 0, 0
	for _, o := range ops {
		l, ok := byID[o.requestID]
		if ok && o.pages > 0 {
			documents++
		}
		// The provider's figure is known when the client set the output
		// limit (the answer stops there) and the usage was reported.
		if !ok || o.backing == "" || o.limit == 0 || o.script.NoUsage || o.script.MidStreamError || o.kind == opAbandon {
			continue
		}
		payg, _ := o.account.fields["payg"].(bool)
		want := listCost(t, o.backing, tokenUsage{Input: int64(o.script.Usage.Input), Output: int64(min(o.script.Usage.Output, o.limit))}, payg)
		if got := mustUSD(t, l.Cost) + mustUSD(t, l.Shortfall); got != want {
			t.Errorf("entry %+v: cost and shortfall %s, the provider's figure %s: %s", l, got, want, o)
		}
		checked++
	}
	var counted pricing.Money
	for _, g := range nodes {
		for name, v := range scrape(t, g) {
			if strings.HasPrefix(name, "gw_shortfall_usd_total{") {
				counted += pricing.Money(v*float64(pricing.NanoPerUSD) + 0.5)
			}
		}
	}
	if counted != short {
		t.Errorf("gw_shortfall_usd_total adds up to %s, the ledger's shortfalls to %s", counted, short)
	}
	t.Logf("shortfalls: %s in all; %d chat entries held to the provider's figure; %d with a document billed by its pages", short, checked, documents)
}

// propRun runs one operation, recording what happened; it never calls
// t (it runs on a worker goroutine).
func propRun(g *gateway, client *http.Client, o *propOp, wavs map[int][]byte) {
	if o.gate != nil {
		defer close(o.gate)
	}
	var (
		path, ct string
		body     []byte
		header   = bearer(o.keyOf())
		stream   bool
	)
	switch o.kind {
	case opTopUp:
		b, _ := json.Marshal(map[string]any{"add_balance_usd": o.amount.String()})
		req, _ := http.NewRequest(http.MethodPatch, g.AdminURL+"/gw/accounts/"+o.account.id, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			o.err = err.Error()
			return
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
		if o.status != http.StatusOK {
			o.err = "top-up refused"
			o.body = string(rb)
		}
		return
	case opChat, opStream, opAbandon:
		stream = o.kind != opChat
		var prompt any = o.prompt
		msg := map[string]any{"model": o.model, "stream": stream}
		switch o.client {
		case chatClient:
			path = "/v1/chat/completions"
			if o.pdf != "" {
				prompt = []any{map[string]any{"type": "text", "text": o.prompt},
					map[string]any{"type": "file", "file": map[string]any{"filename": "d.pdf", "file_data": "data:application/pdf;base64," + o.pdf}}}
			}
			msg["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
			if o.limit > 0 {
				msg["max_completion_tokens"] = o.limit
			}
		case responsesClient:
			path = "/v1/responses"
			if o.pdf != "" {
				prompt = []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": o.prompt},
					map[string]any{"type": "input_file", "filename": "d.pdf", "file_data": "data:application/pdf;base64," + o.pdf}}}}
			}
			msg["input"] = prompt
			if o.limit > 0 {
				msg["max_output_tokens"] = o.limit
			}
		case messagesClient:
			path = "/alt/v1/messages"
			if o.pdf != "" {
				prompt = []any{map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": o.pdf}},
					map[string]any{"type": "text", "text": o.prompt}}
			}
			msg["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
			msg["max_tokens"] = o.limit
			header = apiKey(o.keyOf())
		}
		body, _ = json.Marshal(msg)
		ct = "application/json"
	case opImage, opImageStream:
		stream = o.kind == opImageStream
		path = "/v1/images/generations"
		msg := map[string]any{"prompt": fmt.Sprintf("[op-%d] a lantern by the sea", o.n), "n": o.images}
		if o.quality != "" {
			msg["quality"] = o.quality
		}
		if o.size != "" {
			msg["size"] = o.size
		}
		if stream {
			msg["stream"] = true
			if o.partials > 0 {
				msg["partial_images"] = o.partials
			}
		}
		body, _ = json.Marshal(msg)
		ct = "application/json"
	case opTranscribe:
		path = "/v1/audio/transcriptions"
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		fw, _ := mw.CreateFormFile("file", fmt.Sprintf("op-%d.wav", o.n))
		fw.Write(wavs[o.seconds])
		mw.WriteField("model", o.model)
		mw.Close()
		body, ct = b.Bytes(), mw.FormDataContentType()
	}

	req, err := http.NewRequest(http.MethodPost, g.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		o.err = err.Error()
		return
	}
	req.Header.Set("Content-Type", ct)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		o.err = err.Error()
		return
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	o.requestID = resp.Header.Get("X-Gw-Request-Id")
	o.outputLimit = resp.Header.Get("X-Gw-Output-Limit")
	if resp.StatusCode != http.StatusOK || !stream {
		rb, err := io.ReadAll(resp.Body)
		if err != nil {
			o.err = "reading the answer: " + err.Error()
			return
		}
		if resp.StatusCode != http.StatusOK {
			o.body = string(rb)
			return
		}
		o.receipt = resp.Header.Get("X-Gw-Cost-Usd")
		if o.receipt == "" {
			o.err = "a whole answer without X-Gw-Cost-Usd"
		}
		return
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		o.err = "a stream answered " + resp.Header.Get("Content-Type")
		return
	}
	leave := o.kind == opAbandon || o.hangUp
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			if name == "error" || name == "response.failed" {
				o.errorEvent = true
			}
			if name == "message_stop" || name == "response.completed" {
				o.completed = true
			}
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			o.sawEvent = true
			if data == "[DONE]" {
				o.completed = true
			} else {
				if gjson.Get(data, "error").Exists() || gjson.Get(data, "type").String() == "error" {
					o.errorEvent = true
				}
				for _, p := range []string{"usage.cost_usd", "response.usage.cost_usd"} {
					if c := gjson.Get(data, p); c.Exists() {
						o.receipt = c.String()
					}
				}
			}
			if leave {
				return // the client hangs up after the first event
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			o.err = "reading the stream: " + err.Error()
			return
		}
	}
	if o.errorEvent {
		o.completed = false
	}
}

// propSettle waits until every call the run made is finished (its access
// log line is written: a stream its client left is read to its end and
// settled before that) and then until two readings of every ledger agree;
// it returns the last reading.
func propSettle(t *testing.T, nodes []*gateway, accounts []*propAccount, ops []*propOp) map[string][]ledgerEntry {
	t.Helper()
	deadline := time.Now().Add(propSettleTimeout)
	timer := time.NewTimer(propSettleTimeout)
	defer timer.Stop()
	start := time.Now()
	// Each call is finished once its node has logged it.
	for i, g := range nodes {
		pending := map[string]bool{}
		for _, o := range ops {
			if o.requestID != "" && o.n%len(nodes) == i {
				pending[o.requestID] = true
			}
		}
		propFinished(t, g, ops, pending, timer)
	}
	t.Logf("every call finished %s after the last operation returned", time.Since(start).Round(time.Millisecond))
	g := nodes[0]
	read := func() map[string][]ledgerEntry {
		out := map[string][]ledgerEntry{}
		for _, a := range accounts {
			out[a.id] = g.ledger(t, a.id)
		}
		return out
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := read()
	for {
		select {
		case <-tick.C:
		case <-timer.C:
			t.Fatalf("the ledgers still changed after %s", propSettleTimeout)
		}
		now := read()
		if fmt.Sprint(now) == fmt.Sprint(last) {
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledgers still changed after %s", propSettleTimeout)
		}
		last = now
	}
}

// propFinished waits until g's access log names every request id of
// pending, or fails at timer.
func propFinished(t *testing.T, g *gateway, ops []*propOp, pending map[string]bool, timer *time.Timer) {
	t.Helper()
	for len(pending) > 0 {
		log, changed := g.log.snapshot()
		for _, l := range strings.Split(log, "\n") {
			if !strings.Contains(l, `"handled request"`) {
				continue
			}
			for id := range pending {
				if strings.Contains(l, id) {
					delete(pending, id)
				}
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			var left []string
			for _, o := range ops {
				if pending[o.requestID] {
					left = append(left, o.String())
				}
			}
			t.Fatalf("%d calls not finished within %s:\n  %s", len(left), propSettleTimeout, strings.Join(left, "\n  "))
		}
	}
}

// journalEntry is one row of GET /gw/accounts/{id}/journal.
type journalEntry struct {
	Kind      string `json:"kind"`
	Amount    string `json:"amount_usd"`
	Balance   string `json:"balance_usd"`
	RequestID string `json:"request_id"`
}

// propCheck checks the properties on the settled ledgers.
func propCheck(t *testing.T, g *gateway, accounts []*propAccount, ops []*propOp, ledgers map[string][]ledgerEntry) {
	t.Helper()
	usd := func(what, s string) pricing.Money {
		m, err := pricing.ParseUSD(s)
		if err != nil {
			t.Fatalf("%s: %q is not an amount: %v", what, s, err)
		}
		return m
	}

	// Every ledger entry is a call answered 200 on its own account, and
	// no request id is billed twice.
	byID := map[string]*propOp{}
	for _, o := range ops {
		if o.requestID != "" {
			if prev := byID[o.requestID]; prev != nil {
				t.Errorf("two calls carry request id %q:\n  %s\n  %s", o.requestID, prev, o)
			}
			byID[o.requestID] = o
		}
	}
	entries := map[string][]ledgerEntry{}
	for _, a := range accounts {
		for _, l := range ledgers[a.id] {
			entries[l.RequestID] = append(entries[l.RequestID], l)
			o := byID[l.RequestID]
			switch {
			case o == nil:
				t.Errorf("ledger of %s: entry %+v belongs to no call of the run", a.id, l)
			case o.account != a:
				t.Errorf("ledger of %s: entry %+v of another account's call: %s", a.id, l, o)
			case o.status != http.StatusOK:
				t.Errorf("ledger of %s: a refused call was charged (%+v): %s", a.id, l, o)
			}
			if usd("ledger cost", l.Cost) < 0 {
				t.Errorf("ledger of %s: entry %+v below zero", a.id, l)
			}
		}
	}
	for id, ls := range entries {
		if len(ls) > 1 {
			t.Errorf("request %q has %d ledger entries %+v: %v", id, len(ls), ls, byID[id])
		}
	}

	// The ledger equals the receipts.
	for _, o := range ops {
		if o.kind == opTopUp {
			continue
		}
		ls := entries[o.requestID]
		// The header announces a limit the gateway set and lowered; a
		// limit the client set is never lowered, nor announced.
		if o.limit > 0 && o.outputLimit != "" {
			if n, err := strconv.Atoi(o.outputLimit); err != nil || n < o.limit {
				t.Errorf("the output limit the client set was lowered: %s", o)
			} else {
				t.Errorf("X-Gw-Output-Limit announces the output limit the client set itself: %s", o)
			}
		}
		switch {
		case o.status != http.StatusOK:
			// Every call here is well formed: the only refusal is for
			// money, and it is not charged (checked above).
			if o.status != http.StatusPaymentRequired || o.requestID == "" {
				t.Errorf("want 200, or 402 with a request id: %s", o)
			}
		case o.receipt != "":
			if len(ls) != 1 || ls[0].Cost != o.receipt {
				t.Errorf("receipt %s, ledger %+v: %s", o.receipt, ls, o)
			}
			if (o.script.NoUsage || o.script.Usage.Input < 0) && usd("receipt", o.receipt) <= 0 {
				t.Errorf("an answer without usage billed at zero: %s", o)
			}
		case o.kind == opAbandon || o.hangUp:
			// A stream its client left is still read to its end (or,
			// with previews, charged at the first one) and billed once.
			if !o.sawEvent || len(ls) != 1 || usd("ledger cost", ls[0].Cost) <= 0 {
				t.Errorf("a stream its client left: ledger %+v, want one entry above zero: %s", ls, o)
			}
		case o.kind == opImageStream:
			if o.completed && len(ls) != 1 {
				t.Errorf("an image stream served whole: ledger %+v, want one entry: %s", ls, o)
			}
		case o.kind == opStream && o.errorEvent:
			// A stream that broke after its first content: billed for
			// what it delivered at most once (checked above).
		default:
			t.Errorf("an answer served without its receipt: %s", o)
		}
	}

	// The organization's accounts together: their ledgers add up to its
	// spend, within its cap.
	var orgSum pricing.Money
	for _, a := range accounts {
		if a.fields["org"] == propOrg {
			for _, l := range ledgers[a.id] {
				orgSum += usd("ledger cost", l.Cost)
			}
		}
	}
	org := g.adminJSON(t, http.MethodGet, "/gw/orgs/"+propOrg, nil, http.StatusOK).JSON(t)
	orgSpend, _ := org["spend"].(map[string]any)
	if today, _ := orgSpend["today_usd"].(string); today != orgSum.String() || orgSum > usd("org cap", propOrgDailyCap) {
		t.Errorf("%s: its accounts' ledgers add up to %s, its spend today is %v, its cap %s", propOrg, orgSum, orgSpend["today_usd"], propOrgDailyCap)
	}

	// Per account: the ledger adds up to the spend; caps and the free stop
	// hold; a prepaid balance never went below zero and is its start plus
	// the top-ups less what the charges drew.
	for _, a := range accounts {
		acct := g.getAccount(t, a.id)
		spend, _ := acct["spend"].(map[string]any)
		str := func(k string) string { s, _ := spend[k].(string); return s }
		total, today, month := usd("total_usd", str("total_usd")), usd("today_usd", str("today_usd")), usd("month_usd", str("month_usd"))
		var sum pricing.Money
		for _, l := range ledgers[a.id] {
			sum += usd("ledger cost", l.Cost)
		}
		if sum != total {
			t.Errorf("%s: the ledger adds up to %s, spend.total_usd is %s", a.id, sum, total)
		}
		if a.dailyCap != "" && today > usd("daily cap", a.dailyCap) {
			t.Errorf("%s: spent %s today, past its daily cap %s", a.id, today, a.dailyCap)
		}
		if a.monthlyCap != "" && month > usd("monthly cap", a.monthlyCap) {
			t.Errorf("%s: spent %s this month, past its monthly cap %s", a.id, month, a.monthlyCap)
		}
		if a.cappedKey != "" {
			// The capped key's calls add up to its spend, within its cap.
			var keySum pricing.Money
			for _, l := range ledgers[a.id] {
				if o := byID[l.RequestID]; o != nil && o.keyOf() == a.cappedKey {
					keySum += usd("ledger cost", l.Cost)
				}
			}
			k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+a.cappedKeyID, nil, http.StatusOK).JSON(t)
			ks, _ := k["spend"].(map[string]any)
			kToday, _ := ks["today_usd"].(string)
			if kToday != keySum.String() || keySum > usd("key daily cap", a.keyDailyCap) {
				t.Errorf("%s: the capped key's calls add up to %s, its spend today is %s, its cap %s", a.id, keySum, kToday, a.keyDailyCap)
			}
		}
		if a.free && total > usd("free stop", propFreeChatStop) {
			t.Errorf("%s: free chat spend %s, past the stop at %s", a.id, total, propFreeChatStop)
		}
		t.Logf("%s: %d ledger entries, spend %s (today %s, month %s), balance %v", a.id, len(ledgers[a.id]), total, today, month, acct["balance_usd"])
		if !a.prepaid {
			if b := acct["balance_usd"]; b != nil {
				t.Errorf("%s: billed afterwards, yet has balance %v", a.id, b)
			}
			continue
		}

		balance := usd("balance_usd", fmt.Sprint(acct["balance_usd"]))
		if balance < 0 {
			t.Errorf("%s: balance %s below zero", a.id, balance)
		}
		r := g.adminJSON(t, http.MethodGet, "/gw/accounts/"+a.id+"/journal?limit=1000", nil, http.StatusOK)
		var j struct {
			Data []journalEntry `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &j); err != nil {
			t.Fatalf("journal of %s: %v", a.id, err)
		}
		if len(j.Data) == 1000 {
			t.Fatalf("journal of %s: longer than one page; run fewer operations", a.id)
		}
		var topUps, drawn pricing.Money
		var nTopUps int
		charged := map[string]pricing.Money{}
		for _, je := range j.Data {
			if b := usd("journal balance", je.Balance); b < 0 {
				t.Errorf("%s: journal entry %+v leaves the balance below zero: %v", a.id, je, byID[je.RequestID])
			}
			switch je.Kind {
			case "top_up":
				topUps += usd("journal amount", je.Amount)
				nTopUps++
			case "charge":
				drawn -= usd("journal amount", je.Amount)
				charged[je.RequestID] += -usd("journal amount", je.Amount)
			}
		}
		var want pricing.Money
		wantN := 0
		for _, o := range ops {
			if o.kind == opTopUp && o.account == a && o.status == http.StatusOK {
				want += o.amount
				wantN++
			}
		}
		if topUps != want || nTopUps != wantN {
			t.Errorf("%s: journal has %d top-ups of %s in all, the run made %d of %s", a.id, nTopUps, topUps, wantN, want)
		}
		if start := usd("initial", a.initial); start+topUps-drawn != balance {
			t.Errorf("%s: %s + top-ups %s − charges %s = %s, balance is %s", a.id, start, topUps, drawn, start+topUps-drawn, balance)
		}
		// A paid account has no free credit: every charge draws its
		// call's whole cost from the balance.
		for _, l := range ledgers[a.id] {
			if got, want := charged[l.RequestID], usd("ledger cost", l.Cost); got != want {
				t.Errorf("%s: request %s cost %s, the balance was charged %s: %v", a.id, l.RequestID, want, got, byID[l.RequestID])
			}
		}
		// An entry a cap floored to nothing drew nothing: it has no
		// journal entry.
		drew := 0
		for _, l := range ledgers[a.id] {
			if usd("ledger cost", l.Cost) > 0 {
				drew++
			}
		}
		if len(charged) != drew {
			t.Errorf("%s: %d charges in the journal, %d ledger entries that drew on the balance", a.id, len(charged), drew)
		}
	}

	check := g.adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK)
	if !gjson.GetBytes(check.Body, "ok").Bool() {
		t.Errorf("journal check: %s", check.Body)
	}
}

// propStats logs what the run exercised, and fails a full-size run that
// missed the money edges it exists for.
func propStats(t *testing.T, ops []*propOp) {
	t.Helper()
	statuses := map[string]int{}
	lowered, refused := 0, 0
	for _, o := range ops {
		k := fmt.Sprintf("%s %d", o.kind, o.status)
		if o.status == http.StatusPaymentRequired {
			code := gjson.Get(o.body, "error.code").String()
			if code == "" {
				code = gjson.Get(o.body, "detail.error.code").String()
			}
			k += " " + code
			refused++
		}
		statuses[k]++
		if o.outputLimit != "" {
			lowered++
		}
	}
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-40s %d", k, statuses[k])
	}
	t.Logf("outcomes (kind, status, code):%s\n  output limits lowered: %d", b.String(), lowered)
	if len(ops) >= propDefaultOps && (refused == 0 || lowered == 0) {
		t.Errorf("a full run had %d money refusals and %d lowered output limits: the balances no longer reach their edges", refused, lowered)
	}
}

// An image is held at the table price of what is asked but charged from
// the provider's usage, which for a medium image is above that price
// (gpt-image-1: 1,056 output tokens at 40 USD a million is 0.04224 USD,
// the table says 0.042): a balance that holds exactly the call must not
// be taken below zero by it. Found by TestMoneyProperties.
func TestImageChargeStaysWithinBalance(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	// The hold: one medium 1024x1024 image (0.042) and the one-byte
	// prompt at a token a byte (5 USD a million).
	const start = "0.042005"
	key := e.newAccountKey(t, map[string]any{"id": "image-edge", "plan": "paid", "cleared": true, "balance_usd": start})
	r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p","quality":"medium","size":"1024x1024"}`, bearer(key)...)
	balance := balanceOf(t, e.gateway, "image-edge")
	switch r.Status {
	case http.StatusOK:
		cost := usdOf(t, r.Header.Get("X-Gw-Cost-Usd"))
		e.expectLedger(t, "image-edge", ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image", Cost: cost.String()})
		if balance < 0 || balance != usdOf(t, start)-cost {
			t.Errorf("served at %s on a balance of %s: balance %s, want %s less the cost and never below zero", cost, start, balance, start)
		}
	case http.StatusPaymentRequired:
		matchJSON(t, r.Body, `{"detail":{"error":{"code":"credit_exhausted","message":"<string>"}}}`)
		if balance != usdOf(t, start) || len(e.ledger(t, "image-edge")) != 0 {
			t.Errorf("refused, yet balance %s (want %s) and ledger %+v", balance, start, e.ledger(t, "image-edge"))
		}
	default:
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	e.expectJournalOK(t)
}

// X-Gw-Output-Limit announces a limit the gateway set and lowered; an
// account whose money covers a call only once its prompt is counted
// exactly serves a limit the client set as it is, unannounced (and the
// answer stays cacheable). Found by TestMoneyProperties.
func TestClientOutputLimitNotAnnounced(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	e.OA.SetDefault(fake.Script{Text: "A cod.", Usage: fake.Usage{Input: 5, Output: 100}, CapOutput: true})
	const prompt = "Name one fish, please, and say nothing else at all in the answer."
	// 0.00044 USD does not cover this body's worst case on gpt-4.1-mini
	// but covers its counted prompt and 256 output tokens.
	send := func(account, limit string) response {
		key := e.account(t, account, map[string]any{"balance_usd": "0.00044"})
		return e.do(t, http.MethodPost, "/v1/chat/completions",
			`{"model":"gw-pinned-gpt-4.1-mini",`+limit+`"messages":[{"role":"user","content":"`+prompt+`"}]}`, bearer(key)...)
	}
	// Without a limit of its own the call is tightened: its limit is
	// lowered and announced.
	r := send("limit-gateway", "")
	if n, err := strconv.Atoi(r.Header.Get("X-Gw-Output-Limit")); r.Status != http.StatusOK || err != nil || n >= 4096 {
		t.Fatalf("no client limit on 0.00044 USD: %d, X-Gw-Output-Limit %q; want 200 and a lowered limit", r.Status, r.Header.Get("X-Gw-Output-Limit"))
	}
	e.reset()
	r = send("limit-client", `"max_completion_tokens":256,`)
	if r.Status != http.StatusOK {
		t.Fatalf("limit 256 on 0.00044 USD: %d %s", r.Status, r.Body)
	}
	if h := r.Header.Get("X-Gw-Output-Limit"); h != "" {
		t.Errorf("X-Gw-Output-Limit %q on a limit the client set (256), want none", h)
	}
	if got := gjson.GetBytes(e.OA.Requests()[0].Body, "max_completion_tokens").Int(); got != 256 {
		t.Errorf("upstream max_completion_tokens %d, want 256", got)
	}
}
