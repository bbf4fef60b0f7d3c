// Package pdfpages counts the pages of a PDF file from its bytes, from
// above: a provider bills a PDF by its pages (each page's text and an
// image of it), so the gateway reserves for as many pages as the file can
// be read to hold.
//
// It reads no cross-reference table: it finds every object the file
// defines ("n g obj"), in every revision and wherever it stands (inside
// another object's stream data too, where a reader led by a
// cross-reference table could still find it), and every object packed in
// an object stream (/Type /ObjStm, inflated). The count is the largest of
// three readings: the page tree's own counts (/Count of each /Pages node),
// the page objects (/Type /Page, by object number) and the leaves the page
// tree's /Kids name. A file read either way from its table, or repaired by
// a lenient reader, has no more pages than that.
package pdfpages

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"errors"
	"io"
)

// Limits of the reading.
const (
	// MaxPages is the most pages a file may be counted to hold: far more
	// than any provider reads in one call, so a count above it is not a
	// document but a claim, and is refused.
	MaxPages = 10_000
	// maxDepth bounds the nesting of arrays and dictionaries read.
	maxDepth = 64
	// maxInflated bounds the bytes one file's object streams inflate to
	// (a compression bomb's defence).
	maxInflated = 16 << 20
	// headerWithin is how far into the file the %PDF- header may stand
	// (readers take junk before it).
	headerWithin = 1024
	// workPerByte and workFloor bound the bytes all parses together read,
	// per byte of the file and over it: a file made to be read again and
	// again from every "obj" it spells is refused instead.
	workPerByte = 16
	workFloor   = 1 << 20
)

// The ways a file's pages cannot be counted.
var (
	ErrNotPDF       = errors.New("not a PDF file (no %PDF- header)")
	ErrNoPages      = errors.New("no pages found")
	ErrTooManyPages = errors.New("more pages than any provider reads")
	ErrUnreadable   = errors.New("an object stream cannot be read (compressed with an unsupported filter, encrypted or damaged)")
	ErrTooComplex   = errors.New("the file is too intricate to read")
)

// Count is the number of pages of the PDF file b, from above (see the
// package's doc), from 1 to MaxPages, or an error saying why it cannot be
// counted.
func Count(b []byte) (int, error) {
	if !bytes.Contains(b[:min(len(b), headerWithin)], []byte("%PDF-")) {
		return 0, ErrNotPDF
	}
	f := &file{data: b, budget: max(workPerByte*len(b), workFloor), objects: map[int64][]value{}}
	if err := f.readObjects(); err != nil {
		return 0, err
	}
	n := f.pages()
	switch {
	case n == 0:
		return 0, ErrNoPages
	case n > MaxPages:
		return 0, ErrTooManyPages
	}
	return int(n), nil
}

// file is a PDF being read: its objects by number, every version found.
type file struct {
	data    []byte
	budget  int // bytes the parses may still read
	objects map[int64][]value
	// streams are the objects whose dictionary is followed by stream data.
	streams []stream
	// inflated is what the object streams inflated to so far.
	inflated int
}

// stream is an object's stream: its dictionary and where its data begins.
type stream struct {
	dict  value
	start int
}

