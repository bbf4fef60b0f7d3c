// Package awsstream reads AWS event streams (the binary framing of
// application/vnd.amazon.eventstream, in which Bedrock Runtime's
// ConverseStream answers) as the gateway's events, so that a stream
// translator reads them as it reads server-sent events.
//
// Frames are decoded by AWS's own decoder; the Reader bounds each frame
// before it is read (MaxMessage, MaxHeaders), so a length field that lies
// costs an error, never memory.
package awsstream

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"

	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// ContentType is the media type of an AWS event stream.
const ContentType = "application/vnd.amazon.eventstream"

// MaxMessage is the largest frame, in bytes, the Reader accepts: the
// protocol's own maximum message size.
const MaxMessage = 16 << 20

// MaxHeaders is the most bytes of headers one frame may carry: the
// protocol's own maximum.
const MaxHeaders = 128 << 10

// ErrorEvent names the event the Reader yields for a frame that reports a
// failure (message type "exception" or "error"). Its data is
// {"type": ..., "message": ...}: the exception's type (the
// ":exception-type" header, e.g. "throttlingException") or the error's
// code (":error-code"), and its message (the payload's "message", or the
// ":error-message" header).
const ErrorEvent = "error"

// preludeLen is the frame's prelude (total length, headers length) and
// its checksum; frameOverhead is the prelude with both checksums: the
// smallest frame.
const (
	preludeLen    = 8
	frameOverhead = preludeLen + 4 + 4
)

// ErrFrame is returned (wrapped) for a frame that is not a well-formed
// event: lengths out of bounds, a checksum that does not match, a
// message type the Reader does not know, an event without its type.
var ErrFrame = errors.New("awsstream: malformed frame")

// Reader reads the frames of one stream. It is not safe for concurrent
// use.
type Reader struct {
	src *waitReader
	br  *bufio.Reader
	dec *eventstream.Decoder
	err error
}

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	src := &waitReader{r: r}
	return &Reader{src: src, br: bufio.NewReaderSize(src, 64<<10), dec: eventstream.NewDecoder()}
}

// OnWait has fn called each time the Reader is about to read the stream
// again, which may wait for its sender (as sse.Reader.OnWait).
func (r *Reader) OnWait(fn func()) { r.src.onWait = fn }

// Next returns the next frame as an event: Event is the frame's
// ":event-type" (messageStart, contentBlockDelta, ...) and Data its
// payload, or Event is ErrorEvent for a failure the stream reports. It
// returns io.EOF at the end of the stream between frames,
// io.ErrUnexpectedEOF inside one, and an error wrapping ErrFrame for a
// malformed frame; after an error every call returns it again.
func (r *Reader) Next() (sse.Event, error) {
	if r.err != nil {
		return sse.Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *Reader) next() (sse.Event, error) {
	prelude, err := r.br.Peek(preludeLen)
	switch {
	case err == io.EOF && len(prelude) == 0:
		return sse.Event{}, io.EOF
	case err == io.EOF:
		return sse.Event{}, io.ErrUnexpectedEOF
	case err != nil:
		return sse.Event{}, err
	}
	total, headers := binary.BigEndian.Uint32(prelude), binary.BigEndian.Uint32(prelude[4:])
	if total > MaxMessage || headers > MaxHeaders || uint64(total) < uint64(headers)+frameOverhead {
		return sse.Event{}, fmt.Errorf("%w: length %d with %d bytes of headers", ErrFrame, total, headers)
	}
	msg, err := r.dec.Decode(r.br, nil)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return sse.Event{}, io.ErrUnexpectedEOF
		}
		if r.src.err != nil {
			return sse.Event{}, r.src.err
		}
		return sse.Event{}, fmt.Errorf("%w: %v", ErrFrame, err)
	}
	return event(msg)
}

// event turns a decoded frame into an event.
func event(msg eventstream.Message) (sse.Event, error) {
	switch kind := header(msg, eventstreamapi.MessageTypeHeader); kind {
	case eventstreamapi.EventMessageType:
		typ := header(msg, eventstreamapi.EventTypeHeader)
		if typ == "" {
			return sse.Event{}, fmt.Errorf("%w: an event without %s", ErrFrame, eventstreamapi.EventTypeHeader)
		}
		return sse.Event{Event: typ, Data: msg.Payload}, nil
	case eventstreamapi.ExceptionMessageType:
		var body struct {
			Message      string `json:"message"`
			MessageUpper string `json:"Message"`
		}
		_ = json.Unmarshal(msg.Payload, &body)
		if body.Message == "" {
			body.Message = body.MessageUpper
		}
		return failure(header(msg, eventstreamapi.ExceptionTypeHeader), body.Message), nil
	case eventstreamapi.ErrorMessageType:
		return failure(header(msg, eventstreamapi.ErrorCodeHeader), header(msg, eventstreamapi.ErrorMessageHeader)), nil
	default:
		return sse.Event{}, fmt.Errorf("%w: message type %q", ErrFrame, kind)
	}
}

// failure is the ErrorEvent of a reported failure.
func failure(typ, message string) sse.Event {
	data, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{typ, message})
	return sse.Event{Event: ErrorEvent, Data: data}
}

// header is a frame's string header, "" when it is absent or not a
// string.
func header(msg eventstream.Message, name string) string {
	if v, ok := msg.Headers.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}

// waitReader tells onWait before each read of the stream, and keeps the
// stream's own read error (the decoder's errors wrap it in words).
type waitReader struct {
	r      io.Reader
	onWait func()
	err    error
}

func (w *waitReader) Read(p []byte) (int, error) {
	if w.onWait != nil {
		w.onWait()
	}
	n, err := w.r.Read(p)
	if err != nil && err != io.EOF {
		w.err = err
	}
	return n, err
}
