package integration

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// transcribe's audio_url is downloaded only once the call may run: the key,
// the ability and plan, the key's model list, the shared rate budget and
// room for the least a file is billed are checked first, so a key that
// cannot pay makes the gateway download nothing. The audio host (https,
// trusted by the gateway through SSL_CERT_FILE, let past the address guard
// by GW_FETCH_ALLOW) counts what it is asked.
func TestMCPToolsTranscribeChecksFirst(t *testing.T) {
	t.Parallel()
	wav := fixture(t, "tone.wav")
	var hits atomic.Int64
	audio := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "audio/wav")
		_, _ = w.Write(wav)
	}))
	t.Cleanup(audio.Close)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: audio.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	oa := fake.NewOpenAI()
	t.Cleanup(oa.Close)
	const billing = "https://billing.example.test/upgrade"
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "SSL_CERT_FILE": roots,
		"GW_FETCH_ALLOW": strings.TrimPrefix(audio.URL, "https://"), "GW_BILLING_URL": billing}})
	clip := map[string]any{"audio_url": audio.URL + "/clip.wav"}
	paid := func(id string, fields map[string]any) string {
		body := map[string]any{"id": id, "plan": "paid", "cleared": true, "balance_usd": "1.00"}
		for k, v := range fields {
			body[k] = v
		}
		return g.newAccountKey(t, body)
	}
	transcribe := func(key string) *sdk.CallToolResult {
		t.Helper()
		res, err := mcpSession(t, g.BaseURL+"/mcp-tools/", key).CallTool(context.Background(), &sdk.CallToolParams{Name: "transcribe", Arguments: clip})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// A key that may: one download, billed at the least a file is billed.
	ok := paid("payer", nil)
	oa.Push(fake.Script{Text: "a tone"})
	res := transcribe(ok)
	minimum := abilityCost(listPrice(t, g, ok, "gw-voice"), 10)
	if got := structured(t, res); res.IsError || got["text"] != "a tone" || got["billed_seconds"] != float64(10) || got["cost_usd"] != minimum.String() {
		t.Fatalf("transcribe: %+v", got)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the audio was downloaded %d times, want once", n)
	}

	limited, _ := g.createKey(t, "payer", map[string]any{"name": "images only", "models": []string{"gw-image"}})
	for _, c := range []struct {
		name string
		key  string
		want map[string]any
	}{
		{"a Free plan", g.newAccountKey(t, map[string]any{"id": "free", "plan": "free"}), map[string]any{
			"error": "premium_locked", "capability": "transcription", "message": "transcription needs a paid plan with a cleared payment",
			"retryable": false, "upgrade_url": billing, "price_microcents": minimum.Microcents()}},
		{"transcription switched off", paid("searcher", map[string]any{"abilities": []string{"search"}}), map[string]any{
			"error": "ability_disabled", "capability": "transcription", "message": "transcription is not switched on for this account", "retryable": false}},
		{"a key without gw-voice", limited, map[string]any{
			"error": "forbidden", "capability": "transcription", "message": "this key may not use model gw-voice", "retryable": false}},
		{"a spent balance", paid("broke", map[string]any{"balance_usd": "0.00"}), map[string]any{
			"error": "payment_required", "capability": "transcription", "message": "the prepaid balance is used up; add credit to continue",
			"retryable": false, "upgrade_url": billing}},
		{"less than the least a file is billed", paid("short", map[string]any{"balance_usd": (minimum - 1).String()}), map[string]any{
			"error": "payment_required", "capability": "transcription", "message": "the prepaid balance is used up; add credit to continue",
			"retryable": false, "upgrade_url": billing}},
	} {
		before := hits.Load()
		res := transcribe(c.key)
		if got, want := jsonText(t, structured(t, res)), jsonText(t, c.want); !res.IsError || got != want {
			t.Errorf("%s: %s\nwant %s", c.name, got, want)
		}
		if n := hits.Load(); n != before {
			t.Errorf("%s: the audio was downloaded", c.name)
		}
	}

	// Over the shared per-minute budget: spent by direct calls until one
	// is refused, then the tool is refused too, with nothing downloaded.
	// The budget refills one call a second: should that call have come
	// back in between (the tool then runs and downloads), spend it again.
	busy := paid("busy", nil)
	for attempt := 0; ; attempt++ {
		if attempt == 3 {
			t.Fatal("the budget refilled before every attempt")
		}
		for i := 0; i < 120; i++ {
			if g.do(t, http.MethodPost, "/v1/search", `{}`, bearer(busy)...).Status == http.StatusTooManyRequests {
				break
			}
		}
		before := hits.Load()
		oa.Push(fake.Script{Text: "a tone"})
		res := transcribe(busy)
		if !res.IsError {
			continue
		}
		got := structured(t, res)
		if got["error"] != "rate_limited" || got["capability"] != "transcription" || got["retryable"] != true || got["retry_after_seconds"] == nil {
			t.Fatalf("over budget: %v", got)
		}
		if n := hits.Load(); n != before {
			t.Fatalf("over budget: the audio was downloaded")
		}
		break
	}
	if l := g.ledger(t, "payer"); len(l) != 1 || l[0].Cost != minimum.String() {
		t.Fatalf("ledger of the payer %+v", l)
	}
}
