package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
)

// Browsers are the headless Chromium programs render looks for, in order
// (Debian's chromium-headless-shell, then chromium).
var Browsers = []string{"chromium-headless-shell", "chromium", "chromium-browser", "headless-shell"}

// BrowserUID and BrowserGID are the unprivileged user and group (nobody)
// the browser runs as when the gateway runs as root: Chromium's sandbox
// refuses to run as root, and the browser never holds the gateway's rights.
const BrowserUID, BrowserGID = 65534, 65534

// browserEnvNames are the only variables of the gateway's environment the
// browser gets; none of them is a secret.
var browserEnvNames = []string{"PATH", "LANG", "TZ"}

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

// browserStartError: the browser did not start (for example, its sandbox
// cannot run on this kernel).
type browserStartError struct{ err error }

func (e *browserStartError) Error() string { return "the browser did not start: " + e.err.Error() }

// BrowserEnv is the browser's whole environment: home is its profile
// directory (HOME and the XDG directories point into it), and of the
// gateway's own environment only PATH, LANG and TZ are passed, so no
// provider key, bootstrap key or store address reaches the browser.
func BrowserEnv(home string) []string {
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	for _, name := range browserEnvNames {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// isolate prepares the browser's command: the environment of BrowserEnv,
// killed with the gateway, and, when the gateway is root, run as
// BrowserUID with its profile directory handed to that user. A failure
// keeps the browser from starting.
func isolate(cmd *exec.Cmd) {
	const flag = "--user-data-dir="
	var dir string
	for _, a := range cmd.Args {
		if strings.HasPrefix(a, flag) {
			dir = strings.TrimPrefix(a, flag)
		}
	}
	if dir == "" {
		cmd.Err = errors.New("the browser has no profile directory")
		return
	}
	cmd.Env = BrowserEnv(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Chown(dir, BrowserUID, BrowserGID); err != nil {
		cmd.Err = fmt.Errorf("handing the profile directory to the browser's user: %w", err)
		return
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: BrowserUID, Gid: BrowserGID, Groups: []uint32{}}
}

// navigation is what the renderer saw of the main frame's document: the
// URL last requested (after redirects) and how many bytes of it arrived.
type navigation struct {
	mu       sync.Mutex
	frame    cdp.FrameID
	request  network.RequestID
	url      string
	received int64
}

func (n *navigation) observe(ev any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Type == network.ResourceTypeDocument && ev.FrameID == n.frame {
			n.request, n.url, n.received = ev.RequestID, ev.Request.URL, 0
		}
	case *network.EventDataReceived:
		if ev.RequestID == n.request {
			n.received += ev.DataLength
		}
	}
}

// render loads u in headless Chromium (its scripts run) and returns the
// page's HTML after load and its final URL. Every request the browser
// makes goes through a local proxy that dials through the address guard;
// WebRTC may send no UDP outside that proxy (so none at all); the browser
// keeps its sandbox, holds none of the gateway's environment and, when the
// gateway is root, runs as BrowserUID. The main document is held to the
// rules of a plain read: a blocked address, a failed site, a type that is
// not a page or a page larger than MaxPage fails as a plain read fails.
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
		chromedp.ExecPath(exe), chromedp.Headless,
		// The sandbox stays on (chromedp turns it off for root unless told).
		chromedp.Flag("no-sandbox", false),
		chromedp.NoInheritEnv, chromedp.ModifyCmdFunc(isolate),
		chromedp.ProxyServer("http://"+proxy.Addr()),
		// Loopback too goes through the proxy (and its guard).
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// WebRTC may use no UDP but through the proxy, which has none: a
		// page's STUN never reaches an address the guard would refuse.
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	nav := &navigation{}
	if err := chromedp.Listen(bctx, nav.observe); err != nil {
		if ctx.Err() != nil {
			return "", "", err
		}
		return "", "", &browserStartError{err}
	}
	// The main frame's id is its target's.
	nav.mu.Lock()
	nav.frame = cdp.FrameID(chromedp.FromContext(bctx).Target.TargetID)
	nav.mu.Unlock()

	resp, err := chromedp.Run(bctx, chromedp.NavigateResponse(u.String()))
	nav.mu.Lock()
	doc, received := nav.url, nav.received
	nav.mu.Unlock()
	if err := judge(proxy, doc, resp, err, received); err != nil {
		return "", "", err
	}
	if html, err = chromedp.Run(bctx, chromedp.Evaluate[string]("document.documentElement.outerHTML")); err != nil {
		return "", "", err
	}
	if final, err = chromedp.Run(bctx, chromedp.Location()); err != nil {
		return "", "", err
	}
	// A script or a meta refresh can move the page on after it loaded: a
	// page moved on to a blocked address is refused all the same.
	if f, err := url.Parse(final); err == nil {
		if err := blocked(proxy.refusal(hostPort(f))); err != nil {
			return "", "", err
		}
	}
	return html, final, nil
}

// blocked is the refusal of a blocked target for a dial's err, or nil.
func blocked(err error) error {
	var be *netguard.BlockedError
	if errors.As(err, &be) {
		return flat(gwerr.Invalid, be.Error(), "")
	}
	return nil
}

// judge turns the main document's navigation into a plain read's answer:
// nil when the page can be read, else the error a plain read of it gives.
func judge(p *proxy, doc string, resp *network.Response, navErr error, received int64) error {
	var le *chromedp.LoadError
	refused := false
	if resp != nil {
		for k := range resp.Headers {
			refused = refused || strings.EqualFold(k, refusedHeader)
		}
	}
	switch {
	case navErr != nil && errors.As(navErr, &le) && le.ErrorText == "net::ERR_UNSAFE_REDIRECT":
		return flat(gwerr.Invalid, netguard.ErrNotHTTP.Error(), "")
	case navErr != nil && !errors.As(navErr, &le):
		return navErr
	case navErr != nil || refused || resp == nil:
		if u, err := url.Parse(doc); err == nil && doc != "" {
			if err := blocked(p.refusal(hostPort(u))); err != nil {
				return err
			}
		}
		return providerFailed("the site could not be reached")
	case resp.Status/100 != 2:
		return providerFailed("the site answered %d", resp.Status)
	case !readable(resp.MimeType):
		return providerFailed("%s is not a page that can be read", resp.MimeType)
	case received > MaxPage:
		return providerFailed("the page is larger than %d bytes", MaxPage)
	}
	return nil
}

// readRendered is read for render: true.
func (h *Handler) readRendered(ctx context.Context, u *url.URL, log *zap.Logger) (page, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	// The page's own address is checked before the browser starts, so a
	// blocked target is refused at once, as a plain read refuses it.
	if err := h.Guard.Check(ctx, hostPort(u)); err != nil {
		if err := blocked(err); err != nil {
			return page{}, err
		}
		return page{}, providerFailed("the site could not be reached")
	}
	html, final, err := h.render(ctx, u)
	var ge *gwerr.Error
	var se *browserStartError
	switch {
	case errors.Is(err, errNoBrowser):
		return page{}, flat(gwerr.Unavailable, "capability_unavailable", "rendering is unavailable; retry later or drop render")
	case errors.As(err, &se):
		log.Error("page reading: the browser did not start", zap.Error(se.err))
		return page{}, flat(gwerr.Unavailable, "capability_unavailable", "rendering is unavailable; retry later or drop render")
	case errors.As(err, &ge):
		return page{}, err
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

// refusedHeader marks the proxy's own answer to a request it could not
// pass on (the address refused or unreachable).
const refusedHeader = "X-Gw-Proxy-Refused"

// proxy is a local forward proxy (HTTP and CONNECT) that dials through the
// guard; it serves one render and remembers why it refused each address.
type proxy struct {
	ln    net.Listener
	srv   *http.Server
	guard *netguard.Guard
	wg    sync.WaitGroup

	mu       sync.Mutex
	refusals map[string]error // host:port -> the dial's error
}

func startProxy(g *netguard.Guard) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, guard: g, refusals: map[string]error{}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := g.DialContext(ctx, network, addr)
		if err != nil {
			p.refuse(addr, err)
		}
		return c, err
	}
	tr := &http.Transport{Proxy: nil, DialContext: dial, ResponseHeaderTimeout: Timeout}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.connect(w, r, dial)
			return
		}
		r.RequestURI = ""
		resp, err := tr.RoundTrip(r)
		if err != nil {
			w.Header().Set(refusedHeader, "1")
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

func (p *proxy) refuse(addr string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusals[addr] = err
}

// refusal is why the proxy could not reach addr (host:port), or nil.
func (p *proxy) refusal(addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals[addr]
}

// connect tunnels a CONNECT request to its guarded destination.
func (p *proxy) connect(w http.ResponseWriter, r *http.Request, dial func(context.Context, string, string) (net.Conn, error)) {
	up, err := dial(r.Context(), "tcp", r.Host)
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
