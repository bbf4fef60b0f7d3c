package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/mcp"
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
	client *http.Client // with the server's credentials (authTransport)

	// ids number the calls the gateway posts itself.
	ids atomic.Int64

	session single[*sdk.ClientSession]

	mu      sync.Mutex
	tools   []*sdk.Tool
	toolsAt time.Time
	// asking: a caller is asking the server for its tools.
	asking bool
	// listErr is why the last list failed, at listFailed.
	listErr    error
	listFailed time.Time
	// gone is the id of a session the server answered 404 for: it ended
	// it (restarted), so a request in it did not run.
	gone atomic.Pointer[string]
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
	u := &Upstream{conn: c}
	t := &authTransport{base: base, onStatus: u.noteStatus}
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
	u.client = &http.Client{Transport: t}
	return u
}

// Timeout is what bounds one of its tool calls.
func (u *Upstream) Timeout() time.Duration { return u.conn.Timeout }

// connect returns the pooled session, opening it when there is none.
func (u *Upstream) connect(ctx context.Context) (*sdk.ClientSession, error) {
	return u.session.get(ctx, func(s *sdk.ClientSession) bool { return s != nil }, func() (*sdk.ClientSession, error) {
		client := sdk.NewClient(&sdk.Implementation{Name: clientName, Version: "1"}, nil)
		return client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: u.conn.URL, HTTPClient: u.client, DisableStandaloneSSE: true}, nil)
	})
}

// drop forgets session s after it failed, so the next use opens another,
// and has the tool list asked again (it is kept meanwhile).
func (u *Upstream) drop(s *sdk.ClientSession) {
	if _, ok := u.session.drop(func(v *sdk.ClientSession) bool { return v == s && v != nil }); ok {
		u.mu.Lock()
		u.toolsAt = time.Time{}
		u.mu.Unlock()
		go s.Close()
	}
}

// Close ends the pooled session.
func (u *Upstream) Close() error {
	if s, ok := u.session.drop(func(v *sdk.ClientSession) bool { return v != nil }); ok {
		return s.Close()
	}
	return nil
}

// ListRetry is how long after a failed list the server is asked again: in
// between, lists answer at once with the last list the server gave (or
// none). ListWait bounds the asking (or the server's timeout, when
// shorter), so a server that does not answer holds a list back no longer.
const (
	ListRetry = 5 * time.Second
	ListWait  = 10 * time.Second
)

// Tools lists the server's tools, kept for ToolsTTL; fresh reports whether
// they were asked for now. While one caller asks the server again, the
// others get the list it last gave. A server that cannot list them gives
// that list with the error, and is asked again after ListRetry. The
// asking outlives ctx's cancellation (a caller going away is not the
// server failing), within ListWait.
func (u *Upstream) Tools(ctx context.Context) (tools []*sdk.Tool, fresh bool, err error) {
	u.mu.Lock()
	switch {
	case !u.toolsAt.IsZero() && time.Since(u.toolsAt) < ToolsTTL:
		defer u.mu.Unlock()
		return u.tools, false, nil
	case u.listErr != nil && time.Since(u.listFailed) < ListRetry:
		defer u.mu.Unlock()
		return u.tools, false, u.listErr
	case u.asking && u.tools != nil:
		defer u.mu.Unlock()
		return u.tools, false, nil
	}
	u.asking = true
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(u.conn.Timeout, ListWait))
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
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asking = false
	if err != nil {
		u.listErr, u.listFailed = classify(ctx, err), time.Now()
		return u.tools, false, u.listErr
	}
	u.tools, u.toolsAt, u.listErr = tools, time.Now(), nil
	return tools, true, nil
}

// Result is a tool call's result as the server sent it: a JSON object,
// and whether it is an error result.
type Result struct {
	Raw     json.RawMessage
	IsError bool
}

// Call calls tool name with args (a JSON object, or empty), within the
// server's timeout. A result with isError is a result; err is
// ErrUnavailable, ErrTimeout or the server's *jsonrpc.Error. The call is
// one POST of the gateway's own in the pooled session's era (the SDK's
// client opened the session and lists the tools), its result passed on as
// it came.
func (u *Upstream) Call(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, u.conn.Timeout)
	defer cancel()
	var res Result
	err := u.withSession(ctx, func(s *sdk.ClientSession) (err error) {
		version := mcp.LatestVersion
		if init := s.InitializeResult(); init != nil {
			version = init.ProtocolVersion
		}
		res, err = u.post(ctx, s.ID(), version, name, args)
		return err
	})
	if err != nil {
		return Result{}, classify(ctx, err)
	}
	return res, nil
}

// MaxAnswer bounds an upstream's answer to one tool call, as the longest
// event the gateway reads.
const MaxAnswer = sse.MaxLine

// callMeta is the _meta of a stateless-era request: the revision, no
// client capabilities, and the gateway's name.
var callMeta = `"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.StatelessVersion + `","` + mcp.MetaClientCapabilities +
	`":{},"` + mcp.MetaClientInfo + `":{"name":"` + clientName + `","version":"1"}}`

// errNoAnswer: the server's answer held no response to the call.
var errNoAnswer = errors.New("the answer holds no response to the call")

