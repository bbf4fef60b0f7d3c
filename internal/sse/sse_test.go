package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader) ([]Event, error) {
	t.Helper()
	rd := NewReader(r)
	var evs []Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return evs, nil
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func ev(name, data, id string) Event { return Event{Event: name, Data: []byte(data), ID: id} }

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"simple", "data: hello\n\n", []Event{ev("", "hello", "")}},
		{"named", "event: message_start\ndata: {\"a\":1}\n\n", []Event{ev("message_start", `{"a":1}`, "")}},
		{"multi data lines", "data: YHOO\ndata: +2\ndata: 10\n\n", []Event{ev("", "YHOO\n+2\n10", "")}},
		{"crlf", "event: x\r\ndata: a\r\ndata: b\r\n\r\n", []Event{ev("x", "a\nb", "")}},
		{"cr only", "event: x\rdata: a\rdata: b\r\rdata: c\r\r", []Event{ev("x", "a\nb", ""), ev("", "c", "")}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []Event{ev("", "a\nb\nc", "")}},
		{"comments ignored", ": keep-alive\ndata: x\n: another\n\n", []Event{ev("", "x", "")}},
		{"one space removed", "data:  two spaces\ndata:none\n\n", []Event{ev("", " two spaces\nnone", "")}},
		{"no data skipped", "event: ping\n\nevent: other\nid: 7\n\ndata: z\n\n", []Event{ev("", "z", "7")}},
		{"empty data line", "data\n\ndata:\n\n", []Event{ev("", "", ""), ev("", "", "")}},
		{"empty data lines joined", "data:\ndata:\n\n", []Event{ev("", "\n", "")}},
		{"final event without blank line", "data: a\n\nevent: e\ndata: last", []Event{ev("", "a", ""), ev("e", "last", "")}},
		{"final event ended by newline only", "data: last\n", []Event{ev("", "last", "")}},
		{"event type resets", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{ev("a", "1", ""), ev("", "2", "")}},
		{"id persists and resets", "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []Event{ev("", "a", "1"), ev("", "b", "1"), ev("", "c", "")}},
		{"id with NUL ignored", "id: 5\ndata: a\n\nid: x\x00y\ndata: b\n\n", []Event{ev("", "a", "5"), ev("", "b", "5")}},
		{"retry and unknown ignored", "retry: 1000\nfoo: bar\ndata: a\n\n", []Event{ev("", "a", "")}},
		{"bom stripped", "\xEF\xBB\xBFdata: a\n\n", []Event{ev("", "a", "")}},
		{"colon in value", "data: {\"k\":\"v: w\"}\n\n", []Event{ev("", `{"k":"v: w"}`, "")}},
		{"field without colon", "data\n\n", []Event{ev("", "", "")}},
		{"WHATWG example", ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n",
			[]Event{ev("", "first event", "1"), ev("", "second event", ""), ev("", " third event", "")}},
		{"empty stream", "", nil},
		{"only blank lines", "\n\n\r\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "onebyte"} {
				var r io.Reader = strings.NewReader(tc.in)
				if mode == "onebyte" {
					r = iotest.OneByteReader(r)
				}
				got, err := readAll(t, r)
				if err != nil {
					t.Fatalf("%s: error %v", mode, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: got %q, want %q", mode, got, tc.want)
				}
			}
		})
	}
}

func TestReaderEOFRepeats(t *testing.T) {
	rd := NewReader(strings.NewReader("data: a\n\n"))
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rd.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("got %v, want io.EOF", err)
		}
	}
}

func TestReaderLineTooLong(t *testing.T) {
	long := "data: " + strings.Repeat("x", MaxLine) + "\n\n"
	got, err := readAll(t, strings.NewReader("data: ok\n\n"+long))
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	if len(got) != 1 || string(got[0].Data) != "ok" {
		t.Fatalf("events before the long line: %q", got)
	}
	// Exactly MaxLine is accepted.
	exact := "data:" + strings.Repeat("y", MaxLine-5) + "\n\n"
	got, err = readAll(t, strings.NewReader(exact))
	if err != nil || len(got) != 1 || len(got[0].Data) != MaxLine-5 {
		t.Fatalf("line of MaxLine: err %v, %d events", err, len(got))
	}
	// Without any line ending at all.
	_, err = readAll(t, strings.NewReader(strings.Repeat("z", MaxLine+1)))
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("unterminated: err = %v", err)
	}
}

