package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// Placeholders of matchJSON's want text.
const (
	// anyString matches a non-empty string.
	anyString = "<string>"
	// optString matches a non-empty string or an absent key.
	optString = "<string?>"
	// anyNumber matches a number.
	anyNumber = "<number>"
)

// matchJSON checks that got is exactly the JSON of want: the same keys at
// every level (no more, no fewer), the same values, except where want holds
// a placeholder.
func matchJSON(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("body is not JSON (%v): %q\nwant %s", err, got, want)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	var diffs []string
	compareJSON("$", g, w, &diffs)
	if len(diffs) > 0 {
		t.Errorf("body %s\nwant %s\n  %s", strings.TrimSpace(string(got)), want, strings.Join(diffs, "\n  "))
	}
}

func compareJSON(path string, got, want any, diffs *[]string) {
	bad := func(format string, args ...any) {
		*diffs = append(*diffs, path+": "+fmt.Sprintf(format, args...))
	}
	switch w := want.(type) {
	case string:
		switch w {
		case anyString, optString:
			if s, ok := got.(string); !ok || s == "" {
				bad("got %#v, want a non-empty string", got)
			}
		case anyNumber:
			if _, ok := got.(float64); !ok {
				bad("got %#v, want a number", got)
			}
		default:
			if got != w {
				bad("got %#v, want %q", got, w)
			}
		}
	case map[string]any:
		gm, ok := got.(map[string]any)
		if !ok {
			bad("got %#v, want an object", got)
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, present := gm[k]
			if !present {
				if w[k] != optString {
					bad("key %q missing", k)
				}
				continue
			}
			compareJSON(path+"."+k, gv, w[k], diffs)
		}
		for k := range gm {
			if _, ok := w[k]; !ok {
				bad("unexpected key %q (value %#v)", k, gm[k])
			}
		}
	case []any:
		ga, ok := got.([]any)
		if !ok || len(ga) != len(w) {
			bad("got %#v, want an array of %d", got, len(w))
			return
		}
		for i := range w {
			compareJSON(fmt.Sprintf("%s[%d]", path, i), ga[i], w[i], diffs)
		}
	default: // nil, float64, bool
		if !reflect.DeepEqual(got, w) {
			bad("got %#v, want %#v", got, w)
		}
	}
}

// expectError checks a gateway error: status, JSON content type, body shape
// and a request id with the prefix.
func expectError(t testing.TB, r response, status int, want, idPrefix string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d (body %s)", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	matchJSON(t, r.Body, want)
	expectRequestID(t, r, idPrefix)
}

// expectRequestID checks X-Gw-Request-Id starts with prefix ("" means req-)
// and carries more than the prefix.
func expectRequestID(t testing.TB, r response, prefix string) {
	t.Helper()
	if prefix == "" {
		prefix = "req-"
	}
	id := r.Header.Get("X-Gw-Request-Id")
	if !strings.HasPrefix(id, prefix) || len(id) <= len(prefix) {
		t.Errorf("X-Gw-Request-Id %q, want %s<id>", id, prefix)
	}
}

// modelIDs returns the ids of a 200 model list, checking the wrapper.
func modelIDs(t testing.TB, r response) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("model list: status %d, want 200; body %s", r.Status, r.Body)
	}
	var list struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || list.Object != "list" || list.Data == nil {
		t.Fatalf("model list %s: want {object: list, data: [...]} (%v)", r.Body, err)
	}
	ids := []string{}
	for _, raw := range list.Data {
		var row struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &row); err != nil || row.ID == "" {
			t.Fatalf("model row %s without id", raw)
		}
		ids = append(ids, row.ID)
	}
	return ids
}

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	x := append([]string(nil), a...)
	y := append([]string(nil), b...)
	sort.Strings(x)
	sort.Strings(y)
	return reflect.DeepEqual(x, y)
}

// TestMatchJSON keeps the matcher honest: it must reject what it should.
func TestMatchJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		got, want string
		ok        bool
	}{
		{`{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, true},
		{`{"a":1}`, `{"a":1,"b":"x"}`, false},
		{`{"a":1,"b":"x","c":null}`, `{"a":1,"b":"x"}`, false},
		{`{"a":null}`, `{"a":null}`, true},
		{`{}`, `{"a":null}`, false},
		{`{"a":"hi"}`, `{"a":"<string>"}`, true},
		{`{"a":""}`, `{"a":"<string>"}`, false},
		{`{"a":1}`, `{"a":"<string>"}`, false},
		{`{}`, `{"a":"<string?>"}`, true},
		{`{"a":2}`, `{"a":"<string?>"}`, false},
		{`{"a":-32002}`, `{"a":"<number>"}`, true},
		{`{"a":-32002}`, `{"a":-32001}`, false},
		{`{"a":[1,2]}`, `{"a":[1,2]}`, true},
		{`{"a":[1]}`, `{"a":[1,2]}`, false},
		{`not json`, `{}`, false},
	}
	for _, c := range cases {
		ft := &fakeT{}
		matchJSON(ft, []byte(c.got), c.want)
		if ft.failed == c.ok {
			t.Errorf("matchJSON(%s, %s): failed=%v, want ok=%v", c.got, c.want, ft.failed, c.ok)
		}
	}
}

// fakeT records failures of a helper under test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
