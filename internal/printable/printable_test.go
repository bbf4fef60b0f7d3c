package printable

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"gpt-4.1 mini", "gpt-4.1 mini"},
		{"café ☕ 模型", "café ☕ 模型"},
		{"a\u00a0b", "a\u00a0b"}, // a no-break space is a space
		{"\x1b[2Jx", `\u001b[2Jx`},
		{"a\nb\r\tc", `a\nb\r\tc`},
		{"del\x7f", `del\u007f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"abc\u202eevil", `abc\u202eevil`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"line\u2028sep", `line\u2028sep`},
		{"tag\U000e0001", `tag\U000e0001`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{`back\slash`, `back\slash`},
		{`\u001b`, `\u001b`}, // text, not a character
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string // the error, "" for none
	}{
		{"laptop", 128, ""},
		{"café ☕", 6, ""},
		{"café ☕!", 6, "at most 6 characters"},
		{"a\x1b[2J", 128, ErrNotShown.Error()},
		{"a\nb", 128, ErrNotShown.Error()},
		{"a\tb", 128, ErrNotShown.Error()},
		{"rtl\u202e", 128, ErrNotShown.Error()},
		{"\xff", 128, ErrNotShown.Error()},
		{"", 128, ""},
	} {
		err := Check(c.in, c.max)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Check(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"model":"gpt"}`, `{"model":"gpt"}`},
		{"{\"a\": [1, 2],\n \"b\":\t\"x\"}", "{\"a\": [1, 2],\n \"b\":\t\"x\"}"},
		{`{"m":"\u001b[2J\n"}`, `{"m":"\u001b[2J\n"}`}, // escaped already
		{"{\"m\":\"del\x7f c1\u009b rtl\u202e\"}", `{"m":"del\u007f c1\u009b rtl\u202e"}`},
		{"{\"m\":\"tag\U000e0001\"}", `{"m":"tag\udb40\udc01"}`},
		{"{\"m\":\"bad\xff\"}", `{"m":"bad\ufffd"}`},
		{`{"m":"café ☕"}`, `{"m":"café ☕"}`},
	} {
		if got := string(JSON([]byte(c.in))); got != c.want {
			t.Errorf("JSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// shownOnly reports whether s holds only characters Shown (and, when
// space is true, JSON's whitespace).
func shownOnly(s string, space bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !Shown(r) && !(space && strings.ContainsRune("\t\n\r", r)) {
			return false
		}
	}
	return true
}

// FuzzEscape: escaped text holds only characters shown as themselves, and
// text that needed nothing is left as it was.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "gpt", "\x1b[2J\n", "\xff", `\u001b`, "\u202e", "\U000e0001", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !shownOnly(got, false) {
			t.Fatalf("Escape(%q) = %q holds what is not shown", s, got)
		}
		if Check(s, len(s)) == nil && got != s {
			t.Fatalf("Escape(%q) = %q changed printable text", s, got)
		}
		if again := Escape(got); again != got {
			t.Fatalf("Escape(%q) = %q, escaped again %q", s, got, again)
		}
	})
}

// FuzzJSON: valid JSON stays valid, decodes to the same value and holds no
// character that is not shown outside JSON's whitespace.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"m":"a"}`, "{\"m\":\"\x7f\u009b\u202e\"}", "[\"\U000e0001\", 1, null]", "{\"m\":\"\xff\"}", "\"\u2028\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		got := JSON([]byte(s))
		if !json.Valid(got) || !shownOnly(string(got), true) {
			t.Fatalf("JSON(%q) = %q", s, got)
		}
		var before, after any
		if json.Unmarshal([]byte(s), &before) != nil || json.Unmarshal(got, &after) != nil || !reflect.DeepEqual(before, after) {
			t.Fatalf("JSON(%q) = %q decodes to %v, not %v", s, got, after, before)
		}
	})
}
