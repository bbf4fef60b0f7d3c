package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// cloudProject is the Google Cloud project the Vertex tests name.
const cloudProject = "fake-project"

// cloudEnv is a chat gateway whose Caddyfile.example reaches the cloud
// fakes too: the Vertex AI fake (VX) with a key file it issued.
type cloudEnv struct {
	*chatEnv
	VX *fake.Upstream
}

func newCloudEnv(t *testing.T) *cloudEnv {
	t.Helper()
	oa, an, vx := fake.NewOpenAI(), fake.NewAnthropic(), fake.NewVertex()
	for _, u := range []*fake.Upstream{oa, an, vx} {
		t.Cleanup(u.Close)
	}
	const key = "sk-cloud-bootstrap-0123456789abcdefghijklmn"
	g := startGateway(t, gwOptions{BootstrapKey: key, Env: map[string]string{
		"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL,
		"GW_VERTEX_BASE_URL": vx.URL, "GW_VERTEX_PROJECT": cloudProject, "GOOGLE_APPLICATION_CREDENTIALS": vx.KeyFile(t.TempDir()),
	}})
	return &cloudEnv{chatEnv: &chatEnv{gateway: g, OA: oa, AN: an, BootKey: key}, VX: vx}
}

// vertexClaude is Claude on Vertex AI, as the example names it.
var vertexClaude = backend{name: "vertex", model: "gw-pinned-claude-sonnet-4-5@20250929", backing: "claude-sonnet-4-5@20250929", anthropic: true}

// TestVertexClaude: a client of each format (chat completions, responses,
// messages), whole and streamed, reaches Claude on Vertex AI: the call
// goes to the model's rawPredict (streamRawPredict) path of the project
// and location with an access token from the key file's token endpoint
// (asked once, then kept), the body carries Vertex's version and no
// model; the answer's text, tool calls, finish reason and usage reach the
// client in its format, and the receipt and the ledger are the Vertex
// model's list price of the usage.
func TestVertexClaude(t *testing.T) {
	t.Parallel()
	e := newCloudEnv(t)
	const account = "vertex"
	key := e.account(t, account, nil)
	b := vertexClaude
	var total pricing.Money
	for _, k := range clientKinds {
		for _, stream := range []bool{false, true} {
			for _, v := range matrixVariants {
				mode := map[bool]string{false: "whole", true: "stream"}[stream]
				t.Run(fmt.Sprintf("%s/%s/%s", k, mode, v.name), func(t *testing.T) {
					e.VX.Reset()
					script, calls := matrixScript(b, v)
					e.VX.Push(script)
					res, err := e.run(t, k, key, chatReq{model: b.model, stream: stream, tools: v.tools})
					if err != nil {
						t.Fatal(err)
					}
					checkAnswer(t, k, b, v, stream, res, calls)
					reqs := e.VX.Requests()
					var calls2 []fake.Request
					for _, r := range reqs {
						if r.Path != "/token" {
							calls2 = append(calls2, r)
						}
					}
					if len(calls2) != 1 {
						t.Fatalf("the Vertex fake got %d calls, want 1", len(calls2))
					}
					verb := "rawPredict"
					if stream {
						verb = "streamRawPredict"
					}
					want := "/v1/projects/" + cloudProject + "/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:" + verb
					if got := calls2[0]; got.Path != want || !strings.HasPrefix(got.Header.Get("Authorization"), "Bearer ya29.fake-") ||
						got.JSON()["anthropic_version"] != "vertex-2023-10-16" || got.JSON()["model"] != nil {
						t.Errorf("Vertex call %s %s, Authorization %q, body %s", got.Method, got.Path, got.Header.Get("Authorization"), got.Body)
					}
					cost := listCost(t, b.backing, matrixUsage, false)
					id := res.header.Get("X-Gw-Request-Id")
					if stream {
						if res.streamCost != cost.String() {
							t.Errorf("stream cost %q, want %q", res.streamCost, cost)
						}
					} else if got := res.header.Get("X-Gw-Cost-Usd"); got != cost.String() {
						t.Errorf("X-Gw-Cost-Usd %q, want %q", got, cost)
					}
					e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: k.ledgerEndpoint(), Model: b.backing,
						Units: matrixUsage.Units(), Unit: "token", Cost: cost.String()})
					total += cost
				})
			}
		}
	}
	if n := e.VX.Tokens(); n != 1 {
		t.Errorf("%d access tokens asked for, want 1 kept for every call", n)
	}
	if spend, _ := e.accountMoney(t, account); spend != total {
		t.Errorf("spend %s, want the receipts' sum %s", spend, total)
	}
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
		t.Errorf("the other upstreams got %d calls", n)
	}
}

// Without the cloud's credentials its provider is left out, with its
// models: they are not listed and a call names an unknown model.
func TestCloudLeftOutWithoutCredentials(t *testing.T) {
	t.Parallel()
	g, _, _, key := chatGateway(t)
	ids := modelIDs(t, g.do(t, http.MethodGet, "/v1/models", "", bearer(key)...))
	for _, id := range ids {
		if strings.Contains(id, "claude-sonnet-4-5@") || strings.Contains(id, "gemini") || strings.Contains(id, "nova") {
			t.Errorf("model %s listed without its cloud's credentials", id)
		}
	}
	g.waitLog(t, func(log string) bool {
		return strings.Count(log, `"msg":"provider left out: its credentials are not set"`) >= 3
	}, "the three cloud providers left out")
}
