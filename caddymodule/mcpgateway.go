package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-gw/caddy-gw/mcp/gateway"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// DefaultMCPPrice is the price of one call of a server given by URL alone
// (mcp_servers) when mcp_price names none.
var DefaultMCPPrice = pricing.Micro(1000)

// MCPServerConfig is one upstream MCP server of the MCP gateway (an
// mcp_server block).
type MCPServerConfig struct {
	// Name is the server's name: its tools are offered as
	// <name>__<tool>, and on their own at /mcp-gateway/<name>/. 1 to 64
	// characters of A-Z, a-z, 0-9, '_', '-' and '.', without "__" and not
	// ending in '_'.
	Name string `json:"name"`
	// URL is the server's Streamable HTTP endpoint (http or https). It is
	// the operator's choice: page reading's address guard does not apply.
	// Placeholders expand at load.
	URL string `json:"url"`
	// Auth is what the gateway sends the server (none by default); the
	// caller's key never reaches it. Placeholders in its token, client
	// id and client secret expand at load.
	Auth gateway.Auth `json:"auth,omitempty"`
	// Allow are globs over the server's tool names: the tools offered
	// (default: all). Deny are globs of tools never offered; they win.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Price is the plan price of one successful tool call, in US dollars
	// (default 0).
	Price pricing.Money `json:"price,omitempty"`
	// ToolPrices are prices of single tools, over Price.
	ToolPrices map[string]pricing.Money `json:"tool_prices,omitempty"`
	// Timeout bounds one tool call (default 60s).
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// mcpServers are the configured servers, those given as name=url first
// expanded into blocks of their own, placeholders expanded.
func (a *App) mcpServers() ([]MCPServerConfig, error) {
	price := DefaultMCPPrice
	if a.MCPPrice != nil {
		price = *a.MCPPrice
	}
	var out []MCPServerConfig
	for _, item := range expandList(a.MCPServerURLs) {
		name, u, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("mcp_servers: %q is not name=url", item)
		}
		out = append(out, MCPServerConfig{Name: strings.TrimSpace(name), URL: strings.TrimSpace(u), Price: price})
	}
	repl := caddy.NewReplacer()
	for _, s := range a.MCPServers {
		s.URL = strings.TrimSpace(repl.ReplaceAll(s.URL, ""))
		for _, f := range []*string{&s.Auth.Token, &s.Auth.TokenURL, &s.Auth.ClientID, &s.Auth.ClientSecret, &s.Auth.Scope} {
			*f = strings.TrimSpace(repl.ReplaceAll(*f, ""))
		}
		out = append(out, s)
	}
	seen := map[string]bool{}
	for _, s := range out {
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("mcp_server %s: %w", s.Name, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("mcp_server %s: declared twice", s.Name)
		}
		seen[s.Name] = true
	}
	return out, nil
}

// validate refuses a server the gateway cannot offer.
func (s *MCPServerConfig) validate() error {
	if !gateway.ServerNameOK(s.Name) {
		return fmt.Errorf("a name is 1 to %d characters of A-Z, a-z, 0-9, '_', '-' and '.', without %q and not ending in '_'", gateway.MaxServerName, gateway.Separator)
	}
	if err := httpURL(s.URL); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	switch s.Auth.Kind {
	case "", gateway.AuthNone:
	case gateway.AuthBearer:
		if s.Auth.Token == "" {
			return fmt.Errorf("auth bearer: the token is empty")
		}
	case gateway.AuthClientCredentials:
		if err := httpURL(s.Auth.TokenURL); err != nil {
			return fmt.Errorf("auth %s: token url: %w", gateway.AuthClientCredentials, err)
		}
		if s.Auth.ClientID == "" || s.Auth.ClientSecret == "" {
			return fmt.Errorf("auth %s: the client id and secret are required", gateway.AuthClientCredentials)
		}
	default:
		return fmt.Errorf("auth: %q is not none, bearer or %s", s.Auth.Kind, gateway.AuthClientCredentials)
	}
	for _, g := range append(append([]string(nil), s.Allow...), s.Deny...) {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("allow/deny: %q is not a glob", g)
		}
	}
	if s.Price < 0 {
		return fmt.Errorf("price: %s is below zero", s.Price)
	}
	for tool, p := range s.ToolPrices {
		if p < 0 || !tools.ToolNameOK(tool) {
			return fmt.Errorf("tool_price %s %s: want a tool name and 0 or more US dollars", tool, p)
		}
	}
	if s.Timeout < 0 {
		return fmt.Errorf("timeout: below zero")
	}
	return nil
}

