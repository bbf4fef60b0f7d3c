package translate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/sjson"
)

// FuzzSetLikeSjson holds set's fast path (appendMember, appendValue) to
// sjson's output: the same JSON, byte for byte once both are compacted.
func FuzzSetLikeSjson(f *testing.F) {
	f.Add([]byte(`{}`), "role", "assistant", int64(3))
	f.Add([]byte(`{"a":1}`), "a", "x", int64(-1))
	f.Add([]byte("{ \n}"), "k", "é\"<\x01", int64(0))
	f.Add([]byte(`{"a":{"b":2} }`), "b", "\x7f", int64(1<<62))
	f.Fuzz(func(t *testing.T, b []byte, key, s string, n int64) {
		if !json.Valid(b) || len(b) == 0 || b[0] != '{' {
			return
		}
		for _, v := range []any{s, n, int(n), n%2 == 0} {
			in := bytes.Clone(b)
			got := set(in, key, v)
			if !bytes.Equal(in, b) {
				t.Fatalf("set changed its input: %q", in)
			}
			want, err := sjson.SetBytes(bytes.Clone(b), key, v)
			if err != nil {
				continue
			}
			var g, w bytes.Buffer
			if json.Compact(&w, want) != nil {
				continue
			}
			if err := json.Compact(&g, got); err != nil {
				t.Fatalf("set(%q, %q, %#v) = %q: not JSON: %v", b, key, v, got, err)
			}
			if !bytes.Equal(g.Bytes(), w.Bytes()) {
				t.Fatalf("set(%q, %q, %#v) = %q, sjson %q", b, key, v, got, want)
			}
		}
	})
}

// FuzzObjectLikeSet holds the object builder to the set chain it stands
// for: the same bytes for the same distinct plain keys and values.
func FuzzObjectLikeSet(f *testing.F) {
	f.Add("role", "assistant", "n", int64(3), `{"x":[1,2]}`)
	f.Add("text", "é\"<\x01\n", "created", int64(-1), `null`)
	f.Fuzz(func(t *testing.T, k1, s, k2 string, n int64, raw string) {
		if !plainKey(k1) || !plainKey(k2) || k1 == k2 || k1 == "raw" || k2 == "raw" || !json.Valid([]byte(raw)) {
			return
		}
		want := setRaw(set(set(set(obj(), k1, s), k2, n), "flag", n%2 == 0), "raw", raw)
		got := newObject().val(k1, s).val(k2, n).val("flag", n%2 == 0).rawS("raw", raw).done()
		if k1 == "flag" || k2 == "flag" {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("object %q, set %q", got, want)
		}
		if e := newObject().done(); string(e) != "{}" {
			t.Fatalf("empty object %q", e)
		}
	})
}
