package chat

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
)

// readings are the readings of a client body: validation and routing
// needs (every call, before the money check, inline documents included),
// the local count of count_tokens and of an answer without usage, the
// byte bound of a tightened reservation, and the translation to the other
// format.
var readings = []struct {
	name string
	read func(tb testing.TB, body []byte, f Format)
}{
	{"parse", func(tb testing.TB, body []byte, f Format) {
		if _, err := parse(body, f); err != nil {
			tb.Fatalf("parse: %v", err)
		}
	}},
	{"count", func(tb testing.TB, body []byte, f Format) {
		if _, err := countLocal(f.spec().billing, gjson.ParseBytes(body)); err != nil {
			tb.Fatal(err)
		}
		promptTokens(f, body)
	}},
	{"bound", func(tb testing.TB, body []byte, f Format) {
		promptBoundTokens(f.spec().billing, gjson.ParseBytes(body))
	}},
	{"translate", func(tb testing.TB, body []byte, f Format) {
		to := Messages
		if f == Messages {
			to = ChatCompletions
		}
		if _, _, err := requestFor(body, f, to, "m", false); err != nil {
			tb.Fatalf("translate: %v", err)
		}
	}},
}

// bodyShapes build a body of about size bytes in the shapes that cost a
// reader the most per byte: many tiny content parts, many messages, one
// long string, one unbroken word and many tiny responses input items.
var bodyShapes = []struct {
	name   string
	format Format
	build  func(size int) []byte
}{
	{"tiny parts", ChatCompletions, func(size int) []byte {
		part := `{"type":"text","text":"a"},`
		return wrap(`{"model":"m","messages":[{"role":"user","content":[`, repeatTo(part, size), `]}]}`)
	}},
	{"tiny parts messages", Messages, func(size int) []byte {
		part := `{"type":"text","text":"a"},`
		return wrap(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[`, repeatTo(part, size), `]}]}`)
	}},
	{"many messages", ChatCompletions, func(size int) []byte {
		msg := `{"role":"user","content":"hi"},`
		return wrap(`{"model":"m","messages":[`, repeatTo(msg, size), `]}`)
	}},
	{"long text", ChatCompletions, func(size int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("the cat sat. ", size/13) + `"}]}`)
	}},
	{"one word", ChatCompletions, func(size int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
	}},
	{"spaces", ChatCompletions, func(size int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"x` + strings.Repeat(" ", size) + `x"}]}`)
	}},
	{"digits and marks", ChatCompletions, func(size int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("12345!?.,", size/9) + `"}]}`)
	}},
	{"tiny input items", Responses, func(size int) []byte {
		item := `{"role":"user","content":[{"type":"input_text","text":"a"}]},`
		return wrap(`{"model":"m","input":[`, repeatTo(item, size), `]}`)
	}},
	{"tiny documents", ChatCompletions, func(size int) []byte {
		pdf := base64.StdEncoding.EncodeToString(pdftest.Make(1, pdftest.Options{}))
		part := `{"type":"file","file":{"file_data":"data:application/pdf;base64,` + pdf + `"}},`
		return wrap(`{"model":"m","messages":[{"role":"user","content":[`, repeatTo(part, size), `]}]}`)
	}},
	{"one large document", Messages, func(size int) []byte {
		pdf := base64.StdEncoding.EncodeToString(pdftest.Make(10, pdftest.Options{Text: strings.Repeat("1 0 obj (a) ", size*3/4/12)}))
		return []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` +
			pdf + `"}}]}]}`)
	}},
}

// repeatTo repeats a comma-ended JSON value to about size bytes, without
// its last comma.
func repeatTo(v string, size int) string {
	s := strings.Repeat(v, max(size/len(v), 1))
	return s[:len(s)-1]
}

func wrap(head, middle, tail string) []byte {
	return []byte(head + middle + tail)
}

// BenchmarkReadRequest reads bodies of growing size in every shape, each
// reading on its own: the time per operation grows with the size, not its
// square (the 32 MiB figure near 32 times the 1 MiB one). cpu-ns/op is the
// process's CPU time per operation (the garbage collector's included),
// which other work on a shared machine does not inflate as it does the
// wall time.
func BenchmarkReadRequest(b *testing.B) {
	for _, s := range bodyShapes {
		for _, mib := range []int{1, 32} {
			body := s.build(mib << 20)
			for _, r := range readings {
				b.Run(fmt.Sprintf("%s/%s/%dMiB", r.name, s.name, mib), func(b *testing.B) {
					b.SetBytes(int64(len(body)))
					start := cpuTime(b)
					for b.Loop() {
						r.read(b, body, s.format)
					}
					b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// Every shape is a valid body of its format, so the benchmark measures
// reading, not refusing.
func TestBodyShapesParse(t *testing.T) {
	for _, s := range bodyShapes {
		body := s.build(4 << 10)
		if !bytes.HasPrefix(body, []byte(`{"model"`)) {
			t.Fatalf("%s: %.40s", s.name, body)
		}
		for _, r := range readings {
			r.read(t, body, s.format)
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(tb testing.TB) int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