func TestReaderEventTooLarge(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<20) + "\n"
	in := strings.Repeat(line, MaxEvent/(1<<20)+1) + "\n"
	_, err := readAll(t, strings.NewReader(in))
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
}

func TestReaderUnderlyingError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: partial\n"), iotest.ErrReader(boom))
	got, err := readAll(t, r)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if len(got) != 1 {
		t.Fatalf("got %q; the partial event must not be dispatched on a read error", got)
	}
}

// The reader returns each event as soon as its blank line arrives, without
// waiting for more input (a '\r' ending is not held back to look for a '\n').
func TestReaderDoesNotReadAhead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		_, _ = pw.Write([]byte("data: one\r"))
		_, _ = pw.Write([]byte("\r"))
		// Nothing more is written until the event has been read.
	}()
	e, err := NewReader(pr).Next()
	if err != nil || string(e.Data) != "one" {
		t.Fatalf("got %q, %v", e.Data, err)
	}
}

type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type noFlush struct {
	h http.Header
	b bytes.Buffer
}

func (n *noFlush) Header() http.Header         { return n.h }
func (n *noFlush) Write(p []byte) (int, error) { return n.b.Write(p) }
func (n *noFlush) WriteHeader(int)             {}

func TestWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	StartStream(rec)
	w := NewWriter(wrapped{rec}) // flushing goes through Unwrap, as with Caddy's writers
	steps := []struct {
		ev   Event
		want string
	}{
		{ev("message_start", `{"type":"message_start"}`, ""), "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"},
		{ev("", `{"a":1}`, ""), "data: {\"a\":1}\n\n"},
		{ev("", "line1\nline2\r\nline3\rline4", ""), "data: line1\ndata: line2\ndata: line3\ndata: line4\n\n"},
		{ev("", "", ""), "data:\n\n"},
		{ev("", "x", "42"), "id: 42\ndata: x\n\n"},
		{ev("", "y", "42"), "data: y\n\n"},
		{ev("", "z", ""), "id:\ndata: z\n\n"},
		{ev("e", "trailing\n", ""), "event: e\ndata: trailing\ndata:\n\n"},
	}
	for _, s := range steps {
		rec.Body.Reset()
		rec.Flushed = false
		if err := w.Write(s.ev); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != s.want {
			t.Errorf("Write(%q) wrote %q, want %q", s.ev, got, s.want)
		}
		if !rec.Flushed {
			t.Errorf("Write(%q) did not flush", s.ev)
		}
	}
	rec.Body.Reset()
	if err := w.WriteDone(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != "data: [DONE]\n\n" {
		t.Errorf("WriteDone wrote %q", got)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestWriterSetsNoHeaders(t *testing.T) {
	nf := &noFlush{h: http.Header{}}
	if err := NewWriter(nf).Write(ev("", "a", "")); err != nil {
		t.Fatal(err)
	}
	if len(nf.h) != 0 {
		t.Fatalf("Writer set headers %v", nf.h)
	}
}

func TestWriterNoFlushSupport(t *testing.T) {
	nf := &noFlush{h: http.Header{}}
	w := NewWriter(nf)
	if err := w.Write(ev("x", "a", "")); err != nil {
		t.Fatalf("a writer that cannot flush: %v", err)
	}
	if nf.b.String() != "event: x\ndata: a\n\n" {
		t.Fatalf("wrote %q", nf.b.String())
	}
}

func TestWriterInvalidFields(t *testing.T) {
	w := NewWriter(httptest.NewRecorder())
	for _, e := range []Event{ev("a\nb", "x", ""), ev("a\rb", "x", ""), ev("", "x", "1\n2"), ev("", "x", "1\x002")} {
		if err := w.Write(e); !errors.Is(err, ErrInvalidField) {
			t.Errorf("Write(%q) = %v, want ErrInvalidField", e, err)
		}
	}
}

func TestIsDone(t *testing.T) {
	if !IsDone(ev("", "[DONE]", "")) || !IsDone(ev("", " [DONE] ", "")) || IsDone(ev("", `{"a":1}`, "")) {
		t.Fatal("IsDone")
	}
}

func TestRoundTrip(t *testing.T) {
	in := []Event{ev("message_start", `{"x":"y"}`, ""), ev("", "multi\nline", "1"), ev("", "", "1"), ev("z", " lead", "")}
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	for _, e := range in {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readAll(t, rec.Body)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("got %q (%v), want %q", got, err, in)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: hello\n\n",
		"event: message_start\ndata: {}\n\n",
		"data: a\r\ndata: b\r\rid: 1\ndata\n\n: c\n",
		"\xEF\xBB\xBFid: x\x00\nretry: 5\ndata:  sp\r\n\r\nevent: e\ndata: last",
		"data: [DONE]\n\n",
		"\r\r\n\n:data\nevent\nid\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, _ := readAll(t, bytes.NewReader(in))
		for _, e := range evs {
			if bytes.IndexByte(e.Data, '\r') >= 0 {
				t.Fatalf("data has a CR: %q", e.Data)
			}
			if strings.ContainsAny(e.Event, "\r\n") || strings.ContainsAny(e.ID, "\r\n\x00") {
				t.Fatalf("bad name or id: %q", e)
			}
		}
		rec := httptest.NewRecorder()
		w := NewWriter(rec)
		for _, e := range evs {
			if err := w.Write(e); err != nil {
				t.Fatalf("Write(%q): %v", e, err)
			}
		}
		again, err := readAll(t, rec.Body)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(again) != len(evs) {
			t.Fatalf("re-read %d events, want %d", len(again), len(evs))
		}
		for i := range evs {
			if evs[i].Event != again[i].Event || evs[i].ID != again[i].ID || !bytes.Equal(evs[i].Data, again[i].Data) {
				t.Fatalf("event %d: %q became %q", i, evs[i], again[i])
			}
		}
	})
}

// flushLog is a ResponseWriter that records how much of the body had been
// written at each flush.
type flushLog struct {
	httptest.ResponseRecorder
	at []int
}

func (f *flushLog) Flush() { f.at = append(f.at, f.Body.Len()) }

// TestQueueAndFlush: queued events are written in order and flushed only
// by Flush, Write or WriteDone, which flush them with their own; a Flush
// with nothing written since the last does nothing.
func TestQueueAndFlush(t *testing.T) {
	f := &flushLog{ResponseRecorder: *httptest.NewRecorder()}
	w := NewWriter(f)
	for _, ev := range []Event{{Data: []byte("a")}, {Event: "e", Data: []byte("b\nc")}} {
		if err := w.Queue(ev); err != nil {
			t.Fatal(err)
		}
	}
	const queued = "data: a\n\nevent: e\ndata: b\ndata: c\n\n"
	if f.Body.String() != queued || len(f.at) != 0 {
		t.Fatalf("after two Queue: body %q, flushes %v", f.Body.String(), f.at)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Queue(Event{Data: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Data: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDone(); err != nil {
		t.Fatal(err)
	}
	const all = queued + "data: d\n\ndata: e\n\ndata: [DONE]\n\n"
	want := []int{len(queued), len(all) - len("data: [DONE]\n\n"), len(all)}
	if f.Body.String() != all || !slices.Equal(f.at, want) {
		t.Fatalf("body %q flushed at %v, want %q at %v", f.Body.String(), f.at, all, want)
	}
	if err := w.Flush(); err != nil || len(f.at) != len(want) {
		t.Fatalf("a Flush with nothing written flushed: %v %v", err, f.at)
	}
	if err := w.Queue(Event{Event: "a\nb"}); err != ErrInvalidField {
		t.Fatalf("Queue of an event name with a line break: %v", err)
	}
}

// chunks returns one piece per Read.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	if n == len((*c)[0]) {
		*c = (*c)[1:]
	} else {
		(*c)[0] = (*c)[0][n:]
	}
	return n, nil
}

// TestOnWait: the Reader calls OnWait's function exactly when it has used
// up what it read and reads the stream again, so events read together are
// returned between two calls.
func TestOnWait(t *testing.T) {
	src := chunks{"data: a\n\ndata: b\n\n", "data: c\n", "\n"}
	r := NewReader(&src)
	var log []string
	r.OnWait(func() { log = append(log, "wait") })
	for {
		ev, err := r.Next()
		if err == io.EOF {
			log = append(log, "EOF")
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, string(ev.Data))
	}
	want := []string{"wait", "a", "b", "wait", "wait", "c", "wait", "EOF"}
	if !slices.Equal(log, want) {
		t.Fatalf("%q, want %q", log, want)
	}
}
