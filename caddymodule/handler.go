package caddymodule

import (
	"bytes"
	"errors"
	"maps"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gw/caddy-gw/routes"
)

func init() {
	register(routes.All, "gw")
	for _, f := range routes.Families {
		register(f, familyDirective(f))
	}
}

// familyDirective is the module name and Caddyfile directive of the
// handler serving family f alone.
func familyDirective(f routes.Family) string { return "gw_" + string(f) }

// register registers the handler of family f as the module
// http.handlers.<name> with the Caddyfile directive <name>, sorted before
// reverse_proxy (and so before file_server) when it is not in a route.
func register(f routes.Family, name string) {
	caddy.RegisterModule(Handler{family: f, name: name})
	httpcaddyfile.RegisterHandlerDirective(name, func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		handler := &Handler{family: f, name: name}
		return handler, handler.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder(name, httpcaddyfile.Before, "reverse_proxy")
}

// Handler serves the gateway's routes on a site. As http.handlers.gw (the
// `gw` directive) it mounts every route of every family; as
// http.handlers.gw_<family> (`gw_chat`, `gw_embeddings`, `gw_models`,
// `gw_usage`, `gw_audio`, `gw_images`, `gw_search`, `gw_fetch`,
// `gw_decide`, `gw_mcp`, `gw_mcp_tools`, `gw_mcp_gateway`) it serves that family's paths
// alone, wherever it is placed, so an operator can put Caddy's matchers
// and handlers (basic_auth, forward_auth, header, a rate limiter) in front
// of one family or serve only some of them. Every one of them serves from
// the one `gw` app, configured in the global options, so it takes no
// options itself.
//
// Any path the handler does not serve goes to the next handler. The `gw`
// handler answers a path under the gateway's own prefixes that is not a
// route (/v1/..., /images/..., /audio/...) with the gateway's JSON 404,
// but only when the next handler answers 404 or nothing, so a file_server
// beside the gateway still serves /images/logo.png.
//
// A call's facts are set on the request's replacer, for the access log,
// log_append, a deferred header and the handlers after this one: the
// request id, account and key id as soon as the key is checked, the rest
// once the call ends:
//
//	{http.gw.request_id}     the request id (X-Gw-Request-Id)
//	{http.gw.account}        the account of a call with a key
//	{http.gw.key_id}         the id of its key
//	{http.gw.alias}          the alias a billed call asked for
//	{http.gw.model}          the backing model that served it
//	{http.gw.cost_usd}       what it was charged
//	{http.gw.shortfall_usd}  what the provider billed past what the account could pay
//	{http.gw.input_tokens}   input tokens of a call billed by the token
//	{http.gw.output_tokens}  its output tokens
//
// The access log carries the same facts as gw_<name> fields.
type Handler struct {
	family routes.Family
	name   string
	app    *App
	hosts  *siteHosts
}

// CaddyModule returns the Caddy module information.
func (h Handler) CaddyModule() caddy.ModuleInfo {
	f, name := h.family, h.name
	return caddy.ModuleInfo{ID: caddy.ModuleID("http.handlers." + name), New: func() caddy.Module { return &Handler{family: f, name: name} }}
}

// Provision finds the gw app (loading it with its defaults when the
// config has no gw app). The app's store is reached only when serving,
// after the app has started.
func (h *Handler) Provision(ctx caddy.Context) error {
	app, err := ctx.App("gw")
	if err != nil {
		return err
	}
	h.app = app.(*App)
	h.hosts = new(siteHosts)
	return nil
}

// ServeHTTP serves the handler's paths and hands the rest on. The gw app
// may start after the http app (Caddy starts apps in no fixed order), so a
// request waits until it has.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	rt, served := h.serve(w, r)
	switch {
	case served:
		return nil
	case rt == nil && routes.OwnPath(r.URL.Path):
		http.Error(w, "the gateway is not running", http.StatusServiceUnavailable)
		return nil
	case rt == nil || h.family != routes.All || !routes.OwnPath(r.URL.Path):
		return next.ServeHTTP(w, r)
	}
	return serveOrNotFound(w, r, next, func() { rt.ServeNotFound(w, h.hosts.withSiteHosts(r)) })
}

// serve serves r when it is a route of the handler's family, counted
// among the config's requests in flight (the next handler's are not, so a
// long proxied stream beside the gateway never holds a reload's
// clean-up), and returns the routes (nil when the gateway is not
// running).
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (*routes.Router, bool) {
	h.app.inflight.enter()
	defer h.app.inflight.leave()
	rt := h.app.serving(r.Context())
	if rt == nil {
		return nil, false
	}
	return rt, rt.ServeHTTP(w, h.hosts.withSiteHosts(r), h.family)
}

// serveOrNotFound hands an own path that is not a route to next, and
// answers the gateway's JSON 404 instead of what next answers when next
// answers 404 (written or returned as an error) or writes nothing at all.
// Any other answer of next goes out as next writes it.
func serveOrNotFound(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, notFound func()) error {
	header := w.Header().Clone()
	rec := caddyhttp.NewResponseRecorder(w, new(bytes.Buffer), func(status int, _ http.Header) bool {
		return status == http.StatusNotFound
	})
	err := next.ServeHTTP(rec, r)
	var herr caddyhttp.HandlerError
	switch {
	case err != nil && !(errors.As(err, &herr) && herr.StatusCode == http.StatusNotFound && rec.Status() == 0):
		return err
	case rec.Status() != 0 && !rec.Buffered():
		return nil // next answered
	}
	// next answered 404 or nothing: drop what it set and answer in JSON.
	clear(w.Header())
	maps.Copy(w.Header(), header)
	notFound()
	return nil
}

// UnmarshalCaddyfile reads the handler's directive, which takes no
// arguments (besides a matcher) and no block:
//
//	gw
//	gw_chat [<matcher>]
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("%s takes no options here; configure the gateway in the global gw option", h.name)
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
