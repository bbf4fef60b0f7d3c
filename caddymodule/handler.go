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
	caddy.RegisterModule(Handler{})
	httpcaddyfile.RegisterHandlerDirective("gw", parseHandler)
	httpcaddyfile.RegisterDirectiveOrder("gw", httpcaddyfile.Before, "reverse_proxy")
}

// Handler mounts every route of the gateway (the chat, model, ability and
// MCP paths of the spec) on a site; any other path goes to the next
// handler. A path under the gateway's own prefixes that is not a route
// (/v1/..., /images/..., /audio/...) goes to the next handler too, and
// answers the gateway's JSON 404 only when that handler answers 404 or
// nothing, so a file_server beside the gateway still serves
// /images/logo.png. It is configured by the `gw` app, so it takes no
// options.
type Handler struct {
	app   *App
	hosts *siteHosts
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.gw", New: func() caddy.Module { return new(Handler) }}
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

// ServeHTTP serves the gateway's paths and hands the rest on. The gw app
// may start after the http app (Caddy starts apps in no fixed order), so a
// request waits until it has.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	h.app.inflight.enter()
	defer h.app.inflight.leave()
	rt := h.app.serving(r.Context())
	if rt == nil {
		http.Error(w, "the gateway is not running", http.StatusServiceUnavailable)
		return nil
	}
	hr := h.hosts.withSiteHosts(r)
	if rt.ServeHTTP(w, hr) {
		return nil
	}
	if !routes.OwnPath(r.URL.Path) {
		return next.ServeHTTP(w, r)
	}
	return serveOrNotFound(w, r, next, func() { rt.ServeNotFound(w, hr) })
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

// UnmarshalCaddyfile reads the `gw` directive, which takes no arguments.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Err("gw takes no options here; configure the gateway in the global gw option")
	}
	return nil
}

func parseHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var handler Handler
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return &handler, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
