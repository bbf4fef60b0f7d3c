// Package gateway is the MCP gateway (docs/mcp-gateway.md): the tools of
// the upstream MCP servers an operator declares, offered to keys through
// one MCP server at /mcp-gateway/ (each tool named <server>__<tool>) and
// one per server at /mcp-gateway/<server>/ (the server's own names), in
// both protocol eras. Each tools/call goes through the money gate at the
// tool's price and is settled when the server answered a result that is
// not an error; the gateway holds the servers' credentials and sessions.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/obs"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/mcp"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Path is where the gateway is served: every server's tools there, one
// server's at Path + <server> + "/".
const Path = "/mcp-gateway/"

// Names and limits of the gateway's tools.
const (
	// Separator joins a server's name and its tool's in the name the
	// gateway offers the tool under at Path: <server>__<tool>.
	Separator = "__"
	// MaxServerName is the longest server name, in characters of A-Z,
	// a-z, 0-9, '_', '-' and '.', without Separator.
	MaxServerName = 64
	// MaxToolName is the longest tool name the gateway offers, as the MCP
	// specification (2025-11-25) asks (tools.MaxToolName). A server's tool
	// named otherwise is left out, and at Path so is one whose
	// <server>__<tool> is longer.
	MaxToolName = tools.MaxToolName
	// UnitCall is the ledger unit of a tool call.
	UnitCall = "call"
	// ServerName is how the gateway names itself to its callers.
	ServerName = "gw-mcp-gateway"
	// maxMessage is how much of an upstream's error message a tool error
	// repeats.
	maxMessage = 200
)

// Tool error codes of the gateway (the error member of a tool error
// result), besides the money and rate refusals every billed call has.
const (
	// CodeNotAllowed: the key's allowlist (mcp_tools) lacks the tool.
	CodeNotAllowed = "not_allowed"
	// CodeUpstreamUnavailable: the server could not be reached or refused
	// the gateway's credentials.
	CodeUpstreamUnavailable = "upstream_unavailable"
	// CodeUpstreamError: the server answered the call with a protocol
	// error.
	CodeUpstreamError = "upstream_error"
	// CodeUpstreamTimeout: the call did not end within the server's
	// timeout.
	CodeUpstreamTimeout = "upstream_timeout"
	// CodeUnknownTool: the sessions era's answer to a tool no server
	// offers (the stateless era's is -32602).
	CodeUnknownTool = "unknown_tool"
)

// Outcomes of a tool call, the outcome label of gw_mcp_tool_calls_total.
const (
	OutcomeOK            = "ok"
	OutcomeToolError     = "tool_error"
	OutcomeRefused       = "refused"
	OutcomeUpstreamError = "upstream_error"
)

// Server is one upstream server as the gateway offers it.
type Server struct {
	// Name is the server's name: the prefix of its tools' names and its
	// path under Path.
	Name string
	// Upstream reaches it.
	Upstream *Upstream
	// Allow are globs (path.Match) over the server's own tool names: the
	// tools offered (empty: all). Deny are those never offered; they win.
	Allow, Deny []string
	// Price is the plan price of one successful call, ToolPrices of one
	// of the named tools instead.
	Price      pricing.Money
	ToolPrices map[string]pricing.Money
}

// offers reports whether the server offers its tool named tool: a name of
// the MCP rule, allowed and not denied.
func (s *Server) offers(tool string) bool {
	if !tools.ToolNameOK(tool) {
		return false
	}
	if matchAny(s.Deny, tool) {
		return false
	}
	return len(s.Allow) == 0 || matchAny(s.Allow, tool)
}

// price is the plan price of one call of tool.
func (s *Server) price(tool string) pricing.Money {
	if p, ok := s.ToolPrices[tool]; ok {
		return p
	}
	return s.Price
}

// matchAny reports whether any glob matches name.
func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// ServerNameOK reports whether name may name a server: 1 to
// MaxServerName characters of A-Z, a-z, 0-9, '_', '-' and '.', without
// Separator, and not ending in '_' (whose tools'
// names would read as another server's: "a_" + "__" + "x" is "a" +
// "__" + "_x").
func ServerNameOK(name string) bool {
	return name != "" && len(name) <= MaxServerName && tools.PlainName(name) && !strings.Contains(name, Separator) && !strings.HasSuffix(name, "_")
}

// Gateway serves Path.
type Gateway struct {
	// Servers are the upstream servers, in configuration order.
	Servers []*Server
	// AllowedHosts are the browser origins allowed besides loopback names.
	AllowedHosts []string
	// UpgradeURL is where premium_locked and payment_required point.
	UpgradeURL string
	Metrics    *pipeline.Metrics
	Logger     *zap.Logger
}

