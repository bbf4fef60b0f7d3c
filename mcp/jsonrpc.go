// Package mcp is the gateway's Model Context Protocol transport: JSON-RPC
// 2.0 over Streamable HTTP (protocol 2025-11-25, older versions
// negotiated), shared by the two servers: the routing server at /mcp
// (sessions, flux_route, flux_explain, flux_models) and the stateless tools
// server at /mcp-tools/ (package mcp/tools holds its tools). Both run
// behind the gateway's pipeline, which has checked the bearer key.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// Protocol versions, newest first: the server speaks LatestVersion and
// accepts the older published ones.
const LatestVersion = "2025-11-25"

// Versions are the protocol versions the servers negotiate.
var Versions = []string{LatestVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// Headers of the Streamable HTTP transport.
const (
	HeaderSession  = "Mcp-Session-Id"
	HeaderProtocol = "Mcp-Protocol-Version"
)

// MaxMessage bounds one JSON-RPC message.
const MaxMessage = 16 << 20

// Message is one JSON-RPC 2.0 message a client sends: a request (with an
// id), a notification (without) or a response.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// IsRequest reports a request (method and id); IsNotification a method
// without id; otherwise the message is a response.
func (m *Message) IsRequest() bool      { return m.Method != "" && len(m.ID) > 0 }
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// RPCError is a JSON-RPC error with the HTTP status it is sent with.
type RPCError struct {
	Status  int
	Code    int
	Message string
	// Data, when set, is the error's data member.
	Data any
}

func (e *RPCError) Error() string { return e.Message }

// Errf makes an RPCError.
func Errf(status, code int, msg string) *RPCError {
	return &RPCError{Status: status, Code: code, Message: msg}
}

// Parse reads one JSON-RPC message: -32700 when the body is not JSON (or
// repeats a key, or nests too deep), -32600 when it is not a JSON-RPC 2.0
// message (batches included: the 2025-06-18 revision removed them).
func Parse(body []byte) (*Message, *RPCError) {
	if err := jsonbody.Check(body); err != nil {
		return nil, Errf(http.StatusBadRequest, gwerr.RPCParseError, "parse error: the body is not valid JSON")
	}
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return nil, Errf(http.StatusBadRequest, gwerr.RPCInvalidRequest, "invalid request: one JSON-RPC 2.0 object is expected")
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil || m.JSONRPC != "2.0" {
		return nil, Errf(http.StatusBadRequest, gwerr.RPCInvalidRequest, "invalid request: jsonrpc must be \"2.0\"")
	}
	if len(m.ID) > 0 {
		switch m.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		default: // null, objects and arrays are not ids
			return nil, Errf(http.StatusBadRequest, gwerr.RPCInvalidRequest, "invalid request: id must be a string or a number")
		}
	}
	if m.Method == "" && len(m.Result) == 0 && len(m.Error) == 0 {
		return nil, Errf(http.StatusBadRequest, gwerr.RPCInvalidRequest, "invalid request: a method is required")
	}
	return &m, nil
}

// ReadMessage reads and parses the message of r, answering the refusal
// itself (and returning nil) when it cannot be read, is too large or is not
// JSON-RPC 2.0.
func ReadMessage(w http.ResponseWriter, r *http.Request) *Message {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxMessage+1))
	if err != nil || len(body) > MaxMessage {
		Reply(w, nil, nil, Errf(http.StatusBadRequest, gwerr.RPCInvalidRequest, "the message could not be read or is too large"), false)
		return nil
	}
	msg, perr := Parse(body)
	if perr != nil {
		Reply(w, nil, nil, perr, false)
		return nil
	}
	return msg
}

// CheckOrigin answers a request whose Host or Origin names a host the
// servers do not serve itself (403: -32001, or -31403 to a stateless-era
// client) and reports false (see OriginAllowed).
func CheckOrigin(w http.ResponseWriter, r *http.Request, allowed []string) bool {
	if OriginAllowed(r, allowed) {
		return true
	}
	code := gwerr.RPCHeaderMismatch
	if ModernHeader(r) {
		code = gwerr.StatelessRPCCode(http.StatusForbidden)
	}
	Reply(w, nil, nil, Errf(http.StatusForbidden, code, "the Host or Origin header names a host this server does not serve"), false)
	return false
}

// Negotiate answers a client's requested protocol version: the same when
// supported, else the latest.
func Negotiate(requested string) string {
	if slices.Contains(Versions, requested) {
		return requested
	}
	return LatestVersion
}

