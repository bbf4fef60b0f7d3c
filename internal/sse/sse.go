// Package sse reads and writes server-sent events (the text/event-stream
// format of the WHATWG HTML standard, "Server-sent events").
//
// The Reader parses a stream as the standard says, with two deliberate
// differences: a line longer than MaxLine (or an event whose data grows past
// MaxEvent) is an error instead of unbounded memory, and an event that is
// still pending at the end of the stream (no blank line after it) is
// dispatched rather than discarded, as most client libraries do.
//
// The Writer writes one event at a time and flushes it at once, through
// http.NewResponseController so that wrapped writers (Caddy's) flush too;
// or queues events and flushes them together. A relay queues the events it
// reads and flushes them when its Reader is about to wait for more
// (OnWait): events that arrived together leave together, in one write, and
// none waits for the next.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
)

// MaxLine is the longest line, in bytes without its line ending, that the
// Reader accepts.
const MaxLine = 8 << 20

// MaxEvent is the most data, in bytes, that one event may carry.
const MaxEvent = 16 << 20

// Errors of the Reader and the Writer.
var (
	// ErrLineTooLong: a line of the stream is longer than MaxLine.
	ErrLineTooLong = errors.New("sse: line too long")
	// ErrEventTooLarge: an event's data is larger than MaxEvent.
	ErrEventTooLarge = errors.New("sse: event too large")
	// ErrInvalidField: an event name or id contains a line break (or an id
	// contains NUL), which the format cannot carry.
	ErrInvalidField = errors.New("sse: event name or id contains a line break")
)

// Event is one server-sent event.
type Event struct {
	// Event is the event type (the "event:" field); empty means "message".
	Event string
	// Data is the event's data: its "data:" lines joined with "\n".
	Data []byte
	// ID is the last event ID in force when the event was dispatched.
	ID string
}

// IsDone reports whether ev is the "data: [DONE]" end of a
// chat-completions-style stream.
func IsDone(ev Event) bool { return bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) }

// Reader reads events from a stream.
type Reader struct {
	br      *bufio.Reader
	onWait  func()
	line    []byte
	skipLF  bool // the last line ended in '\r': a '\n' right after it belongs to it
	first   bool // no line read yet (a leading BOM is dropped)
	err     error
	evType  []byte
	data    []byte
	hasData bool
	lastID  string
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, 64<<10) }

// NewReaderSize returns a Reader reading from r through a buffer of size
// bytes: small for a stream of one event, such as an MCP server's answer.
// Lines longer than the buffer are read all the same, up to MaxLine.
func NewReaderSize(r io.Reader, size int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, size), first: true}
}

// OnWait has fn called each time the Reader has used up what it read and
// is about to read the stream again, which may wait for its sender.
func (r *Reader) OnWait(fn func()) { r.onWait = fn }

// Next returns the next event. At the end of the stream it returns io.EOF;
// after any error it keeps returning that error.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			r.err = err
			return Event{}, err
		}
		if err == nil || len(line) > 0 {
			if ev, ok, perr := r.processLine(line); perr != nil {
				r.err = perr
				return Event{}, perr
			} else if ok {
				return ev, nil
			}
		}
		if err != nil { // io.EOF
			r.err = io.EOF
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			return Event{}, io.EOF
		}
	}
}

// readLine returns the next line without its ending. At the end of the stream
// it returns the unterminated rest (possibly empty) with io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if r.br.Buffered() == 0 {
			if r.onWait != nil {
				r.onWait()
			}
			if _, err := r.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					return r.stripBOM(r.line), io.EOF
				}
				return nil, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if len(r.line)+len(buf) > MaxLine {
				return nil, ErrLineTooLong
			}
			r.line = append(r.line, buf...)
			_, _ = r.br.Discard(len(buf))
			continue
		}
		if len(r.line)+i > MaxLine {
			return nil, ErrLineTooLong
		}
		r.line = append(r.line, buf[:i]...)
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		return r.stripBOM(r.line), nil
	}
}

