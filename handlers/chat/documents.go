package chat

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/pdfpages"
)

// A PDF is billed by its pages: the providers put each page's text and an
// image of the page in the prompt (1,500 to 3,000 tokens of text a page
// as one documents it, plus the image). PDFPageTextTokens is the most text
// a page is reserved for, PDFPageTokens a whole page: its text and its
// image at ImageTokenCeiling. A file's text is reserved at no less than a
// token a byte of the file either, so a page stored with more text than
// that is covered as its bytes.
const (
	PDFPageTextTokens = 3000
	PDFPageTokens     = PDFPageTextTokens + ImageTokenCeiling
)

// documentBound is what the inline documents of a prompt can be billed
// for: tokens, and the bytes of the body their data takes (reserved as
// those tokens instead).
type documentBound struct {
	tokens, dataBytes int
}

// documents bounds the inline documents (files given with their data) in
// messages or input items (list, the member name list), tool results
// included: a messages-style document with a base64 source, a
// chat-completions file part's file_data, a responses input_file's
// file_data. A file the gateway cannot bound (a PDF whose pages cannot be
// counted, or a file that is neither a PDF nor text) is a 400 whose param
// is the part's path.
func documents(list gjson.Result, name string) (documentBound, error) {
	var b documentBound
	if !mayHold(list.Raw, "document") && !mayHold(list.Raw, "file_data") {
		return b, nil
	}
	var err error
	list.ForEach(func(i, m gjson.Result) bool {
		for _, p := range itemParts(m) {
			var at string
			if at, err = documentsIn(p.list, &b); err != nil {
				at = fmt.Sprintf("%s[%d].%s%s", name, i.Int(), p.name, at)
				err = invalid(at, "%s %v", at, err)
				return false
			}
		}
		return true
	})
	return b, err
}

// documentsIn is documents for one content list: on an error, it says
// where in the list ("[2]", "[0].content[1]").
func documentsIn(content gjson.Result, b *documentBound) (at string, err error) {
	content.ForEach(func(j, part gjson.Result) bool {
		if part.Get("type").String() == "tool_result" {
			if k, e := documentsIn(part.Get("content"), b); e != nil {
				at, err = fmt.Sprintf("[%d].content%s", j.Int(), k), e
			}
			return err == nil
		}
		data, ok := inlineFile(part)
		if !ok {
			return true
		}
		n, e := fileTokens(data.Str)
		if e != nil {
			at, err = fmt.Sprintf("[%d]", j.Int()), e
			return false
		}
		b.tokens += n
		b.dataBytes += len(data.Raw)
		return true
	})
	return at, err
}

// inlineFile is the data of a content part that carries a file: a
// messages-style document's base64 source, a chat-completions file
// part's or a responses input_file's file_data.
func inlineFile(part gjson.Result) (gjson.Result, bool) {
	var data gjson.Result
	switch part.Get("type").String() {
	case "document":
		if part.Get("source.type").String() == "base64" {
			data = part.Get("source.data")
		}
	case "file":
		data = part.Get("file.file_data")
	case "input_file":
		data = part.Get("file_data")
	}
	return data, data.Type == gjson.String
}

// Why a file cannot be reserved for.
var (
	errNotBase64 = errors.New("holds a file whose data cannot be decoded (base64, or a data: URL): what it costs cannot be reserved for")
	errNotRead   = errors.New("holds a file the gateway cannot reserve for: only PDF files (by their pages) and text files are read")
)

// fileTokens is the most tokens a file given as data (a data: URL, or
// base64) can be billed for: a PDF its pages at PDFPageTokens each, its
// text at no less than a token a byte; a text file a token a byte.
func fileTokens(data string) (int, error) {
	b, ok := decodeFile(data)
	if !ok {
		return 0, errNotBase64
	}
	pages, err := pdfpages.Count(b)
	switch {
	case err == nil:
		return pages*ImageTokenCeiling + max(pages*PDFPageTextTokens, len(b)), nil
	case !errors.Is(err, pdfpages.ErrNotPDF):
		return 0, fmt.Errorf("is a PDF whose pages cannot be counted (%w), so what it costs cannot be reserved for", err)
	case utf8.Valid(b) && bytes.IndexByte(b, 0) < 0:
		return len(b), nil
	}
	return 0, errNotRead
}

// decodeFile decodes a file's data: a data: URL (base64 or
// percent-encoded) or bare base64 (padded or not).
func decodeFile(s string) ([]byte, bool) {
	if rest, ok := strings.CutPrefix(s, "data:"); ok {
		header, payload, ok := strings.Cut(rest, ",")
		if !ok {
			return nil, false
		}
		if !strings.HasSuffix(header, ";base64") {
			text, err := url.PathUnescape(payload)
			return []byte(text), err == nil
		}
		s = payload
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}
