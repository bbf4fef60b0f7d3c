package caddymodule

import (
	"net/http"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gw/caddy-gw/mcp"
)

// siteHosts are the host names a Caddy server's routes match (its sites'
// addresses and host matchers, in subroutes too), found once per server:
// the names the MCP servers accept in Host and Origin besides loopback
// names and mcp_allowed_hosts. A site that names no host adds none.
type siteHosts struct {
	once  sync.Once
	hosts []string
}

// of returns the host names of the server serving r.
func (s *siteHosts) of(r *http.Request) []string {
	s.once.Do(func() {
		if srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
			s.hosts = routeHosts(srv.Routes, nil)
		}
	})
	return s.hosts
}

// routeHosts appends the hosts routes match to out.
func routeHosts(routes caddyhttp.RouteList, out []string) []string {
	for _, rt := range routes {
		for _, set := range rt.MatcherSets {
			for _, m := range set {
				switch h := m.(type) {
				case *caddyhttp.MatchHost:
					out = append(out, *h...)
				case caddyhttp.MatchHost:
					out = append(out, h...)
				}
			}
		}
		for _, h := range rt.Handlers {
			if sub, ok := h.(*caddyhttp.Subroute); ok {
				out = routeHosts(sub.Routes, out)
			}
		}
	}
	return out
}

// withSiteHosts hands the MCP servers the host names of the site serving
// r (only requests under /mcp carry them).
func (s *siteHosts) withSiteHosts(r *http.Request) *http.Request {
	if !strings.HasPrefix(r.URL.Path, "/mcp") {
		return r
	}
	return r.WithContext(mcp.WithSiteHosts(r.Context(), s.of(r)))
}
