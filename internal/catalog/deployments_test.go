package catalog

import (
	"net/url"
	"strings"
	"testing"
)

// newProvider builds a catalogue of p alone and returns its provider.
func newProvider(p Provider) (*Provider, error) {
	p.Name, p.Format = "p", FormatOpenAI
	c, err := New([]Provider{p}, nil, nil, nil, "")
	if err != nil {
		return nil, err
	}
	return c.Providers["p"], nil
}

// A base_url of several comma-separated URLs is that many deployments
// sharing the key; listed deployments get the provider's key when they
// name none and weight 1 by default; base_url and APIKey become the first
// deployment's.
func TestDeployments(t *testing.T) {
	p, err := newProvider(Provider{BaseURL: " https://a.example/v1/ , https://b.example/v1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Deployment{{BaseURL: "https://a.example/v1", APIKey: "k", Weight: 1}, {BaseURL: "https://b.example/v1", APIKey: "k", Weight: 1}}
	if len(p.Deployments) != 2 || p.Deployments[0] != want[0] || p.Deployments[1] != want[1] || p.BaseURL != "https://a.example/v1" {
		t.Fatalf("comma-separated base_url: %+v (base %q)", p.Deployments, p.BaseURL)
	}
	if p.Cooldown != DefaultCooldown {
		t.Fatalf("cooldown %v, want %v", p.Cooldown, DefaultCooldown)
	}

	listed := []Deployment{{BaseURL: "https://east.example/v1", APIKey: "east", Weight: 3, RequestsPerMinute: 60, TokensPerMinute: 9000},
		{BaseURL: "https://west.example/v1/"}}
	p, err = newProvider(Provider{APIKey: "shared", Deployments: listed})
	if err != nil {
		t.Fatal(err)
	}
	if p.Deployments[0] != listed[0] || p.Deployments[1] != (Deployment{BaseURL: "https://west.example/v1", APIKey: "shared", Weight: 1}) ||
		p.APIKey != "east" || p.BaseURL != "https://east.example/v1" {
		t.Fatalf("listed deployments: %+v (base %q key %q)", p.Deployments, p.BaseURL, p.APIKey)
	}
	if listed[1].APIKey != "" {
		t.Fatal("the caller's list was changed")
	}
}

// Deployments that cannot work are refused, naming what is wrong.
func TestDeploymentsRefused(t *testing.T) {
	many := make([]Deployment, MaxDeployments+1)
	for i := range many {
		many[i].BaseURL = "http://x/v1"
	}
	for _, tc := range []struct {
		p    Provider
		want string
	}{
		{Provider{}, "provider p: base_url is required"},
		{Provider{BaseURL: "http://a/v1,,http://b/v1"}, "provider p: deployment 2: base_url is required"},
		{Provider{BaseURL: "http://a/v1", Deployments: []Deployment{{BaseURL: "http://b/v1"}}}, "base_url and deployments: give one or the other"},
		{Provider{Deployments: []Deployment{{BaseURL: "http://a/v1,http://b/v1"}}}, "holds a comma"},
		{Provider{Deployments: []Deployment{{BaseURL: "http://a/v1", Weight: MaxWeight + 1}}}, "weight 1001: want 1 to 1000"},
		{Provider{Deployments: []Deployment{{BaseURL: "http://a/v1", Weight: -1}}}, "weight -1"},
		{Provider{Deployments: []Deployment{{BaseURL: "http://a/v1", RequestsPerMinute: -1}}}, "per-minute limit below zero"},
		{Provider{Deployments: many}, "65 deployments: at most 64"},
		{Provider{BaseURL: "https://a/v1,https://b/%zz"}, `provider p: deployment 2: base_url: not a URL: invalid URL escape "%zz"`},
		{Provider{BaseURL: "https://b/%zz"}, `provider p: base_url: not a URL: invalid URL escape "%zz"`},
		{Provider{BaseURL: "http://a/v1,ftp://b/v1"}, "provider p: deployment 2: base_url: the scheme must be http or https"},
		{Provider{BaseURL: "api.openai.com/v1"}, "provider p: base_url: the scheme must be http or https"},
		{Provider{BaseURL: "localhost:8000/v1"}, "provider p: base_url: the scheme must be http or https"},
		{Provider{Deployments: []Deployment{{BaseURL: "http://a/v1"}, {BaseURL: "https:///v1"}}}, "provider p: deployment 2: base_url: no host"},
		{Provider{BaseURL: "http://:8000/v1"}, "provider p: base_url: no host"},
		{Provider{BaseURL: "http:a/v1"}, "provider p: base_url: no host"},
		{Provider{BaseURL: "https://user:hunter2@a/v1"}, "provider p: base_url: a user or password in the URL: give the key as api_key"},
		{Provider{BaseURL: "http://a/v1,https://a/v1#x"}, "provider p: deployment 2: base_url: a fragment (#): not sent to the provider"},
		{Provider{BaseURL: "https://a/v1#"}, "provider p: base_url: a fragment"},
		{Provider{BaseURL: "https://a.openai.azure.com/openai/v1?api-version=preview"}, "provider p: base_url: a query (?)"},
	} {
		_, err := newProvider(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.p, err, tc.want)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error quotes the password: %v", err)
		}
	}
	// Loopback and self-hosted servers over plain http, and ports, are
	// base URLs.
	for _, base := range []string{"http://127.0.0.1:8000/v1", "http://[::1]:9/v1", "HTTPS://api.openai.com/v1"} {
		if _, err := newProvider(Provider{BaseURL: base}); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
}

// FuzzBaseURLList holds the reading of a base_url (from the environment,
// comma-separated) to its contract on any text: an error, or one
// deployment per comma-separated part, each trimmed, non-empty, without a
// comma or a trailing slash, carrying the key, an http or https URL with
// a host.
func FuzzBaseURLList(f *testing.F) {
	for _, s := range []string{"https://api.openai.com/v1", "https://a/v1,https://b/%zz", "https://u:p@a/v1", "ftp://a", "http://a/v1#f", "http://a/v1,http://b/v1", " http://a/v1/ ,http://b/v1//", ",", "", "a,,b", "///", " , x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, base string) {
		p, err := newProvider(Provider{BaseURL: base, APIKey: "k"})
		if err != nil {
			return
		}
		parts := strings.Split(base, ",")
		if len(p.Deployments) != len(parts) {
			t.Fatalf("%q: %d deployments, want %d", base, len(p.Deployments), len(parts))
		}
		for i, d := range p.Deployments {
			if d.BaseURL == "" || strings.Contains(d.BaseURL, ",") || strings.HasSuffix(d.BaseURL, "/") ||
				d.BaseURL != strings.TrimRight(strings.TrimSpace(parts[i]), "/") || d.APIKey != "k" || d.Weight != 1 {
				t.Fatalf("%q: deployment %d is %+v", base, i, d)
			}
			u, err := url.Parse(d.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" {
				t.Fatalf("%q: deployment %d has base URL %q (%v)", base, i, d.BaseURL, err)
			}
		}
	})
}