// Serve serves a request under Path behind the pipeline: every server at
// Path, one at Path + <server> + "/" (the trailing slash may be left
// out); any other path is 404.
func (g *Gateway) Serve(c *pipeline.Call) error {
	v := view{g: g}
	if rest := strings.Trim(strings.TrimPrefix(c.R.URL.Path, Path), "/"); rest != "" {
		v.only = g.server(rest)
		if v.only == nil {
			return gwerr.New(gwerr.NotFound, "no MCP server %q on this gateway", mcp.ShortText(rest))
		}
	}
	return mcp.ServeTools(c, v, g.AllowedHosts)
}

// server returns the server named name, or nil.
func (g *Gateway) server(name string) *Server {
	for _, s := range g.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// view is the gateway as one URL shows it: every server (only nil), with
// tools named <server>__<tool>, or one server with its own names.
type view struct {
	g    *Gateway
	only *Server
}

var _ mcp.ToolSet = view{}

// Info implements mcp.ToolSet.
func (v view) Info() (string, string) {
	if v.only != nil {
		return ServerName + "/" + v.only.Name, "The tools of the MCP server " + v.only.Name + " through the gateway. " + instructions
	}
	return ServerName, "The tools of the MCP servers this gateway offers, each named <server>__<tool>. " + instructions
}

// instructions say how the gateway bills.
const instructions = "Each call is billed at the price its tool's description ends with, when the tool answers a result that is not an error; failed calls cost nothing."

// servers are the servers the view shows.
func (v view) servers() []*Server {
	if v.only != nil {
		return []*Server{v.only}
	}
	return v.g.Servers
}

// name is the name the view offers server s's tool under.
func (v view) name(s *Server, tool string) string {
	if v.only != nil {
		return tool
	}
	return s.Name + Separator + tool
}

// resolve finds the server and the server's own tool name of a name the
// view offers; ok is false for one it cannot name.
func (v view) resolve(name string) (s *Server, tool string, ok bool) {
	if v.only != nil {
		return v.only, name, true
	}
	server, tool, found := strings.Cut(name, Separator)
	if !found {
		return nil, "", false
	}
	s = v.g.server(server)
	return s, tool, s != nil
}

// List implements mcp.ToolSet: the tools of the view's servers that they
// offer and the key may call, each description ending with the account's
// price. The servers are asked at once; one that cannot list its tools
// shows the last list it gave (none when it never did).
func (v view) List(c *pipeline.Call) ([]mcp.Tool, *gwerr.Error) {
	servers := v.servers()
	lists := make([][]*sdk.Tool, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { lists[i], _ = v.g.tools(c.R.Context(), s) })
	}
	wg.Wait()
	out := []mcp.Tool{}
	for i, s := range servers {
		for _, t := range lists[i] {
			name := v.name(s, t.Name)
			if !s.offers(t.Name) || !tools.ToolNameOK(name) || !c.Key.AllowsMCPTool(s.Name+Separator+t.Name) {
				continue
			}
			schema, _ := json.Marshal(t.InputSchema)
			out = append(out, mcp.Tool{Name: name, Description: describe(t.Description, v.g.cost(c, s, t.Name)), InputSchema: schema})
		}
	}
	return out, nil
}

// describe ends a tool's description with its price.
func describe(desc string, price pricing.Money) string {
	p := "Price: " + price.String() + " USD per successful call."
	if desc = strings.TrimSpace(desc); desc == "" {
		return p
	}
	return desc + "\n\n" + p
}

// cost is what one call of s's tool costs the call's account.
func (g *Gateway) cost(c *pipeline.Call, s *Server, tool string) pricing.Money {
	return pricing.Cost(c.Account.PAYG, pricing.Line{Units: 1, Rate: pricing.PerUnit(s.price(tool))})
}

// tools lists s's tools (the last list it gave, when it cannot list them
// now), admitting their names to the metrics' labels when the list was
// asked for now, and marking the server up or down.
func (g *Gateway) tools(ctx context.Context, s *Server) ([]*sdk.Tool, error) {
	tools, fresh, err := s.Upstream.Tools(ctx)
	g.Metrics.ServerUp(s.Name, err == nil)
	if err != nil {
		g.Logger.Warn("MCP server could not list its tools", zap.String("server", s.Name), zap.String("error", s.Upstream.Redact(err)))
		return tools, err
	}
	if fresh {
		labels := make([]string, 0, len(tools))
		for _, t := range tools {
			if s.offers(t.Name) {
				labels = append(labels, s.Name+"/"+t.Name)
			}
		}
		g.Metrics.Admit(s.Name, labels)
	}
	return tools, nil
}

// Known implements mcp.ToolSet: a tool the view's server offers, from its
// list.
func (v view) Known(c *pipeline.Call, name string) bool {
	s, tool, ok := v.resolve(name)
	return ok && v.g.listed(c.R.Context(), s, tool)
}

// listed reports whether s lists and offers tool. A server that cannot
// list its tools is taken at its word: the call will tell.
func (g *Gateway) listed(ctx context.Context, s *Server, tool string) bool {
	if !s.offers(tool) {
		return false
	}
	tools, err := g.tools(ctx, s)
	if err != nil {
		return true
	}
	for _, t := range tools {
		if t.Name == tool {
			return true
		}
	}
	return false
}

