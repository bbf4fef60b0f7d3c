package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// RoutingName is the routing server's name.
const RoutingName = "gw-routing"

// Tool names of the routing server.
const (
	ToolRoute   = "flux_route"
	ToolExplain = "flux_explain"
	ToolModels  = "flux_models"
)

// Tiers flux_route and flux_models take.
var (
	routeTiers  = map[string]string{"fast": catalog.AliasFast, "standard": catalog.AliasStandard, "reasoning": catalog.AliasReasoning, "auto": catalog.AliasAuto}
	modelsTiers = []string{"fast", "standard", "reasoning", "pinned", "all"}
)

// Invoker serves a gateway route in-process (routes.Router.Invoke).
type Invoker interface {
	Invoke(r *http.Request) (*pipeline.Recorded, *gwerr.Error)
}

// Routing is the routing server at /mcp.
type Routing struct {
	Sessions  Sessions
	Invoker   Invoker
	Decisions lanes.DecisionStore
	// AllowedHosts are the origins besides loopback names that browsers
	// may call the server from (mcp_allowed_hosts).
	AllowedHosts []string
}

var routingTools = []Tool{
	{Name: ToolRoute, Description: "Answer a prompt (or messages) through the gateway's router: tier fast, standard, reasoning or auto (default), or a model. Returns the answer and a decision_id.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"},"messages":{"type":"array","items":{"type":"object"}},"tier":{"type":"string","enum":["fast","standard","reasoning","auto"]},"model":{"type":"string"},"max_tokens":{"type":"integer","minimum":1},"temperature":{"type":"number"}}}`)},
	{Name: ToolExplain, Description: "Explain a flux_route decision: the model that answered, the tier, the cost and the latency.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"decision_id":{"type":"string"}},"required":["decision_id"]}`)},
	{Name: ToolModels, Description: "List the models this key can route to, by tier: fast, standard, reasoning, pinned or all (default).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tier":{"type":"string","enum":["fast","standard","reasoning","pinned","all"]}}}`)},
}

// Serve serves /mcp behind the pipeline (the key is checked; GET is 405).
func (s *Routing) Serve(c *pipeline.Call) error {
	w, r := c.W, c.R
	if !CheckOrigin(w, r, s.AllowedHosts) {
		return nil
	}
	if r.Method == http.MethodDelete {
		id := r.Header.Get(HeaderSession)
		if id == "" {
			Reply(w, nil, nil, Errf(http.StatusBadRequest, gwerr.RPCNoSession, "Mcp-Session-Id header is missing"), false)
			return nil
		}
		if _, ok, _ := s.session(c, id); !ok {
			Reply(w, nil, nil, Errf(http.StatusNotFound, gwerr.RPCSessionExpired, "session expired or unknown; send initialize again"), false)
			return nil
		}
		_ = s.Sessions.Delete(r.Context(), c.Key.ID, id)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	msg := ReadMessage(w, r)
	if msg == nil {
		return nil
	}
	if Stateless(r, msg) {
		s.serveStateless(c, msg)
		return nil
	}
	if msg.Method == "initialize" {
		var p InitParams
		_ = json.Unmarshal(msg.Params, &p)
		sess := Session{ID: NewSessionID(), KeyID: c.Key.ID, Version: Negotiate(p.ProtocolVersion)}
		if err := s.Sessions.Create(r.Context(), sess); err != nil {
			Reply(w, msg.ID, nil, Errf(http.StatusServiceUnavailable, gwerr.RPCInternal, "the session could not be made; retry"), false)
			return nil
		}
		w.Header().Set(HeaderSession, sess.ID)
		Reply(w, msg.ID, InitializeResult(sess.Version, RoutingName, routingInstructions), nil, false)
		return nil
	}
	id := r.Header.Get(HeaderSession)
	if id == "" {
		Reply(w, msg.ID, nil, Errf(http.StatusBadRequest, gwerr.RPCNoSession, "Mcp-Session-Id header is missing; send initialize first"), false)
		return nil
	}
	sess, ok, err := s.session(c, id)
	if err != nil {
		Reply(w, msg.ID, nil, Errf(http.StatusServiceUnavailable, gwerr.RPCInternal, "the session could not be read; retry"), false)
		return nil
	}
	if !ok {
		Reply(w, msg.ID, nil, Errf(http.StatusNotFound, gwerr.RPCSessionExpired, "session expired or unknown; send initialize again"), false)
		return nil
	}
	if v := r.Header.Get(HeaderProtocol); v != "" && v != sess.Version {
		Reply(w, msg.ID, nil, Errf(http.StatusBadRequest, gwerr.RPCHeaderMismatch, "Mcp-Protocol-Version does not match the session's "+sess.Version), false)
		return nil
	}
	if !msg.IsRequest() {
		Accepted(w) // notifications and responses
		return nil
	}
	switch msg.Method {
	case "ping":
		Reply(w, msg.ID, map[string]any{}, nil, false)
	case "tools/list":
		Reply(w, msg.ID, map[string]any{"tools": routingTools}, nil, false)
	case "tools/call":
		var p CallParams
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			Reply(w, msg.ID, nil, Errf(http.StatusOK, gwerr.RPCInvalidParams, "tools/call needs a tool name"), false)
			return nil
		}
		res, argErr, rpcErr := s.call(c, p)
		if rpcErr == nil {
			rpcErr = argErr
		}
		Reply(w, msg.ID, res, rpcErr, false)
	default:
		Reply(w, msg.ID, nil, Errf(http.StatusOK, gwerr.RPCMethodNotFound, "unknown method "+ShortText(msg.Method)), false)
	}
	return nil
}

// routingInstructions tell a client what the routing server is for.
const routingInstructions = "Route prompts through the gateway with flux_route; explain a decision with flux_explain."

// serveStateless serves a request of the stateless era: no session, the
// request's headers checked against its body, every result complete with
// the server's name (and the tool list with how long it may be reused).
func (s *Routing) serveStateless(c *pipeline.Call, msg *Message) {
	w := c.W
	if !msg.IsRequest() {
		Accepted(w)
		return
	}
	if err := CheckStateless(c.R, msg); err != nil {
		Reply(w, msg.ID, nil, err, false)
		return
	}
	if ServeStateless(w, msg, RoutingName, routingInstructions, false) {
		return
	}
	switch msg.Method {
	case "tools/list":
		Reply(w, msg.ID, StatelessResult(map[string]any{"tools": routingTools}, RoutingName, &Cache{TTLMs: StaticTTL, Scope: ScopePublic}), nil, false)
	case "tools/call":
		var p CallParams
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			Reply(w, msg.ID, nil, invalidParams("tools/call needs a tool name"), false)
			return
		}
		res, argErr, rpcErr := s.call(c, p)
		if rpcErr != nil {
			Reply(w, msg.ID, nil, rpcErr, false)
			return
		}
		if argErr != nil {
			res = argumentRefusal(p.Name, argErr)
		}
		Reply(w, msg.ID, StatelessResult(res, RoutingName, nil), nil, false)
	default:
		Reply(w, msg.ID, nil, UnknownMethod(msg.Method), false)
	}
}

// session finds the caller's key's live session id; an id the gateway
// cannot have made is not looked up.
func (s *Routing) session(c *pipeline.Call, id string) (Session, bool, error) {
	if !validSessionID(id) {
		return Session{}, false, nil
	}
	return s.Sessions.Get(c.R.Context(), c.Key.ID, id)
}

// validSessionID reports an id of NewSessionID's form: 48 lowercase hex
// digits.
func validSessionID(id string) bool {
	if len(id) != 48 {
		return false
	}
	for _, b := range []byte(id) {
		if (b < '0' || b > '9') && (b < 'a' || b > 'f') {
			return false
		}
	}
	return true
}

// shortTextMax is how many bytes of what a client sent an error message
// quotes.
const shortTextMax = 64

// ShortText is s cut to shortTextMax bytes (and an ellipsis), for an
// error message that quotes what a client sent.
func ShortText(s string) string {
	if len(s) > shortTextMax {
		return s[:shortTextMax] + "…"
	}
	return s
}

func invalidParams(msg string) *RPCError { return Errf(http.StatusOK, gwerr.RPCInvalidParams, msg) }

// call runs a routing tool. A call the server cannot make (no such tool,
// arguments that are not an object) is rpcErr; the tool's refusal of its
// arguments is argErr, which the sessions era sends as the same -32602
// and the stateless era as a tool result with isError (argumentRefusal).
func (s *Routing) call(c *pipeline.Call, p CallParams) (res any, argErr, rpcErr *RPCError) {
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	a := gjson.ParseBytes(args)
	if !jsonbody.Valid(args) || !a.IsObject() {
		return nil, nil, invalidParams("arguments must be an object")
	}
	switch p.Name {
	case ToolRoute:
		res, argErr = s.route(c, a)
	case ToolExplain:
		res, argErr = s.explain(c, a)
	case ToolModels:
		res, argErr = s.models(c, a)
	default:
		return nil, nil, invalidParams("unknown tool " + ShortText(p.Name))
	}
	return res, argErr, nil
}

// argumentRefusal is a tool's refusal of its arguments as the stateless
// era reports it, a tool result with isError the model can correct from:
// the tools server's error object for an invalid request.
func argumentRefusal(tool string, argErr *RPCError) ToolResult {
	return TextResult(gwerr.ToolObject(gwerr.New(gwerr.Invalid, "%s", argErr.Message), tool, ""), true)
}

// route runs a chat call through the gateway's own chat route, with the
// caller's key: routed, checked, billed and recorded exactly like one.
func (s *Routing) route(c *pipeline.Call, a gjson.Result) (any, *RPCError) {
	prompt, msgs := a.Get("prompt"), a.Get("messages")
	if prompt.Exists() == msgs.Exists() {
		return nil, invalidParams("give exactly one of prompt and messages")
	}
	req := map[string]any{}
	switch {
	case prompt.Exists():
		if prompt.Type != gjson.String || strings.TrimSpace(prompt.Str) == "" {
			return nil, invalidParams("prompt must be non-empty text")
		}
		req["messages"] = []any{map[string]any{"role": "user", "content": prompt.Str}}
	default:
		if !msgs.IsArray() || len(msgs.Array()) == 0 {
			return nil, invalidParams("messages must be a non-empty array")
		}
		req["messages"] = json.RawMessage(msgs.Raw)
	}
	model := catalog.AliasAuto
	if t := a.Get("tier"); t.Exists() {
		alias, ok := routeTiers[t.String()]
		if !ok || t.Type != gjson.String {
			return nil, invalidParams("tier must be fast, standard, reasoning or auto")
		}
		model = alias
	}
	if m := a.Get("model"); m.Exists() {
		if m.Type != gjson.String || m.Str == "" {
			return nil, invalidParams("model must be a model id")
		}
		model = m.Str
	}
	req["model"] = model
	if mt := a.Get("max_tokens"); mt.Exists() {
		if mt.Type != gjson.Number || mt.Num != float64(int64(mt.Num)) || mt.Num < 1 {
			return nil, invalidParams("max_tokens must be a positive whole number")
		}
		req["max_tokens"] = mt.Int()
	}
	if tp := a.Get("temperature"); tp.Exists() {
		if tp.Type != gjson.Number {
			return nil, invalidParams("temperature must be a number")
		}
		req["temperature"] = tp.Num
	}
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(c.R.Context(), http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	hr.Header.Set("Authorization", c.R.Header.Get("Authorization"))
	hr.Header.Set("Content-Type", "application/json")
	rec, refused := s.Invoker.Invoke(hr)
	if refused != nil {
		obj := map[string]any{"error": gwerr.Chat.Code(refused), "status": gwerr.Chat.Status(refused), "message": refused.Message}
		if refused.RetryAfter > 0 {
			obj["retry_after_seconds"] = refused.RetryAfter
		}
		return TextResult(obj, true), nil
	}
	out := rec.Body.Bytes()
	if rec.Status != http.StatusOK {
		return TextResult(map[string]any{"error": "chat_failed", "status": rec.Status, "message": gjson.GetBytes(out, "error.message").String()}, true), nil
	}
	return TextResult(map[string]any{
		"answer":      gjson.GetBytes(out, "choices.0.message.content").String(),
		"decision_id": rec.Header.Get(pipeline.HeaderRequestID),
		"model":       rec.Model(),
		"cost_usd":    rec.Cost().String(),
	}, false), nil
}

// explain answers for a decision of the caller's own account only.
func (s *Routing) explain(c *pipeline.Call, a gjson.Result) (any, *RPCError) {
	id := a.Get("decision_id").String()
	if id == "" {
		return nil, invalidParams("decision_id is required")
	}
	d, ok := s.Decisions.Get(id)
	if !ok || d.AccountID != c.Account.ID {
		return nil, invalidParams("unknown decision_id")
	}
	tier := d.Lane
	if tier == "" {
		tier = "pinned"
	}
	return TextResult(map[string]any{
		"decision_id": d.ID, "model": d.Chosen, "requested_model": d.Requested, "tier": tier, "escalated": d.Escalated,
		"cost_usd": d.Cost.String(), "latency_ms": d.Latency.Milliseconds(), "candidates": d.Candidates,
	}, false), nil
}

// models lists the chat models the key may route to, by tier.
func (s *Routing) models(c *pipeline.Call, a gjson.Result) (any, *RPCError) {
	tier := "all"
	if t := a.Get("tier"); t.Exists() {
		tier = t.String()
		valid := false
		for _, x := range modelsTiers {
			valid = valid || x == tier
		}
		if !valid || t.Type != gjson.String {
			return nil, invalidParams("tier must be fast, standard, reasoning, pinned or all")
		}
	}
	cat := c.Gateway.Catalog
	var out []map[string]any
	add := func(id, t string, m *catalog.Model) {
		if !catalog.Allowed(c.Key.Models, id) {
			return
		}
		row := map[string]any{"id": id, "tier": t}
		if m != nil {
			row["provider"] = m.Provider
			row["input_usd_per_m"] = m.InputPrice.String()
			row["output_usd_per_m"] = m.OutputPrice.String()
		}
		out = append(out, row)
	}
	if tier == "all" {
		add(catalog.AliasAuto, "auto", nil)
	}
	for _, lane := range catalog.Lanes {
		if tier == lane || tier == "all" {
			add(catalog.LaneAlias(lane), lane, nil)
		}
	}
	for _, m := range cat.Models {
		if tier == "pinned" || tier == "all" || tier == m.Lane {
			add(catalog.PinnedPrefix+m.ID, "pinned", m)
		}
	}
	if out == nil {
		out = []map[string]any{}
	}
	return TextResult(map[string]any{"tier": tier, "models": out}, false), nil
}
