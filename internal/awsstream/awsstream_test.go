package awsstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// frame encodes one message with AWS's encoder.
func frame(t testing.TB, headers map[string]string, payload string) []byte {
	t.Helper()
	var msg eventstream.Message
	for _, k := range []string{":event-type", ":exception-type", ":error-code", ":error-message", ":content-type", ":message-type"} {
		if v, ok := headers[k]; ok {
			msg.Headers.Set(k, eventstream.StringValue(v))
		}
	}
	msg.Payload = []byte(payload)
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, msg); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func eventFrame(t testing.TB, typ, payload string) []byte {
	return frame(t, map[string]string{":event-type": typ, ":content-type": "application/json", ":message-type": "event"}, payload)
}

// readAll reads events until an error, which it returns.
func readAll(r *Reader) ([]sse.Event, error) {
	var out []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestReaderEvents(t *testing.T) {
	var in []byte
	in = append(in, eventFrame(t, "messageStart", `{"p":"abcd","role":"assistant"}`)...)
	in = append(in, eventFrame(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)...)
	in = append(in, frame(t, map[string]string{":exception-type": "throttlingException", ":content-type": "application/json", ":message-type": "exception"},
		`{"message":"Too many requests, please wait before trying again."}`)...)
	in = append(in, frame(t, map[string]string{":error-code": "InternalFailure", ":error-message": "An internal error occurred", ":message-type": "error"}, "")...)
	in = append(in, frame(t, map[string]string{":exception-type": "validationException", ":message-type": "exception"}, `{"Message":"upper"}`)...)
	got, err := readAll(NewReader(bytes.NewReader(in)))
	if err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	want := []sse.Event{
		{Event: "messageStart", Data: []byte(`{"p":"abcd","role":"assistant"}`)},
		{Event: "contentBlockDelta", Data: []byte(`{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)},
		{Event: ErrorEvent, Data: []byte(`{"type":"throttlingException","message":"Too many requests, please wait before trying again."}`)},
		{Event: ErrorEvent, Data: []byte(`{"type":"InternalFailure","message":"An internal error occurred"}`)},
		{Event: ErrorEvent, Data: []byte(`{"type":"validationException","message":"upper"}`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}

// TestReaderOneByteAtATime reads frames that arrive a byte at a time, and
// tells OnWait before each read.
func TestReaderOneByteAtATime(t *testing.T) {
	in := append(eventFrame(t, "messageStop", `{"stopReason":"end_turn"}`), eventFrame(t, "metadata", `{"usage":{"inputTokens":3}}`)...)
	r := NewReader(io.LimitReader(oneByte{bytes.NewReader(in)}, int64(len(in))))
	waits := 0
	r.OnWait(func() { waits++ })
	got, err := readAll(r)
	if err != io.EOF || len(got) != 2 || got[1].Event != "metadata" {
		t.Fatalf("got %q, %v", got, err)
	}
	if waits != len(in)+1 { // one read per byte, and the read that finds the end
		t.Fatalf("OnWait called %d times for %d bytes", waits, len(in))
	}
}

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

func TestReaderRefuses(t *testing.T) {
	good := eventFrame(t, "messageStart", `{"role":"assistant"}`)
	lengths := func(total, headers uint32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b, total)
		binary.BigEndian.PutUint32(b[4:], headers)
		return b
	}
	flip := bytes.Clone(good)
	flip[len(flip)-6] ^= 1 // a payload byte: the message checksum fails
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated prelude", good[:5], io.ErrUnexpectedEOF},
		{"truncated frame", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"too large", lengths(MaxMessage+1, 10), ErrFrame},
		{"headers too large", lengths(MaxHeaders+100, MaxHeaders+1), ErrFrame},
		{"headers past the frame", lengths(20, 10), ErrFrame},
		{"prelude checksum", lengths(uint32(len(good)+1), 40), ErrFrame},
		{"message checksum", flip, ErrFrame},
		{"no message type", frame(t, map[string]string{":event-type": "x"}, "{}"), ErrFrame},
		{"unknown message type", frame(t, map[string]string{":event-type": "x", ":message-type": "ping"}, "{}"), ErrFrame},
		{"event without its type", frame(t, map[string]string{":message-type": "event"}, "{}"), ErrFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tc.in))
			_, err := r.Next()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if _, again := r.Next(); again != err {
				t.Fatalf("second Next: %v, want %v again", again, err)
			}
		})
	}
}

// TestReaderSourceError passes on the stream's own read error.
func TestReaderSourceError(t *testing.T) {
	cut := errors.New("connection reset")
	in := eventFrame(t, "messageStart", `{"role":"assistant"}`)
	r := NewReader(io.MultiReader(bytes.NewReader(in[:20]), errReader{cut}))
	if _, err := r.Next(); !errors.Is(err, cut) {
		t.Fatalf("err = %v, want %v", err, cut)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// FuzzReader reads any bytes without panicking or holding more than a
// frame, and reads back exactly the frames AWS's encoder wrote.
func FuzzReader(f *testing.F) {
	f.Add([]byte{}, "contentBlockDelta", []byte(`{"delta":{"text":"x"}}`))
	f.Add(eventFrame(f, "messageStart", `{"role":"assistant"}`), "metadata", []byte(`{"usage":{}}`))
	f.Add(frame(f, map[string]string{":exception-type": "throttlingException", ":message-type": "exception"}, `{"message":"m"}`), "", []byte{})
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 5, 200, 11, 9, 1, 2, 3, 4}, "x", []byte("y"))
	f.Fuzz(func(t *testing.T, junk []byte, typ string, payload []byte) {
		r := NewReader(bytes.NewReader(junk))
		for range 1000 {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if ev.Event == "" || len(ev.Data) > MaxMessage {
				t.Fatalf("event %q", ev.Event)
			}
		}
		if typ == "" || len(typ) > 255 || len(payload) > 1<<12 {
			return
		}
		in := eventFrame(t, typ, string(payload))
		got, err := readAll(NewReader(bytes.NewReader(in)))
		if err != io.EOF || len(got) != 1 || got[0].Event != typ || !bytes.Equal(got[0].Data, payload) {
			t.Fatalf("read back %q, %v", got, err)
		}
	})
}
