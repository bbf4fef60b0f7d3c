package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

// StatelessVersion is the protocol revision without sessions: no
// initialize, every request carries its protocol version and client in
// _meta, server/discover describes the server. The servers speak it beside
// Versions on the same URL, telling the two eras apart per request.
const StatelessVersion = "2026-07-28"

// SupportedVersions are every version the servers speak, newest first:
// what server/discover and an unsupported version's refusal list.
var SupportedVersions = append([]string{StatelessVersion}, Versions...)

// Headers a stateless-era POST carries besides Mcp-Protocol-Version:
// the method, and the tool, prompt or resource it names.
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// The _meta keys of the stateless era.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
)

// JSON-RPC codes of the stateless era's transport checks.
const (
	// CodeHeaderMismatch: a required header is missing or disagrees with
	// the body.
	CodeHeaderMismatch = -32020
	// CodeUnsupportedVersion: the request's protocol version is not one
	// the server speaks (its data lists them).
	CodeUnsupportedVersion = -32022
)

// Cache lifetimes of stateless-era results (ttlMs, cacheScope).
const (
	// StaticTTL is how long a result that changes only with the gateway's
	// configuration may be reused: server/discover, the routing server's
	// tool list, the empty prompt and resource lists.
	StaticTTL = 3_600_000
	// ScopePublic results are the same for every caller; ScopePrivate ones
	// may be reused only with the same key.
	ScopePublic  = "public"
	ScopePrivate = "private"
)

// Cache is the reuse a stateless-era result allows.
type Cache struct {
	TTLMs int64
	Scope string
}

// namedMethods are the methods whose Mcp-Name header names what the body
// names, and the params member it names it in.
var namedMethods = map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

// base64Prefix and base64Suffix wrap a header value that is not plain ASCII:
// =?base64?<the value's UTF-8, base64>?=.
const base64Prefix, base64Suffix = "=?base64?", "?="

// ModernHeader reports a request whose Mcp-Protocol-Version header names
// a version newer than the sessions era's (StatelessVersion, or one the
// servers do not know): a stateless-era client's. A refusal the pipeline
// makes before the body is read tells the eras apart by it.
func ModernHeader(r *http.Request) bool {
	v := r.Header.Get(HeaderProtocol)
	return v != "" && !slices.Contains(Versions, v)
}

// Stateless reports whether msg is of the stateless era: its _meta names
// a protocol version, or its Mcp-Protocol-Version header names a version
// newer than the sessions era's. That wins over the method: an initialize
// sent with a stateless _meta is an unknown method of the stateless era.
func Stateless(r *http.Request, msg *Message) bool {
	return meta(msg).Get(metaPath(MetaProtocolVersion)).Exists() || ModernHeader(r)
}

// meta is the request's params._meta.
func meta(msg *Message) gjson.Result {
	if len(msg.Params) == 0 {
		return gjson.Result{}
	}
	return gjson.GetBytes(msg.Params, "_meta")
}

// metaPath escapes a _meta key for gjson (its dots are not paths).
func metaPath(key string) string { return strings.ReplaceAll(key, ".", `\.`) }

// CheckStateless checks a stateless-era request before it is served, in
// the revision's order: the _meta members it requires (-32602), the
// protocol version header against _meta (-32020), the version
// (-32022, listing SupportedVersions), then the Mcp-Method and Mcp-Name
// headers against the body (-32020). Each refusal is HTTP 400.
func CheckStateless(r *http.Request, msg *Message) *RPCError {
	m := meta(msg)
	v := m.Get(metaPath(MetaProtocolVersion))
	if v.Type != gjson.String || !m.Get(metaPath(MetaClientCapabilities)).IsObject() {
		return Errf(http.StatusBadRequest, gwerr.RPCInvalidParams,
			"params._meta must carry "+MetaProtocolVersion+" (a string) and "+MetaClientCapabilities+" (an object)")
	}
	if h := r.Header.Get(HeaderProtocol); h != v.Str {
		return mismatch(HeaderProtocol, h, v.Str)
	}
	if v.Str != StatelessVersion {
		msg := "Unsupported protocol version"
		if slices.Contains(Versions, v.Str) {
			msg = "protocol version " + v.Str + " is served with sessions: send initialize, without the stateless _meta"
		}
		e := Errf(http.StatusBadRequest, CodeUnsupportedVersion, msg)
		e.Data = map[string]any{"supported": SupportedVersions, "requested": v.Str}
		return e
	}
	if h := r.Header.Get(HeaderMethod); h != msg.Method {
		return mismatch(HeaderMethod, h, msg.Method)
	}
	if member, ok := namedMethods[msg.Method]; ok {
		name := gjson.GetBytes(msg.Params, member).String()
		if h := headerValue(r.Header.Get(HeaderName)); h != name || h == "" {
			return mismatch(HeaderName, r.Header.Get(HeaderName), name)
		}
	}
	return nil
}

