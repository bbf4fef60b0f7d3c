// Package upload reads multipart/form-data request bodies under hard
// bounds: every file part and text field is read at most to its limit (one
// byte more tells it is over), so an upload of any size costs at most the
// limits in memory, and each file is held once.
package upload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/dustin/go-humanize"
)

// Defaults for text fields.
const (
	DefaultMaxFieldBytes = 64 << 10
	DefaultMaxFields     = 64
)

// countCap bounds how far past a limit a too-large part is read (and
// discarded) to report its size; beyond it the size is "at least".
const countCap = 256 << 20

// Limits bounds what Read accepts.
type Limits struct {
	// MaxFileBytes bounds each file part.
	MaxFileBytes int64
	// MaxTotalBytes bounds all file parts together; 0 means no bound
	// beyond MaxFiles × MaxFileBytes.
	MaxTotalBytes int64
	// MaxFiles bounds the number of file parts.
	MaxFiles int
	// MaxFieldBytes bounds each text field (DefaultMaxFieldBytes when 0).
	MaxFieldBytes int64
	// MaxFields bounds the number of text fields (DefaultMaxFields when 0).
	MaxFields int
}

// File is one uploaded file, read whole.
type File struct {
	// Field is the form field the file came in ("file", "image[]").
	Field string
	// Filename is the name the client gave (never trusted for the format).
	Filename string
	// ContentType is the part's declared type (never trusted either).
	ContentType string
	// Data is the file's bytes.
	Data []byte
}

// Form is a parsed upload.
type Form struct {
	// Values holds the text fields in order of arrival.
	Values map[string][]string
	// Files holds the file parts in order of arrival.
	Files []File
}

// Value returns the first value of a text field, or "".
func (f *Form) Value(name string) string {
	if v := f.Values[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Has reports whether a text field was sent.
func (f *Form) Has(name string) bool { _, ok := f.Values[name]; return ok }

// FilesOf returns the files sent under any of names, in order of arrival.
func (f *Form) FilesOf(names ...string) []File {
	var out []File
	for _, file := range f.Files {
		for _, n := range names {
			if file.Field == n {
				out = append(out, file)
				break
			}
		}
	}
	return out
}

// ErrNotMultipart is a body that is not multipart/form-data or whose framing
// cannot be read.
var ErrNotMultipart = errors.New("request body is not multipart/form-data")

// TooLargeError is a part (or all files together, Total) over its limit.
type TooLargeError struct {
	// Field is the form field of the part.
	Field string
	// Size is the part's size (or the files' total, Total), counted by
	// reading on and discarding; AtLeast when counting stopped early.
	Size    int64
	AtLeast bool
	// Limit is the bound it passed.
	Limit int64
	// Total is true when the files together passed MaxTotalBytes.
	Total bool
}

func (e *TooLargeError) Error() string {
	size := humanize.Bytes(uint64(e.Size))
	if e.AtLeast {
		size = "at least " + size
	}
	what := fmt.Sprintf("field %q is", e.Field)
	if e.Total {
		what = "the files together are"
	}
	return fmt.Sprintf("%s %s, over the limit of %s", what, size, humanize.Bytes(uint64(e.Limit)))
}

// TooManyFilesError is an upload with more file parts than MaxFiles.
type TooManyFilesError struct{ Limit int }

func (e *TooManyFilesError) Error() string {
	return fmt.Sprintf("more than %d files", e.Limit)
}

// FieldError is a text field over its limits.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Reason) }

// Read parses r's multipart/form-data body under l.
func Read(r *http.Request, l Limits) (*Form, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, ErrNotMultipart
	}
	if l.MaxFieldBytes <= 0 {
		l.MaxFieldBytes = DefaultMaxFieldBytes
	}
	if l.MaxFields <= 0 {
		l.MaxFields = DefaultMaxFields
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	f := &Form{Values: map[string][]string{}}
	var total int64
	fields := 0
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, ErrNotMultipart
		}
		name := p.FormName()
		if p.FileName() == "" {
			fields++
			if fields > l.MaxFields {
				return nil, &FieldError{Field: name, Reason: fmt.Sprintf("more than %d fields", l.MaxFields)}
			}
			b, over, err := readBounded(p, l.MaxFieldBytes)
			if err != nil {
				return nil, ErrNotMultipart
			}
			if over {
				return nil, &FieldError{Field: name, Reason: "longer than " + humanize.Bytes(uint64(l.MaxFieldBytes))}
			}
			f.Values[name] = append(f.Values[name], string(b))
			continue
		}
		if len(f.Files) >= l.MaxFiles {
			return nil, &TooManyFilesError{Limit: l.MaxFiles}
		}
		b, over, err := readFile(p, l.MaxFileBytes, r.ContentLength)
		if err != nil {
			return nil, ErrNotMultipart
		}
		if over {
			size, atLeast := countRest(p, int64(len(b)))
			return nil, &TooLargeError{Field: name, Size: size, AtLeast: atLeast, Limit: l.MaxFileBytes}
		}
		total += int64(len(b))
		if l.MaxTotalBytes > 0 && total > l.MaxTotalBytes {
			return nil, &TooLargeError{Field: name, Size: total, Limit: l.MaxTotalBytes, Total: true}
		}
		f.Files = append(f.Files, File{Field: name, Filename: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: b})
	}
}

// readBounded reads r whole when it holds at most limit bytes; over is true
// (with limit+1 bytes read) when it holds more.
func readBounded(r io.Reader, limit int64) (b []byte, over bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	return b, int64(len(b)) > limit, nil
}

// readFile is readBounded for a file part: the buffer is sized once from
// the request's length when it is known, so a file is not copied while it
// grows.
func readFile(r io.Reader, limit, hint int64) (b []byte, over bool, err error) {
	size := limit + 1
	if hint > 0 && hint < size {
		size = hint
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err = buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), int64(buf.Len()) > limit, nil
}

// countRest discards the rest of a too-large part, up to countCap, and
// returns its whole size.
func countRest(r io.Reader, read int64) (size int64, atLeast bool) {
	n, _ := io.Copy(io.Discard, io.LimitReader(r, countCap))
	if n == countCap {
		return read + n, true
	}
	return read + n, false
}

// OutFile is a file part of an outgoing body.
type OutFile struct {
	Field, Filename, ContentType string
	Data                         []byte
}

// Body frames a multipart/form-data body of text fields (name, value
// pairs) then files, for upstream.Request.Parts: the files' bytes are
// referenced between small framing buffers, never copied.
func Body(fields [][2]string, files []OutFile) (parts [][]byte, contentType string) {
	boundary := multipart.NewWriter(io.Discard).Boundary()
	var b bytes.Buffer
	for _, f := range fields {
		fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", boundary, f[0], f[1])
	}
	for _, f := range files {
		fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=%q; filename=%q\r\nContent-Type: %s\r\n\r\n", boundary, f.Field, f.Filename, f.ContentType)
		parts = append(parts, bytes.Clone(b.Bytes()), f.Data)
		b.Reset()
		b.WriteString("\r\n")
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	parts = append(parts, b.Bytes())
	return parts, "multipart/form-data; boundary=" + boundary
}
