// Package routes is the gateway's route table: every path the gateway
// serves, each with its Endpoint data and the family whose handler module
// serves it, and the few fixed answers it gives to mistaken paths.
package routes

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/handlers/audio"
	"github.com/caddy-gw/caddy-gw/handlers/chat"
	"github.com/caddy-gw/caddy-gw/handlers/decide"
	"github.com/caddy-gw/caddy-gw/handlers/embeddings"
	"github.com/caddy-gw/caddy-gw/handlers/fetch"
	"github.com/caddy-gw/caddy-gw/handlers/images"
	"github.com/caddy-gw/caddy-gw/handlers/models"
	"github.com/caddy-gw/caddy-gw/handlers/search"
	"github.com/caddy-gw/caddy-gw/handlers/usage"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/mcp"
	"github.com/caddy-gw/caddy-gw/mcp/gateway"
)

// DefaultAltPrefix is the messages-style path prefix.
const DefaultAltPrefix = "/alt"

// The gateway's paths, relative to the base address.
const (
	PathChat          = "/v1/chat/completions"
	PathResponses     = "/v1/responses"
	PathModels        = "/v1/models"
	PathEmbeddings    = "/v1/embeddings"
	PathMessages      = "/v1/messages" // under the alt prefix
	PathCountTokens   = "/v1/messages/count_tokens"
	PathTranscription = "/v1/audio/transcriptions"
	PathSpeech        = "/v1/audio/speech"
	PathVoices        = "/v1/audio/voices"
	PathImageGen      = "/v1/images/generations"
	PathImageEdit     = "/v1/images/edits"
	PathSearch        = "/v1/search"
	PathFetch         = "/v1/fetch"
	PathDecide        = "/v1/decide"
	PathSystemOne     = "/v1/systemone"
	PathUsage         = "/v1/usage"
	PathTools         = "/mcp-tools/"
	PathRouting       = "/mcp"
	// PathMCPGateway serves every upstream MCP server's tools; each server's
	// own are under it, at PathMCPGateway + <server> + "/".
	PathMCPGateway = gateway.Path
	// PathDoubleV1 is what a messages-style client given the /v1 base asks
	// for; it answers 404 naming the right base address.
	PathDoubleV1 = "/v1/v1/messages"
)

// DecideRequestIDPrefix starts decision mode's request ids, so a receipt
// tells a decision from a chat call.
const DecideRequestIDPrefix = "dec-"

// unprefixed lists the paths that also answer without /v1.
var unprefixed = []string{PathVoices, PathSpeech, PathTranscription, PathModels, PathSearch}

var (
	post = []string{http.MethodPost}
	get  = []string{http.MethodGet}
)

// Family names a group of routes that one handler module serves: the
// module http.handlers.gw_<family> and its Caddyfile directive gw_<family>.
type Family string

// The route families, each served by a handler module of its own.
const (
	Chat       Family = "chat"       // chat completions, responses, messages, count_tokens
	Embeddings Family = "embeddings" // /v1/embeddings
	Models     Family = "models"     // the model list
	Usage      Family = "usage"      // the account's usage figures
	Audio      Family = "audio"      // transcription, speech, the voice list
	Images     Family = "images"     // image generation and edits
	Search     Family = "search"     // web search
	Fetch      Family = "fetch"      // page reading
	Decide     Family = "decide"     // decision mode
	MCP        Family = "mcp"        // the routing MCP server at /mcp
	MCPTools   Family = "mcp_tools"  // the tools MCP server at /mcp-tools/
	// MCPGateway is the MCP gateway at /mcp-gateway/ and under it.
	MCPGateway Family = "mcp_gateway"
)

// Families lists every family, in the order the gw handler tries them.
var Families = []Family{Chat, Embeddings, Models, Usage, Audio, Images, Search, Fetch, Decide, MCP, MCPTools, MCPGateway}

// All serves every family (the gw handler).
const All Family = ""

// route is an endpoint and the family that serves it.
type route struct {
	ep     *pipeline.Endpoint
	family Family
}