// OriginAllowed reports whether a request may reach the servers: its Host
// and its Origin (when it has one: browsers send it) each name a loopback
// host (localhost, 127.0.0.1, [::1], any port), a host the site serving
// the request is configured with (WithSiteHosts; any port, "*" standing
// for one label), or one of allowed (a host, or host:port). A page whose
// name was rebound to the gateway's address names itself in both, so it
// is refused: DNS rebinding protection.
func OriginAllowed(r *http.Request, allowed []string) bool {
	site := siteHosts(r.Context())
	if !nameAllowed(r.Host, site, allowed) {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	return nameAllowed(u.Host, site, allowed)
}

// nameAllowed reports whether hostport (host or host:port, IPv6 in
// brackets) names a loopback host, a site host or an allowed one.
func nameAllowed(hostport string, site, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.HasPrefix(host, "[") || strings.HasSuffix(host, "]") {
		if len(host) < 2 || host[0] != '[' || host[len(host)-1] != ']' {
			return false
		}
		host = host[1 : len(host)-1]
	}
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, pattern := range site {
		if hostMatches(pattern, host) {
			return true
		}
	}
	for _, a := range allowed {
		if strings.EqualFold(a, hostport) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// hostMatches matches host against a site's host pattern as Caddy's host
// matcher does: case aside, label by label, "*" standing for any one.
func hostMatches(pattern, host string) bool {
	pattern = strings.ToLower(pattern)
	if !strings.Contains(pattern, "*") {
		return pattern == host
	}
	p, h := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(p) != len(h) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != h[i] {
			return false
		}
	}
	return true
}

// siteHostsKey is the context key of the site's host names.
type siteHostsKey struct{}

// WithSiteHosts returns ctx carrying the host names the site serving a
// request is configured with, which OriginAllowed accepts besides loopback
// names and the allowed ones.
func WithSiteHosts(ctx context.Context, hosts []string) context.Context {
	return context.WithValue(ctx, siteHostsKey{}, hosts)
}

func siteHosts(ctx context.Context) []string {
	h, _ := ctx.Value(siteHostsKey{}).([]string)
	return h
}

// Reply writes the response to request id: result, or the error. With
// stream it is one server-sent event (data: the message), as the tools server
// answers; otherwise application/json.
func Reply(w http.ResponseWriter, id json.RawMessage, result any, rpcErr *RPCError, stream bool) {
	msg := map[string]any{"jsonrpc": "2.0", "id": rawOrNull(id)}
	status := http.StatusOK
	if rpcErr != nil {
		e := map[string]any{"code": rpcErr.Code, "message": rpcErr.Message}
		if rpcErr.Data != nil {
			e["data"] = rpcErr.Data
		}
		msg["error"] = e
		if rpcErr.Status != 0 {
			status = rpcErr.Status
		}
	} else {
		msg["result"] = result
	}
	b, _ := json.Marshal(msg)
	if stream && status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write(sse.Append(make([]byte, 0, len(b)+32), sse.Event{Event: eventMessage, Data: b}))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func rawOrNull(id json.RawMessage) any {
	if len(id) == 0 {
		return nil
	}
	return id
}

// eventMessage is the event type of the servers' answers on a stream.
const eventMessage = "message"

// Accepted answers a notification or a client's response: 202, no body.
func Accepted(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }

// Tool is a tool as tools/list shows it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolResult is a tools/call result.
type ToolResult struct {
	// Content is the content blocks, as JSON objects or values that
	// marshal to them (the SDK's content of an upstream's result).
	Content           any  `json:"content"`
	StructuredContent any  `json:"structuredContent,omitempty"`
	IsError           bool `json:"isError"`
	// Meta is the result's _meta (the MCP gateway's receipt).
	Meta map[string]any `json:"_meta,omitempty"`
}

// TextResult is a tool result whose content is obj as JSON text, also
// given as structured content.
func TextResult(obj any, isError bool) ToolResult {
	b, _ := json.Marshal(obj)
	return ToolResult{Content: []map[string]any{{"type": "text", "text": string(b)}}, StructuredContent: obj, IsError: isError}
}

// InitializeResult is the answer to initialize.
func InitializeResult(version, name, instructions string) map[string]any {
	out := map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": name, "version": "1.0.0"},
	}
	if instructions != "" {
		out["instructions"] = instructions
	}
	return out
}

// CallParams are tools/call's params.
type CallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// InitParams are initialize's params (what the servers read of them).
type InitParams struct {
	ProtocolVersion string `json:"protocolVersion"`
}
