package caddymodule

import (
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The site hosts are every host matcher of the server's routes, in
// subroutes too; other matchers add nothing.
func TestRouteHosts(t *testing.T) {
	named := caddyhttp.MatchHost{"gw.example.com", "*.tenants.example.com"}
	inner := caddyhttp.MatchHost{"api.example.org"}
	routes := caddyhttp.RouteList{
		{MatcherSets: caddyhttp.MatcherSets{{&named}}, Handlers: []caddyhttp.MiddlewareHandler{
			&caddyhttp.Subroute{Routes: caddyhttp.RouteList{{MatcherSets: caddyhttp.MatcherSets{{inner, &caddyhttp.MatchPath{"/mcp"}}}}}},
		}},
		{}, // a site without a host
	}
	got := routeHosts(routes, nil)
	if want := []string{"gw.example.com", "*.tenants.example.com", "api.example.org"}; !slices.Equal(got, want) {
		t.Fatalf("site hosts %q, want %q", got, want)
	}
}
