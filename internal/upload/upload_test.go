package upload

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type part struct {
	field, filename string
	data            []byte
}

func request(t testing.TB, parts ...part) *http.Request {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		var w interface{ Write([]byte) (int, error) }
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.field, p.filename)
		} else {
			w, err = mw.CreateFormField(p.field)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(p.data)
	}
	_ = mw.Close()
	r := httptest.NewRequest(http.MethodPost, "/", &body)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}

var limits = Limits{MaxFileBytes: 10, MaxTotalBytes: 15, MaxFiles: 2, MaxFieldBytes: 5, MaxFields: 3}

func TestRead(t *testing.T) {
	f, err := Read(request(t,
		part{field: "model", data: []byte("gw-1")},
		part{field: "image[]", filename: "a.png", data: []byte("0123456789")},
		part{field: "tag", data: []byte("x")}, part{field: "tag", data: []byte("y")},
		part{field: "image", filename: "b.png", data: []byte("abcde")},
	), limits)
	if err != nil {
		t.Fatal(err)
	}
	if f.Value("model") != "gw-1" || strings.Join(f.Values["tag"], ",") != "x,y" || f.Value("none") != "" || !f.Has("tag") || f.Has("none") {
		t.Fatalf("values = %v", f.Values)
	}
	files := f.FilesOf("image[]", "image")
	if len(files) != 2 || string(files[0].Data) != "0123456789" || files[1].Filename != "b.png" || files[1].Field != "image" {
		t.Fatalf("files = %+v", files)
	}
	if len(f.FilesOf("file")) != 0 {
		t.Fatal("FilesOf matched another field")
	}
}

func TestReadRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   *http.Request
		check func(error) bool
	}{
		{"json body", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}(), func(err error) bool { return errors.Is(err, ErrNotMultipart) }},
		{"no boundary", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`x`))
			r.Header.Set("Content-Type", "multipart/form-data")
			return r
		}(), func(err error) bool { return errors.Is(err, ErrNotMultipart) }},
		{"broken framing", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxx"))
			r.Header.Set("Content-Type", "multipart/form-data; boundary=b")
			return r
		}(), func(err error) bool { return errors.Is(err, ErrNotMultipart) }},
		{"file too large", request(t, part{field: "file", filename: "a", data: bytes.Repeat([]byte("x"), 25)}),
			func(err error) bool {
				var e *TooLargeError
				return errors.As(err, &e) && e.Field == "file" && e.Size == 25 && !e.AtLeast && e.Limit == 10 && !e.Total &&
					e.Error() == `field "file" is 25 B, over the limit of 10 B`
			}},
		{"files together too large", request(t, part{field: "f", filename: "a", data: bytes.Repeat([]byte("x"), 10)}, part{field: "f", filename: "b", data: bytes.Repeat([]byte("x"), 6)}),
			func(err error) bool {
				var e *TooLargeError
				return errors.As(err, &e) && e.Total && e.Size == 16 && e.Limit == 15
			}},
		{"too many files", request(t, part{field: "f", filename: "a", data: []byte("1")}, part{field: "f", filename: "b", data: []byte("2")}, part{field: "f", filename: "c", data: []byte("3")}),
			func(err error) bool {
				var e *TooManyFilesError
				return errors.As(err, &e) && e.Limit == 2
			}},
		{"field too long", request(t, part{field: "prompt", data: []byte("123456")}),
			func(err error) bool {
				var e *FieldError
				return errors.As(err, &e) && e.Field == "prompt"
			}},
		{"too many fields", request(t, part{field: "a"}, part{field: "b"}, part{field: "c"}, part{field: "d"}),
			func(err error) bool {
				var e *FieldError
				return errors.As(err, &e) && e.Field == "d"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.req, limits)
			if !tc.check(err) {
				t.Fatalf("Read error = %v (%T)", err, err)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.SetBoundary("BOUNDARY")
	w, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = w.Write([]byte("RIFF....WAVE"))
	_ = mw.WriteField("model", "gw-voice")
	_ = mw.Close()
	f.Add(b.Bytes())
	f.Add([]byte("--BOUNDARY--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "multipart/form-data; boundary=BOUNDARY")
		form, err := Read(r, limits)
		if err != nil {
			return
		}
		var total int64
		for _, file := range form.Files {
			if int64(len(file.Data)) > limits.MaxFileBytes {
				t.Fatalf("file of %d bytes passed", len(file.Data))
			}
			total += int64(len(file.Data))
		}
		if len(form.Files) > limits.MaxFiles || total > limits.MaxTotalBytes {
			t.Fatalf("%d files, %d bytes passed", len(form.Files), total)
		}
		for name, vs := range form.Values {
			for _, v := range vs {
				if int64(len(v)) > limits.MaxFieldBytes {
					t.Fatalf("field %q of %d bytes passed", name, len(v))
				}
			}
		}
	})
}

// Body frames fields and files that a multipart reader reads back exactly,
// the files' bytes referenced rather than copied.
func TestBody(t *testing.T) {
	big := bytes.Repeat([]byte{0xAB}, 70_000)
	files := []OutFile{{Field: "image[]", Filename: "image-1.png", ContentType: "image/png", Data: big},
		{Field: "image[]", Filename: "image-2.jpeg", ContentType: "image/jpeg", Data: []byte("\r\n--x\r\n")}}
	parts, ct := Body([][2]string{{"prompt", "make it\r\nnight"}, {"n", "1"}}, files)
	if &parts[1][0] != &big[0] {
		t.Error("the file's bytes were copied")
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatal(err)
	}
	form, err := multipart.NewReader(bytes.NewReader(bytes.Join(parts, nil)), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if form.Value["prompt"][0] != "make it\r\nnight" || form.Value["n"][0] != "1" || len(form.File["image[]"]) != 2 {
		t.Fatalf("form %+v", form)
	}
	for i, fh := range form.File["image[]"] {
		f, _ := fh.Open()
		b, _ := io.ReadAll(f)
		if fh.Filename != files[i].Filename || fh.Header.Get("Content-Type") != files[i].ContentType || !bytes.Equal(b, files[i].Data) {
			t.Errorf("file %d: %s %s %d bytes", i, fh.Filename, fh.Header.Get("Content-Type"), len(b))
		}
	}
}
