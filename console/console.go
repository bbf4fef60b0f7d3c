// Package console is the operator console: server-rendered pages over the
// admin API, run in process, showing accounts, their keys, balance
// movements, organizations and usage. It guards itself against other origins, foreign
// Host names and (unless authentication comes first) non-loopback clients.
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Limits of the console.
const (
	// MaxForm is the largest form body a write reads.
	MaxForm = 64 << 10
	// JournalRows is how many journal entries an account's page shows.
	JournalRows = 100
	// AccountsPerPage is how many accounts the start page lists at once.
	AccountsPerPage = 100
	// UsageDays is how many days, today included, the usage page plots.
	UsageDays = 30
)

//go:embed assets page.html
var files embed.FS

var pages = textOnly(template.Must(template.New("").Funcs(funcs).Funcs(template.FuncMap{textHelper: text}).ParseFS(files, "page.html")))

// Console serves the console's pages.
type Console struct {
	// Admin is the admin API the console calls in process; nil answers 503.
	Admin func() http.Handler
	// Hosts returns the host names the serving site answers to (beside
	// loopback names, which are always accepted); nil means none.
	Hosts func(r *http.Request) []string
	// BehindAuth says authentication comes before the console, so clients
	// other than loopback ones are served.
	BehindAuth bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	csrf *http.CrossOriginProtection
	mux  *http.ServeMux
}

// New returns a console calling the admin API admin returns.
func New(admin func() http.Handler) *Console {
	c := &Console{Admin: admin, csrf: http.NewCrossOriginProtection()}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.accounts)
	m.HandleFunc("GET /accounts/{id}", c.account)
	m.HandleFunc("POST /accounts/{id}/keys", c.createKey)
	m.HandleFunc("POST /accounts/{id}/keys/{key}/revoke", c.revokeKey)
	m.HandleFunc("POST /accounts/{id}/keys/{key}/caps", c.setCaps)
	m.HandleFunc("POST /accounts/{id}/keys/{key}/tools", c.setTools)
	m.HandleFunc("POST /accounts/{id}/balance", c.addBalance)
	m.HandleFunc("POST /accounts/{id}/org", c.setOrg)
	m.HandleFunc("GET /orgs", c.orgs)
	m.HandleFunc("POST /orgs", c.createOrg)
	m.HandleFunc("GET /orgs/{id}", c.org)
	m.HandleFunc("POST /orgs/{id}/caps", c.setOrgCaps)
	m.HandleFunc("POST /orgs/{id}/delete", c.deleteOrg)
	m.HandleFunc("GET /usage", c.usage)
	m.Handle("GET /assets/", http.FileServerFS(files))
	c.mux = m
	return c
}

func (c *Console) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// securityHeaders keep the pages out of frames and caches and let them load
// nothing but the console's own style sheet.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":         "DENY",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
}

// ServeHTTP checks who asks and from where, then serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	if status, why := c.refuse(r); status != 0 {
		http.Error(w, why, status)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// refuse returns the status and reason a request is refused with, or 0.
func (c *Console) refuse(r *http.Request) (int, string) {
	if !c.BehindAuth && !loopbackClient(r.RemoteAddr) {
		return http.StatusForbidden, "the console serves loopback clients only (or set behind_auth after an authentication handler)"
	}
	var hosts []string
	if c.Hosts != nil {
		hosts = c.Hosts(r)
	}
	if !hostAllowed(r.Host, hosts) {
		return http.StatusMisdirectedRequest, "the console does not serve this host name"
	}
	if err := c.csrf.Check(r); err != nil {
		return http.StatusForbidden, "cross-origin writes are refused"
	}
	return 0, ""
}

// loopbackClient reports whether addr (host:port) is a loopback address.
func loopbackClient(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostAllowed reports whether the Host header names a loopback name or one
// of hosts (a leading "*." matches one label).
func hostAllowed(hostport string, hosts []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	for _, h := range hosts {
		h = strings.ToLower(h)
		if h == host {
			return true
		}
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			if label, tail, found := strings.Cut(host, "."); found && label != "" && tail == rest {
				return true
			}
		}
	}
	return false
}

// call runs one admin API request in process and decodes its JSON answer
// into out (when out is not nil and the status is 2xx). It returns the
// status and, for a failed call, the API's error message.
func (c *Console) call(r *http.Request, method, path string, body any, out any) (int, string) {
	var admin http.Handler
	if c.Admin != nil {
		admin = c.Admin()
	}
	if admin == nil {
		return http.StatusServiceUnavailable, "the gateway is not running"
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return http.StatusInternalServerError, err.Error()
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	req.RequestURI = path
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}, Code: http.StatusOK}
	admin.ServeHTTP(rec, req)
	if rec.Code/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("the admin API answered %d", rec.Code)
		}
		return rec.Code, e.Error
	}
	if out != nil && rec.Code != http.StatusNoContent {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			return http.StatusInternalServerError, "reading the admin API's answer: " + err.Error()
		}
	}
	return rec.Code, ""
}

// recorder keeps an in-process answer of the admin API.
type recorder struct {
	header http.Header
	Code   int
	Body   bytes.Buffer
	wrote  bool
}

func (rc *recorder) Header() http.Header { return rc.header }

func (rc *recorder) Write(b []byte) (int, error) {
	rc.wrote = true
	return rc.Body.Write(b)
}

func (rc *recorder) WriteHeader(code int) {
	if !rc.wrote {
		rc.Code, rc.wrote = code, true
	}
}
