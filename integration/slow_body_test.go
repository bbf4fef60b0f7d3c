package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// Pace of the slow client: one byte every trickleEvery, far below the
// gateway's minimum body rate (1 KiB a second by default).
const trickleEvery = 100 * time.Millisecond

// testBodyGrace is the body_grace of the slow-body tests' gateway.
const testBodyGrace = time.Second

// trickle sends a request's headers and the start of its body (head) at
// once, then the rest one byte every trickleEvery, never finishing; it
// returns the gateway's answer, how long after the headers it came, and
// whether the gateway then closed the connection.
func trickle(t *testing.T, g *gateway, key, path, contentType, head string) (r response, after time.Duration, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", g.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const declared = 1 << 20 // a length the client never reaches
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		path, g.Addr, key, contentType, declared, head); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(trickleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	if err := conn.SetReadDeadline(time.Now().Add(requestTimeout)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a slow body within %s: %v", requestTimeout, err)
	}
	after = time.Since(start)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	// The gateway closes the connection: its end (or, when a byte trickled
	// in after it closed, a reset) is all that follows the answer.
	_, err = br.ReadByte()
	closed = errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, after, closed
}

// A client that sends the headers and the start of its body, then trickles
// bytes slower than the minimum rate, is answered 408 request_timeout in
// its endpoint's error shape once the grace has passed, and the connection
// is closed; nothing reaches the provider and nothing is charged. Multipart
// uploads (transcription, image edits) and a chat body are read by the
// same rule.
func TestSlowBodyEnds(t *testing.T) {
	t.Parallel()
	g, oa := startWithFakes(t, withGW(t, fmt.Sprintf("\t\tlimits {\n\t\t\tbody_grace %s\n\t\t}", testBodyGrace)))
	const balance = "1.00"
	key := g.newAccountKey(t, map[string]any{"id": "trickler", "plan": "paid", "cleared": true, "balance_usd": balance})
	const boundary = "slowb0undary"
	part := func(field, filename, contentType, start string) string {
		return "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + field + "\"; filename=\"" + filename + "\"\r\nContent-Type: " + contentType + "\r\n\r\n" + start
	}
	const abilityShape = `{"error":{"message":"<string>","type":"invalid_request_error","code":"request_timeout"}}`
	for _, c := range []struct {
		name, path, contentType, head, want string
	}{
		{"transcription", "/v1/audio/transcriptions", "multipart/form-data; boundary=" + boundary,
			"--" + boundary + "\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngw-voice\r\n" + part("file", "clip.wav", "audio/wav", "RIFF"), abilityShape},
		{"image edit", "/v1/images/edits", "multipart/form-data; boundary=" + boundary,
			part("image[]", "ref.png", "image/png", "\x89PNG\r\n\x1a\n"), abilityShape},
		{"chat", "/v1/chat/completions", "application/json",
			`{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"`,
			`{"error":{"message":"<string>","type":"invalid_request_error","param":null,"code":"request_timeout"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, after, closed := trickle(t, g, key, c.path, c.contentType, c.head)
			expectError(t, r, http.StatusRequestTimeout, c.want, "")
			if after < testBodyGrace {
				t.Errorf("answered after %s, before the grace of %s", after, testBodyGrace)
			}
			if !closed {
				t.Error("the connection stayed open after the answer")
			}
		})
	}
	if n := len(oa.Requests()); n != 0 {
		t.Fatalf("%d requests reached the provider", n)
	}
	if l := ledgerOf(t, g, "trickler"); len(l) != 0 {
		t.Fatalf("ledger %v, want nothing charged", l)
	}
	if got := balanceOf(t, g, "trickler"); got != mustUSD(t, balance) {
		t.Fatalf("balance %s, want %s", got, balance)
	}
}
