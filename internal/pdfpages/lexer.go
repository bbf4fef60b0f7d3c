package pdfpages

import "errors"

// kind is the kind of a token or a value.
type kind uint8

const (
	kindNone kind = iota
	kindInt
	kindReal
	kindName
	kindString
	kindArray
	kindDict
	kindRef
	kindBool
	kindNull
	kindKeyword
	// Tokens that are no value.
	kindArrayOpen
	kindArrayClose
	kindDictOpen
	kindDictClose
)

// value is a PDF value, as much of it as counting pages needs: numbers,
// names (decoded), references, arrays and dictionaries; strings are
// skipped unread.
type value struct {
	kind  kind
	n     int64 // an integer; a reference's object number
	text  string
	array []value
	dict  map[string]value
}

// isName reports the name s.
func (v value) isName(s string) bool { return v.kind == kindName && v.text == s }

// token is one token of the lexer: a value's kind with its number or
// text, a keyword, or a bracket.
type token struct {
	kind kind
	n    int64
	text string
}

// errSyntax is a value the parser cannot read; the object is skipped.
var errSyntax = errors.New("pdf syntax")

// lexer reads tokens from data at pos, charging what it reads to its
// file's budget.
type lexer struct {
	data []byte
	pos  int
	f    *file
	// err is set once the file's budget is spent: reading stops.
	err error
}

// charge takes n bytes off the file's budget.
func (lx *lexer) charge(n int) bool {
	if lx.f == nil {
		return true
	}
	lx.f.budget -= n
	if lx.f.budget < 0 {
		lx.err = ErrTooComplex
		return false
	}
	return true
}

// next reads the next token; ok is false at the end of the data, on
// bytes that make no token, or when the budget is spent.
func (lx *lexer) next() (token, bool) {
	start := lx.pos
	t, ok := lx.read()
	if !lx.charge(lx.pos - start) {
		return token{}, false
	}
	return t, ok
}

func (lx *lexer) read() (token, bool) {
	d := lx.data
	lx.skipSpace()
	if lx.pos >= len(d) {
		return token{}, false
	}
	c := d[lx.pos]
	switch {
	case c == '/':
		lx.pos++
		return token{kind: kindName, text: lx.name()}, true
	case c == '(':
		return token{kind: kindString}, lx.literalString()
	case c == '<' && lx.pos+1 < len(d) && d[lx.pos+1] == '<':
		lx.pos += 2
		return token{kind: kindDictOpen}, true
	case c == '>' && lx.pos+1 < len(d) && d[lx.pos+1] == '>':
		lx.pos += 2
		return token{kind: kindDictClose}, true
	case c == '<':
		return token{kind: kindString}, lx.hexString()
	case c == '[':
		lx.pos++
		return token{kind: kindArrayOpen}, true
	case c == ']':
		lx.pos++
		return token{kind: kindArrayClose}, true
	case c == '+' || c == '-' || c == '.' || isDigit(c):
		return lx.number()
	case isDelimiter(c):
		return token{}, false
	}
	start := lx.pos
	for lx.pos < len(d) && !isSpace(d[lx.pos]) && !isDelimiter(d[lx.pos]) {
		lx.pos++
	}
	switch w := string(d[start:lx.pos]); w {
	case "true", "false":
		return token{kind: kindBool, text: w}, true
	case "null":
		return token{kind: kindNull}, true
	default:
		return token{kind: kindKeyword, text: w}, true
	}
}

// skipSpace skips white space and comments.
func (lx *lexer) skipSpace() {
	d := lx.data
	for lx.pos < len(d) {
		switch c := d[lx.pos]; {
		case isSpace(c):
			lx.pos++
		case c == '%':
			for lx.pos < len(d) && d[lx.pos] != '\n' && d[lx.pos] != '\r' {
				lx.pos++
			}
		default:
			return
		}
	}
}

// name reads a name after its slash, decoding #xx escapes.
func (lx *lexer) name() string {
	d := lx.data
	var b []byte
	for lx.pos < len(d) && !isSpace(d[lx.pos]) && !isDelimiter(d[lx.pos]) {
		c := d[lx.pos]
		if c == '#' && lx.pos+2 < len(d) && isHex(d[lx.pos+1]) && isHex(d[lx.pos+2]) {
			c = unhex(d[lx.pos+1])<<4 | unhex(d[lx.pos+2])
			lx.pos += 2
		}
		b = append(b, c)
		lx.pos++
	}
	return string(b)
}

