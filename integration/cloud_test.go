package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// cloudProject is the Google Cloud project the Vertex tests name.
const cloudProject = "fake-project"

// cloudEnv is a chat gateway whose Caddyfile.example reaches the cloud
// fakes too: the Vertex AI fake (VX) with a key file it issued, and the
// Bedrock fake (BR) with the credentials it checks signatures with.
type cloudEnv struct {
	*chatEnv
	VX, BR, GM *fake.Upstream
}

func newCloudEnv(t *testing.T) *cloudEnv {
	t.Helper()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	clouds, env := newClouds(t)
	env["GW_OPENAI_BASE_URL"], env["GW_ANTHROPIC_BASE_URL"] = oa.URL, an.URL
	const key = "sk-cloud-bootstrap-0123456789abcdefghijklmn"
	g := startGateway(t, gwOptions{BootstrapKey: key, Env: env})
	return &cloudEnv{chatEnv: &chatEnv{gateway: g, OA: oa, AN: an, BootKey: key}, VX: clouds[0], BR: clouds[1], GM: clouds[2]}
}

// newClouds starts the Vertex AI, Bedrock and Gemini fakes (in that
// order) and returns them with the environment that points
// Caddyfile.example at them.
func newClouds(t *testing.T) ([]*fake.Upstream, map[string]string) {
	t.Helper()
	vx, br, gm := fake.NewVertex(), fake.NewBedrock(), fake.NewGemini()
	for _, u := range []*fake.Upstream{vx, br, gm} {
		t.Cleanup(u.Close)
	}
	return []*fake.Upstream{vx, br, gm}, map[string]string{
		"GW_VERTEX_BASE_URL": vx.URL, "GW_VERTEX_PROJECT": cloudProject, "GOOGLE_APPLICATION_CREDENTIALS": vx.KeyFile(t.TempDir()),
		"GW_GEMINI_BASE_URL": gm.URL, "GEMINI_API_KEY": "gemini-key",
		"GW_BEDROCK_BASE_URL": br.URL, "AWS_REGION": fake.BedrockRegion,
		"AWS_ACCESS_KEY_ID": fake.BedrockAccessKeyID, "AWS_SECRET_ACCESS_KEY": fake.BedrockSecretAccessKey,
	}
}

// cloudBackend is a model of a cloud's own API as the tests call it: the
// backend, its fake, and what a call to it must look like upstream.
type cloudBackend struct {
	backend
	fake func(e *cloudEnv) *fake.Upstream
	// path is where a call goes; check says what is wrong with it ("":
	// nothing).
	path  func(stream bool) string
	check func(r fake.Request) string
}

// cloudBackends are the cloud models of the example the tests reach.
var cloudBackends = []cloudBackend{
	{backend: vertexClaude, fake: func(e *cloudEnv) *fake.Upstream { return e.VX },
		path: func(stream bool) string {
			verb := map[bool]string{false: "rawPredict", true: "streamRawPredict"}[stream]
			return "/v1/projects/" + cloudProject + "/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:" + verb
		},
		check: func(r fake.Request) string {
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.fake-") || r.JSON()["anthropic_version"] != "vertex-2023-10-16" || r.JSON()["model"] != nil {
				return fmt.Sprintf("Authorization %q, body %s", r.Header.Get("Authorization"), r.Body)
			}
			return ""
		}},
	{backend: geminiFlash, fake: func(e *cloudEnv) *fake.Upstream { return e.GM },
		path: func(stream bool) string {
			return "/v1beta/models/gemini-2.5-flash:" + map[bool]string{false: "generateContent", true: "streamGenerateContent"}[stream]
		},
		check: func(r fake.Request) string {
			if r.Header.Get("x-goog-api-key") != "gemini-key" || r.JSON()["model"] != nil {
				return fmt.Sprintf("x-goog-api-key %q, body %s", r.Header.Get("x-goog-api-key"), r.Body)
			}
			return ""
		}},
	{backend: vertexGemini, fake: func(e *cloudEnv) *fake.Upstream { return e.VX },
		path: func(stream bool) string {
			verb := map[bool]string{false: "generateContent", true: "streamGenerateContent"}[stream]
			return "/v1/projects/" + cloudProject + "/locations/us-east5/publishers/google/models/gemini-2.5-flash-lite:" + verb
		},
		check: func(r fake.Request) string {
			if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.fake-") || r.JSON()["model"] != nil {
				return fmt.Sprintf("Authorization %q, body %s", r.Header.Get("Authorization"), r.Body)
			}
			return ""
		}},
	{backend: bedrockClaude, fake: func(e *cloudEnv) *fake.Upstream { return e.BR },
		path: func(stream bool) string {
			return "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/" + map[bool]string{false: "converse", true: "converse-stream"}[stream]
		},
		check: func(r fake.Request) string {
			body := r.JSON()
			if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+fake.BedrockAccessKeyID+"/") || body["model"] != nil || body["stream"] != nil {
				return fmt.Sprintf("Authorization %q, body %s", r.Header.Get("Authorization"), r.Body)
			}
			return ""
		}},
}

