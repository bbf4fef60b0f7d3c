package pipeline

import (
	"fmt"
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

// A server's listed names become labels up to MaxListedLabels each, over
// the process's life; one server's names do not use another's room.
func TestAdmitCap(t *testing.T) {
	m := NewMetrics()
	names := func(server string, from, n int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf("%s/t%04d", server, i))
		}
		return out
	}
	m.Admit("a", names("a", 0, MaxListedLabels-1))
	m.Admit("a", names("a", 0, MaxListedLabels+50)) // the first ones again, one more, then past the cap
	m.Admit("a", names("a", 1000, 5))               // a later list: no room left
	m.Admit("b", names("b", 0, 3))
	for _, c := range []struct {
		label string
		want  bool
	}{{"a/t0000", true}, {fmt.Sprintf("a/t%04d", MaxListedLabels-1), true}, {fmt.Sprintf("a/t%04d", MaxListedLabels), false},
		{"a/t1000", false}, {"b/t0002", true}, {"b/t0003", false}} {
		if got := m.admitted(c.label); got != c.want {
			t.Errorf("%s admitted %v, want %v", c.label, got, c.want)
		}
	}
	g := &Gateway{Metrics: m}
	if got := g.modelLabel("a/t1000"); got != LabelOther {
		t.Errorf("label of a name past the cap %q, want %q", got, LabelOther)
	}
	o := &observation{}
	if got := o.providerLabel("nobody"); got != LabelOther {
		t.Errorf("label of an undeclared provider %q", got)
	}
}
