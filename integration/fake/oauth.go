package fake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// OAuthTokenPath is the path of the OAuth fake's token endpoint.
const OAuthTokenPath = "/token"

// DefaultOAuthTTL is the lifetime of the OAuth fake's access tokens unless
// the test changes it with OAuth.SetTTL.
const DefaultOAuthTTL = time.Hour

// maxTokenRequestBytes bounds the body the token endpoint reads.
const maxTokenRequestBytes = 64 << 10

// OAuth is an OAuth 2 authorization server on 127.0.0.1 that grants
// access tokens with the client credentials grant, and the record of the
// tokens it granted (an MCP fake checks them with Valid when its Auth is
// the OAuth).
//
// POST /token takes an application/x-www-form-urlencoded body with
// grant_type=client_credentials and an optional scope; the client
// authenticates with HTTP Basic (id and secret form-encoded, then
// base64, as the protocol says) or with client_id and client_secret in
// the body, not both. It answers
//
//	{"access_token":"…","token_type":"Bearer","expires_in":3600}
//
// (with "scope" when one was asked; without expires_in when TTL is not
// positive, see SetTTL, and such a token never expires), and otherwise the
// protocol's error object: 401 invalid_client for a missing or wrong
// client (with WWW-Authenticate: Basic when Basic was used), 400
// unsupported_grant_type for another grant, 400 invalid_request for a
// malformed request, 405 for a method other than POST.
type OAuth struct {
	// ClientID and ClientSecret are the one client the server knows,
	// random; read them, do not change them.
	ClientID     string
	ClientSecret string

	srv *httptest.Server

	mu     sync.Mutex
	ttl    time.Duration
	tokens map[string]time.Time // token → expiry; zero time: none
	issued int
	scope  string
}

// NewOAuth starts an OAuth fake on 127.0.0.1 with a random client id and
// secret; it is closed when the test ends.
func NewOAuth(t testing.TB) *OAuth {
	t.Helper()
	o := &OAuth{
		ClientID:     newID("client-", 12),
		ClientSecret: newID("secret-", 32),
		ttl:          DefaultOAuthTTL,
		tokens:       map[string]time.Time{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc(OAuthTokenPath, o.serveToken)
	o.srv = httptest.NewServer(mux)
	t.Cleanup(o.srv.Close)
	return o
}

// URL is the token endpoint's address.
func (o *OAuth) URL() string { return o.srv.URL + OAuthTokenPath }

// SetTTL sets the lifetime of the tokens granted from now on (the
// answer's expires_in, rounded up to whole seconds); zero or less grants
// tokens that never expire, without expires_in.
func (o *OAuth) SetTTL(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ttl = d
}

// Valid reports whether token was granted by this server, is not revoked
// and has not expired.
func (o *OAuth) Valid(token string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	exp, ok := o.tokens[token]
	return ok && (exp.IsZero() || time.Now().Before(exp))
}

// Authorize lets in a request whose Authorization header carries a
// bearer token that is Valid, so an OAuth can be an MCP fake's Auth.
func (o *OAuth) Authorize(authorization string) bool {
	tok, ok := bearerToken(authorization)
	return ok && o.Valid(tok)
}

// Revoke makes token invalid from now on (an upstream then answers it
// 401, as one does for a token that has expired or was withdrawn).
func (o *OAuth) Revoke(token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.tokens, token)
}

// RevokeAll makes every token granted so far invalid.
func (o *OAuth) RevokeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.tokens)
}

// Issued is how many access tokens the server has granted.
func (o *OAuth) Issued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.issued
}

// Tokens lists the tokens that are still valid, in no order.
func (o *OAuth) Tokens() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	var out []string
	for tok, exp := range o.tokens {
		if exp.IsZero() || now.Before(exp) {
			out = append(out, tok)
		}
	}
	return out
}

// Scope is the scope the last granted token was asked with ("" for none).
func (o *OAuth) Scope() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.scope
}

// tokenAnswer is the success answer of the token endpoint.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in,omitempty"`
	Scope       string `json:"scope,omitempty"`
}

func (o *OAuth) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "the token endpoint takes POST")
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenRequestBytes)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return
	}
	form := r.PostForm
	if repeated(form, "grant_type", "scope", "client_id", "client_secret") {
		oauthError(w, http.StatusBadRequest, "invalid_request", "a parameter is repeated")
		return
	}
	id, secret, basic, ok := clientCredentials(r)
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_request", "more than one client authentication method")
		return
	}
	if id == "" || id != o.ClientID || secret != o.ClientSecret {
		if basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="fake-oauth"`)
		}
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	switch form.Get("grant_type") {
	case "client_credentials":
	case "":
		oauthError(w, http.StatusBadRequest, "invalid_request", "grant_type is missing")
		return
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only client_credentials is granted")
		return
	}
	o.grant(w, form.Get("scope"))
}

// grant issues a token asked with scope and writes the answer.
func (o *OAuth) grant(w http.ResponseWriter, scope string) {
	ans := tokenAnswer{AccessToken: newID("fake-at-", 40), TokenType: "Bearer", Scope: scope}
	var exp time.Time
	o.mu.Lock()
	if o.ttl > 0 {
		exp = time.Now().Add(o.ttl)
		ans.ExpiresIn = int64((o.ttl + time.Second - 1) / time.Second)
	}
	o.tokens[ans.AccessToken] = exp
	o.issued++
	o.scope = scope
	o.mu.Unlock()
	writeOAuthJSON(w, http.StatusOK, ans)
}

// clientCredentials reads the client's id and secret from HTTP Basic or
// from the form; ok is false when the request uses both.
func clientCredentials(r *http.Request) (id, secret string, basic, ok bool) {
	inForm := r.PostForm.Has("client_id") || r.PostForm.Has("client_secret")
	bid, bsecret, isBasic := r.BasicAuth()
	if !isBasic {
		return r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), false, true
	}
	if inForm {
		return "", "", true, false
	}
	// Basic carries the id and secret form-encoded; one that does not
	// decode matches no client.
	uid, err1 := url.QueryUnescape(bid)
	usecret, err2 := url.QueryUnescape(bsecret)
	if err1 != nil || err2 != nil {
		return "", "", true, true
	}
	return uid, usecret, true, true
}

// repeated reports whether any of names occurs more than once in form.
func repeated(form url.Values, names ...string) bool {
	for _, n := range names {
		if len(form[n]) > 1 {
			return true
		}
	}
	return false
}

// oauthError writes the token endpoint's error object.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeOAuthJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeOAuthJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bearerToken takes the token out of an Authorization header value of
// the Bearer scheme (the scheme name in any case, one or more spaces
// before the token).
func bearerToken(authorization string) (string, bool) {
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}
