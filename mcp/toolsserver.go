package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
)

// KeepAlive is how often a slow tools/call's open event stream gets a
// comment line, so proxies and clients keep it open.
const KeepAlive = 15 * time.Second

// ToolSet is what a tools-only MCP server serves: the tools server and
// the MCP gateway are each one, behind the same transport (ServeTools).
type ToolSet interface {
	// Info names the server and says how it bills (initialize's
	// serverInfo and instructions).
	Info() (name, instructions string)
	// List is what tools/list shows the caller, or a refusal sent as a
	// JSON-RPC error.
	List(c *pipeline.Call) ([]Tool, *gwerr.Error)
	// Known reports whether name is a tool the server offers: a
	// stateless-era tools/call of any other is -32602.
	Known(c *pipeline.Call, name string) bool
	// Call runs tool name with args for the caller of c and returns its
	// result, a JSON object. Every failure is a result with isError, never
	// a protocol fault. ctx outlives the client's connection: a call that
	// began ends and is billed.
	Call(ctx context.Context, c *pipeline.Call, name string, args json.RawMessage) json.RawMessage
}

// ServeTools serves a tools-only MCP server for set behind the pipeline,
// in both protocol eras: tools/list and tools/call need no initialize and
// no session; every reply is a server-sent event. allowed are the browser
// origins allowed besides loopback names.
func ServeTools(c *pipeline.Call, set ToolSet, allowed []string) error {
	w, r := c.W, c.R
	if !CheckOrigin(w, r, allowed) {
		return nil
	}
	msg := ReadMessage(w, r)
	if msg == nil {
		return nil
	}
	if !msg.IsRequest() {
		Accepted(w)
		return nil
	}
	stateless := Stateless(r, msg)
	name, instructions := set.Info()
	if stateless {
		if err := CheckStateless(r, msg); err != nil {
			Reply(w, msg.ID, nil, err, true)
			return nil
		}
		if ServeStateless(w, msg, name, instructions, true) {
			return nil
		}
	}
	switch msg.Method {
	case "initialize", "ping":
		if stateless {
			break
		}
		var result any = map[string]any{}
		if msg.Method == "initialize" {
			var p InitParams
			_ = json.Unmarshal(msg.Params, &p)
			result = InitializeResult(Negotiate(p.ProtocolVersion), name, instructions)
		}
		Reply(w, msg.ID, result, nil, true)
		return nil
	case "tools/list":
		out, err := set.List(c)
		switch {
		case err != nil && stateless:
			Reply(w, msg.ID, nil, statelessRefusal(err), true)
		case err != nil:
			return err
		case stateless:
			Reply(w, msg.ID, StatelessResult(map[string]any{"tools": out}, name, toolsListCache), nil, true)
		default:
			Reply(w, msg.ID, map[string]any{"tools": out}, nil, true)
		}
		return nil
	case "tools/call":
		var p CallParams
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			Reply(w, msg.ID, nil, invalidParams("tools/call needs a tool name"), true)
			return nil
		}
		if stateless && !set.Known(c, p.Name) {
			Reply(w, msg.ID, nil, invalidParams("Unknown tool: "+ShortText(p.Name)), true)
			return nil
		}
		call(c, set, msg.ID, p, name, stateless)
		return nil
	}
	if stateless {
		Reply(w, msg.ID, nil, UnknownMethod(msg.Method), true)
	} else {
		Reply(w, msg.ID, nil, Errf(http.StatusOK, gwerr.RPCMethodNotFound, "unknown method "+ShortText(msg.Method)), true)
	}
	return nil
}

// toolsListCache is the reuse a tools-only server's list allows: none,
// since it follows each key's account, plan and allowlist, and only with
// the same key.
var toolsListCache = &Cache{TTLMs: 0, Scope: ScopePrivate}

// call runs a tool on an event stream kept alive while it runs; the result
// is the stream's one message (completed for the stateless era when
// stateless). The stream begins with the result, or with the first
// keep-alive of a call that takes longer. The call's request keeps its
// context past the client's going away, so what began is billed and the
// pipeline's call ends after it.
func call(c *pipeline.Call, set ToolSet, id json.RawMessage, p CallParams, server string, stateless bool) {
	w := c.W
	ctx := context.WithoutCancel(c.R.Context())
	c.R = c.R.WithContext(ctx)
	done := make(chan json.RawMessage, 1)
	go func() { done <- set.Call(ctx, c, p.Name, p.Arguments) }()
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-store"}
	rc := http.NewResponseController(w)
	tick := time.NewTicker(KeepAlive)
	defer tick.Stop()
	for {
		select {
		case result := <-done:
			if stateless {
				result = StatelessResult(result, server, nil)
			}
			msg := make([]byte, 0, len(result)+len(id)+32)
			msg = append(msg, `{"jsonrpc":"2.0","id":`...)
			msg = append(msg, id...)
			msg = append(msg, `,"result":`...)
			msg = append(msg, result...)
			msg = append(msg, '}')
			b := sse.Append(make([]byte, 0, len(msg)+32), sse.Event{Event: eventMessage, Data: msg})
			_, _ = w.Write(b)
			_ = rc.Flush()
			return
		case <-tick.C:
			_, _ = w.Write([]byte(": keep-alive\n\n"))
			_ = rc.Flush()
		}
	}
}

// ToolsServer is the tools server at /mcp-tools/ (docs/mcp.md), served by
// ServeTools. A refused key is answered by the tools, never as a protocol
// fault: initialize and ping work, tools/list shows what a new account is
// offered, and each tools/call is an auth_failed tool result.
type ToolsServer struct {
	Tools *tools.Server
	// AllowedHosts: as Routing.AllowedHosts.
	AllowedHosts []string
}

// Serve serves /mcp-tools/ behind the pipeline (GET and DELETE are 405).
func (s *ToolsServer) Serve(c *pipeline.Call) error {
	return ServeTools(c, toolsSet{s.Tools}, s.AllowedHosts)
}

// toolsInstructions tell a client how the tools server bills.
const toolsInstructions = "Every tool calls the gateway's API with your key and is billed as a direct call; call list_capabilities first."

// toolsSet is the tools server's tool set as a ToolSet.
type toolsSet struct{ *tools.Server }

func (s toolsSet) Info() (string, string) { return tools.ServerName, toolsInstructions }

func (s toolsSet) Known(_ *pipeline.Call, name string) bool { return s.Server.Known(name) }

func (s toolsSet) Call(ctx context.Context, c *pipeline.Call, name string, args json.RawMessage) json.RawMessage {
	res := s.Server.Call(ctx, c, name, args)
	b, _ := json.Marshal(ToolResult{Content: res.Content, StructuredContent: res.Structured, IsError: res.IsError})
	return b
}

// List is what tools/list shows the caller: its account's tools, what a
// new account is offered when its key was refused, or the refusal when
// the key could not be checked (a JSON-RPC error the client retries).
func (s toolsSet) List(c *pipeline.Call) ([]Tool, *gwerr.Error) {
	var listed []tools.Tool
	switch {
	case c.KeyRefusal == nil:
		listed = s.Server.List(c.R.Context(), c.Account)
	case c.KeyRefusal.Kind == gwerr.Unauthenticated:
		listed = s.Server.Offered()
	default:
		return nil, c.KeyRefusal
	}
	out := make([]Tool, 0, len(listed))
	for _, t := range listed {
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out, nil
}
