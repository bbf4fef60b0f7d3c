package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestProviderAuth: a provider reads the key in the way its auth says
// (Azure OpenAI's api-key header, none for a self-hosted server), and a
// model the operator gave no price is served to no account, while a
// price of 0 is served and charged 0.
func TestProviderAuth(t *testing.T) {
	t.Parallel()
	azure, local := fake.NewOpenAI(), fake.NewOpenAI()
	azure.Auth, azure.APIKey, local.Auth = "api-key", "azure-secret", "none"
	t.Cleanup(azure.Close)
	t.Cleanup(local.Close)
	cfg := withGW(t, `		provider azure {
			format openai
			base_url `+azure.URL+`
			api_key azure-secret
			auth api-key
		}
		provider local {
			format openai
			base_url `+local.URL+`
			auth none
		}
		model azure-mini {
			provider azure
			lane standard
			price 0.40 1.60
		}
		model local-free {
			provider local
			lane fast
			price 0 0
		}
		model local-unpriced {
			provider local
			lane fast
		}`)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Caddyfile: cfg, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "provided", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	chat := func(model string) response {
		return g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	}

	azure.Push(fake.Script{Text: "From Azure.", Usage: fake.Usage{Input: 1000, Output: 100}})
	r := chat("gw-pinned-azure-mini")
	if r.Status != http.StatusOK {
		t.Fatalf("azure: %d %s", r.Status, r.Body)
	}
	h := azure.Requests()[0].Header
	if h.Get("api-key") != "azure-secret" || h.Get("Authorization") != "" || h.Get("x-api-key") != "" {
		t.Errorf("azure got api-key %q, Authorization %q, x-api-key %q; want the key in api-key alone", h.Get("api-key"), h.Get("Authorization"), h.Get("x-api-key"))
	}
	want := pricing.Cost(false, pricing.Line{Units: 1000, Rate: pricing.PerMillion(pricing.Micro(400_000))},
		pricing.Line{Units: 100, Rate: pricing.PerMillion(pricing.Micro(1_600_000))})
	if got := r.Header.Get("X-Gw-Cost-Usd"); got != want.String() {
		t.Errorf("azure cost %s, want %s", got, want)
	}

	local.Push(fake.Script{Text: "From the local server.", Usage: fake.Usage{Input: 1000, Output: 100}})
	r = chat("gw-pinned-local-free")
	if r.Status != http.StatusOK {
		t.Fatalf("local: %d %s", r.Status, r.Body)
	}
	h = local.Requests()[0].Header
	if h.Get("api-key") != "" || h.Get("Authorization") != "" || h.Get("x-api-key") != "" {
		t.Errorf("local got api-key %q, Authorization %q, x-api-key %q; want no key", h.Get("api-key"), h.Get("Authorization"), h.Get("x-api-key"))
	}
	if got := r.Header.Get("X-Gw-Cost-Usd"); got != pricing.Money(0).String() {
		t.Errorf("local cost %s, want 0", got)
	}
	ledger := ledgerOf(t, g, "provided")
	if c, ok := ledger[r.Header.Get("X-Gw-Request-Id")]; !ok || c != 0 {
		t.Errorf("ledger %v: want the free call charged 0", ledger)
	}

	r = chat("gw-pinned-local-unpriced")
	if r.Status != http.StatusBadRequest || gjson.GetBytes(r.Body, "error.code").String() != "model_not_found" {
		t.Errorf("unpriced: %d %s, want 400 model_not_found", r.Status, r.Body)
	}
	if n := len(local.Requests()); n != 1 {
		t.Errorf("the local server got %d requests, want only the priced model's", n)
	}
	r = g.do(t, http.MethodGet, "/v1/models", "", bearer(key)...)
	ids := gjson.GetBytes(r.Body, "data.#.id").String()
	if !strings.Contains(ids, `"gw-pinned-azure-mini"`) || !strings.Contains(ids, `"gw-pinned-local-free"`) || strings.Contains(ids, "local-unpriced") {
		t.Errorf("/v1/models ids %s: want the priced models and not the unpriced one", ids)
	}
	if len(ledgerOf(t, g, "provided")) != 2 {
		t.Errorf("ledger %v, want the two served calls", ledgerOf(t, g, "provided"))
	}
}
