package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
)

// KeepAlive is how often a slow tools/call's open event stream gets a
// comment line, so proxies and clients keep it open.
const KeepAlive = 15 * time.Second

// ToolsServer is the stateless tools server at /mcp-tools/ (docs/mcp.md):
// tools/list and tools/call need no initialize and no session;
// every reply is a server-sent event.
type ToolsServer struct {
	Tools *tools.Server
	// AllowedHosts: as Routing.AllowedHosts.
	AllowedHosts []string
}

// Serve serves /mcp-tools/ behind the pipeline (GET and DELETE are 405).
// A refused key is answered here, never as a protocol fault: initialize
// and ping work, tools/list shows what a new account is offered, and each
// tools/call is an auth_failed tool result.
func (s *ToolsServer) Serve(c *pipeline.Call) error {
	w, r := c.W, c.R
	if !CheckOrigin(w, r, s.AllowedHosts) {
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
	if Stateless(r, msg) {
		return s.serveStateless(c, msg)
	}
	switch msg.Method {
	case "initialize":
		var p InitParams
		_ = json.Unmarshal(msg.Params, &p)
		Reply(w, msg.ID, InitializeResult(Negotiate(p.ProtocolVersion), tools.ServerName, toolsInstructions), nil, true)
	case "ping":
		Reply(w, msg.ID, map[string]any{}, nil, true)
	case "tools/list":
		out, err := s.list(c)
		if err != nil {
			return err
		}
		Reply(w, msg.ID, map[string]any{"tools": out}, nil, true)
	case "tools/call":
		var p CallParams
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			Reply(w, msg.ID, nil, invalidParams("tools/call needs a tool name"), true)
			return nil
		}
		s.call(c, msg.ID, p, false)
	default:
		Reply(w, msg.ID, nil, Errf(http.StatusOK, gwerr.RPCMethodNotFound, "unknown method "+shortText(msg.Method)), true)
	}
	return nil
}

// toolsInstructions tell a client how the tools server bills.
const toolsInstructions = "Every tool calls the gateway's API with your key and is billed as a direct call; call list_capabilities first."

// list is what tools/list shows the caller: its account's tools, what a
// new account is offered when its key was refused, or the refusal when
// the key could not be checked (a JSON-RPC error the client retries).
func (s *ToolsServer) list(c *pipeline.Call) ([]Tool, *gwerr.Error) {
	var listed []tools.Tool
	switch {
	case c.KeyRefusal == nil:
		listed = s.Tools.List(c.R.Context(), c.Account)
	case c.KeyRefusal.Kind == gwerr.Unauthenticated:
		listed = s.Tools.Offered()
	default:
		return nil, c.KeyRefusal
	}
	out := make([]Tool, 0, len(listed))
	for _, t := range listed {
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out, nil
}

// toolsListCache is the reuse the tools server's list allows: none, since
// it follows each account's plan and the paid tools' states, and only
// with the same key.
var toolsListCache = &Cache{TTLMs: 0, Scope: ScopePrivate}

// serveStateless serves a request of the stateless era, its headers
// checked against its body: an unknown tool is -32602 there, and every
// result is complete with the server's name.
func (s *ToolsServer) serveStateless(c *pipeline.Call, msg *Message) error {
	w := c.W
	if err := CheckStateless(c.R, msg); err != nil {
		Reply(w, msg.ID, nil, err, true)
		return nil
	}
	if ServeStateless(w, msg, tools.ServerName, toolsInstructions, true) {
		return nil
	}
	switch msg.Method {
	case "tools/list":
		out, err := s.list(c)
		if err != nil {
			Reply(w, msg.ID, nil, statelessRefusal(err), true)
			return nil
		}
		Reply(w, msg.ID, StatelessResult(map[string]any{"tools": out}, tools.ServerName, toolsListCache), nil, true)
	case "tools/call":
		var p CallParams
		if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
			Reply(w, msg.ID, nil, invalidParams("tools/call needs a tool name"), true)
			return nil
		}
		if !s.Tools.Known(p.Name) {
			Reply(w, msg.ID, nil, invalidParams("Unknown tool: "+shortText(p.Name)), true)
			return nil
		}
		s.call(c, msg.ID, p, true)
	default:
		Reply(w, msg.ID, nil, UnknownMethod(msg.Method), true)
	}
	return nil
}

// call runs a tool on an event stream kept alive while it runs; the result
// is the stream's one message (completed for the stateless era when
// stateless).
func (s *ToolsServer) call(c *pipeline.Call, id json.RawMessage, p CallParams, stateless bool) {
	w := c.W
	done := make(chan tools.Result, 1)
	go func() { done <- s.Tools.Call(context.WithoutCancel(c.R.Context()), c, p.Name, p.Arguments) }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	tick := time.NewTicker(KeepAlive)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			var result any = ToolResult{Content: res.Content, StructuredContent: res.Structured, IsError: res.IsError}
			if stateless {
				result = StatelessResult(result, tools.ServerName, nil)
			}
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
			_, _ = w.Write([]byte("event: message\ndata: "))
			_, _ = w.Write(b)
			_, _ = w.Write([]byte("\n\n"))
			_ = rc.Flush()
			return
		case <-tick.C:
			_, _ = w.Write([]byte(": keep-alive\n\n"))
			_ = rc.Flush()
		}
	}
}
