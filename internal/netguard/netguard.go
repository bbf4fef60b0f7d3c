// Package netguard is the address guard for the gateway's own outbound
// fetches (page reading, transcribe's audio_url): only http and https,
// every address a name resolves to checked at connect time with
// code.dny.dev/ssrf (private, loopback, link-local, CGNAT, unique-local,
// metadata and every other non-public range refused), the connection made
// to the checked address itself (so a name cannot rebind between the check
// and the dial), on every redirect, and no proxy from the environment. The
// hosts of an allow list (GW_FETCH_ALLOW) are the only exception.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"code.dny.dev/ssrf"
)

// MaxRedirects bounds the redirects one fetch follows.
const MaxRedirects = 5

// ErrBlocked is the error (wrapped) of a refused target.
var ErrBlocked = errors.New("blocked target")

// BlockedError says why a target was refused.
type BlockedError struct{ Reason string }

func (e *BlockedError) Error() string { return "blocked target: " + e.Reason }
func (e *BlockedError) Unwrap() error { return ErrBlocked }

// ErrNotHTTP refuses a URL (or a redirect) to a scheme other than http and
// https.
var ErrNotHTTP = &BlockedError{Reason: "only http and https URLs are read"}

// Guard makes HTTP clients that cannot reach non-public addresses.
type Guard struct {
	// Allow lists hosts ("host" or "host:port") exempt from the guard.
	Allow []string
	// LookupIP resolves a name (nil: the system resolver). Tests stub it.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to a checked address (nil: a net.Dialer). Tests stub
	// it to prove nothing private is dialled.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	guardian *ssrf.Guardian
}

// New returns a guard exempting allow.
func New(allow []string) *Guard {
	return &Guard{Allow: allow, guardian: ssrf.New(ssrf.WithAnyPort())}
}

func (g *Guard) allowed(hostport string) bool {
	host, _, _ := net.SplitHostPort(hostport)
	for _, a := range g.Allow {
		if strings.EqualFold(a, hostport) || strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// CheckURL refuses what is not an http or https URL with a host, and a
// host written as a number in a form other than a plain IP address
// (decimal, octal or hexadecimal spellings some resolvers accept).
func CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return ErrNotHTTP
	}
	host := u.Hostname()
	if host == "" {
		return &BlockedError{Reason: "the URL has no host"}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	// 2130706433, 0177.0.0.1, 0x7f.1: every label a number in some base.
	numeric := true
	for _, label := range strings.Split(host, ".") {
		if _, err := strconv.ParseUint(label, 0, 64); err != nil {
			numeric = false
			break
		}
	}
	if numeric {
		return &BlockedError{Reason: "a numeric host must be a plain IP address"}
	}
	return nil
}

// DialContext resolves addr's host, refuses it when any address it
// resolves to is not public (unless the host is allowed), and connects to
// the first checked address.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	target, err := g.resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	dial := g.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		dial = d.DialContext
	}
	return dial(ctx, network, target)
}

// Check resolves addr and refuses it as DialContext would, without
// connecting to it.
func (g *Guard) Check(ctx context.Context, addr string) error {
	_, err := g.resolve(ctx, addr)
	return err
}

// resolve returns the address to connect to for addr: addr itself when its
// host is allowed, else its first resolved address once every address it
// resolves to is public.
func (g *Guard) resolve(ctx context.Context, addr string) (string, error) {
	if g.allowed(addr) {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", &BlockedError{Reason: "bad address"}
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		lookup := g.LookupIP
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if ips, err = lookup(ctx, host); err != nil {
			return "", fmt.Errorf("resolving %s: %w", host, err)
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("resolving %s: no address", host)
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		nw := "tcp4"
		if ip.Is6() {
			nw = "tcp6"
		}
		if err := g.guardian.Safe(nw, netip.AddrPortFrom(ip, portOf(port)).String(), nil); err != nil {
			return "", &BlockedError{Reason: fmt.Sprintf("%s resolves to a non-public address", host)}
		}
	}
	// Every address is public: connect to one of them, not to the name.
	return net.JoinHostPort(ips[0].Unmap().String(), port), nil
}

func portOf(s string) uint16 {
	var p uint16
	for _, r := range s {
		p = p*10 + uint16(r-'0')
	}
	return p
}

// Client returns an HTTP client through the guard: no proxy, at most
// MaxRedirects redirects, each to an http or https URL and dialled through
// the guard again.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           g.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("more than %d redirects", MaxRedirects)
			}
			return CheckURL(req.URL)
		},
	}
}
