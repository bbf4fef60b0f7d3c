package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
)

// billing_url is expanded from the environment and must be an http or
// https URL; empty means the tool errors carry no upgrade_url.
func TestBillingURL(t *testing.T) {
	cat, err := catalog.New(nil, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env, want, err string
	}{
		{"https://billing.example.com/upgrade", "https://billing.example.com/upgrade", ""},
		{" http://localhost:3000/billing ", "http://localhost:3000/billing", ""},
		{"", "", ""},
		{"billing.example.com/upgrade", "", `billing_url: "billing.example.com/upgrade" is not an http or https URL`},
		{"mailto:billing@example.com", "", "is not an http or https URL"},
		{"https:///nohost", "", "is not an http or https URL"},
	} {
		t.Setenv("GW_TEST_BILLING_URL", tc.env)
		s, err := (&App{BillingURL: "{env.GW_TEST_BILLING_URL}"}).toolSet(cat)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v, want the upgrade URL %q", tc.env, err, tc.want)
		} else if s.UpgradeURL != tc.want {
			t.Errorf("%q: upgrade URL %q, want %q", tc.env, s.UpgradeURL, tc.want)
		}
	}
}
