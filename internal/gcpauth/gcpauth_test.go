package gcpauth

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// tokenServer is a token endpoint that checks each JWT bearer grant
// against pub and answers tokens tok-1, tok-2, ... that expire in
// expires seconds, or status when it is set.
func tokenServer(t *testing.T, pub *rsa.PublicKey, email string, expires int, status int) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			t.Errorf("grant %v (%v)", r.Form, err)
		}
		parts := strings.Split(r.Form.Get("assertion"), ".")
		if len(parts) != 3 {
			t.Fatalf("assertion %q", r.Form.Get("assertion"))
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			t.Errorf("assertion signature: %v", err)
		}
		claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var c struct {
			Iss, Aud, Scope string
		}
		if err := json.Unmarshal(claims, &c); err != nil || c.Iss != email || c.Scope != Scope || c.Aud != "http://"+r.Host+"/token" {
			t.Errorf("claims %s (%v)", claims, err)
		}
		k := n.Add(1)
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, k, expires)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// keyFile writes a service-account key file whose token_uri is url.
func keyFile(t *testing.T, key *rsa.PrivateKey, email, url string) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "kid1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1", "token_uri": url,
	})
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t *testing.T) *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// A token is asked for once with a JWT signed by the file's key and
// kept while it lasts; one about to expire is renewed.
func TestTokenKeptAndRenewed(t *testing.T) {
	key := newKey(t)
	const email = "gw@p.iam.gserviceaccount.com"
	srv, n := tokenServer(t, &key.PublicKey, email, 3600, 0)
	src, err := Load(keyFile(t, key, email, srv.URL+"/token"), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if tok, err := src.Token(); err != nil || tok != "tok-1" {
			t.Fatalf("Token() = %q, %v", tok, err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("%d token requests, want 1", n.Load())
	}
	// Tokens that expire within seconds are renewed at each use.
	short, m := tokenServer(t, &key.PublicKey, email, 5, 0)
	src, err = Load(keyFile(t, key, email, short.URL+"/token"), short.Client())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := src.Token()
	b, _ := src.Token()
	if a != "tok-1" || b != "tok-2" || m.Load() != 2 {
		t.Fatalf("short-lived tokens %q, %q after %d requests", a, b, m.Load())
	}
}

// A refused grant is an error naming the status; a file that is not a
// service-account key is refused at load without quoting it.
func TestRefusals(t *testing.T) {
	key := newKey(t)
	srv, _ := tokenServer(t, &key.PublicKey, "e@x", 3600, http.StatusUnauthorized)
	src, err := Load(keyFile(t, key, "e@x", srv.URL+"/token"), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Token(); !errors.Is(err, ErrNoToken) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("refused grant: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"type":"authorized_user","secret":"s3cr3t"}`), 0o600)
	if _, err := Load(bad, nil); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("a user credential file: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.json"), nil); err == nil {
		t.Fatal("a missing file loaded")
	}
}
