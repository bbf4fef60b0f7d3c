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