// literalString skips a (string), its parentheses balanced and its
// escapes honoured.
func (lx *lexer) literalString() bool {
	d := lx.data
	depth := 0
	for ; lx.pos < len(d); lx.pos++ {
		switch d[lx.pos] {
		case '\\':
			lx.pos++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				lx.pos++
				return true
			}
		}
	}
	return false
}

// hexString skips a <hex string>.
func (lx *lexer) hexString() bool {
	d := lx.data
	for lx.pos++; lx.pos < len(d); lx.pos++ {
		switch c := d[lx.pos]; {
		case c == '>':
			lx.pos++
			return true
		case !isHex(c) && !isSpace(c):
			return false
		}
	}
	return false
}

// maxDigits bounds the digits of an integer read (no count, offset or
// object number of a file has more).
const maxDigits = 15

// number reads an integer or a real.
func (lx *lexer) number() (token, bool) {
	d := lx.data
	neg := d[lx.pos] == '-'
	if d[lx.pos] == '+' || neg {
		lx.pos++
	}
	var n int64
	digits, real := 0, false
	for ; lx.pos < len(d); lx.pos++ {
		c := d[lx.pos]
		if c == '.' && !real {
			real = true
			continue
		}
		if !isDigit(c) {
			break
		}
		if !real && digits < maxDigits {
			n = n*10 + int64(c-'0')
		}
		digits++
	}
	switch {
	case digits == 0:
		return token{}, false
	case real || digits > maxDigits:
		return token{kind: kindReal}, true
	case neg:
		n = -n
	}
	return token{kind: kindInt, n: n}, true
}

// parser reads values from its lexer, looking two tokens ahead for
// references (n g R).
type parser struct {
	lx    lexer
	ahead []token
}

// newParser reads f's data (or other bytes of f, data) from pos.
func newParser(f *file, data []byte, pos int) *parser {
	return &parser{lx: lexer{data: data, pos: pos, f: f}}
}

// token is the next token, from those looked ahead first.
func (p *parser) token() (token, bool) {
	if len(p.ahead) > 0 {
		t := p.ahead[0]
		p.ahead = p.ahead[1:]
		return t, true
	}
	return p.lx.next()
}

// peek is the i-th token ahead (0: the next).
func (p *parser) peek(i int) (token, bool) {
	for len(p.ahead) <= i {
		t, ok := p.lx.next()
		if !ok {
			return token{}, false
		}
		p.ahead = append(p.ahead, t)
	}
	return p.ahead[i], true
}

// integer reads one integer.
func (p *parser) integer() (int64, bool) {
	t, ok := p.token()
	return t.n, ok && t.kind == kindInt
}

// value reads one value at nesting depth.
func (p *parser) value(depth int) (value, error) {
	if depth > maxDepth {
		return value{}, errSyntax
	}
	t, ok := p.token()
	if !ok {
		if p.lx.err != nil {
			return value{}, p.lx.err
		}
		return value{}, errSyntax
	}
	switch t.kind {
	case kindInt:
		// n g R is a reference.
		if g, ok := p.peek(0); ok && g.kind == kindInt {
			if r, ok := p.peek(1); ok && r.kind == kindKeyword && r.text == "R" {
				p.ahead = p.ahead[2:]
				return value{kind: kindRef, n: t.n}, nil
			}
		}
		return value{kind: kindInt, n: t.n}, nil
	case kindReal, kindName, kindString, kindBool, kindNull:
		return value{kind: t.kind, n: t.n, text: t.text}, nil
	case kindArrayOpen:
		return p.array(depth)
	case kindDictOpen:
		return p.dict(depth)
	}
	if p.lx.err != nil {
		return value{}, p.lx.err
	}
	return value{}, errSyntax
}

// array reads the values of an array up to its ].
func (p *parser) array(depth int) (value, error) {
	v := value{kind: kindArray}
	for {
		if t, ok := p.peek(0); ok && t.kind == kindArrayClose {
			p.ahead = p.ahead[1:]
			return v, nil
		}
		x, err := p.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		v.array = append(v.array, x)
	}
}

// dict reads the pairs of a dictionary up to its >>; a key given twice
// keeps its first value.
func (p *parser) dict(depth int) (value, error) {
	v := value{kind: kindDict, dict: map[string]value{}}
	for {
		t, ok := p.token()
		switch {
		case !ok && p.lx.err != nil:
			return value{}, p.lx.err
		case !ok:
			return value{}, errSyntax
		case t.kind == kindDictClose:
			return v, nil
		case t.kind != kindName:
			return value{}, errSyntax
		}
		x, err := p.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		if _, seen := v.dict[t.text]; !seen {
			v.dict[t.text] = x
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isDelimiter(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
