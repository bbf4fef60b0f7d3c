package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name, body string
		want       string // "" accepts; otherwise a substring of the reason
	}{
		{"object", `{"model":"gpt-4.1-nano","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"scalars", ` {"a":true,"b":false,"c":null,"d":-0.5e+10,"e":0,"f":"\u00e9\n"} `, ""},
		{"top-level array", `[1,2,3]`, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"duplicate model", `{"model":"gpt-4.1-nano","messages":[],"model":"o4-mini"}`, `the key "model" twice`},
		{"duplicate nested", `{"stream_options":{"include_usage":true,"include_usage":false}}`, `"include_usage" twice`},
		{"duplicate in array element", `{"messages":[{"role":"user","role":"system"}]}`, `"role" twice`},
		{"duplicate by escape", `{"model":"a","mod\u0065l":"b"}`, `"model" twice`},
		{"duplicate of an early key as the seventeenth", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k0":0}`, `"k0" twice`},
		{"duplicate of a late key", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k17":3}`, `"k17" twice`},
		{"duplicate among many keys", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`, `"k3" twice`},
		{"depth 64 arrays", deep(MaxDepth), ""},
		{"depth 65 arrays", deep(MaxDepth + 1), "deeper than 64"},
		{"depth 64 objects", deepObj(MaxDepth), ""},
		{"depth 65 objects", deepObj(MaxDepth + 1), "deeper than 64"},
		{"empty", ``, "not valid JSON"},
		{"two values", `{} {}`, "not valid JSON"},
		{"trailing comma", `{"a":1,}`, "not valid JSON"},
		{"bad escape", `{"a":"\x"}`, "not valid JSON"},
		{"control char", "{\"a\":\"\x01\"}", "not valid JSON"},
		{"leading zero", `{"a":01}`, "not valid JSON"},
		{"bare minus", `[-]`, "not valid JSON"},
		{"bad literal", `[tru]`, "not valid JSON"},
		{"not utf-8", "{\"a\":\"\xff\"}", "not UTF-8"},
		{"unclosed", `{"a":[1,2`, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.body))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Reason, tc.want) {
				t.Fatalf("Check = %v, want an *Error containing %q", err, tc.want)
			}
		})
	}
}

// A huge run of '[' is refused at the depth bound, without recursing through it.
func TestCheckHugeNesting(t *testing.T) {
	b := bytes.Repeat([]byte("["), 10<<20)
	if err := Check(b); err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("Check = %v", err)
	}
}

// Valid allows duplicate keys (models and upstreams write them) but keeps
// the depth bound.
func TestValid(t *testing.T) {
	for body, want := range map[string]bool{
		`{"a":1,"a":2}`: true,
		`[1,{"b":[]}]`:  true,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1): false,
		`{"a":`: false,
		``:      false,
	} {
		if got := Valid([]byte(body)); got != want {
			t.Errorf("Valid(%.40q) = %v, want %v", body, got, want)
		}
	}
	if Valid(bytes.Repeat([]byte("["), 10<<20)) {
		t.Fatal("Valid accepted 10 MB of [")
	}
}

func TestRead(t *testing.T) {
	b, err := Read(strings.NewReader(`{"a":1}`), 7)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("Read = %q, %v", b, err)
	}
	_, err = Read(strings.NewReader(`{"a":12}`), 7)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 7 {
		t.Fatalf("Read over the limit = %v, want *TooLargeError{7}", err)
	}
	if _, err = Read(strings.NewReader(`{"a":1,"a":2}`), 100); err == nil {
		t.Fatal("Read accepted a duplicate key")
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[[[]]]`, `{"a":"\u0041","A":1}`, `"x"`, `-1.5e3`, `{"a":{"b":[{"c":null}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b)
		if err == nil {
			if !json.Valid(b) {
				t.Fatalf("Check accepted invalid JSON %q", b)
			}
			if duplicated(b) {
				t.Fatalf("Check accepted a duplicate key in %q", b)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Check error %T, want *Error", err)
		}
		if strings.Contains(e.Reason, "twice") && !duplicated(b) {
			t.Fatalf("Check found a duplicate key in %q, which has none", b)
		}
		if json.Valid(b) && !strings.Contains(e.Reason, "twice") && !strings.Contains(e.Reason, "deeper") && !strings.Contains(e.Reason, "UTF-8") {
			t.Fatalf("Check refused valid JSON %q: %v", b, err)
		}
	})
}

// duplicated reports whether valid JSON b has an object with a key twice
// (after unescaping), read with encoding/json's tokens: the reference
// Check's duplicate test is held to.
func duplicated(b []byte) bool {
	type frame struct {
		keys      map[string]bool // nil: an array
		expectKey bool
	}
	var stack []*frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		d, delim := tok.(json.Delim)
		switch {
		case delim && (d == '}' || d == ']'):
			stack = stack[:len(stack)-1]
			if f := top(); f != nil && f.keys != nil {
				f.expectKey = true
			}
		case top() != nil && top().expectKey:
			f, k := top(), tok.(string)
			if f.keys[k] {
				return true
			}
			f.keys[k], f.expectKey = true, false
		case delim:
			f := &frame{}
			if d == '{' {
				f.keys, f.expectKey = map[string]bool{}, true
			}
			stack = append(stack, f)
		default:
			if f := top(); f != nil && f.keys != nil {
				f.expectKey = true
			}
		}
	}
}

// Parse reads as gjson.ParseBytes does, without the copy.
func TestParse(t *testing.T) {
	if r := Parse(nil); r.Exists() {
		t.Fatalf("Parse(nil) = %v, want nothing", r)
	}
	b := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if got, want := Parse(b).Get("messages.0.content").String(), "hi"; got != want {
		t.Fatalf("content %q, want %q", got, want)
	}
	if got, want := Parse(b).Raw, gjson.ParseBytes(b).Raw; got != want {
		t.Fatalf("raw %q, want %q", got, want)
	}
}

// Members reads each named member as a path lookup does: the first of a
// repeated key, nothing for an absent one or a value that is no object.
func TestMembers(t *testing.T) {
	o := gjson.Parse(`{"a":1,"b":{"c":2},"a":3}`)
	var a, b, z gjson.Result
	Members(o, Member{"a", &a}, Member{"b", &b}, Member{"z", &z})
	if a.Raw != o.Get("a").Raw || b.Raw != o.Get("b").Raw || z.Exists() {
		t.Fatalf("a %q b %q z %q, want %q %q and nothing", a.Raw, b.Raw, z.Raw, o.Get("a").Raw, o.Get("b").Raw)
	}
	var x gjson.Result
	Members(gjson.Parse(`[{"a":1}]`), Member{"a", &x})
	if x.Exists() {
		t.Fatalf("a member read from an array: %q", x.Raw)
	}
}

// AppendString quotes as json.Marshal does, whatever the string holds.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "gpt-4.1-mini", `a"b\c`, "<&>", "\x00\x1f\x7f", "é\u2028\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal: %s", s, got[1:], want)
		}
	})
}
