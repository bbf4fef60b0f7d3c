package pipeline

import (
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

// TestFamilyOf: the metrics' families are the route families, whatever
// the endpoint's own name.
func TestFamilyOf(t *testing.T) {
	for _, c := range []struct {
		ep   Endpoint
		path string
		want string
	}{
		{Endpoint{Name: "chat"}, "/v1/chat/completions", "chat"},
		{Endpoint{Name: "chat"}, "/v1/responses", "responses"},
		{Endpoint{Name: "chat"}, "/responses", "responses"},
		{Endpoint{Name: "messages"}, "/alt/v1/messages", "messages"},
		{Endpoint{Name: "transcription"}, "/v1/audio/transcriptions", "audio"},
		{Endpoint{Name: "speech"}, "/v1/audio/speech", "audio"},
		{Endpoint{Name: "voices"}, "/v1/audio/voices", "audio"},
		{Endpoint{Name: "mcp_tools"}, "/mcp-tools", "mcp"},
		{Endpoint{Name: "mcp_routing"}, "/mcp", "mcp"},
		{Endpoint{Name: "apps"}, "/mcp-tools/apps_execute", "mcp"},
		{Endpoint{Name: "not_found", Family: gwerr.Messages}, "/alt/nothing", "messages"},
		{Endpoint{Name: "not_found", Family: gwerr.Chat}, "/v1/nothing", "chat"},
		{Endpoint{Name: "images"}, "/v1/images/generations", "images"},
		{Endpoint{Name: "decide"}, "/v1/decide", "decide"},
	} {
		if got := familyOf(&c.ep, c.path); got != c.want {
			t.Errorf("%s on %s: family %q, want %q", c.ep.Name, c.path, got, c.want)
		}
	}
}

// TestMillis: Server-Timing's durations are milliseconds with one
// decimal, rounded half up.
func TestMillis(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0"},
		{49999, "0.0"},
		{50 * time.Microsecond, "0.1"},
		{time.Millisecond, "1.0"},
		{1249 * time.Microsecond, "1.2"},
		{1250 * time.Microsecond, "1.3"},
		{9960 * time.Microsecond, "10.0"},
		{123456789 * time.Microsecond, "123456.8"},
	} {
		if got := string(millis(nil, c.d)); got != c.want {
			t.Errorf("millis(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