// post calls tool name in a session's era (version; session is the
// sessions era's id, "" for none): one POST with the era's headers (in the
// stateless era the _meta, Mcp-Method and Mcp-Name as well), its answer
// (JSON, or an event stream of which the response to this call is taken)
// read up to MaxAnswer.
func (u *Upstream) post(ctx context.Context, session, version, name string, args json.RawMessage) (Result, error) {
	stateless := version == mcp.StatelessVersion
	id := u.ids.Add(1)
	body := make([]byte, 0, 256+len(args))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"method":"tools/call","params":{"name":`...)
	body = strconv.AppendQuote(body, name)
	if len(args) > 0 {
		body = append(body, `,"arguments":`...)
		body = append(body, args...)
	}
	if stateless {
		body = append(body, ',')
		body = append(body, callMeta...)
	}
	body = append(body, "}}"...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.conn.URL, bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h[mcp.HeaderProtocol] = []string{version}
	if stateless {
		h[mcp.HeaderMethod] = []string{"tools/call"}
		h[mcp.HeaderName] = []string{name} // a tool the gateway offers has a plain name
	}
	if session != "" {
		h[mcp.HeaderSession] = []string{session}
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && session != "" {
		// The server ended the session (it restarted): the call did not
		// run, whatever the answer's body says.
		return Result{}, fmt.Errorf("status 404: %w", sdk.ErrSessionMissing)
	}
	msg, err := response(resp, id)
	if err != nil {
		return Result{}, err
	}
	if e := gjson.GetBytes(msg, "error"); e.Exists() {
		return Result{}, &jsonrpc.Error{Code: e.Get("code").Int(), Message: e.Get("message").String()}
	}
	r := gjson.GetBytes(msg, "result")
	if !r.IsObject() || resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("status %d: %w", resp.StatusCode, errNoAnswer)
	}
	return Result{Raw: json.RawMessage(r.Raw), IsError: r.Get("isError").Bool()}, nil
}

// response is the JSON-RPC response with id in an answer: its JSON body,
// or the event of its stream that carries it. A refusal's body is read
// too, for the JSON-RPC error it may hold (an unknown tool is a 400).
func response(resp *http.Response, id int64) ([]byte, error) {
	body := io.LimitReader(resp.Body, MaxAnswer+1)
	if ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) == "text/event-stream" && resp.StatusCode == http.StatusOK {
		events := sse.NewReaderSize(body, 4<<10)
		for {
			ev, err := events.Next()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errNoAnswer, err)
			}
			if gjson.GetBytes(ev.Data, "id").Int() == id && gjson.GetBytes(ev.Data, "id").Exists() {
				return ev.Data, nil
			}
		}
	}
	msg, err := io.ReadAll(body)
	if err != nil || len(msg) > MaxAnswer {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, errNoAnswer)
	}
	if gjson.GetBytes(msg, "id").Int() != id {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, errNoAnswer)
	}
	return msg, nil
}

// withSession runs f on the pooled session. A session the server no
// longer knows (it restarted) is opened again and f run once more: the
// server refused the request without running it. Any other failure but
// the server's own JSON-RPC error, or ctx's end (one call's time-out or
// its caller gone, which says nothing of the session other calls share),
// drops the session, since the connection may be broken; f is not
// repeated, since it may have run. A session that cannot be opened is
// ErrUnavailable.
func (u *Upstream) withSession(ctx context.Context, f func(*sdk.ClientSession) error) error {
	for try := 0; ; try++ {
		s, err := u.connect(ctx)
		if err != nil {
			return errors.Join(ErrUnavailable, err)
		}
		err = f(s)
		if err == nil || serverError(err) != nil || ctx.Err() != nil {
			return err
		}
		u.drop(s)
		if try > 0 || !u.ended(s, err) {
			return err
		}
	}
}

// ended reports whether err says the server ended session s: the SDK's
// ErrSessionMissing, or a 404 to a request in s (whatever its body).
func (u *Upstream) ended(s *sdk.ClientSession, err error) bool {
	if errors.Is(err, sdk.ErrSessionMissing) {
		return true
	}
	gone := u.gone.Load()
	return gone != nil && s.ID() != "" && *gone == s.ID()
}

// noteStatus is told each answer's status: a 404 to a request in a
// session says the server ended it.
func (u *Upstream) noteStatus(r *http.Request, status int) {
	if id := r.Header.Get(mcp.HeaderSession); status == http.StatusNotFound && id != "" {
		u.gone.Store(&id)
	}
}

// rejected is the SDK's own JSON-RPC error for a request the transport
// refused (it did not reach the server, or the server answered it with an
// HTTP error): it is in the chain of every such failure, even one whose
// body held the server's JSON-RPC error.
var rejected = &jsonrpc.Error{Code: rejectedCode}

// rejectedCode is the SDK's code for a request the transport refused.
const rejectedCode = -32005

// serverError is the server's own JSON-RPC answer to the call that err
// carries, or nil when the call failed on the way.
func serverError(err error) *jsonrpc.Error {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || errors.Is(err, rejected) {
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
	case errors.Is(err, ErrUnavailable):
		return err
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return errors.Join(ErrUnavailable, err)
}

// Redact is err's text for the log, with the server's URL and its token
// URL cut to their scheme and host: an operator may keep a credential in
// either's path or query.
func (u *Upstream) Redact(err error) string {
	msg := err.Error()
	for _, raw := range []string{u.conn.URL, u.conn.Auth.TokenURL} {
		if raw == "" {
			continue
		}
		short := "(url)"
		if p, perr := url.Parse(raw); perr == nil {
			short = p.Scheme + "://" + p.Host + "/…"
			msg = strings.ReplaceAll(msg, p.String(), short)
		}
		msg = strings.ReplaceAll(msg, raw, short)
	}
	return msg
}