// vertexClaude and bedrockClaude are Claude on Vertex AI and on Bedrock,
// as the example names them (their fakes report usage as messages do:
// input without the cached tokens).
var (
	vertexClaude  = backend{name: "vertex", model: "gw-pinned-claude-sonnet-4-5@20250929", backing: "claude-sonnet-4-5@20250929", anthropic: true}
	geminiFlash   = backend{name: "gemini", model: "gw-pinned-gemini-2.5-flash", backing: "gemini-2.5-flash", gemini: true}
	vertexGemini  = backend{name: "vertex-gemini", model: "gw-pinned-gemini-2.5-flash-lite", backing: "gemini-2.5-flash-lite", gemini: true}
	bedrockClaude = backend{name: "bedrock", model: "gw-pinned-us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		backing: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", anthropic: true}
)

// TestCloudModels: a client of each format (chat completions, responses,
// messages), whole and streamed, reaches each cloud's model: Claude on
// Vertex AI (its rawPredict or streamRawPredict path of the project and
// location, an access token from the key file's token endpoint asked for
// once and kept, Vertex's version in the body and no model) and Claude on
// Bedrock (its converse or converse-stream path, signed with Signature
// Version 4, which the fake checks); the answer's text, tool calls,
// finish reason and usage reach the client in its format, and the
// receipt and the ledger are the model's list price of the usage.
func TestCloudModels(t *testing.T) {
	t.Parallel()
	e := newCloudEnv(t)
	for _, cb := range cloudBackends {
		account := "cloud-" + cb.name
		key := e.account(t, account, nil)
		b := cb.backend
		var total pricing.Money
		for _, k := range clientKinds {
			for _, stream := range []bool{false, true} {
				for _, v := range matrixVariants {
					mode := map[bool]string{false: "whole", true: "stream"}[stream]
					t.Run(fmt.Sprintf("%s/%s/%s/%s", cb.name, k, mode, v.name), func(t *testing.T) {
						up := cb.fake(e)
						up.Reset()
						script, calls := matrixScript(b, v)
						up.Push(script)
						res, err := e.run(t, k, key, chatReq{model: b.model, stream: stream, tools: v.tools})
						if err != nil {
							t.Fatal(err)
						}
						checkAnswer(t, k, b, v, stream, res, calls)
						var sent []fake.Request
						for _, r := range up.Requests() {
							if r.Path != "/token" {
								sent = append(sent, r)
							}
						}
						if len(sent) != 1 {
							t.Fatalf("the %s fake got %d calls, want 1", cb.name, len(sent))
						}
						if got := sent[0]; got.Path != cb.path(stream) {
							t.Errorf("call to %s, want %s", got.Path, cb.path(stream))
						} else if msg := cb.check(got); msg != "" {
							t.Errorf("call to %s: %s", got.Path, msg)
						}
						cost := listCost(t, b.backing, matrixUsage, false)
						if stream {
							if res.streamCost != cost.String() {
								t.Errorf("stream cost %q, want %q", res.streamCost, cost)
							}
						} else if got := res.header.Get("X-Gw-Cost-Usd"); got != cost.String() {
							t.Errorf("X-Gw-Cost-Usd %q, want %q", got, cost)
						}
						e.expectLedger(t, account, ledgerEntry{RequestID: res.header.Get("X-Gw-Request-Id"), Endpoint: k.ledgerEndpoint(),
							Model: b.backing, Units: matrixUsage.Units(), Unit: "token", Cost: cost.String()})
						total += cost
					})
				}
			}
		}
		if spend, _ := e.accountMoney(t, account); spend != total {
			t.Errorf("%s: spend %s, want the receipts' sum %s", cb.name, spend, total)
		}
	}
	if n := e.VX.Tokens(); n != 1 {
		t.Errorf("%d access tokens asked for, want 1 kept for every call", n)
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

// TestCloudCountTokens: count_tokens of each cloud model is the cloud's
// own count of the request made the API's: Gemini's countTokens (the
// Gemini API's and Vertex AI's), Vertex AI's count-tokens model for
// Claude, Bedrock's CountTokens.
func TestCloudCountTokens(t *testing.T) {
	t.Parallel()
	e := newCloudEnv(t)
	key := e.account(t, "counted", nil)
	body := func(model string) string {
		return `{"model":"` + model + `","system":"Answer in French.","messages":[{"role":"user","content":"How far is the moon from Paris, in kilometres?"}]}`
	}
	vertexBase := "/v1/projects/" + cloudProject + "/locations/us-east5/publishers/"
	for _, c := range []struct {
		cb    cloudBackend
		path  string
		count func(body []byte) int
	}{
		{cloudOf(t, "gemini"), "/v1beta/models/gemini-2.5-flash:countTokens", fake.GeminiCountTokens},
		{cloudOf(t, "vertex-gemini"), vertexBase + "google/models/gemini-2.5-flash-lite:countTokens", fake.GeminiCountTokens},
		{cloudOf(t, "vertex"), vertexBase + "anthropic/models/count-tokens:rawPredict", fake.CountTokens},
		{cloudOf(t, "bedrock"), "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens", func(b []byte) int {
			var req struct {
				Input struct {
					Converse map[string]any `json:"converse"`
				} `json:"input"`
			}
			if err := json.Unmarshal(b, &req); err != nil {
				t.Fatal(err)
			}
			return fake.BedrockCountTokens(req.Input.Converse)
		}},
	} {
		up := c.cb.fake(e)
		up.Reset()
		r := e.do(t, http.MethodPost, "/alt/v1/messages/count_tokens", body(c.cb.model), bearer(key)...)
		var sent []fake.Request
		for _, q := range up.Requests() {
			if q.Path != "/token" {
				sent = append(sent, q)
			}
		}
		if len(sent) != 1 || sent[0].Path != c.path {
			t.Fatalf("%s: the fake got %+v, want one count at %s", c.cb.name, sent, c.path)
		}
		if msg := c.cb.check(sent[0]); msg != "" && c.cb.name != "vertex" {
			t.Errorf("%s: the count call: %s", c.cb.name, msg)
		}
		want := c.count(sent[0].Body)
		if r.Status != http.StatusOK || r.JSON(t)["input_tokens"] != float64(want) {
			t.Errorf("%s: count_tokens %d %s, want input_tokens %d", c.cb.name, r.Status, r.Body, want)
		}
		if !strings.Contains(string(sent[0].Body), "Answer in French.") || !strings.Contains(string(sent[0].Body), "moon from Paris") {
			t.Errorf("%s: the count's body lacks the system prompt or the message: %s", c.cb.name, sent[0].Body)
		}
	}

	// A prompt with tools and a tool choice: Vertex AI's countTokens takes
	// the tools but no tool choice (toolConfig), which it would refuse.
	vg := cloudOf(t, "vertex-gemini")
	up := vg.fake(e)
	up.Reset()
	withTools := `{"model":"` + vg.model + `","tool_choice":{"type":"any"},"tools":[{"name":"weather","description":"The weather in a city.",` +
		`"input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	r := e.do(t, http.MethodPost, "/alt/v1/messages/count_tokens", withTools, bearer(key)...)
	sent := up.Requests()
	if r.Status != http.StatusOK || len(sent) == 0 || !strings.Contains(string(sent[len(sent)-1].Body), `"weather"`) ||
		strings.Contains(string(sent[len(sent)-1].Body), "toolConfig") {
		t.Errorf("vertex-gemini count with tools: %d %s; sent %+v", r.Status, r.Body, sent)
	}
}

// cloudOf is the cloud backend of that name.
func cloudOf(t *testing.T, name string) cloudBackend {
	for _, cb := range cloudBackends {
		if cb.name == name {
			return cb
		}
	}
	t.Fatalf("no cloud backend %s", name)
	return cloudBackend{}
}

// A Vertex AI key file its token endpoint refuses makes the provider's
// calls 503 (unavailable, in the caller's shape, saying no more), and
// the operator's log says why, without the file's key.
func TestCloudCredentialsRefused(t *testing.T) {
	t.Parallel()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	clouds, env := newClouds(t)
	// A key file of another key: the token endpoint refuses its grant.
	other := fake.NewVertex()
	t.Cleanup(other.Close)
	b, err := os.ReadFile(other.KeyFile(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	bogus := filepath.Join(t.TempDir(), "bogus.json")
	if err := os.WriteFile(bogus, []byte(strings.ReplaceAll(string(b), other.URL, clouds[0].URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	env["GOOGLE_APPLICATION_CREDENTIALS"] = bogus
	env["GW_OPENAI_BASE_URL"], env["GW_ANTHROPIC_BASE_URL"] = oa.URL, an.URL
	const key = "sk-cloud-refused-0123456789abcdefghijklmnop"
	g := startGateway(t, gwOptions{BootstrapKey: key, Env: env})
	r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"`+vertexClaude.model+`","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "vertex cannot be reached") {
		t.Fatalf("a call with refused credentials: %d %s", r.Status, r.Body)
	}
	g.waitLog(t, func(log string) bool {
		return strings.Contains(log, `"msg":"provider credentials failed; its calls answer 503"`) && strings.Contains(log, "HTTP 400")
	}, "why the credentials failed")
	if strings.Contains(g.log.String(), "PRIVATE KEY") {
		t.Error("the log holds the key file's private key")
	}
}

// TestCloudErrors: a cloud's error reaches the client in its own family's
// shape: a throttle is a 429 (chat completions' rate_limit_error shape,
// messages' rate_limit_error), a refusal of the operator's cloud account
// (Bedrock's ServiceQuotaExceededException) the gateway's 503, and a
// request the cloud finds wrong a 400; nothing is charged.
func TestCloudErrors(t *testing.T) {
	t.Parallel()
	e := newCloudEnv(t)
	const account = "cloud-errors"
	key := e.account(t, account, nil)
	for _, c := range []struct {
		cb     string
		script fake.Script
		status int
	}{
		{"gemini", fake.Script{Status: http.StatusTooManyRequests}, http.StatusTooManyRequests},
		{"bedrock", fake.Script{Status: http.StatusTooManyRequests, ErrorType: "ThrottlingException"}, http.StatusTooManyRequests},
		{"bedrock", fake.Script{Status: http.StatusBadRequest, ErrorType: "ServiceQuotaExceededException"}, http.StatusServiceUnavailable},
		{"vertex-gemini", fake.Script{Status: http.StatusBadRequest, ErrorType: "INVALID_ARGUMENT"}, http.StatusBadRequest},
	} {
		cb := cloudOf(t, c.cb)
		for _, path := range []string{"/v1/chat/completions", "/alt/v1/messages"} {
			up := cb.fake(e)
			up.Reset()
			up.Push(c.script)
			body := `{"model":"` + cb.model + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
			r := e.do(t, http.MethodPost, path, body, bearer(key)...)
			got := r.JSON(t)
			shaped := false
			if errObj, ok := got["error"].(map[string]any); ok {
				_, typed := errObj["type"].(string)
				_, said := errObj["message"].(string)
				shaped = typed && said && (path == "/v1/chat/completions" || got["type"] == "error")
			}
			if r.Status != c.status || !shaped {
				t.Errorf("%s %v on %s: %d %s, want %d in the family's error shape", c.cb, c.script.ErrorType, path, r.Status, r.Body, c.status)
			}
		}
	}
	if l := e.ledger(t, account); len(l) != 0 {
		t.Errorf("failed calls charged: %+v", l)
	}
}

// A cloud provider's deployments are tried as any provider's: with the
// Gemini API's first base URL refusing connections, a call is answered
// by the second, and the dead one is passed over afterwards.
func TestCloudDeployments(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	clouds, env := newClouds(t)
	gm := clouds[2]
	env["GW_OPENAI_BASE_URL"], env["GW_ANTHROPIC_BASE_URL"] = oa.URL, an.URL
	env["GW_GEMINI_BASE_URL"] = dead + "," + gm.URL
	const key = "sk-cloud-deploy-0123456789abcdefghijklmnop"
	g := startGateway(t, gwOptions{BootstrapKey: key, Env: env})
	for i := range 3 {
		r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"`+geminiFlash.model+`","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
		if r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	if n := len(gm.Requests()); n != 3 {
		t.Errorf("the live deployment served %d calls, want 3", n)
	}
}
