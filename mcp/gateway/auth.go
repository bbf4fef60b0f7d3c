package gateway

import (
	"context"
	"errors"
	"net/http"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// How the gateway authenticates to an upstream MCP server.
const (
	AuthNone   = "none"
	AuthBearer = "bearer"
	// AuthClientCredentials fetches an OAuth 2 access token with the
	// client credentials grant, keeps it until it expires and fetches a
	// new one when the server answers 401.
	AuthClientCredentials = "oauth_client_credentials"
)

// Auth is the credentials the gateway holds for one upstream server. The
// caller's key never reaches the server.
type Auth struct {
	// Kind is AuthNone (or empty), AuthBearer or AuthClientCredentials.
	Kind string `json:"kind,omitempty"`
	// Token is the static bearer token (AuthBearer).
	Token string `json:"token,omitempty"`
	// TokenURL, ClientID, ClientSecret and Scope are the client
	// credentials grant's (AuthClientCredentials); Scope may be empty.
	TokenURL     string `json:"token_url,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// errTokenRefused is a token endpoint's refusal: the server cannot be
// reached with these credentials until the operator changes them.
var errTokenRefused = errors.New("the OAuth token endpoint refused the client credentials")

// authTransport puts the server's credentials on every request to it and,
// for a token fetched with client credentials, fetches a new one and sends
// the request once more when the server answers 401.
type authTransport struct {
	base   http.RoundTripper
	bearer string
	tokens *tokens // nil unless AuthClientCredentials
	// onStatus, when set, is told each answer's status.
	onStatus func(r *http.Request, status int)
}

// RoundTrip implements http.RoundTripper.
func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(r)
	if err == nil && t.onStatus != nil {
		t.onStatus(r, resp.StatusCode)
	}
	return resp, err
}

// roundTrip sends r with the server's credentials.
func (t *authTransport) roundTrip(r *http.Request) (*http.Response, error) {
	if t.tokens == nil {
		if t.bearer == "" {
			return t.base.RoundTrip(r)
		}
		return t.send(r, t.bearer)
	}
	tok, err := t.tokens.get(r.Context())
	if err != nil {
		return nil, err
	}
	resp, err := t.send(r, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || r.GetBody == nil && r.Body != nil && r.Body != http.NoBody {
		return resp, err
	}
	// The token was revoked or expired early: one fresh token, one more
	// try.
	t.tokens.drop(tok)
	if tok, err = t.tokens.get(r.Context()); err != nil {
		return resp, nil
	}
	if r.GetBody != nil {
		body, err := r.GetBody()
		if err != nil {
			return resp, nil
		}
		r = r.Clone(r.Context())
		r.Body = body
	}
	_ = resp.Body.Close()
	return t.send(r, tok)
}

// send sends r with token tok.
func (t *authTransport) send(r *http.Request, tok string) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// tokens keeps one server's access token: fetched with the client
// credentials on first use, kept until it expires (less oauth2's margin),
// dropped when the server refuses it. Fetches of several calls at once
// are one fetch.
type tokens struct {
	cfg    clientcredentials.Config
	client *http.Client
	tok    single[*oauth2.Token]
}

// get returns a valid access token, fetching one when none is kept.
func (t *tokens) get(ctx context.Context) (string, error) {
	tok, err := t.tok.get(ctx, (*oauth2.Token).Valid, func() (*oauth2.Token, error) {
		tok, err := t.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
				return nil, errTokenRefused
			}
			return nil, err
		}
		return tok, nil
	})
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// drop forgets token old, unless a newer one replaced it already.
func (t *tokens) drop(old string) {
	t.tok.drop(func(tok *oauth2.Token) bool { return tok != nil && tok.AccessToken == old })
}