// readObjects finds every "n g obj" of the file and reads the value after
// it, then the objects packed in object streams.
func (f *file) readObjects() error {
	d := f.data
	for at := 0; ; {
		i := bytes.Index(d[at:], []byte("obj"))
		if i < 0 {
			break
		}
		i += at
		at = i + 3
		num, ok := objectNumber(d, i)
		if !ok || at < len(d) && !isDelimiter(d[at]) && !isSpace(d[at]) {
			continue
		}
		p := newParser(f, d, at)
		v, err := p.value(0)
		if errors.Is(err, ErrTooComplex) {
			return err
		}
		if err != nil {
			continue
		}
		f.objects[num] = append(f.objects[num], v)
		if v.kind == kindDict {
			if t, ok := p.token(); ok && t.kind == kindKeyword && t.text == "stream" {
				f.streams = append(f.streams, stream{dict: v, start: streamStart(d, p.lx.pos)})
			}
		}
		if p.lx.err != nil {
			return p.lx.err
		}
	}
	for _, s := range f.streams {
		if s.dict.dict["Type"].isName("ObjStm") {
			if err := f.readObjectStream(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// objectNumber reads the "n g" before the "obj" at i: n when it is there,
// each number a run of digits after white space.
func objectNumber(d []byte, i int) (int64, bool) {
	j := i
	if j == 0 || !isSpace(d[j-1]) {
		return 0, false
	}
	for j > 0 && isSpace(d[j-1]) {
		j--
	}
	genEnd := j
	for j > 0 && isDigit(d[j-1]) {
		j--
	}
	if j == genEnd || j == 0 || !isSpace(d[j-1]) {
		return 0, false
	}
	for j > 0 && isSpace(d[j-1]) {
		j--
	}
	numEnd := j
	for j > 0 && isDigit(d[j-1]) {
		j--
	}
	if j == numEnd || numEnd-j > 10 || j > 0 && !isSpace(d[j-1]) && !isDelimiter(d[j-1]) {
		return 0, false
	}
	var n int64
	for _, c := range d[j:numEnd] {
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// streamStart is where stream data begins after the keyword stream ended
// at pos: past its end of line (CR LF or LF; a lone CR is taken too).
func streamStart(d []byte, pos int) int {
	if pos < len(d) && d[pos] == '\r' {
		pos++
	}
	if pos < len(d) && d[pos] == '\n' {
		pos++
	}
	return pos
}

// streamData is the data of s: /Length bytes when the length is known
// (direct, or an object holding a number) and fits the file, else up to
// the next endstream.
func (f *file) streamData(s stream) []byte {
	d := f.data
	if l, ok := f.number(s.dict.dict["Length"]); ok && l >= 0 && int64(s.start)+l <= int64(len(d)) {
		return d[s.start : s.start+int(l)]
	}
	end := bytes.Index(d[s.start:], []byte("endstream"))
	if end < 0 {
		return d[s.start:]
	}
	return d[s.start : s.start+end]
}

// readObjectStream reads the objects packed in the object stream s: its
// header's pairs of object number and offset, each object's value at
// /First plus its offset. A stream that cannot be inflated or read
// leaves pages unseen, so the file cannot be counted.
func (f *file) readObjectStream(s stream) error {
	data, err := f.decode(s.dict, f.streamData(s))
	if err != nil {
		return err
	}
	n, okN := f.number(s.dict.dict["N"])
	first, okF := f.number(s.dict.dict["First"])
	if !okN || !okF || n < 0 || first < 0 || first > int64(len(data)) || n > int64(len(data)) {
		return ErrUnreadable
	}
	hp := newParser(f, data[:first], 0)
	for range n {
		num, ok1 := hp.integer()
		off, ok2 := hp.integer()
		if !ok1 || !ok2 || off < 0 || first+off > int64(len(data)) {
			return ErrUnreadable
		}
		p := newParser(f, data, int(first+off))
		v, err := p.value(0)
		if errors.Is(err, ErrTooComplex) {
			return err
		}
		if err != nil {
			return ErrUnreadable
		}
		f.objects[num] = append(f.objects[num], v)
	}
	return nil
}

// decode inflates a stream's data by its filters: none, or FlateDecode
// without a predictor (what object streams use). Any other is
// ErrUnreadable.
func (f *file) decode(dict value, data []byte) ([]byte, error) {
	filter := dict.dict["Filter"]
	if filter.kind == kindArray {
		if len(filter.array) > 1 {
			return nil, ErrUnreadable
		}
		if len(filter.array) == 1 {
			filter = filter.array[0]
		}
	}
	parms := dict.dict["DecodeParms"]
	if parms.kind == kindArray && len(parms.array) == 1 {
		parms = parms.array[0]
	}
	if pred, ok := f.number(parms.dict["Predictor"]); ok && pred > 1 {
		return nil, ErrUnreadable
	}
	switch {
	case filter.kind == kindNone || filter.kind == kindNull:
		return data, nil
	case filter.isName("FlateDecode") || filter.isName("Fl"):
	default:
		return nil, ErrUnreadable
	}
	var r io.Reader
	if zr, err := zlib.NewReader(bytes.NewReader(data)); err == nil {
		r = zr
	} else {
		r = flate.NewReader(bytes.NewReader(data))
	}
	left := maxInflated - f.inflated
	out, err := io.ReadAll(io.LimitReader(r, int64(left)+1))
	if len(out) > left {
		return nil, ErrTooComplex
	}
	if err != nil {
		return nil, ErrUnreadable
	}
	f.inflated += len(out)
	return out, nil
}

// number is v as a whole number: direct, or the first version of the
// object it refers to that holds one.
func (f *file) number(v value) (int64, bool) {
	if v.kind == kindInt {
		return v.n, true
	}
	if v.kind == kindRef {
		for _, o := range f.objects[v.n] {
			if o.kind == kindInt {
				return o.n, true
			}
		}
	}
	return 0, false
}

// pages is the largest of the three readings: the page tree nodes'
// counts, the page objects and the page tree's leaves.
func (f *file) pages() int64 {
	var counted int64
	pageObjects := map[int64]bool{}
	leaves := map[int64]bool{}
	direct := int64(0)
	for num, versions := range f.objects {
		for _, v := range versions {
			switch {
			case v.kind != kindDict:
			case isPageTree(v):
				if c, ok := f.number(v.dict["Count"]); ok {
					counted = max(counted, c)
				}
				direct += f.kids(v, leaves, 0)
			case v.dict["Type"].isName("Page"):
				pageObjects[num] = true
			}
		}
	}
	return max(counted, int64(len(pageObjects)), int64(len(leaves))+direct)
}

// kids adds the leaves node's /Kids name to leaves (by object number) and
// returns how many leaves it holds directly (a dictionary in the array, as
// some writers put them), looking into page tree nodes so held.
func (f *file) kids(node value, leaves map[int64]bool, depth int) int64 {
	var direct int64
	for _, k := range node.dict["Kids"].array {
		switch k.kind {
		case kindRef:
			if !f.isPageTreeObject(k.n) {
				leaves[k.n] = true
			}
		case kindDict:
			if isPageTree(k) {
				if depth < maxDepth {
					direct += f.kids(k, leaves, depth+1)
				}
			} else {
				direct++
			}
		}
	}
	return direct
}

// isPageTreeObject reports an object any version of which is a page tree
// node (its leaves are counted when that node is).
func (f *file) isPageTreeObject(num int64) bool {
	for _, v := range f.objects[num] {
		if v.kind == kindDict && isPageTree(v) {
			return true
		}
	}
	return false
}

// isPageTree reports a page tree node: /Type /Pages, or /Kids with a
// /Count (form fields have /Kids but no /Count; outlines a /Count but no
// /Kids).
func isPageTree(v value) bool {
	if v.dict["Type"].isName("Pages") {
		return true
	}
	_, kids := v.dict["Kids"]
	_, count := v.dict["Count"]
	return kids && count
}
