// Package gcpauth makes the OAuth 2 access tokens a Vertex AI provider's
// calls carry, from a Google Cloud service-account key file: a JWT signed
// with the file's private key is exchanged at the file's token_uri (the
// JWT bearer grant), and the token is kept and renewed shortly before it
// expires.
package gcpauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// Scope is the OAuth scope of Vertex AI's calls.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// MaxKeyFile bounds a key file's size: Google's are a few kilobytes.
const MaxKeyFile = 64 << 10

// Source makes and renews one key file's access tokens. It is safe for
// concurrent use.
type Source struct {
	ts oauth2.TokenSource
}

// Load reads the service-account key file at path once; tokens are asked
// for with client (nil: http.DefaultClient) at the file's token_uri.
// Errors name the file, never its content.
func Load(path string, client *http.Client) (*Source, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	if info.Size() > MaxKeyFile {
		return nil, fmt.Errorf("credentials file %s: larger than %d bytes", path, MaxKeyFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	return FromJSON(b, client, path)
}

// FromJSON is Load of a key file's content b; name says where it came
// from in errors.
func FromJSON(b []byte, client *http.Client, name string) (*Source, error) {
	cfg, err := google.JWTConfigFromJSON(b, Scope)
	if err != nil {
		// The library's error may quote the file: say only what it is.
		return nil, fmt.Errorf("credentials file %s: not a service-account key file", name)
	}
	if cfg.TokenURL == "" || cfg.Email == "" || len(cfg.PrivateKey) == 0 {
		return nil, fmt.Errorf("credentials file %s: lacks token_uri, client_email or private_key", name)
	}
	ctx := context.Background()
	if client != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	}
	return &Source{ts: cfg.TokenSource(ctx)}, nil
}

// ErrNoToken is the failure to get an access token.
var ErrNoToken = errors.New("no access token from the credentials' token endpoint")

// Token returns a valid access token: the one kept while it has more
// than a few seconds left, else a new one.
func (s *Source) Token() (string, error) {
	t, err := s.ts.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			return "", fmt.Errorf("%w: HTTP %d", ErrNoToken, re.Response.StatusCode)
		}
		return "", fmt.Errorf("%w: %v", ErrNoToken, err)
	}
	return t.AccessToken, nil
}
