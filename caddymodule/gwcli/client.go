package gwcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// Limits of the command line's calls to the admin endpoint.
const (
	// RequestTimeout bounds one call.
	RequestTimeout = 30 * time.Second
	// MaxAnswer bounds the answer read.
	MaxAnswer = 64 << 20
)

// AdminAddress is the admin endpoint the command line talks to: address
// when given, else the admin address of the config that `caddy reload`
// would load (config and adapter, or the Caddyfile in the current folder),
// else Caddy's default (localhost:2019). It finds the config as Caddy's
// own commands do, without their log lines.
func AdminAddress(address, config, adapter string) (string, error) {
	if address != "" {
		return address, nil
	}
	if adapter != "" && config == "" {
		return "", errors.New("--adapter needs --config")
	}
	file := config
	if file == "" {
		if _, err := os.Stat(defaultCaddyfile); errors.Is(err, fs.ErrNotExist) {
			return caddy.DefaultAdminListen, nil
		} else if err != nil {
			return "", fmt.Errorf("reading %s for its admin address (or give --address): %w", defaultCaddyfile, err)
		}
		file = defaultCaddyfile
	}
	body, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the config for its admin address (or give --address): %w", err)
	}
	base := strings.ToLower(filepath.Base(file))
	if adapter == "" && filepath.Ext(base) != ".json" && (strings.HasPrefix(base, "caddyfile") || strings.HasSuffix(base, ".caddyfile")) {
		adapter = "caddyfile"
	}
	if adapter != "" {
		a := caddyconfig.GetAdapter(adapter)
		if a == nil {
			return "", fmt.Errorf("unknown config adapter %q", adapter)
		}
		if body, _, err = a.Adapt(body, map[string]any{"filename": file}); err != nil {
			return "", fmt.Errorf("adapting %s for its admin address (or give --address): %w", file, err)
		}
	}
	return caddycmd.DetermineAdminAPIAddress("", body, file, adapter)
}

// defaultCaddyfile is the config Caddy's commands use when none is named.
const defaultCaddyfile = "Caddyfile"

// client calls the gw routes of the admin endpoint.
type client struct {
	addr string
	// base is the URL requests go to; origin, when set, is sent as
	// Origin, as Caddy's own commands do over TCP.
	base, origin string
	http         *http.Client
}

// newClient returns a client of the admin endpoint at addr (host:port, or
// unix/path as Caddy writes a socket).
func newClient(addr string) (*client, error) {
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil || na.PortRangeSize() > 1 {
		return nil, fmt.Errorf("admin address %q: not one address a client can dial", addr)
	}
	network, dial := na.Network, na.JoinHostPort(0)
	base, origin := "http://"+dial, "http://"+dial
	switch {
	case na.IsUnixNetwork():
		// A socket's permission bits ("|0220") are no part of its path;
		// the host of its URL is a stand-in.
		dial, _, _ = strings.Cut(na.Host, "|")
		base, origin = "http://127.0.0.1", ""
	case na.IsFdNetwork():
		return nil, fmt.Errorf("admin address %q: a file descriptor cannot be dialled; give --address", addr)
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dial)
		},
	}
	return &client{addr: addr, base: base, origin: origin, http: &http.Client{Transport: tr, Timeout: RequestTimeout}}, nil
}

// apiError is an answer of the admin endpoint that is not a success.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Message }

// call sends method to path with body (nil: none) as JSON and returns the
// answer's body; an answer that is not a success is an *apiError carrying
// the endpoint's message.
func (c *client) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the admin endpoint %s did not answer (is the gateway running? --address names another): %w", c.addr, unwrapURL(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the admin endpoint's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return nil, &apiError{Status: resp.StatusCode, Message: msg}
	}
	return b, nil
}

// unwrapURL drops the method and URL that net/http puts before a dial
// error: the URL's host is made up for a socket.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
