package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

func provider(format, url string) *catalog.Provider {
	return &catalog.Provider{Name: "p", Format: format, BaseURL: url, APIKey: "upstream-secret",
		DialTimeout: time.Second, HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
}

func TestHeaders(t *testing.T) {
	var got http.Header
	var path, method string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, path, method = r.Header.Clone(), r.URL.Path, r.Method
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c := New()

	client := httptest.NewRequest("POST", "/alt/v1/messages", nil)
	client.Header.Set("vendor-version", "2026-10-21")
	client.Header.Add("anthropic-beta", "unchecked-1") // only the checked betas go
	resp, err := c.Do(context.Background(), Request{Provider: provider("anthropic", srv.URL), Path: PathMessages, Body: []byte(`{}`), Client: client,
		Betas: []string{"a-1", "b-2"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if path != "/v1/messages" || got.Get("x-api-key") != "upstream-secret" || got.Get("anthropic-version") != "2026-10-21" ||
		strings.Join(got.Values("anthropic-beta"), "|") != "a-1,b-2" || got.Get("Authorization") != "" {
		t.Fatalf("anthropic: path %s headers %v", path, got)
	}

	resp, err = c.Do(context.Background(), Request{Provider: provider("anthropic", srv.URL), Path: PathMessages, Body: []byte(`{}`),
		Client: httptest.NewRequest("POST", "/", nil)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("anthropic-version") != DefaultVersion {
		t.Fatalf("default version: %v", got)
	}

	resp, err = c.Do(context.Background(), Request{Provider: provider("openai", srv.URL+"/v1"), Path: PathChat, Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if path != "/v1/chat/completions" || method != http.MethodPost || got.Get("Content-Type") != "application/json" ||
		got.Get("Authorization") != "Bearer upstream-secret" || got.Get("x-api-key") != "" {
		t.Fatalf("openai: %s %s headers %v", method, path, got)
	}

	// Uploads name their content type; other methods are sent as asked.
	resp, err = c.Do(context.Background(), Request{Provider: provider("openai", srv.URL+"/v1"), Path: "/audio/transcriptions",
		Method: http.MethodPut, ContentType: "multipart/form-data; boundary=x", Body: []byte("--x--")})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if path != "/v1/audio/transcriptions" || method != http.MethodPut || got.Get("Content-Type") != "multipart/form-data; boundary=x" {
		t.Fatalf("upload: %s %s headers %v", method, path, got)
	}
}

// TestAuth: each provider auth sends the key in its own header, or none.
func TestAuth(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c := New()
	for _, tc := range []struct {
		format, auth, header, value string
	}{
		{"openai", "", "Authorization", "Bearer upstream-secret"},
		{"openai", catalog.AuthBearer, "Authorization", "Bearer upstream-secret"},
		{"openai", catalog.AuthAPIKey, "api-key", "upstream-secret"},
		{"openai", catalog.AuthNone, "", ""},
		{"anthropic", "", "x-api-key", "upstream-secret"},
		{"anthropic", catalog.AuthBearer, "Authorization", "Bearer upstream-secret"},
		{"anthropic", catalog.AuthNone, "", ""},
	} {
		p := provider(tc.format, srv.URL)
		p.Auth = tc.auth
		resp, err := c.Do(context.Background(), Request{Provider: p, Path: "/x", Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, h := range []string{"Authorization", "api-key", "x-api-key"} {
			want := ""
			if h == tc.header {
				want = tc.value
			}
			if got.Get(h) != want {
				t.Errorf("%s auth %q: %s %q, want %q", tc.format, tc.auth, h, got.Get(h), want)
			}
		}
		if tc.format == "anthropic" && got.Get("anthropic-version") != DefaultVersion {
			t.Errorf("%s auth %q: no anthropic-version", tc.format, tc.auth)
		}
	}
}

func TestStatusErrors(t *testing.T) {
	for _, tc := range []struct {
		status     int
		body       string
		retryAfter string
		kind       gwerr.Kind
		retryable  bool
		wantWait   int
		wantMsg    string
		wantParam  string
	}{
		{400, `{"error":{"message":"bad temperature","param":"temperature"}}`, "", gwerr.Invalid, false, 0, "bad temperature", "temperature"},
		{413, `{}`, "", gwerr.TooLarge, false, 0, "", ""},
		{422, `{}`, "", gwerr.Unprocessable, false, 0, "", ""},
		// 429, 529 and 503 say it in the gateway's words: the provider's
		// name the operator's organisation and limits.
		{429, `{"error":{"message":"Rate limit reached for gpt-4.1 in organization org-OPERATOR on tokens per min (TPM): Limit 30000"}}`, "7", gwerr.RateLimited, true, 7, "provider p is rate limiting; retry later", ""},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded for org org-OPERATOR"}}`, "", gwerr.Overloaded, true, 0, "provider p is at capacity; retry later", ""},
		{503, `{"error":{"message":"org-OPERATOR is paused"}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{504, `{}`, "", gwerr.Timeout, true, 0, "provider p took too long to answer", ""},
		{500, `{}`, "", gwerr.Upstream, true, 0, "", ""},
		{401, `{"error":{"message":"bad key sk-abc...xyz"}}`, "", gwerr.Upstream, true, 0, "provider p failed (401)", ""},
		// The gateway's own account refused: 503 in the gateway's words,
		// whatever the provider's status.
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, "30", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":null}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{429, `{"error":{"message":"Your account is not active","type":"billing_not_active","code":"billing_not_active"}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{400, `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified workspace API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{402, `{"type":"error","error":{"type":"billing_error","message":"There is an issue with your billing."}}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		{402, `{}`, "", gwerr.Unavailable, true, 0, "provider p is unavailable; retry later", ""},
		// The Gemini API's RESOURCE_EXHAUSTED is a rate limit, its
		// per-minute and per-day quotas alike.
		{429, `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED"}}`, "", gwerr.RateLimited, true, 0, "provider p is rate limiting; retry later", ""},
		// An AWS API's 400 says what was wrong in its message.
		{400, `{"message":"The model returned the following errors: messages: text content blocks must be non-empty"}`, "", gwerr.Invalid, false, 0, "The model returned the following errors: messages: text content blocks must be non-empty", ""},
		// A request whose own words mention credit is the request's.
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0: 'Your credit balance is too low' is not valid"}}`, "", gwerr.Invalid, false, 0, "messages.0: 'Your credit balance is too low' is not valid", ""},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		_, err := New().Do(context.Background(), Request{Provider: provider("openai", srv.URL), Path: PathChat})
		srv.Close()
		g := gwerr.As(err)
		if g.Kind != tc.kind || Retryable(err) != tc.retryable || g.RetryAfter != tc.wantWait || g.Param != tc.wantParam ||
			(tc.wantMsg != "" && g.Message != tc.wantMsg) {
			t.Errorf("%d: kind %v retryable %v wait %d param %q msg %q", tc.status, g.Kind, Retryable(err), g.RetryAfter, g.Param, g.Message)
		}
		if AccountRefused(err) != (tc.kind == gwerr.Unavailable && tc.status != 503) {
			t.Errorf("%d %s: AccountRefused %v", tc.status, tc.body, AccountRefused(err))
		}
	}
}

// A Google API's answer about the gateway's own key, project or billing
// is the account's refusal (503), never the caller's 400, and its words
// stay out; the same 400 about the request is the caller's.
func TestGoogleSetupErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   gwerr.Kind
	}{
		{400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, gwerr.Unavailable},
		{403, `{"error":{"code":403,"message":"Generative Language API has not been used in project 123 before or it is disabled.","status":"PERMISSION_DENIED"}}`, gwerr.Unavailable},
		{400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified","status":"INVALID_ARGUMENT"}}`, gwerr.Invalid},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		p := provider("openai", srv.URL)
		p.Format = catalog.FormatGemini
		_, err := New().Do(context.Background(), Request{Provider: p, Path: "/v1beta/models/m:generateContent"})
		srv.Close()
		g := gwerr.As(err)
		if g.Kind != tc.kind || AccountRefused(err) != (tc.kind == gwerr.Unavailable) || strings.Contains(g.Message, "API key") || strings.Contains(g.Message, "project 123") {
			t.Errorf("%d %s: kind %v, message %q", tc.status, tc.body, g.Kind, g.Message)
		}
	}
}

// Bedrock names its errors in a header: a quota of the AWS account is
// the account's refusal (503), a throttle a rate limit.
func TestAWSErrorTypes(t *testing.T) {
	for _, tc := range []struct {
		status  int
		errType string
		kind    gwerr.Kind
		account bool
	}{
		{400, "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/", gwerr.Unavailable, true},
		{429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", gwerr.RateLimited, false},
		{403, "AccessDeniedException", gwerr.Upstream, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-amzn-ErrorType", tc.errType)
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"message":"Too many requests for account 123456789012"}`)
		}))
		_, err := New().Do(context.Background(), Request{Provider: provider("openai", srv.URL), Path: PathChat})
		srv.Close()
		if g := gwerr.As(err); g.Kind != tc.kind || AccountRefused(err) != tc.account || strings.Contains(g.Message, "123456789012") {
			t.Errorf("%d %s: kind %v, account %v, message %q", tc.status, tc.errType, g.Kind, AccountRefused(err), g.Message)
		}
	}
}

func TestUnreachableAndTimeouts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = New().Do(context.Background(), Request{Provider: provider("openai", "http://"+addr), Path: PathChat})
	if g := gwerr.As(err); g.Kind != gwerr.Upstream || !Retryable(err) {
		t.Fatalf("unreachable: %v", err)
	}

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-headers" {
			<-release
			return
		}
		w.WriteHeader(200)
		io.WriteString(w, "data: first\n\n")
		http.NewResponseController(w).Flush()
		<-release // then nothing more
	}))
	defer srv.Close()
	defer close(release) // runs first: the handlers return, then Close can finish
	p := provider("openai", srv.URL)
	p.HeaderTimeout = 50 * time.Millisecond
	_, err = New().Do(context.Background(), Request{Provider: p, Path: "/slow-headers"})
	if g := gwerr.As(err); g.Kind != gwerr.Timeout || !Retryable(err) {
		t.Fatalf("header time-out: %v", err)
	}

	p = provider("openai", srv.URL)
	p.IdleTimeout = 50 * time.Millisecond
	resp, err := New().Do(context.Background(), Request{Provider: p, Path: "/stream"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, ErrIdle) {
		t.Fatalf("idle stream: %v", err)
	}
}

// The idle time-out counts only time spent waiting on the provider: a
// reader that pauses longer than it between reads (a gateway blocked on a
// slow client) still gets the rest of the stream.
func TestIdleCountsOnlyWaiting(t *testing.T) {
	const idle = 40 * time.Millisecond
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	b := newIdleBody(&ctxReader{pr, ctx}, idle, cancel)
	go func() {
		for _, chunk := range []string{"a", "b", "c"} {
			_, _ = pw.Write([]byte(chunk))
		}
		pw.Close()
	}()
	buf := make([]byte, 1)
	var got []byte
	for {
		n, err := b.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after a slow consumer: %v", err)
		}
		time.Sleep(3 * idle) // the consumer is slow, the provider is not
	}
	if string(got) != "abc" {
		t.Fatalf("read %q", got)
	}

	// A provider that sends nothing for longer than idle ends the stream.
	pr2, _ := io.Pipe()
	ctx, cancel2 := context.WithCancel(context.Background())
	b2 := newIdleBody(&ctxReader{pr2, ctx}, idle, cancel2)
	if _, err := b2.Read(buf); !errors.Is(err, ErrIdle) {
		t.Fatalf("silent provider: %v, want ErrIdle", err)
	}
}

// ctxReader fails its read when ctx ends, as an HTTP body does.
type ctxReader struct {
	r   *io.PipeReader
	ctx context.Context
}

func (c *ctxReader) Read(p []byte) (int, error) {
	go func() { <-c.ctx.Done(); c.r.CloseWithError(c.ctx.Err()) }()
	return c.r.Read(p)
}

func (c *ctxReader) Close() error { return c.r.Close() }

// A provider whose time-outs changed (a reload) gets a new client with
// them; TLS handshakes are bounded.
func TestClientPerTimeouts(t *testing.T) {
	c := New()
	p := provider("openai", "http://127.0.0.1:1/v1")
	a := c.transport(p)
	if c.transport(p) != a {
		t.Fatal("the same provider got two transports")
	}
	p2 := *p
	p2.HeaderTimeout = time.Minute
	b := c.transport(&p2)
	if b == a || b.ResponseHeaderTimeout != time.Minute {
		t.Fatal("a changed header time-out kept the old transport")
	}
	if a.TLSHandshakeTimeout != TLSHandshakeTimeout {
		t.Fatal("no TLS handshake time-out")
	}
}

// A provider's redirect is its failure: the call is not sent on, with
// the provider's key, to wherever it points.
func TestRedirectNotFollowed(t *testing.T) {
	followed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	_, err := New().Do(context.Background(), Request{Provider: provider("openai", srv.URL+"/v1"), Path: PathChat, Body: []byte(`{}`)})
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusTemporaryRedirect || e.Err.Kind != gwerr.Upstream || followed {
		t.Fatalf("redirect: %v (followed %v)", err, followed)
	}
}

// An address is parsed once and handed out as a copy of its own; the kept
// addresses are bounded.
func TestAddressParsedOnce(t *testing.T) {
	c := New()
	a, err := c.address("http://127.0.0.1:9/v1", PathChat)
	if err != nil {
		t.Fatal(err)
	}
	a.Path = "/changed"
	b, err := c.address("http://127.0.0.1:9/v1", PathChat)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != "http://127.0.0.1:9/v1/chat/completions" || a == b {
		t.Fatalf("second address %q (%p, first %p): want the parsed one, a copy of its own", b, b, a)
	}
	if _, err := c.address("http://[::1", PathChat); err == nil {
		t.Fatal("a base URL that cannot be parsed was accepted")
	}
	for i := range maxURLs + 10 {
		if _, err := c.address("http://127.0.0.1:9/v"+strconv.Itoa(i), PathChat); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.urls) > maxURLs {
		t.Fatalf("%d addresses kept, at most %d", len(c.urls), maxURLs)
	}
}

// FuzzStatusError: any error answer maps to an error of a kind; a refusal
// of the gateway's account (every 402 among them) is a retryable 503 in
// the gateway's own words.
func FuzzStatusError(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low"}}`},
		{402, `not json`},
		{400, `{"error":{"message":"bad","code":["x"]}}`},
		{500, ``},
	} {
		f.Add(s.status, []byte(s.body))
	}
	p := provider("anthropic", "http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 400 + (status%200+200)%200
		err := statusError(p, &http.Response{StatusCode: status, Header: http.Header{}}, body)
		var e *Error
		if !errors.As(err, &e) || e.Err == nil || e.Err.Kind == 0 {
			t.Fatalf("%d %q: %v", status, body, err)
		}
		if (status == http.StatusPaymentRequired && !e.Account) ||
			(e.Account && (e.Err.Kind != gwerr.Unavailable || !e.Retryable || e.Err.Message != "provider p is unavailable; retry later")) {
			t.Fatalf("%d %q: %+v %+v", status, body, e, e.Err)
		}
	})
}
