package fake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzBearerToken: a token taken from an Authorization value is never
// empty, holds no blank, and is what follows the Bearer scheme and its
// spaces.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc", "BEARER x y", "Basic abc", "Bearer", "Bearer ", "", "Bearer\tabc", "Bearer a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, authorization string) {
		tok, ok := bearerToken(authorization)
		if !ok {
			if tok != "" {
				t.Fatalf("%q: refused but token %q", authorization, tok)
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t") {
			t.Fatalf("%q: token %q", authorization, tok)
		}
		if !strings.EqualFold(authorization[:len("Bearer ")], "Bearer ") ||
			strings.TrimLeft(authorization[len("Bearer "):], " ") != tok {
			t.Fatalf("%q: token %q", authorization, tok)
		}
	})
}

// FuzzOAuthToken: whatever a request to the token endpoint holds, the
// answer is one of the endpoint's statuses with a JSON object, and a
// token only for the one client with the client credentials grant.
func FuzzOAuthToken(f *testing.F) {
	const id, secret = "cid", "csecret"
	basic := "Basic Y2lkOmNzZWNyZXQ=" // cid:csecret
	for _, c := range [][4]string{
		{"POST", "application/x-www-form-urlencoded", basic, "grant_type=client_credentials"},
		{"POST", "application/x-www-form-urlencoded", "", "grant_type=client_credentials&client_id=cid&client_secret=csecret&scope=a+b"},
		{"POST", "application/x-www-form-urlencoded; charset=utf-8", basic, "grant_type=password"},
		{"POST", "application/json", basic, `{"grant_type":"client_credentials"}`},
		{"GET", "", "", ""},
		{"POST", "application/x-www-form-urlencoded", "Basic %%%", "grant_type=client_credentials&scope=%zz"},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, method, contentType, authorization, body string) {
		if method != http.MethodPost && method != http.MethodGet && method != http.MethodPut {
			return
		}
		o := &OAuth{ClientID: id, ClientSecret: secret, ttl: DefaultOAuthTTL, tokens: map[string]time.Time{}}
		req := httptest.NewRequest(method, OAuthTokenPath, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", authorization)
		rec := httptest.NewRecorder()
		o.serveToken(rec, req)
		var ans map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("%d: not a JSON object: %q", rec.Code, rec.Body.Bytes())
		}
		switch rec.Code {
		case http.StatusOK:
			tok, _ := ans["access_token"].(string)
			if !o.Valid(tok) || ans["token_type"] != "Bearer" || o.Issued() != 1 || !strings.Contains(body, "client_credentials") {
				t.Fatalf("granted %v for %q", ans, body)
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusMethodNotAllowed:
			if code, _ := ans["error"].(string); code == "" || o.Issued() != 0 {
				t.Fatalf("%d: %v", rec.Code, ans)
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}