// stripBOM drops a U+FEFF at the very start of the stream.
func (r *Reader) stripBOM(line []byte) []byte {
	if r.first {
		r.first = false
		return bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line
}

// processLine applies one line; ok reports a dispatched event.
func (r *Reader) processLine(line []byte) (Event, bool, error) {
	if len(line) == 0 {
		ev, ok := r.dispatch()
		return ev, ok, nil
	}
	if line[0] == ':' {
		return Event{}, false, nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		r.evType = append(r.evType[:0], value...)
	case "data":
		if len(r.data)+len(value)+1 > MaxEvent {
			return Event{}, false, ErrEventTooLarge
		}
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	}
	// "retry" and unknown fields are ignored.
	return Event{}, false, nil
}

// dispatch ends the pending event; an event without data lines is skipped.
func (r *Reader) dispatch() (Event, bool) {
	defer func() {
		r.evType = r.evType[:0]
		r.data = r.data[:0]
		r.hasData = false
	}()
	if !r.hasData {
		return Event{}, false
	}
	data := r.data[:len(r.data)-1]
	ev := Event{Event: string(r.evType), Data: append([]byte{}, data...), ID: r.lastID}
	return ev, true
}

// Writer writes events to an HTTP response, flushing after each (Write)
// or when told (Queue, Flush).
type Writer struct {
	w      io.Writer
	rc     *http.ResponseController
	buf    []byte
	lastID string
	queued bool // written since the last flush
}

// NewWriter returns a Writer on w. It sets no headers: call StartStream first
// for the usual ones.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// StartStream sets the headers of an event stream: Content-Type
// text/event-stream, Cache-Control no-cache and X-Accel-Buffering no (so
// that proxies do not buffer). It writes nothing: the headers go out with the
// first event.
func StartStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// Write writes ev ("event:" when set, "id:" when it changed, one "data:" line
// per line of the data, a blank line) and flushes it, with whatever was
// queued before it. Line breaks in the data (\n, \r\n or \r) become
// separate data lines, so a reader gets them back as \n. An event name or
// id with a line break is refused with ErrInvalidField.
func (w *Writer) Write(ev Event) error {
	if err := w.Queue(ev); err != nil {
		return err
	}
	return w.Flush()
}

// Queue writes ev as Write does, without flushing it: it goes out with the
// next Flush (or sooner, when the response's own buffer fills).
func (w *Writer) Queue(ev Event) error {
	b, err := appendEvent(w.buf[:0], ev, w.lastID)
	if err != nil {
		return err
	}
	w.lastID = ev.ID
	w.buf = b
	w.queued = true
	_, err = w.w.Write(b)
	return err
}

// Append appends ev to b as a stream carries it: its event line, its id
// line when it has one, its data lines and the blank line that ends it.
// An event name or id with a line break (ErrInvalidField) appends
// nothing.
func Append(b []byte, ev Event) []byte {
	out, err := appendEvent(b, ev, "")
	if err != nil {
		return b
	}
	return out
}

// appendEvent appends ev to b; lastID is the id in force before it (an
// id line is written when ev's differs).
func appendEvent(b []byte, ev Event, lastID string) ([]byte, error) {
	if strings.ContainsAny(ev.Event, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
		return b, ErrInvalidField
	}
	if ev.Event != "" {
		b = append(b, "event: "...)
		b = append(b, ev.Event...)
		b = append(b, '\n')
	}
	if ev.ID != lastID {
		b = append(b, "id:"...)
		if ev.ID != "" {
			b = append(b, ' ')
			b = append(b, ev.ID...)
		}
		b = append(b, '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line = data[:i]
		}
		b = append(b, "data:"...)
		if len(line) > 0 {
			b = append(b, ' ')
			b = append(b, line...)
		}
		b = append(b, '\n')
		if i < 0 {
			break
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(b, '\n'), nil
}

// WriteDone writes "data: [DONE]" and a blank line, the end of a
// chat-completions-style stream, and flushes it.
func (w *Writer) WriteDone() error {
	w.queued = true
	if _, err := w.w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return err
	}
	return w.Flush()
}

// Flush sends what was written so far to the client; with nothing written
// since the last flush, it does nothing.
func (w *Writer) Flush() error {
	if !w.queued {
		return nil
	}
	w.queued = false
	if err := w.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