// Router maps paths to endpoints and serves them through the pipeline.
type Router struct {
	gw        *pipeline.Gateway
	altPrefix string
	table     map[string]route
	// Fixed answers to mistaken paths, served through the pipeline too
	// (request id, metrics) but without a key: altOther and doubleV1 by
	// the chat family, toolsSlash by the tools server's.
	altOther, doubleV1, toolsSlash, gatewaySlash *pipeline.Endpoint
	// notFound and messagesNotFound answer the gateway's own paths that
	// are not routes, in the chat and the messages shape.
	notFound, messagesNotFound *pipeline.Endpoint
}

// Options are the configurable parts of the route table.
type Options struct {
	// AltPrefix is the messages-style prefix ("" means DefaultAltPrefix).
	AltPrefix string
	// ChatBudgets are rate budgets every chat call takes a unit of.
	ChatBudgets []limits.Budget
	// DecideBudgets are rate budgets every decision-mode call takes a unit of.
	DecideBudgets []limits.Budget
	// CountTokensBudgets are rate budgets every count_tokens call takes a
	// unit of (it is not billed, so it is bounded by calls).
	CountTokensBudgets []limits.Budget
	// Chat serves the chat endpoints; nil leaves them answering 501.
	Chat *chat.Handler
	// Embeddings serves the embeddings endpoint; nil leaves it answering
	// 501. Its calls take the chat budgets and are billed as chat.
	Embeddings *embeddings.Handler
	// Decide serves decision mode; nil leaves it answering 501.
	Decide *decide.Handler
	// MCPBudgets are rate budgets every request to either MCP server
	// takes a unit of.
	MCPBudgets []limits.Budget
	// MCPConcurrency bounds each account's requests to the MCP servers in
	// flight at once; nil: no bound.
	MCPConcurrency *limits.Bound
	// Routing serves the routing server at /mcp; nil leaves it answering
	// 501. Its calls take the chat budgets and the MCP budgets.
	Routing *mcp.Routing
	// Tools serves the tools server at /mcp-tools/; nil leaves it
	// answering 501.
	Tools *mcp.ToolsServer
	// MCPGateway serves the MCP gateway at /mcp-gateway/ and under it;
	// nil leaves it answering 501. Its calls take the MCP budgets.
	MCPGateway *gateway.Gateway
	// Search serves web search; nil leaves it answering 501.
	Search *search.Handler
	// Fetch serves page reading; nil leaves it answering 501.
	Fetch *fetch.Handler
	// Audio serves transcription, speech and the voice list; nil leaves
	// them answering 501.
	Audio *audio.Handler
	// Images serves image generation and edits; nil leaves them
	// answering 501.
	Images *images.Handler
}

// Billing kinds of the billed routes.
var (
	chatSpend    = money.Chat
	abilitySpend = money.Ability
)

// shared is the per-minute budget of transcription, speech and
// search (image calls and page reads do not count against it).
var shared = []limits.Budget{limits.Requests}

