package pdfpages

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
)

// TestCountMadeFiles: files made with a page tree of every shape, classic
// and packed in object streams, count their pages exactly.
func TestCountMadeFiles(t *testing.T) {
	for _, pages := range []int{1, 2, 37, 100, 1000} {
		for _, packed := range []bool{false, true} {
			for _, fanout := range []int{0, 3, 10} {
				b := pdftest.Make(pages, pdftest.Options{ObjectStreams: packed, Fanout: fanout})
				if n, err := Count(b); n != pages || err != nil {
					t.Errorf("%d pages, object streams %t, fanout %d: %d, %v", pages, packed, fanout, n, err)
				}
			}
		}
	}
}

// TestCountWrittenByATool: files a PDF tool wrote (qpdf: object streams
// with a predicted cross-reference stream, a linearized file, an
// encrypted one whose page tree is in the clear) count their 37 pages; an
// encrypted file whose pages are in an encrypted object stream cannot be
// counted.
func TestCountWrittenByATool(t *testing.T) {
	for _, tc := range []struct {
		file  string
		pages int
		err   error
	}{
		{"q37-objstm.pdf", 37, nil},
		{"q37-linear.pdf", 37, nil},
		{"q37-aes.pdf", 37, nil},
		{"q37-aes-objstm.pdf", 0, ErrUnreadable},
	} {
		b, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := Count(b); n != tc.pages || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %v; want %d, %v", tc.file, n, err, tc.pages, tc.err)
		}
	}
}

// classicFile is a PDF of the objects given (numbered from 1) with a
// cross-reference table, as a writer would make it.
func classicFile(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	x := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<</Size %d/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, x)
	return b.Bytes()
}

