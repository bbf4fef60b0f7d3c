// Package printable keeps text that people read free of control: names,
// reasons and models reach a terminal or a page as text, never as escape
// sequences, line breaks or direction overrides. The admin API refuses
// such characters in what it stores; what is printed is escaped anyway,
// since a store may hold text written before it refused them.
package printable

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Shown reports whether r is printed as itself: a letter, mark, number,
// punctuation, symbol or space. Control characters (escape, line breaks,
// tabs, delete, the C1 range), format characters (direction overrides,
// zero-width ones), line and paragraph separators, private-use and
// unassigned code points are not.
func Shown(r rune) bool { return unicode.IsGraphic(r) }

// Escape returns s with every character that is not Shown written as its
// escape: \n, \r and \t, \u001b (four hex digits) or \U000e0001 (eight)
// for the others, and \xff for a byte that is not UTF-8. A backslash is
// left as it is, so escaping twice changes nothing; where text that holds
// "\u001b" itself must be told from an escaped character, the JSON of the
// value is exact.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case Shown(r):
			b.WriteString(s[i : i+size])
		default:
			b.WriteString(escapeRune(r))
		}
		i += size
	}
	return b.String()
}

// clean reports whether Escape leaves s as it is.
func clean(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !Shown(r) {
			return false
		}
		i += size
	}
	return true
}

// escapeRune writes r (not Shown) as Go writes it in a quoted string.
func escapeRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r > 0xffff {
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// ErrNotShown is Check's answer for text holding a character that is not
// Shown, or bytes that are not UTF-8.
var ErrNotShown = errors.New("must be printable text: no control characters (line breaks, tabs, escapes) and valid UTF-8")

// Check returns nil when s is UTF-8 of Shown characters only and at most
// max characters long; otherwise an error saying what is wrong.
func Check(s string, max int) error {
	if !utf8.ValidString(s) {
		return ErrNotShown
	}
	for _, r := range s {
		if !Shown(r) {
			return ErrNotShown
		}
	}
	if n := utf8.RuneCountInString(s); n > max {
		return errors.New("at most " + strconv.Itoa(max) + " characters")
	}
	return nil
}

// JSON returns the JSON text b with every character that is not Shown
// inside its strings written as a \u escape (a surrogate pair above
// U+FFFF), and a byte that is not UTF-8 as \ufffd, as encoding/json reads
// it: the text decodes to the same values and prints no control. The
// whitespace between values is kept. b must be valid JSON.
func JSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || Shown(r):
			// JSON's whitespace outside strings (inside them these are
			// escaped already), or a character shown as itself.
			out = append(out, b[i:i+size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}