// Call implements mcp.ToolSet: the key's allowlist, the money gate at the
// tool's price, the upstream call, and the charge when its result is not
// an error. The result is the server's, its _meta carrying the request id
// and what was charged.
func (v view) Call(ctx context.Context, c *pipeline.Call, name string, args json.RawMessage) json.RawMessage {
	s, tool, ok := v.resolve(name)
	if !ok || !v.g.listed(ctx, s, tool) {
		return v.g.result(c, nil, tool, OutcomeRefused, toolError(CodeUnknownTool, false, "no tool "+mcp.ShortText(name)+" is offered here; tools/list names them"))
	}
	if a := bytes.TrimSpace(args); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return v.g.result(c, s, tool, OutcomeRefused, toolError("invalid_request", false, "arguments must be an object"))
	} else if string(a) == "null" {
		args = nil
	}
	full := s.Name + Separator + tool
	if !c.Key.AllowsMCPTool(full) {
		return v.g.result(c, s, tool, OutcomeRefused, toolError(CodeNotAllowed, false, "this key may not call "+full))
	}
	price := v.g.cost(c, s, tool)
	if err := c.Reserve(price); err != nil {
		return v.g.result(c, s, tool, OutcomeRefused, v.g.refusal(err))
	}
	start := time.Now()
	res, err := s.Upstream.Call(ctx, tool, args)
	obs.From(ctx).Waited(time.Since(start))
	v.g.Metrics.ServerUp(s.Name, !errors.Is(err, ErrUnavailable))
	if err != nil {
		return v.g.result(c, s, tool, OutcomeUpstreamError, v.g.upstreamFailure(s, tool, err))
	}
	outcome, charged := OutcomeToolError, pricing.Money(0)
	if !res.IsError {
		charged, err = c.Charge(pipeline.Bill{Units: 1, Unit: UnitCall, Model: s.Name + "/" + tool, Cost: price})
		if err != nil {
			return v.g.result(c, s, tool, OutcomeRefused, v.g.refusal(err))
		}
		outcome = OutcomeOK
	}
	v.g.Metrics.MCPToolCall(s.Name, tool, outcome)
	return receipt(res.Raw, c.RequestID, charged)
}

// AbilityName is the account ability the gateway's calls need, and the
// capability its tool errors name.
const AbilityName = store.AbilityMCPGateway

// refusal is the tool error of a call the money gate refused: the tools
// server's object, its error the refusal's own code (credit_exhausted,
// key_daily_cap, ...) when it has one.
func (g *Gateway) refusal(err error) map[string]any {
	e := gwerr.As(err)
	obj := gwerr.ToolObject(e, AbilityName, g.UpgradeURL)
	if e.Code != "" {
		obj["error"] = e.Code
	}
	return obj
}

// upstreamFailure is the tool error of a call the server failed, logged
// for the operator.
func (g *Gateway) upstreamFailure(s *Server, tool string, err error) map[string]any {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, ErrTimeout):
		return toolError(CodeUpstreamTimeout, true, fmt.Sprintf("%s did not answer within %s", s.Name, s.Upstream.Timeout()))
	case !errors.Is(err, ErrUnavailable) && errors.As(err, &rpcErr):
		return toolError(CodeUpstreamError, false, fmt.Sprintf("%s answered error %d: %s", s.Name, rpcErr.Code, cut(rpcErr.Message)))
	}
	g.Logger.Warn("MCP server unavailable", zap.String("server", s.Name), zap.String("tool", tool), zap.String("error", s.Upstream.Redact(err)))
	return toolError(CodeUpstreamUnavailable, true, s.Name+" could not be reached; retry later")
}

// result is a failed call's tool result: obj as text and structured
// content, with the receipt of a call that cost nothing; s is nil for a
// tool no server offers.
func (g *Gateway) result(c *pipeline.Call, s *Server, tool, outcome string, obj map[string]any) json.RawMessage {
	if s != nil {
		g.Metrics.MCPToolCall(s.Name, tool, outcome)
	}
	b, _ := json.Marshal(mcp.TextResult(obj, true))
	return receipt(b, c.RequestID, 0)
}

// Receipt members of a tool call result's _meta.
const (
	MetaRequestID = "gw/request_id"
	MetaCostUSD   = "gw/cost_usd"
)

// receipt puts the call's request id and what it was charged in the
// result's _meta, beside what the server put there.
func receipt(result []byte, requestID string, charged pricing.Money) json.RawMessage {
	result, _ = sjson.SetBytes(result, "_meta."+MetaRequestID, requestID)
	result, _ = sjson.SetBytes(result, "_meta."+MetaCostUSD, charged.String())
	return result
}

// toolError is a gateway tool error object.
func toolError(code string, retryable bool, message string) map[string]any {
	return map[string]any{"error": code, "capability": AbilityName, "retryable": retryable, "message": message}
}

// cut keeps an upstream's message short.
func cut(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage] + "…"
	}
	return s
}