// httpURL refuses anything but an absolute http or https URL.
func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", s)
	}
	return nil
}

// mcpUpstreams keeps the upstream servers' sessions and tokens across
// reloads: a server whose URL, credentials and timeout a reload keeps is
// reached through the same session and token.
var mcpUpstreams = caddy.NewUsagePool()

type pooledUpstream struct{ *gateway.Upstream }

func (p pooledUpstream) Destruct() error { return p.Close() }

// mcpTransport is what reaches the upstream servers: the default
// transport's settings, with room for as many idle connections per server
// as a busy gateway keeps calls in flight.
func mcpTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return t
}

// mcpGateway builds the MCP gateway, taking a reference to each server's
// pooled upstream (released by Cleanup). With no server declared it lists
// no tools.
func (a *App) mcpGateway(upgradeURL string) (*gateway.Gateway, error) {
	list, err := a.mcpServers()
	if err != nil {
		return nil, err
	}
	g := &gateway.Gateway{AllowedHosts: a.MCPAllowedHosts, UpgradeURL: upgradeURL, Metrics: metrics, Logger: a.logger.Named("mcp_gateway")}
	for _, s := range list {
		conn := gateway.Conn{URL: s.URL, Auth: s.Auth, Timeout: time.Duration(s.Timeout)}
		b, _ := json.Marshal(conn)
		sum := sha256.Sum256(b)
		key := "mcp:" + s.Name + ":" + hex.EncodeToString(sum[:])
		v, _, err := mcpUpstreams.LoadOrNew(key, func() (caddy.Destructor, error) {
			return pooledUpstream{gateway.NewUpstream(conn, mcpTransport())}, nil
		})
		if err != nil {
			return nil, err
		}
		a.mcpKeys = append(a.mcpKeys, key)
		g.Servers = append(g.Servers, &gateway.Server{Name: s.Name, Upstream: v.(pooledUpstream).Upstream,
			Allow: s.Allow, Deny: s.Deny, Price: s.Price, ToolPrices: s.ToolPrices})
	}
	return g, nil
}

// releaseMCP drops this config's references to the pooled upstreams.
func releaseMCP(keys []string) {
	for _, k := range keys {
		_, _ = mcpUpstreams.Delete(k)
	}
}

// mcpServerOptions is the mcp_server block's table.
func mcpServerOptions(s *MCPServerConfig) options {
	return options{
		"url": textOption(&s.URL),
		"auth": {read: func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			s.Auth = gateway.Auth{Kind: args[0]}
			switch {
			case args[0] == gateway.AuthNone && len(args) == 1:
			case args[0] == gateway.AuthBearer && len(args) == 2:
				s.Auth.Token = args[1]
			case args[0] == gateway.AuthClientCredentials && (len(args) == 4 || len(args) == 5):
				s.Auth.TokenURL, s.Auth.ClientID, s.Auth.ClientSecret = args[1], args[2], args[3]
				if len(args) == 5 {
					s.Auth.Scope = args[4]
				}
			default:
				return d.Errf("auth: want none, bearer <token> or %s <token_url> <client_id> <client_secret> [<scope>]", gateway.AuthClientCredentials)
			}
			return nil
		}},
		"allow":   {repeat: true, read: func(d *caddyfile.Dispenser) error { return appendArgs(d, &s.Allow) }},
		"deny":    {repeat: true, read: func(d *caddyfile.Dispenser) error { return appendArgs(d, &s.Deny) }},
		"price":   usdOption(1, "one amount of US dollars", &s.Price),
		"timeout": durationOption(&s.Timeout),
		"tool_price": {repeat: true, read: func(d *caddyfile.Dispenser) error {
			var tool, usd string
			if !d.Args(&tool, &usd) || d.NextArg() {
				return d.ArgErr()
			}
			p, err := pricing.ParseUSD(usd)
			if err != nil || p < 0 {
				return d.Errf("tool_price %s: %q: %v", tool, usd, pricing.ErrBadAmount)
			}
			if s.ToolPrices == nil {
				s.ToolPrices = map[string]pricing.Money{}
			}
			s.ToolPrices[tool] = p
			return nil
		}},
	}
}

// appendArgs appends the option's arguments (at least one) to dst.
func appendArgs(d *caddyfile.Dispenser, dst *[]string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	*dst = append(*dst, args...)
	return nil
}