// New builds the route table for gw.
func New(gw *pipeline.Gateway, opt Options) *Router {
	altPrefix := opt.AltPrefix
	if altPrefix == "" {
		altPrefix = DefaultAltPrefix
	}
	altPrefix = "/" + strings.Trim(altPrefix, "/")
	chatRoute := func(h pipeline.Handler) *pipeline.Endpoint {
		// Chat-completions-style routes read the key only from
		// Authorization: Bearer (x-api-key is for the messages-style
		// endpoints, the model list and the abilities).
		return &pipeline.Endpoint{Name: "chat", Methods: post, Family: gwerr.Chat, Auth: pipeline.BearerOnly, Billing: &chatSpend, Budgets: opt.ChatBudgets, Handler: h}
	}
	messages := func(h pipeline.Handler) *pipeline.Endpoint {
		return &pipeline.Endpoint{Name: "messages", Methods: post, Family: gwerr.Messages, Billing: &chatSpend, Budgets: opt.ChatBudgets, Handler: h}
	}
	ability := func(name, ability string, f gwerr.Family, budgets []limits.Budget) *pipeline.Endpoint {
		return &pipeline.Endpoint{Name: name, Methods: post, Family: f, Ability: ability, Billing: &abilitySpend, Budgets: budgets}
	}
	decideEP := &pipeline.Endpoint{Name: "decide", Methods: post, Family: gwerr.Decide, Ability: store.AbilityDecide, Billing: &abilitySpend, Budgets: opt.DecideBudgets, RequestIDPrefix: DecideRequestIDPrefix}
	if opt.Decide != nil {
		decideEP.Handler = opt.Decide.Serve
	}
	routingEP := &pipeline.Endpoint{Name: "mcp_routing", Methods: []string{http.MethodPost, http.MethodDelete}, Family: gwerr.RPC,
		Auth: pipeline.BearerOnly, Budgets: append(slices.Clip(opt.ChatBudgets), opt.MCPBudgets...), Concurrency: opt.MCPConcurrency,
		Refuse: mcp.Refuse(gwerr.RPC)}
	if opt.Routing != nil {
		routingEP.Handler = opt.Routing.Serve
	}
	fetchEP := ability("fetch", store.AbilityFetch, gwerr.Fetch, nil)
	if opt.Fetch != nil {
		fetchEP.Handler = opt.Fetch.Serve
	}
	searchEP := ability("search", store.AbilitySearch, gwerr.Ability, shared)
	if opt.Search != nil {
		searchEP.Handler = opt.Search.Serve
	}
	transcriptionEP := ability("transcription", store.AbilityTranscription, gwerr.Ability, shared)
	speechEP := ability("speech", store.AbilitySpeech, gwerr.Ability, shared)
	voicesEP := &pipeline.Endpoint{Name: "voices", Methods: get, Family: gwerr.Voices, Auth: pipeline.BearerOnly}
	if a := opt.Audio; a != nil {
		transcriptionEP.Handler, speechEP.Handler, voicesEP.Handler = a.Transcribe, a.Speech, a.Voices
	}
	imageGenEP := ability("images", store.AbilityImages, gwerr.Images, nil)
	imageEditEP := ability("images", store.AbilityImages, gwerr.Images, nil)
	if im := opt.Images; im != nil {
		imageGenEP.Handler, imageEditEP.Handler = im.Generate, im.Edit
	}
	toolsEP := &pipeline.Endpoint{Name: "mcp_tools", Methods: post, Family: gwerr.Tools, Auth: pipeline.BearerOnly, AnswersRefusedKeys: true,
		Refuse: mcp.Refuse(gwerr.Tools)}
	toolsEP.Budgets, toolsEP.Concurrency = opt.MCPBudgets, opt.MCPConcurrency
	if opt.Tools != nil {
		toolsEP.Handler = opt.Tools.Serve
	}
	// The MCP gateway's calls are billed as abilities, each tools/call at
	// its tool's price; its lists and refusals are JSON-RPC.
	mcpGatewayEP := &pipeline.Endpoint{Name: "mcp_gateway", Methods: post, Family: gwerr.RPC, Auth: pipeline.BearerOnly,
		Ability: store.AbilityMCPGateway, Billing: &abilitySpend, Budgets: opt.MCPBudgets, Concurrency: opt.MCPConcurrency,
		Refuse: mcp.Refuse(gwerr.RPC)}
	if opt.MCPGateway != nil {
		mcpGatewayEP.Handler = opt.MCPGateway.Serve
	}
	// Embeddings take the key as Bearer or x-api-key, as the clients of
	// embedding models (retrieval libraries) send either.
	embeddingsEP := &pipeline.Endpoint{Name: "embeddings", Methods: post, Family: gwerr.Chat, Billing: &chatSpend, Budgets: opt.ChatBudgets}
	if opt.Embeddings != nil {
		embeddingsEP.Handler = opt.Embeddings.Serve
	}
	countTokens := &pipeline.Endpoint{Name: "messages", Methods: post, Family: gwerr.Messages, Budgets: opt.CountTokensBudgets}
	var chatCompletions, responses, msgs, count pipeline.Handler
	if h := opt.Chat; h != nil {
		chatCompletions, responses, msgs, count = h.ChatCompletions, h.Responses, h.Messages, h.CountTokens
	}
	countTokens.Handler = count
	families := map[Family]map[string]*pipeline.Endpoint{
		Chat: {
			PathChat:                    chatRoute(chatCompletions),
			PathResponses:               chatRoute(responses),
			altPrefix + PathMessages:    messages(msgs),
			altPrefix + PathCountTokens: countTokens,
		},
		Embeddings: {PathEmbeddings: embeddingsEP},
		Models:     {PathModels: {Name: "models", Methods: get, Family: gwerr.Chat, Handler: models.Handler}},
		Usage:      {PathUsage: {Name: "usage", Methods: get, Family: gwerr.Chat, Handler: usage.Handler}},
		Audio:      {PathTranscription: transcriptionEP, PathSpeech: speechEP, PathVoices: voicesEP},
		Images:     {PathImageGen: imageGenEP, PathImageEdit: imageEditEP},
		Search:     {PathSearch: searchEP},
		Fetch:      {PathFetch: fetchEP},
		Decide:     {PathDecide: decideEP, PathSystemOne: decideEP},
		MCP:        {PathRouting: routingEP},
		MCPTools:   {PathTools: toolsEP},
		MCPGateway: {PathMCPGateway: mcpGatewayEP},
	}
	t := make(map[string]route)
	for f, paths := range families {
		for p, ep := range paths {
			t[p] = route{ep, f}
		}
	}
	for _, p := range unprefixed {
		t[strings.TrimPrefix(p, "/v1")] = t[p]
	}
	fixed := func(name string, f gwerr.Family, h pipeline.Handler) *pipeline.Endpoint {
		return &pipeline.Endpoint{Name: name, Family: f, Public: true, Handler: h}
	}
	rt := &Router{gw: gw, altPrefix: altPrefix, table: t,
		altOther: fixed("messages", gwerr.Messages, func(c *pipeline.Call) error {
			return gwerr.New(gwerr.Forbidden, "the %s path serves only %s and %s", altPrefix, altPrefix+PathMessages, altPrefix+PathCountTokens)
		}),
		doubleV1: fixed("messages", gwerr.Messages, func(c *pipeline.Call) error {
			return gwerr.New(gwerr.NotFound, "no route %s: the messages-style base address is %s, not /v1", c.R.URL.Path, altPrefix)
		}),
		toolsSlash:   fixed("mcp_tools", gwerr.Tools, redirect(PathTools)),
		gatewaySlash: fixed("mcp_gateway", gwerr.RPC, redirect(PathMCPGateway)),
	}
	notFound := func(c *pipeline.Call) error { return gwerr.New(gwerr.NotFound, "%s", rt.notFoundMessage(c.R)) }
	rt.notFound = fixed("not_found", gwerr.Chat, notFound)
	rt.messagesNotFound = fixed("not_found", gwerr.Messages, notFound)
	return rt
}

