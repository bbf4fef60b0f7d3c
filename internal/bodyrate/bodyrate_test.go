package bodyrate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// testLimits are short, so the tests take a fraction of a second.
var testLimits = Limits{Grace: 200 * time.Millisecond, MinRate: 1000}

// result is what the test server's handler saw.
type result struct {
	read    int
	err     error
	tooSlow bool
	// ctxErr is the request context's error after the answer's pause.
	ctxErr error
}

// server reads each body under testLimits and reports what it saw; after
// the read it waits pause (with the answer's headers sent) before it ends.
func server(t *testing.T, pause time.Duration) (*httptest.Server, chan result) {
	t.Helper()
	results := make(chan result, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := Wrap(w, r, testLimits)
		data, err := io.ReadAll(r.Body)
		res := result{read: len(data), err: err, tooSlow: b.TooSlow()}
		if err != nil {
			w.WriteHeader(http.StatusRequestTimeout)
			results <- res
			return
		}
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-time.After(pause):
		case <-r.Context().Done():
		}
		res.ctxErr = r.Context().Err()
		fmt.Fprint(w, "done")
		results <- res
	}))
	t.Cleanup(srv.Close)
	return srv, results
}

// A body trickled below the rate fails with ErrTooSlow once the grace has
// passed, the handler can still answer, and the connection is then
// closed.
func TestTrickleEnds(t *testing.T) {
	srv, results := server(t, 0)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nstart")
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // 50 bytes a second
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
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d", resp.StatusCode)
	}
	res := <-results
	if !errors.Is(res.err, ErrTooSlow) || !res.tooSlow {
		t.Fatalf("read error %v, TooSlow %v; want ErrTooSlow", res.err, res.tooSlow)
	}
	if elapsed < testLimits.Grace {
		t.Fatalf("ended after %s, within the grace", elapsed)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the answer: %v, want the connection closed", err)
	}
}

// A body sent at once is read whole, and the deadline ends with it: an
// answer that lasts longer than the deadline would have keeps its context,
// and the connection serves the next request.
func TestFastBodyKeepsConnection(t *testing.T) {
	pause := 3 * testLimits.Grace
	srv, results := server(t, pause)
	client := srv.Client()
	for i := range 2 {
		body := "tiny" // allowed only a few milliseconds past the grace
		reused := false
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if want := i > 0; reused != want {
			t.Fatalf("request %d: connection reused %v, want %v", i, reused, want)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "done" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
		}
		res := <-results
		if res.err != nil || res.read != len(body) || res.tooSlow {
			t.Fatalf("request %d: read %d, %v, TooSlow %v", i, res.read, res.err, res.tooSlow)
		}
		if res.ctxErr != nil {
			t.Fatalf("request %d: the answer's context ended: %v", i, res.ctxErr)
		}
	}
}

// A request without a body is left alone.
func TestNoBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if b := Wrap(httptest.NewRecorder(), r, testLimits); b != nil || r.Body != http.NoBody {
		t.Fatalf("Wrap of a GET: %v, body %v", b, r.Body)
	}
	if (*Body)(nil).TooSlow() {
		t.Fatal("a nil Body is too slow")
	}
}
