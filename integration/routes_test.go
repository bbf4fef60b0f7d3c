package integration

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/routes"
)

// family is a group of routes sharing one error shape, with the exact
// bodies its answers have.
type family struct {
	name string
	// unauth: no key, or a key not accepted (401).
	unauth string
	// notBuilt: a valid paid cleared key on a route whose feature is not
	// built yet (501).
	notBuilt string
	// wrongMethod: 405 (with an Allow header).
	wrongMethod string
	// idPrefix starts X-Gw-Request-Id ("" means req-).
	idPrefix string
	// noStore: errors carry Cache-Control: no-store.
	noStore bool
}

var (
	famChat = family{
		name:        "chat",
		unauth:      unauthChat,
		notBuilt:    `{"error":{"message":"<string>","type":"api_error","param":null,"code":"not_implemented"}}`,
		wrongMethod: `{"error":{"message":"<string>","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}`,
	}
	famMessages = family{
		name:        "messages",
		unauth:      `{"type":"error","error":{"type":"authentication_error","message":"<string>"}}`,
		notBuilt:    `{"type":"error","error":{"type":"api_error","message":"<string>","code":"not_implemented"}}`,
		wrongMethod: `{"type":"error","error":{"type":"invalid_request_error","message":"<string>"}}`,
	}
	famAbility = family{
		name:        "ability",
		unauth:      `{"error":{"message":"<string>","type":"authentication_error"}}`,
		notBuilt:    `{"error":{"message":"<string>","type":"api_error","code":"not_implemented"}}`,
		wrongMethod: `{"error":{"message":"<string>","type":"invalid_request_error"}}`,
	}
	famImages = family{
		name:        "images",
		unauth:      `{"error":{"message":"<string>","type":"permission_error","code":"permission_error"}}`,
		notBuilt:    famAbility.notBuilt,
		wrongMethod: famAbility.wrongMethod,
	}
	famDecide = family{
		name:        "decide",
		unauth:      `{"error":{"message":"<string>","type":"authentication_error","code":"invalid_api_key","param":null}}`,
		notBuilt:    `{"error":{"message":"<string>","type":"api_error","code":"not_implemented","param":null}}`,
		wrongMethod: `{"error":{"message":"<string>","type":"invalid_request_error","code":"method_not_allowed","param":null}}`,
		idPrefix:    "dec-",
	}
	famVoices = family{
		name:        "voices",
		unauth:      `{"error":{"message":"Unauthorized"}}`,
		notBuilt:    `{"error":{"message":"<string>"}}`,
		wrongMethod: `{"error":{"message":"<string>"}}`,
		noStore:     true,
	}
	famFetch = family{
		name:        "fetch",
		unauth:      `{"error":"unauthorized","message":"<string?>"}`,
		notBuilt:    `{"error":"not_implemented","message":"<string?>"}`,
		wrongMethod: `{"error":"method not allowed","message":"<string?>"}`,
	}
	famRPC = family{
		name:        "mcp",
		unauth:      `{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"<string>"}}`,
		notBuilt:    `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"<string>"}}`,
		wrongMethod: `{"jsonrpc":"2.0","id":null,"error":{"code":"<number>","message":"<string>"}}`,
	}
	// famGateway is the MCP gateway's: JSON-RPC as the MCP servers', an
	// ability's refusals besides.
	famGateway = family{
		name:        "mcp_gateway",
		unauth:      famRPC.unauth,
		notBuilt:    famRPC.notBuilt,
		wrongMethod: famRPC.wrongMethod,
	}
)

// route is one path of the route table.
type route struct {
	path   string
	method string // the method it serves
	fam    family
	// lists: a list (of models or voices: 200 for any valid key) rather
	// than a feature still to build (501).
	lists bool
	// allow is the Allow header of a 405 ("" means method).
	allow string
	// wrong is a method the route refuses with 405.
	wrong string
	// built is the 400 a built route gives the small body `{}` (a required
	// field missing); "" means the route is not built yet (501).
	built string
	// builtStatus is built's status (400 when 0).
	builtStatus int
	// events: the route answers any valid key with a server-sent event
	// carrying a JSON-RPC result (the tools server's tools/list).
	events bool
	// keyless: the route answers a refused key as it answers a valid one
	// (the tools server: refusals are tool results, never a 401).
	keyless bool
	// report: the route answers any valid key with a usage report (a list
	// and its total).
	report bool
}

