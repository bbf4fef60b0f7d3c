// Package jsonbody is the gateway's one strict reading of a JSON request
// body. gjson and sjson read and edit the first copy of a key, while most
// upstream parsers keep the last one, so a body with a duplicate key could
// be routed, checked and billed as one thing and served as another. Check
// refuses such bodies, and bodies nested deeper than MaxDepth, before
// anything else reads them: what the gateway reads is then exactly what
// the upstream receives.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// MaxDepth is the deepest nesting a request body may have: the top-level
// value's members are at depth 1, and a container at depth MaxDepth+1 is
// refused. The check recurses at most this deep, so no body can exhaust the
// stack.
const MaxDepth = 64

// maxKeyShown bounds how much of a duplicate key a message repeats.
const maxKeyShown = 64

// Error is a body refused by Check. Reason is plain text safe to show.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// TooLargeError is a body longer than Limit bytes.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body is larger than %d bytes", e.Limit)
}

// Read reads r to its end, at most limit bytes (a *TooLargeError beyond,
// without reading further), and checks the body with Check.
func Read(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return b, Check(b)
}

// Check refuses what is not exactly one JSON value (RFC 8259, UTF-8), an
// object with a duplicate key at any level (keys compared after unescaping,
// so "model" and "mod\u0065l" are the same key), or nesting deeper than
// MaxDepth. The error is an *Error.
func Check(b []byte) error { return check(b, true) }

// Object checks a client's body as Check does and that it is one JSON
// object, and parses it (as Parse: b must never change afterwards). why
// says what is wrong, for a 400; it is "" when the body is an object.
func Object(b []byte) (root gjson.Result, why string) {
	if err := Check(b); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return root, e.Reason
		}
		return root, "the body must be valid JSON"
	}
	if root = Parse(b); !root.IsObject() {
		return root, "the body must be a JSON object"
	}
	return root, ""
}

// Valid reports whether b is one JSON value nested at most MaxDepth deep,
// duplicate keys allowed: the check for what upstreams and models write
// (answers, streamed events, tool arguments), where gjson.Valid would
// recurse without bound.
func Valid(b []byte) bool { return check(b, false) == nil }

func check(b []byte, unique bool) error {
	if !utf8.Valid(b) {
		return &Error{Reason: "request body is not valid JSON (not UTF-8)"}
	}
	s := scanner{b: b, unique: unique}
	s.ws()
	if err := s.value(0); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return s.invalid()
	}
	return nil
}

type scanner struct {
	b      []byte
	i      int
	unique bool // refuse duplicate keys
}

func (s *scanner) invalid() error {
	return &Error{Reason: "request body is not valid JSON (at byte " + strconv.Itoa(s.i) + ")"}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value whose containers would sit at depth+1.
func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.invalid()
	}
	switch c := s.b[s.i]; {
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return &Error{Reason: fmt.Sprintf("request body is nested deeper than %d levels", MaxDepth)}
		}
		if c == '{' {
			return s.object(depth + 1)
		}
		return s.array(depth + 1)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.invalid()
}

func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.invalid()
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.invalid()
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.invalid()
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.invalid()
		}
	}
	return nil
}

// str scans a string and returns its raw bytes (quotes included) and
// whether it holds escapes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start := s.i
	s.i++ // opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i], escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return nil, false, s.invalid()
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 || !hex4(s.b[s.i+1:s.i+5]) {
					return nil, false, s.invalid()
				}
				s.i += 5
			default:
				return nil, false, s.invalid()
			}
		case c < 0x20:
			return nil, false, s.invalid()
		default:
			s.i++
		}
	}
	return nil, false, s.invalid()
}

func hex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *scanner) object(depth int) error {
	s.i++ // {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	var keys keySet
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.invalid()
		}
		raw, escaped, err := s.str()
		if err != nil {
			return err
		}
		if s.unique {
			key := raw[1 : len(raw)-1] // the body's own bytes: no copy
			if escaped {
				var k string
				if json.Unmarshal(raw, &k) != nil {
					return s.invalid()
				}
				key = []byte(k)
			}
			if !keys.add(key) {
				return &Error{Reason: "request body has the key " + shown(string(key)) + " twice in one object"}
			}
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.invalid()
		}
		s.i++
		s.ws()
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.invalid()
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return nil
		default:
			return s.invalid()
		}
	}
}

func (s *scanner) array(depth int) error {
	s.i++ // [
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.invalid()
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return nil
		default:
			return s.invalid()
		}
	}
}

// shown quotes a key for a message, cut to maxKeyShown characters.
func shown(key string) string {
	if utf8.RuneCountInString(key) > maxKeyShown {
		r := []rune(key)
		key = string(r[:maxKeyShown]) + "…"
	}
	return strconv.Quote(key)
}

// smallSet is how many keys an object holds before keySet switches from a
// linear scan to a map.
const smallSet = 16

// keySet remembers the keys of one object: the first smallSet in place
// (no allocation), then in a map.
type keySet struct {
	n     int
	small [smallSet][]byte
	m     map[string]struct{}
}

// add records k and reports false when it was there already.
func (ks *keySet) add(k []byte) bool {
	if ks.m != nil {
		if _, ok := ks.m[string(k)]; ok {
			return false
		}
		ks.m[string(k)] = struct{}{}
		return true
	}
	for _, x := range ks.small[:ks.n] {
		if bytes.Equal(x, k) {
			return false
		}
	}
	if ks.n < smallSet {
		ks.small[ks.n] = k
		ks.n++
		return true
	}
	ks.m = make(map[string]struct{}, 2*smallSet)
	for _, x := range ks.small[:ks.n] {
		ks.m[string(x)] = struct{}{}
	}
	ks.m[string(k)] = struct{}{}
	return true
}

// Parse is gjson.ParseBytes without its copy of b: the values read alias
// b, so b must never change afterwards. Every body the gateway reads whole
// (a request, an answer) is a buffer of its own that nothing writes again
// (sjson edits into a new one), so one copy per reading is spared.
func Parse(b []byte) gjson.Result {
	return gjson.Parse(String(b))
}

// String is b as a string without a copy, for path lookups (gjson.Get)
// and searches; as with Parse, b must never change afterwards.
func String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Member names a member of an object and where Members puts it.
type Member struct {
	Key string
	To  *gjson.Result
}

// Members reads the named members of object o into their Results (each
// the zero Result before), in one pass over o that ends once all are
// found; of a repeated key the first counts, as a path lookup reads it.
func Members(o gjson.Result, want ...Member) {
	if !o.IsObject() {
		return
	}
	found := 0
	o.ForEach(func(k, v gjson.Result) bool {
		for _, w := range want {
			if k.Str == w.Key && !w.To.Exists() {
				*w.To = v
				found++
			}
		}
		return found < len(want)
	})
}

// AppendString appends s as a JSON string, byte for byte as json.Marshal
// writes it (FuzzAppendString holds it to that): the HTML characters,
// U+2028 and U+2029 escaped, an invalid UTF-8 byte written as U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