// redirect answers a path given without its trailing slash with a
// redirect to target, the query kept.
func redirect(target string) pipeline.Handler {
	return func(c *pipeline.Call) error {
		to := target
		if c.R.URL.RawQuery != "" {
			to += "?" + c.R.URL.RawQuery
		}
		http.Redirect(c.W, c.R, to, http.StatusTemporaryRedirect)
		return nil
	}
}

// Endpoint returns the endpoint serving path, for tests and handlers.
func (rt *Router) Endpoint(path string) (*pipeline.Endpoint, bool) {
	r, ok := rt.table[path]
	return r.ep, ok
}

// Paths lists every routed path.
func (rt *Router) Paths() []string {
	out := make([]string, 0, len(rt.table))
	for p := range rt.table {
		out = append(out, p)
	}
	return out
}

// Invoke serves a routed path in-process (pipeline.Gateway.Invoke): the
// tools server calls the ability routes this way, with its caller's key.
func (rt *Router) Invoke(r *http.Request) (*pipeline.Recorded, *gwerr.Error) {
	route, ok := rt.table[r.URL.Path]
	if !ok {
		return &pipeline.Recorded{Status: http.StatusNotFound, Header: http.Header{}}, gwerr.New(gwerr.NotFound, "no route %s", r.URL.Path)
	}
	return rt.gw.Invoke(r, route.ep)
}

