package fake_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// clientConfig is the standard client of o, sending its credentials the
// given way and asking for scopes.
func clientConfig(o *fake.OAuth, style oauth2.AuthStyle, scopes ...string) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.URL(),
		Scopes: scopes, AuthStyle: style}
}

// TestOAuthClientCredentials: the standard client gets a token with the
// credentials in HTTP Basic and in the form; each token is new and valid.
func TestOAuthClientCredentials(t *testing.T) {
	o := fake.NewOAuth(t)
	ctx := context.Background()
	var got []string
	for i, c := range []struct {
		style  oauth2.AuthStyle
		scopes []string
		scope  string
	}{
		{oauth2.AuthStyleInHeader, []string{"tools:call", "tools:list"}, "tools:call tools:list"},
		{oauth2.AuthStyleInParams, nil, ""},
	} {
		tok, err := clientConfig(o, c.style, c.scopes...).Token(ctx)
		if err != nil {
			t.Fatalf("style %d: %v", c.style, err)
		}
		if tok.TokenType != "Bearer" || tok.Extra("expires_in") != 3600.0 || tok.AccessToken == "" {
			t.Fatalf("style %d: token %+v", c.style, tok)
		}
		if left := time.Until(tok.Expiry); left <= 59*time.Minute || left > time.Hour {
			t.Fatalf("style %d: expiry in %v", c.style, left)
		}
		if !o.Valid(tok.AccessToken) || o.Issued() != i+1 || o.Scope() != c.scope {
			t.Fatalf("style %d: valid %v, issued %d, scope %q", c.style, o.Valid(tok.AccessToken), o.Issued(), o.Scope())
		}
		got = append(got, tok.AccessToken)
	}
	if got[0] == got[1] {
		t.Fatalf("the same token twice: %s", got[0])
	}
	if o.Valid("fake-at-never-issued") {
		t.Fatal("a token never issued is valid")
	}
	o.Revoke(got[0])
	if o.Valid(got[0]) || !o.Valid(got[1]) {
		t.Fatal("Revoke did not revoke exactly the one token")
	}
	o.RevokeAll()
	if o.Valid(got[1]) || len(o.Tokens()) != 0 {
		t.Fatal("RevokeAll left a token valid")
	}
}

// TestOAuthTTL: expires_in follows SetTTL, rounded up to seconds, and is
// left out for tokens that never expire.
func TestOAuthTTL(t *testing.T) {
	o := fake.NewOAuth(t)
	o.SetTTL(1500 * time.Millisecond)
	if ans := postToken(t, o, url.Values{"grant_type": {"client_credentials"}}, true); ans.status != 200 ||
		ans.json["expires_in"] != 2.0 || ans.json["token_type"] != "Bearer" || len(ans.json) != 3 {
		t.Fatalf("got %d %v", ans.status, ans.json)
	}
	o.SetTTL(0)
	ans := postToken(t, o, url.Values{"grant_type": {"client_credentials"}, "scope": {"a b"}}, true)
	if _, has := ans.json["expires_in"]; has || ans.json["scope"] != "a b" || len(ans.json) != 3 {
		t.Fatalf("got %d %v", ans.status, ans.json)
	}
	if tok, _ := ans.json["access_token"].(string); !o.Valid(tok) {
		t.Fatalf("token %q without expiry is not valid", tok)
	}
}

// TestOAuthRefusals: a wrong secret is 401 invalid_client (with a Basic
// challenge when Basic was used), another grant 400
// unsupported_grant_type, two ways of authenticating 400
// invalid_request; nothing is issued.
func TestOAuthRefusals(t *testing.T) {
	o := fake.NewOAuth(t)
	bad := clientConfig(o, oauth2.AuthStyleInParams)
	bad.ClientSecret = "wrong"
	_, err := bad.Token(context.Background())
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusUnauthorized || re.ErrorCode != "invalid_client" {
		t.Fatalf("wrong secret: %v", err)
	}

	cc := url.Values{"grant_type": {"client_credentials"}}
	for _, c := range []struct {
		name      string
		form      url.Values
		basic     bool
		status    int
		code      string
		challenge string
	}{
		{"wrong secret in Basic", cc, false, 401, "invalid_client", `Basic realm="fake-oauth"`},
		{"no client", cc, false, 401, "invalid_client", ""},
		{"password grant", url.Values{"grant_type": {"password"}, "username": {"u"}, "password": {"p"}}, true, 400, "unsupported_grant_type", ""},
		{"no grant", url.Values{}, true, 400, "invalid_request", ""},
		{"both ways", url.Values{"grant_type": {"client_credentials"}, "client_id": {o.ClientID}, "client_secret": {o.ClientSecret}}, true, 400, "invalid_request", ""},
		{"grant twice", url.Values{"grant_type": {"client_credentials", "client_credentials"}}, true, 400, "invalid_request", ""},
	} {
		var ans tokenAnswer
		if c.name == "wrong secret in Basic" {
			ans = postTokenAs(t, o, c.form, o.ClientID, "wrong")
		} else {
			ans = postToken(t, o, c.form, c.basic)
		}
		if ans.status != c.status || ans.json["error"] != c.code || ans.header.Get("WWW-Authenticate") != c.challenge ||
			ans.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: got %d %v %v", c.name, ans.status, ans.json, ans.header)
		}
	}
	res, err := http.Get(o.URL())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d %v", res.StatusCode, res.Header)
	}
	if o.Issued() != 0 {
		t.Fatalf("issued %d", o.Issued())
	}
}

// tokenAnswer is one answer of the token endpoint.
type tokenAnswer struct {
	status int
	header http.Header
	json   map[string]any
}

// postToken POSTs form to o's token endpoint, with o's credentials in
// HTTP Basic when basic is true.
func postToken(t *testing.T, o *fake.OAuth, form url.Values, basic bool) tokenAnswer {
	t.Helper()
	if basic {
		return postTokenAs(t, o, form, o.ClientID, o.ClientSecret)
	}
	return postTokenAs(t, o, form, "", "")
}

// postTokenAs POSTs form with id and secret in HTTP Basic (none when id
// is empty), and decodes the JSON answer.
func postTokenAs(t *testing.T, o *fake.OAuth, form url.Values, id, secret string) tokenAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, o.URL(), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret))))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	ans := tokenAnswer{status: res.StatusCode, header: res.Header}
	if ct := res.Header.Get("Content-Type"); ct != "application/json;charset=UTF-8" {
		t.Fatalf("content type %q", ct)
	}
	if err := json.Unmarshal(body, &ans.json); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return ans
}
