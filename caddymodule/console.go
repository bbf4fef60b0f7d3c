package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gw/caddy-gw/console"
)

func init() {
	caddy.RegisterModule(Console{})
	httpcaddyfile.RegisterHandlerDirective("gw_console", parseConsole)
	// After basic_auth, so authentication in the same route comes first.
	httpcaddyfile.RegisterDirectiveOrder("gw_console", httpcaddyfile.After, "basic_auth")
}

// Console serves the operator console (accounts, keys, balance movements
// and usage) on a site, running the gw app's admin API in process.
type Console struct {
	// BehindAuth says an authentication handler comes before the console,
	// so clients other than loopback ones are served.
	BehindAuth bool `json:"behind_auth,omitempty"`

	app     *App
	hosts   *siteHosts
	console *console.Console
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.gw_console", New: func() caddy.Module { return new(Console) }}
}

// Provision finds the gw app and builds the console over its admin API.
func (h *Console) Provision(ctx caddy.Context) error {
	app, err := ctx.App("gw")
	if err != nil {
		return err
	}
	h.app = app.(*App)
	h.hosts = new(siteHosts)
	h.console = console.New(func() http.Handler { return h.app.admin })
	h.console.BehindAuth = h.BehindAuth
	h.console.Hosts = h.hosts.of
	return nil
}

// ServeHTTP serves the console once the gw app has started.
func (h *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	h.app.inflight.enter()
	defer h.app.inflight.leave()
	if h.app.serving(r.Context()) == nil {
		http.Error(w, "the gateway is not running", http.StatusServiceUnavailable)
		return nil
	}
	h.console.ServeHTTP(w, r)
	return nil
}

// UnmarshalCaddyfile reads `gw_console [{ behind_auth }]`.
func (h *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "behind_auth":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.BehindAuth = true
		default:
			return d.Errf("gw_console: unknown option %q (known: behind_auth)", d.Val())
		}
	}
	return nil
}

func parseConsole(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var c Console
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return &c, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddyfile.Unmarshaler       = (*Console)(nil)
)
