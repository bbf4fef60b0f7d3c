package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI is the admin.api.gw module: accounts and keys under /gw/ on
// Caddy's admin endpoint. Admin modules are rebuilt before
// the apps on every load and take no config, so each request is served by
// whichever gw app is running at that moment.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.gw", New: func() caddy.Module { return new(adminAPI) }}
}

// Routes mounts the API under /gw/.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/gw/", Handler: caddy.AdminHandlerFunc(serveAdmin)}}
}

func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	app := current.Load()
	if app == nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Message: "the gw app is not running"}
	}
	app.admin.ServeHTTP(w, r)
	return nil
}

// Interface guard
var _ caddy.AdminRouter = adminAPI{}