// mismatch is the refusal of a header missing or disagreeing with the
// body; both values are cut short, since both are the client's.
func mismatch(header, got, want string) *RPCError {
	if got == "" {
		return Errf(http.StatusBadRequest, CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header is missing; the body says '%s'", header, ShortText(want)))
	}
	return Errf(http.StatusBadRequest, CodeHeaderMismatch,
		fmt.Sprintf("Header mismatch: %s header value '%s' does not match body value '%s'", header, ShortText(got), ShortText(want)))
}

// headerValue decodes a header value sent in the base64 form; any other
// value is itself.
func headerValue(v string) string {
	if !strings.HasPrefix(v, base64Prefix) || !strings.HasSuffix(v, base64Suffix) || len(v) < len(base64Prefix)+len(base64Suffix) {
		return v
	}
	b, err := base64.StdEncoding.DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
	if err != nil {
		return v
	}
	return string(b)
}

// StatelessResult completes result for the stateless era: resultType
// "complete", the server's name and version in _meta, and, when cache is
// set, the reuse it allows (ttlMs, cacheScope).
func StatelessResult(result any, server string, cache *Cache) json.RawMessage {
	b, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(result); err != nil {
			b = nil
		}
	}
	if len(b) == 0 || b[0] != '{' {
		b = []byte(`{}`)
	}
	b, _ = sjson.SetBytes(b, "resultType", "complete")
	b, _ = sjson.SetBytes(b, "_meta."+metaPath(MetaServerInfo), serverInfo(server))
	if cache != nil {
		b, _ = sjson.SetBytes(b, "ttlMs", cache.TTLMs)
		b, _ = sjson.SetBytes(b, "cacheScope", cache.Scope)
	}
	return b
}

// serverInfo names a server and its version.
func serverInfo(name string) map[string]any {
	return map[string]any{"name": name, "version": ServerVersion}
}

// ServerVersion is the version both servers report.
const ServerVersion = "1.0.0"

// statelessCapabilities are what the servers declare to stateless-era
// clients: tools, and prompts and resources, which they answer with
// empty lists, so a client that asks finds none rather than an error.
var statelessCapabilities = map[string]any{
	"tools":     map[string]any{"listChanged": false},
	"prompts":   map[string]any{"listChanged": false},
	"resources": map[string]any{"listChanged": false, "subscribe": false},
}

// DiscoverResult is the answer to server/discover: the versions, the
// capabilities and the instructions.
func DiscoverResult(instructions string) map[string]any {
	out := map[string]any{"supportedVersions": SupportedVersions, "capabilities": statelessCapabilities}
	if instructions != "" {
		out["instructions"] = instructions
	}
	return out
}

// ServeStateless answers the stateless-era methods both servers share
// (server/discover, the empty prompt and resource lists, and reading a
// prompt or resource, none of which exist) and reports true; for any other
// method it reports false.
func ServeStateless(w http.ResponseWriter, msg *Message, server, instructions string, sse bool) bool {
	static := &Cache{TTLMs: StaticTTL, Scope: ScopePublic}
	var result any
	switch msg.Method {
	case "server/discover":
		result = DiscoverResult(instructions)
	case "prompts/list":
		result = map[string]any{"prompts": []any{}}
	case "resources/list":
		result = map[string]any{"resources": []any{}}
	case "resources/templates/list":
		result = map[string]any{"resourceTemplates": []any{}}
	case "prompts/get":
		Reply(w, msg.ID, nil, invalidParams("unknown prompt "+ShortText(gjson.GetBytes(msg.Params, "name").String())), sse)
		return true
	case "resources/read":
		Reply(w, msg.ID, nil, invalidParams("unknown resource "+ShortText(gjson.GetBytes(msg.Params, "uri").String())), sse)
		return true
	default:
		return false
	}
	Reply(w, msg.ID, StatelessResult(result, server, static), nil, sse)
	return true
}

// UnknownMethod is the stateless era's answer to a method it does not
// have (initialize, ping and the session era's others included): 404.
func UnknownMethod(method string) *RPCError {
	return Errf(http.StatusNotFound, gwerr.RPCMethodNotFound, "unknown method "+ShortText(method))
}

// statelessRefusal is e as a stateless-era JSON-RPC error, for a server
// that answers it with the request's id.
func statelessRefusal(e *gwerr.Error) *RPCError {
	status := gwerr.StatelessRPC.Status(e)
	return Errf(status, gwerr.StatelessRPCCode(status), e.Message)
}

// Refuse renders a refusal the pipeline made before the server read the
// request (a key refused, a budget spent): for a stateless-era client (by
// its Mcp-Protocol-Version header) in gwerr.StatelessRPC, since that era
// forbids the sessions era's codes; for any other client in family.
func Refuse(family gwerr.Family) func(w http.ResponseWriter, r *http.Request, e *gwerr.Error) {
	return func(w http.ResponseWriter, r *http.Request, e *gwerr.Error) {
		f := family
		if ModernHeader(r) {
			f = gwerr.StatelessRPC
		}
		gwerr.Render(w, f, e)
	}
}