// TestCountFromAbove: where a file's readings disagree, the count is the
// largest: a page tree that undercounts its pages, leaves without /Type,
// an update that adds pages, pages hidden inside another object's stream
// data (which a reader led by the table still finds), names spelled with
// escapes; form fields' /Kids are no pages.
func TestCountFromAbove(t *testing.T) {
	page := "<</Type/Page/Parent 2 0 R>>"
	update := func(b []byte, objs ...string) []byte {
		b = bytes.Clone(b)
		for _, o := range objs {
			b = append(b, o...)
		}
		return append(b, "\nstartxref\n0\n%%EOF\n"...)
	}
	base := classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R 4 0 R]/Count 2>>", page, page)
	for _, tc := range []struct {
		name  string
		b     []byte
		pages int
	}{
		{"as written", base, 2},
		{"count below the pages", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R 4 0 R 5 0 R]/Count 1>>", page, page, page), 3},
		{"count above the pages", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 9>>", page), 9},
		{"leaves without a type", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R 4 0 R 5 0 R 6 0 R]/Count 1>>", page, "<<>>", "<<>>", "<<>>"), 4},
		{"a node without a type", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Kids[3 0 R 4 0 R]/Count 1>>", "<</Kids[5 0 R 6 0 R 7 0 R]/Count 1>>", "<<>>", "<<>>", "<<>>", "<<>>"), 4},
		{"leaves given in place", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[<<>> <<>> <</Type/Pages/Kids[<<>> <<>>]/Count 2>>]/Count 1>>"), 4},
		{"an update adds pages", update(base, "2 0 obj <</Type/Pages/Kids[3 0 R 4 0 R 5 0 R 6 0 R]/Count 4>> endobj\n", "5 0 obj "+page+" endobj 6 0 obj "+page+" endobj"), 4},
		{"an update resaves a page", update(base, "3 0 obj "+page+" endobj\n"), 2},
		{"pages inside a stream's data", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[4 0 R]/Count 1>>",
			"<</Length 200>>\nstream\n4 0 obj <</Type/Page>> endobj 5 0 obj <</Type/Page>> endobj 6 0 obj <</Type/Page>> endobj\nendstream"), 3},
		{"escaped names", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>", page, "<</T#79pe/P#61ge>>", "<</Type /Page % a comment\n>>"), 3},
		{"form fields", classicFile("<</Type/Catalog/Pages 2 0 R/AcroForm<</Fields[4 0 R]>>>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>", page,
			"<</FT/Tx/Kids[5 0 R 6 0 R 7 0 R]>>", "<</Type/Annot>>", "<</Type/Annot>>", "<</Type/Annot>>"), 1},
		{"outlines", classicFile("<</Type/Catalog/Pages 2 0 R/Outlines 4 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>", page, "<</Type/Outlines/Count 40>>"), 1},
		{"junk before the header", append([]byte("junk\n"), base...), 2},
	} {
		if n, err := Count(tc.b); n != tc.pages || err != nil {
			t.Errorf("%s: %d, %v; want %d", tc.name, n, err, tc.pages)
		}
	}
}

// objStm is a PDF whose objects objs (numbered from 1) are packed in one
// object stream of the filter given, its data compressed when the filter
// is FlateDecode.
func objStm(filter, parms string, objs ...string) []byte {
	var header, body strings.Builder
	for i, o := range objs {
		fmt.Fprintf(&header, "%d %d ", i+1, body.Len())
		body.WriteString(o + "\n")
	}
	data := []byte(header.String() + body.String())
	if filter == "/FlateDecode" {
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
	}
	dict := fmt.Sprintf("<</Type/ObjStm/N %d/First %d/Length %d%s%s>>", len(objs), header.Len(), len(data), filter, parms)
	if filter != "" {
		dict = strings.Replace(dict, filter, "/Filter"+filter, 1)
	}
	return append(append([]byte(fmt.Sprintf("%%PDF-1.5\n%d 0 obj\n%s\nstream\n", len(objs)+1, dict)), data...), "\nendstream\nendobj\n"...)
}

// TestCountRefuses: what cannot be counted says why: no PDF, no pages,
// more than MaxPages, an object stream of a filter not read, or with a
// predictor, or damaged, or inflating past what is read.
func TestCountRefuses(t *testing.T) {
	tree := []string{"<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R]/Count 1>>", "<</Type/Page/Parent 2 0 R>>"}
	if n, err := Count(objStm("/FlateDecode", "", tree...)); n != 1 || err != nil {
		t.Fatalf("the object stream made for this test: %d, %v", n, err)
	}
	if n, err := Count(objStm("", "", tree...)); n != 1 || err != nil {
		t.Fatalf("an object stream not compressed: %d, %v", n, err)
	}
	damaged := objStm("/FlateDecode", "", tree...)
	damaged[bytes.Index(damaged, []byte("stream\n"))+12] ^= 0xff
	var bomb bytes.Buffer
	w := zlib.NewWriter(&bomb)
	w.Write(make([]byte, maxInflated+1))
	w.Close()
	bombFile := fmt.Sprintf("%%PDF-1.5\n1 0 obj\n<</Type/ObjStm/N 1/First 4/Filter/FlateDecode/Length %d>>\nstream\n%s\nendstream\nendobj\n", bomb.Len(), bomb.Bytes())
	for _, tc := range []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrNotPDF},
		{"a text", []byte("Once upon a time, 1 0 obj <</Type/Page>> endobj"), ErrNotPDF},
		{"no page", classicFile("<</Type/Catalog>>"), ErrNoPages},
		{"an empty tree", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[]/Count 0>>"), ErrNoPages},
		{"a claim", classicFile("<</Type/Catalog/Pages 2 0 R>>", fmt.Sprintf("<</Type/Pages/Kids[]/Count %d>>", MaxPages+1)), ErrTooManyPages},
		{"a huge claim", classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[]/Count 99999999999999999999>>"), ErrNoPages},
		{"ascii85", objStm("/ASCII85Decode", "", tree...), ErrUnreadable},
		{"a predictor", objStm("/FlateDecode", "/DecodeParms<</Predictor 12/Columns 4>>", tree...), ErrUnreadable},
		{"damaged", damaged, ErrUnreadable},
		{"a bomb", []byte(bombFile), ErrTooComplex},
	} {
		if n, err := Count(tc.b); n != 0 || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %v; want %v", tc.name, n, err, tc.err)
		}
	}
}

// TestCountBoundsItsWork: a file that spells "obj" inside strings nested
// in strings, so that every one of them starts a reading of the rest, is
// refused once its readings pass their budget, instead of taking time
// that grows with the square of its size.
func TestCountBoundsItsWork(t *testing.T) {
	const depth = 200_000
	b := []byte("%PDF-1.7\n1 0 obj " + strings.Repeat("(1 0 obj ", depth) + strings.Repeat(")", depth) + " endobj\n")
	if _, err := Count(b); !errors.Is(err, ErrTooComplex) {
		t.Errorf("got %v, want %v", err, ErrTooComplex)
	}
}

// FuzzCount: no file makes Count panic or answer outside 1 to MaxPages.
func FuzzCount(f *testing.F) {
	f.Add(pdftest.Make(3, pdftest.Options{}))
	f.Add(pdftest.Make(5, pdftest.Options{ObjectStreams: true, Fanout: 2}))
	f.Add(classicFile("<</Type/Catalog/Pages 2 0 R>>", "<</Type/Pages/Kids[3 0 R 4 0 R]/Count 1>>", "<</Type/Page>>", "<<>>"))
	f.Add(objStm("", "", "<</Type/Pages/Kids[2 0 R]/Count 1>>", "<</Type/Page>>"))
	f.Add([]byte("%PDF-1.4\n1 0 obj <</A [1 2 R (x\\)y) <0aF> /N#41 -3.5 true null]>> stream\r\nabc\nendstream endobj"))
	for _, name := range []string{"q37-objstm.pdf", "q37-aes-objstm.pdf"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Count(b)
		if err == nil && (n < 1 || n > MaxPages) || err != nil && n != 0 {
			t.Fatalf("%d, %v", n, err)
		}
	})
}