// expectAnswer checks what a valid key gets on rt: a model list, an event
// with a JSON-RPC result, or the route's refusal of body().
func expectAnswer(t testing.TB, r response, rt route) {
	t.Helper()
	switch {
	case rt.events:
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(r.Body), `"result"`) {
			t.Errorf("%s: %d %s, want an event with a result", rt.path, r.Status, r.Body)
		}
	case rt.report:
		var rep struct {
			Object string            `json:"object"`
			Data   []json.RawMessage `json:"data"`
			Total  *struct {
				Requests int64  `json:"requests"`
				CostUSD  string `json:"cost_usd"`
			} `json:"total"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil || rep.Object != "list" || rep.Data == nil || rep.Total == nil {
			t.Errorf("%s: %d %s, want a usage report", rt.path, r.Status, r.Body)
		}
	case rt.lists:
		if ids := modelIDs(t, r); len(ids) == 0 {
			t.Errorf("empty model list")
		}
	default:
		status, want := rt.answer()
		expectFamilyError(t, r, status, want, rt.fam)
	}
}

// Answers of built chat routes to `{}`.
const (
	chatMissing       = `{"error":{"message":"<string>","type":"invalid_request_error","param":"messages","code":null}}`
	responsesMissing  = `{"error":{"message":"<string>","type":"invalid_request_error","param":"input","code":null}}`
	embeddingsMissing = responsesMissing
	messagesMissing   = `{"type":"error","error":{"type":"invalid_request_error","message":"<string>"}}`
	searchMissing     = `{"error":{"message":"<string>","type":"invalid_request_error","param":"query"}}`
	// Transcription reads multipart (a JSON body has no file); speech
	// wants its input.
	transcriptionMissing = `{"error":{"message":"<string>","type":"invalid_request_error","param":"file"}}`
	speechMissing        = `{"error":{"message":"<string>","type":"invalid_request_error","param":"input"}}`
	decideMissing        = `{"error":{"message":"<string>","type":"invalid_request_error","code":"model_not_supported","param":"model"}}`
	// The routing server answers tools/list without a session -32004.
	routingNoSession = `{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"<string>"}}`
)

// answer is what a valid paid cleared key gets with body(): the built
// route's 400, or 501 in the family's shape.
func (rt route) answer() (int, string) {
	if rt.built != "" && rt.builtStatus != 0 {
		return rt.builtStatus, rt.built
	}
	if rt.built != "" {
		return http.StatusBadRequest, rt.built
	}
	return http.StatusNotImplemented, rt.fam.notBuilt
}

var routeTable = []route{
	{path: "/v1/chat/completions", method: "POST", fam: famChat, built: chatMissing},
	{path: "/v1/responses", method: "POST", fam: famChat, built: responsesMissing},
	{path: "/v1/embeddings", method: "POST", fam: famChat, built: embeddingsMissing},
	{path: "/v1/models", method: "GET", fam: famChat, lists: true},
	{path: "/models", method: "GET", fam: famChat, lists: true},
	{path: "/v1/usage", method: "GET", fam: famChat, report: true},
	{path: "/alt/v1/messages", method: "POST", fam: famMessages, built: messagesMissing},
	{path: "/alt/v1/messages/count_tokens", method: "POST", fam: famMessages, built: messagesMissing},
	{path: "/v1/audio/transcriptions", method: "POST", fam: famAbility, built: transcriptionMissing},
	{path: "/audio/transcriptions", method: "POST", fam: famAbility, built: transcriptionMissing},
	{path: "/v1/audio/speech", method: "POST", fam: famAbility, built: speechMissing},
	{path: "/audio/speech", method: "POST", fam: famAbility, built: speechMissing},
	{path: "/v1/audio/voices", method: "GET", fam: famVoices, lists: true},
	{path: "/audio/voices", method: "GET", fam: famVoices, lists: true},
	{path: "/v1/images/generations", method: "POST", fam: famImages, built: `{"error":{"message":"<string>","type":"invalid_request_error","param":"prompt"}}`},
	{path: "/v1/images/edits", method: "POST", fam: famImages, built: `{"error":{"message":"<string>","type":"invalid_request_error","param":"image"}}`},
	{path: "/v1/search", method: "POST", fam: famAbility, built: searchMissing},
	{path: "/search", method: "POST", fam: famAbility, built: searchMissing},
	{path: "/v1/fetch", method: "POST", fam: famFetch, built: `{"error":"url required"}`},
	{path: "/v1/decide", method: "POST", fam: famDecide, built: decideMissing, builtStatus: http.StatusUnprocessableEntity},
	{path: "/v1/systemone", method: "POST", fam: famDecide, built: decideMissing, builtStatus: http.StatusUnprocessableEntity},
	{path: "/mcp-tools/", method: "POST", fam: famRPC, events: true, keyless: true},
	// GET on the routing server answers 405 (it takes POST and DELETE).
	{path: "/mcp", method: "POST", fam: famRPC, allow: "POST, DELETE", wrong: "GET", built: routingNoSession},
	// Caddyfile.example names no MCP server unless GW_MCP_SERVERS does: an
	// empty list.
	{path: "/mcp-gateway/", method: "POST", fam: famGateway, events: true},
}

// body returns a small request body for a route's method.
func (rt route) body() string {
	if rt.method == "GET" {
		return ""
	}
	if rt.fam.name == "mcp" || rt.fam.name == "mcp_gateway" {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	}
	return `{}`
}

// TestRouteTableComplete: the table above covers exactly the gateway's
// route table, so a new route cannot go untested.
func TestRouteTableComplete(t *testing.T) {
	t.Parallel()
	got := routes.New(nil, routes.Options{}).Paths()
	var want []string
	for _, rt := range routeTable {
		want = append(want, rt.path)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !sameSet(got, want) {
		t.Errorf("routes.go serves %v\nthe integration table covers %v", got, want)
	}
}

// expectFamilyError is expectError plus the family's extra headers.
func expectFamilyError(t testing.TB, r response, status int, want string, fam family) {
	t.Helper()
	expectError(t, r, status, want, fam.idPrefix)
	if fam.noStore {
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control %q, want no-store", cc)
		}
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-routes-test-0123456789"
	g := startGateway(t, gwOptions{BootstrapKey: boot})

	for _, rt := range routeTable {
		t.Run(rt.path, func(t *testing.T) {
			t.Parallel()
			// (1) no key, and a key nobody issued: 401 in the family shape
			// (the tools server answers them as it answers a valid key).
			r1 := g.do(t, rt.method, rt.path, rt.body())
			r := g.do(t, rt.method, rt.path, rt.body(), bearer("sk-not-a-key-of-this-gateway")...)
			for _, r := range []response{r1, r} {
				if rt.keyless {
					expectAnswer(t, r, rt)
				} else {
					expectFamilyError(t, r, http.StatusUnauthorized, rt.fam.unauth, rt.fam)
				}
			}

			// (2) a valid paid cleared key: the route's answer.
			r2 := g.do(t, rt.method, rt.path, rt.body(), bearer(boot)...)
			expectAnswer(t, r2, rt)
			expectRequestID(t, r2, rt.fam.idPrefix)
			if id1, id2 := r1.Header.Get("X-Gw-Request-Id"), r2.Header.Get("X-Gw-Request-Id"); id1 == id2 {
				t.Errorf("two requests share the request id %q", id1)
			}

			// (3) a wrong method: 405 with Allow, before any key check.
			wrong := rt.wrong
			if wrong == "" {
				wrong = "GET"
				if rt.method == "GET" {
					wrong = "POST"
				}
			}
			allow := rt.allow
			if allow == "" {
				allow = rt.method
			}
			r3 := g.do(t, wrong, rt.path, "")
			expectFamilyError(t, r3, http.StatusMethodNotAllowed, rt.fam.wrongMethod, rt.fam)
			if got := r3.Header.Get("Allow"); got != allow {
				t.Errorf("%s: Allow %q, want %q", wrong, got, allow)
			}
		})
	}

	t.Run("bearer only", func(t *testing.T) {
		t.Parallel()
		// The voice list, both MCP servers and the chat-completions-style
		// chat routes read only Authorization: Bearer (the tools server's
		// answers to a key it does not read: TestMCPToolsAuthFailed).
		for _, c := range []struct {
			path, method, body string
			fam                family
		}{
			{"/v1/chat/completions", "POST", `{}`, famChat},
			{"/v1/responses", "POST", `{}`, famChat},
			{"/v1/audio/voices", "GET", "", famVoices},
			{"/audio/voices", "GET", "", famVoices},
			{"/mcp", "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, famRPC},
		} {
			r := g.do(t, c.method, c.path, c.body, apiKey(boot)...)
			expectFamilyError(t, r, http.StatusUnauthorized, c.fam.unauth, c.fam)
			r = g.do(t, c.method, c.path, c.body, "Authorization", "Basic "+boot)
			expectFamilyError(t, r, http.StatusUnauthorized, c.fam.unauth, c.fam)
		}
		// Where x-api-key is read, it is enough: embeddings read it too.
		expectFamilyError(t, g.do(t, "POST", "/v1/embeddings", `{}`, apiKey(boot)...), http.StatusBadRequest, embeddingsMissing, famChat)
		for _, rt := range routeTable {
			if rt.fam.name == "voices" || rt.fam.name == "mcp" || rt.fam.name == "mcp_gateway" || rt.fam.name == "chat" && !rt.lists {
				continue
			}
			r := g.do(t, rt.method, rt.path, rt.body(), apiKey(boot)...)
			if rt.lists {
				if r.Status != http.StatusOK {
					t.Errorf("%s with x-api-key: %d %s", rt.path, r.Status, r.Body)
				}
				continue
			}
			status, want := rt.answer()
			expectFamilyError(t, r, status, want, rt.fam)
		}
	})

	t.Run("plan refusals", func(t *testing.T) {
		t.Parallel()
		const premiumLocked = `{"error":{"message":"<string>","type":"insufficient_quota","code":"premium_locked"}}`
		const upgrade = `{"error":"upgrade_required","message":"<string?>"}`
		const paidPlan = `{"error":{"message":"<string>","type":"permission_error","code":"paid_plan_required","param":null}}`
		free := g.newAccountKey(t, map[string]any{"id": "free", "plan": "free"})
		uncleared := g.newAccountKey(t, map[string]any{"id": "uncleared", "plan": "paid", "cleared": false})
		for _, key := range []string{free, uncleared} {
			for _, rt := range routeTable {
				r := g.do(t, rt.method, rt.path, rt.body(), bearer(key)...)
				switch rt.fam.name {
				case "ability", "images":
					expectFamilyError(t, r, http.StatusPaymentRequired, premiumLocked, rt.fam)
				case "fetch":
					expectFamilyError(t, r, http.StatusPaymentRequired, upgrade, rt.fam)
				case "decide":
					expectFamilyError(t, r, http.StatusForbidden, paidPlan, rt.fam)
				case "mcp_gateway":
					expectFamilyError(t, r, http.StatusPaymentRequired, famRPC.notBuilt, rt.fam)
				default:
					// Chat, messages, the voice list and MCP take any valid key.
					expectAnswer(t, r, rt)
				}
				if t.Failed() {
					t.Fatalf("%s %s with key of account %s", rt.method, rt.path, map[string]string{free: "free", uncleared: "uncleared"}[key])
				}
			}
		}
	})

	t.Run("abilities switched off", func(t *testing.T) {
		t.Parallel()
		const abilityOff = `{"error":{"message":"<string>","type":"not_found_error"}}`
		noSearch := g.newAccountKey(t, map[string]any{"id": "no-search", "plan": "paid", "cleared": true,
			"abilities": []string{"transcription", "speech", "images", "fetch", "decide", "apps"}})
		for _, path := range []string{"/v1/search", "/search"} {
			expectFamilyError(t, g.do(t, "POST", path, `{"query":"x"}`, bearer(noSearch)...), http.StatusNotFound, abilityOff, famAbility)
		}
		expectFamilyError(t, g.do(t, "POST", "/v1/fetch", `{}`, bearer(noSearch)...), http.StatusBadRequest, `{"error":"url required"}`, famFetch)

		// The ability check comes before the plan check.
		freeNoSearch := g.newAccountKey(t, map[string]any{"id": "free-no-search", "plan": "free", "abilities": []string{"fetch"}})
		expectFamilyError(t, g.do(t, "POST", "/v1/search", `{"query":"x"}`, bearer(freeNoSearch)...), http.StatusNotFound, abilityOff, famAbility)

		// Nothing switched on: every ability answers 404 in its shape; the
		// voice list works whether or not speech is on.
		none := g.newAccountKey(t, map[string]any{"id": "nothing", "plan": "paid", "cleared": true, "abilities": []string{}})
		for _, rt := range routeTable {
			r := g.do(t, rt.method, rt.path, rt.body(), bearer(none)...)
			switch rt.fam.name {
			case "ability", "images":
				expectFamilyError(t, r, http.StatusNotFound, abilityOff, rt.fam)
			case "fetch":
				expectFamilyError(t, r, http.StatusNotFound, `{"error":"not found","message":"<string?>"}`, rt.fam)
			case "decide":
				expectFamilyError(t, r, http.StatusNotFound, `{"error":{"message":"<string>","type":"not_found_error","code":"not_found","param":null}}`, rt.fam)
			case "mcp_gateway":
				expectFamilyError(t, r, http.StatusNotFound, `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"<string>"}}`, rt.fam)
			default:
				expectAnswer(t, r, rt)
			}
			if t.Failed() {
				t.Fatalf("%s %s with a key of an account with no abilities", rt.method, rt.path)
			}
		}
	})

	t.Run("fixed answers", func(t *testing.T) {
		t.Parallel()
		const altForbidden = `{"type":"error","error":{"type":"permission_error","message":"<string>"}}`
		for _, c := range []struct{ method, path string }{
			{"GET", "/alt/v1/models"},
			{"POST", "/alt/v1/complete"},
			{"POST", "/alt/v1/messages/batches"},
		} {
			for _, h := range [][]string{nil, apiKey(boot)} {
				r := g.do(t, c.method, c.path, "", h...)
				if r.Status != http.StatusForbidden {
					t.Errorf("%s %s: status %d, want 403", c.method, c.path, r.Status)
				}
				matchJSON(t, r.Body, altForbidden)
			}
		}
		r := g.do(t, "POST", "/v1/v1/messages", `{}`, apiKey(boot)...)
		if r.Status != http.StatusNotFound {
			t.Errorf("POST /v1/v1/messages: status %d, want 404", r.Status)
		}
		matchJSON(t, r.Body, `{"type":"error","error":{"type":"not_found_error","message":"<string>"}}`)

		for path, loc := range map[string]string{"/mcp-tools": "/mcp-tools/", "/mcp-tools?a=b": "/mcp-tools/?a=b"} {
			r := g.do(t, "POST", path, `{}`, bearer(boot)...)
			if r.Status != http.StatusTemporaryRedirect || r.Header.Get("Location") != loc {
				t.Errorf("POST %s: %d Location %q, want 307 to %s", path, r.Status, r.Header.Get("Location"), loc)
			}
		}
	})

	t.Run("fixed answers carry a request id", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ method, path string }{
			{"GET", "/alt/v1/models"},
			{"POST", "/alt/v1/complete"},
			{"POST", "/v1/v1/messages"},
		} {
			expectRequestID(t, g.do(t, c.method, c.path, "", apiKey(boot)...), "req-")
		}
	})

	t.Run("paths that are not the gateway's", func(t *testing.T) {
		t.Parallel()
		// Caddyfile.example answers them 404 after the gateway passed
		// them on: no request id of the gateway's.
		for _, path := range []string{"/fetch", "/", "/index.html"} {
			for _, method := range []string{"GET", "POST"} {
				r := g.do(t, method, path, "", bearer(boot)...)
				if r.Status != http.StatusNotFound || len(r.Body) == 0 {
					t.Errorf("%s %s: %d %q, want the example's 404", method, path, r.Status, r.Body)
				}
				if id := r.Header.Get("X-Gw-Request-Id"); id != "" {
					t.Errorf("%s %s: X-Gw-Request-Id %q on a path that is not the gateway's", method, path, id)
				}
			}
		}
		// Paths under the gateway's own prefixes are the gateway's 404s.
		for _, path := range []string{"/chat", "/v1/unknown", "/v1/messages", "/v1/fetch/"} {
			for _, method := range []string{"GET", "POST"} {
				r := g.do(t, method, path, "", bearer(boot)...)
				if r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `"not_found_error"`) {
					t.Errorf("%s %s: %d %q, want the gateway's 404", method, path, r.Status, r.Body)
				}
				expectRequestID(t, r, "req-")
			}
		}
	})
}
