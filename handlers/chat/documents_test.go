package chat

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// pdfTokens is what a PDF of pages pages and size bytes is reserved at.
func pdfTokens(pages, size int) int {
	return pages*ImageTokenCeiling + max(pages*PDFPageTextTokens, size)
}

// documentBodies are a request of each format with one inline file part
// of data (base64) where the format carries files, and the part's path.
var documentBodies = []struct {
	name string
	f    Format
	body func(b64 string) string
	at   string
}{
	{"chat file", ChatCompletions, func(d string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Sum it up."},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + d + `"}}]}]}`
	}, "messages[0].content[1]"},
	{"responses input_file", Responses, func(d string) string {
		return `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Sum it up."},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + d + `"}]}]}`
	}, "input[0].content[1]"},
	{"responses bare base64", Responses, func(d string) string {
		return `{"model":"m","input":[{"role":"user","content":"Sum it up."},{"role":"user","content":[{"type":"input_file","file_data":"` + d + `"}]}]}`
	}, "input[1].content[0]"},
	{"responses tool output", Responses, func(d string) string {
		return `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_data":"data:application/pdf;base64,` + d + `"}]}]}`
	}, "input[0].output[0]"},
	{"messages document", Messages, func(d string) string {
		return `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + d + `"}},{"type":"text","text":"Sum it up."}]}]}`
	}, "messages[0].content[0]"},
	{"messages tool result", Messages, func(d string) string {
		return `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"here"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + d + `"}}]}]}]}`
	}, "messages[0].content[0].content[1]"},
}

// TestDocumentsReservedByTheirPages: an inline PDF in any format's part is
// reserved at its pages (PDFPageTokens each, its text at no less than a
// token a byte), in place of its data's bytes; two count twice.
func TestDocumentsReservedByTheirPages(t *testing.T) {
	for _, pages := range []int{1, 100} {
		pdf := pdftest.Make(pages, pdftest.Options{ObjectStreams: pages > 1})
		b64 := base64.StdEncoding.EncodeToString(pdf)
		want := pdfTokens(pages, len(pdf))
		for _, tc := range documentBodies {
			body := tc.body(b64)
			req, err := parse([]byte(body), tc.f)
			if err != nil {
				t.Fatalf("%s, %d pages: %v", tc.name, pages, err)
			}
			if req.documentTokens != want {
				t.Errorf("%s, %d pages: %d document tokens, want %d", tc.name, pages, req.documentTokens, want)
			}
			// The bound: the rest of the body's bytes (its data left out)
			// and the document.
			if b := req.needs.PromptBound; b < want || b > want+len(body)-len(b64) {
				t.Errorf("%s, %d pages: bound %d, want %d plus at most the %d bytes around the data", tc.name, pages, b, want, len(body)-len(b64))
			}
		}
	}
	two := strings.Replace(documentBodies[0].body("X"), `{"type":"text","text":"Sum it up."}`,
		`{"type":"file","file":{"file_data":"data:application/pdf;base64,`+base64.StdEncoding.EncodeToString(pdftest.Make(3, pdftest.Options{}))+`"}}`, 1)
	two = strings.Replace(two, `base64,X"`, `base64,`+base64.StdEncoding.EncodeToString(pdftest.Make(5, pdftest.Options{}))+`"`, 1)
	req, err := parse([]byte(two), ChatCompletions)
	if err != nil || req.documentTokens != pdfTokens(3, len(pdftest.Make(3, pdftest.Options{})))+pdfTokens(5, len(pdftest.Make(5, pdftest.Options{}))) {
		t.Errorf("two documents: %+v, %v", req, err)
	}
}

// TestTextFilesReservedByTheirBytes: an inline file that is text (no
// PDF) is reserved at a token a byte of the text; a data: URL that is not
// base64 is read percent-decoded.
func TestTextFilesReservedByTheirBytes(t *testing.T) {
	text := strings.Repeat("row,42\n", 500)
	for _, data := range []string{base64.StdEncoding.EncodeToString([]byte(text)), base64.RawStdEncoding.EncodeToString([]byte(text))} {
		req, err := parse([]byte(documentBodies[2].body(data)), Responses)
		if err != nil || req.documentTokens != len(text) {
			t.Errorf("a text file: %v, %v; want %d tokens", req, err, len(text))
		}
	}
	body := `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"data:text/csv,a%2Cb%0A1%2C2"}]}]}`
	if req, err := parse([]byte(body), Responses); err != nil || req.documentTokens != len("a,b\n1,2") {
		t.Errorf("a percent-encoded file: %v, %v", req, err)
	}
}

// TestUncountableDocumentsRefused: a file the gateway cannot bound is a
// 400 whose param is the part's path, saying why: a PDF whose pages
// cannot be counted (no page, pages in an object stream it cannot read),
// a file that is neither a PDF nor text, data that is not base64.
func TestUncountableDocumentsRefused(t *testing.T) {
	noPages := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\n1 0 obj <</Type/Catalog>> endobj\n%%EOF\n"))
	encrypted := base64.StdEncoding.EncodeToString([]byte("%PDF-1.5\n1 0 obj <</Type/ObjStm/N 1/First 4/Filter/ASCII85Decode/Length 3>> stream\nabc\nendstream endobj\n"))
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	for _, tc := range documentBodies {
		for _, bad := range []struct{ data, says string }{
			{noPages, "is a PDF whose pages cannot be counted (no pages found)"},
			{encrypted, "is a PDF whose pages cannot be counted (an object stream cannot be read"},
			{png, "holds a file the gateway cannot reserve for"},
			{"not base64!", "holds a file whose data cannot be decoded"},
		} {
			_, err := parse([]byte(tc.body(bad.data)), tc.f)
			var e *gwerr.Error
			if !errors.As(err, &e) || e.Kind != gwerr.Invalid || e.Param != tc.at || !strings.HasPrefix(e.Message, tc.at+" "+bad.says) {
				t.Errorf("%s, %.20s: %v; want a 400 with param %s saying %q", tc.name, bad.data, err, tc.at, bad.says)
			}
		}
	}
}

// TestTightenedCountHoldsTheDocuments: the tightened count of a prompt
// with an inline PDF holds its pages' bound, over the rest of the prompt.
func TestTightenedCountHoldsTheDocuments(t *testing.T) {
	f := newReserveFixture(t)
	balance := pricing.USD(1) / 100
	f.account(t, "doc", &balance)
	pdf := pdftest.Make(100, pdftest.Options{})
	cl := f.call(t, "doc", documentBodies[0].body(base64.StdEncoding.EncodeToString(pdf)))
	if n, want := cl.countPrompt(f.m), int64(pdfTokens(100, len(pdf))); n < want || n > want*103/100+200 {
		t.Errorf("counted %d, want %d and the margins over it", n, want)
	}
}
