package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestConsoleCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		in         string
		behindAuth bool
		err        bool
	}{
		{"gw_console", false, false},
		{"gw_console {\n behind_auth\n}", true, false},
		{"gw_console extra", false, true},
		{"gw_console {\n behind_auth yes\n}", false, true},
		{"gw_console {\n open_to_all\n}", false, true},
	} {
		var c Console
		err := c.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if (err != nil) != tc.err || c.BehindAuth != tc.behindAuth {
			t.Errorf("%q: behind_auth %v, error %v; want behind_auth %v, error %v", tc.in, c.BehindAuth, err, tc.behindAuth, tc.err)
		}
	}
}