// ServeHTTP serves a route of family f (of every family when f is All),
// or one of the fixed answers to a mistaken path that f gives, and
// reports true; for any other path it reports false, so the caller can
// hand it on (see ServeNotFound).
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request, f Family) bool {
	p := r.URL.Path
	if route, ok := rt.table[p]; ok {
		if f != All && route.family != f {
			return false
		}
		rt.gw.Serve(w, r, route.ep)
		return true
	}
	var ep *pipeline.Endpoint
	switch {
	case p == strings.TrimSuffix(PathTools, "/") && (f == All || f == MCPTools):
		ep = rt.toolsSlash
	case p == strings.TrimSuffix(PathMCPGateway, "/") && (f == All || f == MCPGateway):
		ep = rt.gatewaySlash
	case strings.HasPrefix(p, PathMCPGateway) && (f == All || f == MCPGateway):
		// A server's own path: the gateway tells its servers apart.
		ep = rt.table[PathMCPGateway].ep
	case f != All && f != Chat:
		return false
	case p == PathDoubleV1 || strings.HasPrefix(p, PathDoubleV1+"/"):
		ep = rt.doubleV1
	case p == rt.altPrefix || strings.HasPrefix(p, rt.altPrefix+"/"):
		ep = rt.altOther
	default:
		return false
	}
	rt.gw.Serve(w, r, ep)
	return true
}

// ServeNotFound answers a path under the gateway's own prefixes that is
// not a route 404 in a JSON error shape an SDK reads (the messages shape
// for a messages path), naming the base address the client most likely
// meant, and reports true; for any other path it reports false. The
// caller asks it only when no other handler of the site serves the path.
func (rt *Router) ServeNotFound(w http.ResponseWriter, r *http.Request) bool {
	var ep *pipeline.Endpoint
	switch p := r.URL.Path; {
	case messagesPath(p):
		ep = rt.messagesNotFound
	case OwnPath(p):
		ep = rt.notFound
	default:
		return false
	}
	rt.gw.Serve(w, r, ep)
	return true
}

// ownPrefixes are the path prefixes the gateway answers besides its
// routes: a path under them that is not a route and that no other handler
// of the site serves answers 404 in a JSON error shape an SDK reads, never
// an empty answer.
var ownPrefixes = []string{"/v1", "/chat", "/completions", "/embeddings", "/responses", "/messages", "/mcp", "/audio", "/images"}

// OwnPath reports a path under one of the gateway's own prefixes (/v1,
// /chat, /audio, /images, /messages, /mcp and the rest of ownPrefixes).
func OwnPath(p string) bool {
	for _, prefix := range ownPrefixes {
		if p == prefix || strings.HasPrefix(p, prefix+"/") || strings.HasPrefix(p, prefix+"-") {
			return true
		}
	}
	return false
}

// messagesPath reports a messages-style path sent without its prefix.
func messagesPath(p string) bool {
	p = strings.TrimPrefix(p, "/v1")
	return p == "/messages" || strings.HasPrefix(p, "/messages/")
}

// notFoundMessage names the base address a client most likely meant.
func (rt *Router) notFoundMessage(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + r.Host
	p := r.URL.Path
	switch {
	case messagesPath(p):
		return fmt.Sprintf("no route %s: the messages-style base address is %s%s (the client appends /v1/messages)", p, base, rt.altPrefix)
	case strings.HasPrefix(p, "/v1/v1/") || p == "/v1/v1":
		return fmt.Sprintf("no route %s: /v1 is doubled; the base address is %s/v1", p, base)
	case !strings.HasPrefix(p, "/v1/") && rt.table["/v1"+p].ep != nil:
		return fmt.Sprintf("no route %s: the base address is %s/v1 (it is missing /v1)", p, base)
	}
	return fmt.Sprintf("no route %s on this gateway: chat-completions-style clients use %s/v1, messages-style clients %s%s", p, base, base, rt.altPrefix)
}
