package fetch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
)

// Browsers are the headless Chromium programs render looks for, in order
// (Debian's chromium-headless-shell, then chromium).
var Browsers = []string{"chromium-headless-shell", "chromium", "chromium-browser", "headless-shell"}

// browserPath finds a browser, or "".
func browserPath() string {
	for _, b := range Browsers {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

// errNoBrowser: rendering is unavailable on this machine.
var errNoBrowser = errors.New("no headless browser")

// render loads u in headless Chromium (its scripts run) and returns the
// page's HTML after load and its final URL. Every request the browser
// makes goes through a local proxy that dials through the address guard,
// so the page's scripts cannot reach a non-public address either.
func (h *Handler) render(ctx context.Context, u *url.URL) (html, final string, err error) {
	exe := browserPath()
	if exe == "" {
		return "", "", errNoBrowser
	}
	proxy, err := startProxy(h.Guard)
	if err != nil {
		return "", "", err
	}
	defer proxy.Close()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless,
		chromedp.ProxyServer("http://"+proxy.Addr()),
		// Loopback too goes through the proxy (and its guard).
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if _, err := chromedp.Run(bctx, chromedp.Navigate(u.String())); err != nil {
		return "", "", err
	}
	if html, err = chromedp.Run(bctx, chromedp.Evaluate[string]("document.documentElement.outerHTML")); err != nil {
		return "", "", err
	}
	if final, err = chromedp.Run(bctx, chromedp.Location()); err != nil {
		return "", "", err
	}
	return html, final, nil
}

// readRendered is read for render: true.
func (h *Handler) readRendered(ctx context.Context, u *url.URL) (page, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	// The page's own address is checked before the browser starts, so a
	// blocked target is a 400 like a plain read's.
	if conn, err := h.Guard.DialContext(ctx, "tcp", hostPort(u)); err != nil {
		var be *netguard.BlockedError
		if errors.As(err, &be) {
			return page{}, flat(gwerr.Invalid, be.Error(), "")
		}
		return page{}, providerFailed("the site could not be reached")
	} else {
		conn.Close()
	}
	html, final, err := h.render(ctx, u)
	switch {
	case errors.Is(err, errNoBrowser):
		return page{}, flat(gwerr.Unavailable, "capability_unavailable", "rendering is unavailable; retry later or drop render")
	case err != nil && ctx.Err() != nil:
		return page{}, providerFailed("the site took longer than %s", h.Timeout)
	case err != nil:
		return page{}, providerFailed("the page could not be rendered")
	}
	base, perr := url.Parse(final)
	if perr != nil {
		base = u
	}
	md, err := Markdown(html, base)
	if err != nil {
		return page{}, providerFailed("the page could not be read")
	}
	return page{Markdown: md, URL: final}, nil
}

func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// proxy is a local forward proxy (HTTP and CONNECT) that dials through the
// guard; it serves one render.
type proxy struct {
	ln    net.Listener
	srv   *http.Server
	guard *netguard.Guard
	wg    sync.WaitGroup
}

func startProxy(g *netguard.Guard) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, guard: g}
	tr := &http.Transport{Proxy: nil, DialContext: g.DialContext, ResponseHeaderTimeout: Timeout}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.connect(w, r)
			return
		}
		r.RequestURI = ""
		resp, err := tr.RoundTrip(r)
		if err != nil {
			http.Error(w, "blocked or unreachable", http.StatusForbidden)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// connect tunnels a CONNECT request to its guarded destination.
func (p *proxy) connect(w http.ResponseWriter, r *http.Request) {
	up, err := p.guard.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, "blocked or unreachable", http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	client, _, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	_, _ = client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n"))
	go func() { _, _ = io.Copy(up, client); up.Close() }()
	_, _ = io.Copy(client, up)
	client.Close()
}

func (p *proxy) Close() error {
	err := p.srv.Close()
	p.wg.Wait()
	return err
}
