package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"
)

// Limits of the upstream servers.
const (
	// DefaultTimeout bounds one tool call when the server's block names no
	// timeout.
	DefaultTimeout = 60 * time.Second
	// ToolsTTL is how long a server's tool list is kept before it is asked
	// again.
	ToolsTTL = time.Minute
	// clientName is how the gateway names itself to the servers.
	clientName = "caddy-gw"
)

// Failures of an upstream call, besides a result with isError.
var (
	// ErrUnavailable: the server could not be reached, refused the
	// gateway's credentials or broke off.
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrTimeout: the call did not end within the server's timeout.
	ErrTimeout = errors.New("upstream timed out")
)

// Conn is where one upstream server is and how the gateway reaches it: the
// part of a server's configuration that its pooled session and token
// depend on (a reload that keeps it keeps them).
type Conn struct {
	// URL is the server's Streamable HTTP endpoint.
	URL string `json:"url"`
	// Auth is what the gateway sends it.
	Auth Auth `json:"auth,omitempty"`
	// Timeout bounds one tool call (DefaultTimeout when 0).
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Upstream is one upstream MCP server: one pooled session, opened on first
// use in the protocol era the server offers (the SDK's client asks
// server/discover, the stateless era, and falls back to initialize), its
// tool list kept for ToolsTTL, and its access token.
type Upstream struct {
	conn   Conn
	client *http.Client
	tokens *tokens

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []*sdk.Tool
	toolsAt time.Time
}

// NewUpstream returns the upstream at c, reached through base (nil:
// http.DefaultTransport). Nothing is dialled until it is used.
func NewUpstream(c Conn, base http.RoundTripper) *Upstream {
	if base == nil {
		base = http.DefaultTransport
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	t := &authTransport{base: base}
	switch c.Auth.Kind {
	case AuthBearer:
		t.bearer = c.Auth.Token
	case AuthClientCredentials:
		cfg := clientcredentials.Config{ClientID: c.Auth.ClientID, ClientSecret: c.Auth.ClientSecret, TokenURL: c.Auth.TokenURL}
		if c.Auth.Scope != "" {
			cfg.Scopes = []string{c.Auth.Scope}
		}
		t.tokens = &tokens{cfg: cfg, client: &http.Client{Transport: base, Timeout: c.Timeout}}
	}
	return &Upstream{conn: c, client: &http.Client{Transport: t}, tokens: t.tokens}
}

// Timeout is what bounds one of its tool calls.
func (u *Upstream) Timeout() time.Duration { return u.conn.Timeout }

// TokensFetched is how many access tokens the upstream fetched.
func (u *Upstream) TokensFetched() int {
	if u.tokens == nil {
		return 0
	}
	u.tokens.mu.Lock()
	defer u.tokens.mu.Unlock()
	return u.tokens.fetches
}

// connect returns the pooled session, opening it when there is none.
func (u *Upstream) connect(ctx context.Context) (*sdk.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != nil {
		return u.session, nil
	}
	client := sdk.NewClient(&sdk.Implementation{Name: clientName, Version: "1"}, nil)
	s, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u.conn.URL, HTTPClient: u.client, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, err
	}
	u.session = s
	return s, nil
}

// drop forgets session s after it failed, so the next use opens another.
func (u *Upstream) drop(s *sdk.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == s {
		u.session = nil
		u.toolsAt = time.Time{}
		go s.Close()
	}
}

// Close ends the pooled session.
func (u *Upstream) Close() error {
	u.mu.Lock()
	s := u.session
	u.session = nil
	u.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}

// Tools lists the server's tools, kept for ToolsTTL; fresh reports
// whether they were asked for now.
func (u *Upstream) Tools(ctx context.Context) (tools []*sdk.Tool, fresh bool, err error) {
	u.mu.Lock()
	if !u.toolsAt.IsZero() && time.Since(u.toolsAt) < ToolsTTL {
		defer u.mu.Unlock()
		return u.tools, false, nil
	}
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, u.conn.Timeout)
	defer cancel()
	err = u.withSession(ctx, func(s *sdk.ClientSession) error {
		tools = tools[:0]
		for t, err := range s.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			tools = append(tools, t)
		}
		return nil
	})
	if err != nil {
		return nil, false, classify(ctx, err)
	}
	u.mu.Lock()
	u.tools, u.toolsAt = tools, time.Now()
	u.mu.Unlock()
	return tools, true, nil
}

// Call calls tool name with args (a JSON object, or empty), within the
// server's timeout. A result with isError is a result; err is
// ErrUnavailable, ErrTimeout or the server's *jsonrpc.Error.
func (u *Upstream) Call(ctx context.Context, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, u.conn.Timeout)
	defer cancel()
	var arguments any
	if len(args) > 0 {
		arguments = args
	}
	var res *sdk.CallToolResult
	err := u.withSession(ctx, func(s *sdk.ClientSession) (err error) {
		res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: arguments})
		return err
	})
	if err != nil {
		return nil, classify(ctx, err)
	}
	return res, nil
}

// withSession runs f on the pooled session. A session the server no
// longer knows (it restarted) is opened again and f run once more: the
// server refused the request without running it. Any other failure but
// the server's own JSON-RPC error drops the session, since the
// connection may be broken; f is not repeated, since it may have run.
func (u *Upstream) withSession(ctx context.Context, f func(*sdk.ClientSession) error) error {
	for try := 0; ; try++ {
		s, err := u.connect(ctx)
		if err != nil {
			return err
		}
		err = f(s)
		if err == nil || serverError(err) != nil {
			return err
		}
		u.drop(s)
		if try > 0 || !errors.Is(err, sdk.ErrSessionMissing) {
			return err
		}
	}
}

// rejectedCode and rejectedMessage are the SDK's own error for a request
// that never reached the server (the connection failed, the answer was
// not JSON-RPC): a *jsonrpc.Error too, told from the server's by both.
const (
	rejectedCode    = -32005
	rejectedMessage = "rejected by transport"
)

// serverError is the server's own JSON-RPC error that err carries, or nil
// when the call failed on the way (which the SDK wraps as a JSON-RPC
// error of its own).
func serverError(err error) *jsonrpc.Error {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code == rejectedCode && rpcErr.Message == rejectedMessage {
		return nil
	}
	return rpcErr
}

// classify maps an upstream failure to the server's own JSON-RPC error,
// ErrTimeout or ErrUnavailable.
func classify(ctx context.Context, err error) error {
	switch rpcErr := serverError(err); {
	case rpcErr != nil:
		return rpcErr
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return errors.Join(ErrUnavailable, err)
}
