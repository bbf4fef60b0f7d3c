package search

import (
	"errors"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

func TestRead(t *testing.T) {
	b := []byte(`{"status":"completed","output":[
		{"type":"web_search_call","status":"completed"},{"type":"web_search_call","status":"completed"},
		{"type":"message","content":[{"type":"output_text","text":"A","annotations":[{"type":"url_citation","url":"https://b/"},{"type":"url_citation","url":"https://a/"}]},
			{"type":"output_text","text":"B","annotations":[{"type":"url_citation","url":"https://b/"},{"type":"file_citation","file_id":"f"}]}]}],
		"usage":{"input_tokens":10,"output_tokens":3,"input_tokens_details":{"cached_tokens":0}}}`)
	r := read(b)
	if r.status != "completed" || r.answer != "AB" || strings.Join(r.citations, " ") != "https://b/ https://a/" || r.searches != 2 ||
		!r.hasUsage || r.usage.Input != 10 || r.usage.Output != 3 {
		t.Fatalf("read %+v", r)
	}
	if r := read([]byte(`{"status":"completed","output":[]}`)); r.hasUsage || r.citations == nil {
		t.Fatalf("no usage: %+v", r)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		body, param string
		ok          bool
	}{
		{`{"query":"q"}`, "", true},
		{`{"query":"` + strings.Repeat("x", MaxQueryChars) + `"}`, "", true},
		{`{"query":"` + strings.Repeat("x", MaxQueryChars+1) + `"}`, "query", false},
		{`{"query":" "}`, "query", false},
		{`{"query":"q","query":"r"}`, "", false},
		{`{"query":"q","model":"m"}`, "", false},
		{`{}`, "query", false},
		{`[]`, "", false},
	} {
		_, err := parse(strings.NewReader(tc.body))
		var e *gwerr.Error
		if tc.ok != (err == nil) || (!tc.ok && (!errors.As(err, &e) || e.Kind != gwerr.Invalid || e.Param != tc.param)) {
			t.Errorf("%.40s: %v", tc.body, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"query":"q"}`))
	f.Add([]byte(`{"query":"q","x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := parse(strings.NewReader(string(b)))
		if err == nil && (strings.TrimSpace(q) == "" || len([]rune(q)) > MaxQueryChars) {
			t.Fatalf("accepted %q", q)
		}
	})
}
