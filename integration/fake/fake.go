// Package fake provides fake model upstreams for the gateway's integration
// tests and benchmarks: an OpenAI-style server (NewOpenAI), an
// Anthropic-style server (NewAnthropic), and the clouds' own APIs: the
// Gemini API (NewGemini), Vertex AI with its token endpoint (NewVertex)
// and Bedrock Runtime's Converse (NewBedrock), each an httptest.Server on
// 127.0.0.1 that speaks the provider's real wire format, streams included.
// For the MCP gateway it also has an MCP server built with the official Go
// SDK (NewMCP: both protocol eras, optional bearer or OAuth protection, a
// fixed set of tools, Stop and Start on the same port) and an OAuth 2
// server granting client credentials (NewOAuth).
//
// A test scripts what the next request(s) get with Push, or changes Default
// (or, for concurrent requests, picks each one's script from its body with
// Choose), and inspects what the gateway sent with Requests:
//
//	up := fake.NewOpenAI()
//	defer up.Close()
//	up.Push(fake.Script{Text: "hi", Usage: fake.Usage{Input: 9, Output: 1}})
//	// point the gateway at up.URL (it ends in /v1), send a request through it…
//	got := up.Requests()
//
// # What each fake answers
//
// OpenAI (URL = server + "/v1"):
//   - POST /v1/chat/completions: a chat.completion object, or with
//     "stream": true data-only SSE chat.completion.chunk events ended by
//     "data: [DONE]"; the trailing usage chunk (empty choices) is sent only
//     when stream_options.include_usage is true, and then every other chunk
//     carries "usage": null, as the real API does.
//   - POST /v1/responses: a response object, or with "stream": true the
//     Responses API's named SSE events (response.created … response.completed),
//     each with its sequence_number.
//   - GET /v1/models and GET /v1/models/{id}: the list in Upstream.Models.
//   - POST /v1/audio/transcriptions (multipart/form-data): json, text or
//     verbose_json (segments, and words when asked) of Script.Text; the
//     gpt-4o transcription models refuse verbose_json and timestamp
//     granularities as the real API does, and a file whose name has no
//     supported extension is refused.
//   - POST /v1/embeddings: an embeddings list, one vector per input
//     (Embedding), as numbers or with encoding_format base64 as
//     little-endian float32 bytes; dimensions shortens the vectors.
//   - POST /v1/audio/speech (JSON): Script.Audio as a binary stream, in
//     Script.Chunks flushed pieces.
//
// Anthropic (URL = server, no /v1; the gateway appends /v1/messages):
//   - POST /v1/messages: a message object, or with "stream": true the named
//     SSE events message_start, content_block_start, ping,
//     content_block_delta (text_delta / input_json_delta), content_block_stop,
//     message_delta, message_stop.
//   - POST /v1/messages/count_tokens: {"input_tokens": CountTokens(body)};
//     a member the real endpoint does not take (max_tokens, stream, ...)
//     is a 400 invalid_request_error, as it is there.
//
// # Strictness
//
// Both fakes check what the real APIs check where a gateway bug would show:
// the OpenAI fake wants "Authorization: Bearer <key>", a string "model", a
// "messages" array whose roles OpenAI knows, and no stream_options without
// "stream": true; the Anthropic fake wants x-api-key (401
// authentication_error without it), a known anthropic-version (400
// invalid_request_error without it, as the real API answers), a "model",
// "max_tokens" (not on count_tokens) and a "messages" array of only "user" and
// "assistant" turns ("system" belongs top-level; "tool" does not exist there).
// Set Upstream.APIKey to also require one exact key. A request refused this
// way is recorded but does not take a Script from the queue.
//
// # Usage numbers
//
// Script.Usage is written verbatim into the format's own fields, so its
// meaning follows that format: OpenAI prompt_tokens = Input with
// prompt_tokens_details.cached_tokens = CachedInput (a part of Input);
// Responses input_tokens = Input with input_tokens_details.cached_tokens =
// CachedInput; Anthropic input_tokens = Input, cache_read_input_tokens =
// CachedInput and cache_creation_input_tokens = CacheWrite (Anthropic counts
// cache reads and writes in addition to input_tokens).
package fake

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tidwall/sjson"
)

// ToolCall is one function/tool call the fake model makes.
type ToolCall struct {
	// ID is the call's id; empty means a fresh one in the format's style
	// (call_… for OpenAI chat and Responses, toolu_… for Anthropic).
	ID string
	// Name is the function/tool name.
	Name string
	// Arguments is the call's arguments as JSON text; empty means "{}".
	Arguments string
}

// Usage is the token usage a Script reports (see the package doc for how
// each format carries it).
type Usage struct {
	Input       int
	Output      int
	CachedInput int
	// CacheWrite is Anthropic's cache_creation_input_tokens; the OpenAI
	// formats have no such field and ignore it.
	CacheWrite int
}

// Script says what the fake answers to one request.
type Script struct {
	// Text is the assistant text (may be empty when there are only tool calls).
	Text string
	// ToolCalls are the tool calls, after the text.
	ToolCalls []ToolCall
	// Usage is the reported token usage.
	Usage Usage
	// Finish is the finish/stop reason in the upstream's own vocabulary.
	// Empty derives it: tool calls → "tool_calls" (OpenAI) / "tool_use"
	// (Anthropic), else "stop" / "end_turn". The Responses endpoint maps
	// "length" and "max_output_tokens" to status "incomplete" with
	// incomplete_details.reason "max_output_tokens", "content_filter" to
	// "incomplete" with reason "content_filter", and anything else to
	// "completed".
	Finish string
	// Chunks splits the text and each tool call's arguments into this many
	// pieces when streaming (default 3; fewer when the text is shorter).
	Chunks int
	// Status, when non-zero, answers this HTTP status with the format's error
	// body instead of a completion.
	Status int
	// ErrorType is the error type for Status and MidStreamError; empty means
	// the format's default. Anthropic: 400 invalid_request_error, 401
	// authentication_error, 403 permission_error, 404 not_found_error, 413
	// request_too_large, 429 rate_limit_error, 500 (and other 5xx)
	// api_error, 529 overloaded_error; a mid-stream error is
	// overloaded_error. OpenAI: "invalid_request_error" for 4xx (code
	// invalid_api_key on 401, model_not_found on 404), "requests" with code
	// rate_limit_exceeded on 429, "server_error" for 5xx and mid-stream.
	// On OpenAI a set ErrorType is also the error's code, unless
	// ErrorCode is set.
	ErrorType string
	// ErrorCode, on OpenAI, is the error's code where it differs from its
	// type (billing_hard_limit_reached of an invalid_request_error).
	ErrorCode string
	// ErrorMessage is the error message; empty means a realistic default.
	ErrorMessage string
	// Header holds extra response headers (e.g. retry-after with Status 429).
	Header http.Header
	// MidStreamError, when streaming, sends the events up to and including
	// the first content event, then the format's error event, then ends the
	// stream (no [DONE], no message_stop, no response.completed).
	MidStreamError bool
	// Gate, when streaming, blocks after the first content event (text
	// delta, or the first tool-call delta when there is no text) has been
	// flushed until Gate is closed. When not streaming it blocks before the
	// response is written, which holds a request in flight.
	Gate chan struct{}
	// Delay pauses before answering (for time-out tests only).
	Delay time.Duration
	// NoUsage leaves every usage object out of the answer (streamed or
	// not), as a provider that reports none would.
	NoUsage bool
	// EmptyBlock, on a non-streamed messages answer without text, sends
	// one text block with an empty text instead of no block.
	EmptyBlock bool
	// CapOutput reports at most the request's output limit
	// (max_completion_tokens, max_tokens or max_output_tokens) as output
	// tokens, as a real model stops there.
	CapOutput bool
	// Images is how many images an image generation answers (0: the n
	// asked; below 0: none, and a stream breaks with an error event before
	// its first event); each is ImageData(i). A streamed one sends
	// partial_images previews first; with MidStreamError an error event
	// follows the first event; with Gate it blocks after the first event.
	// An image answer reports gpt-image-1's usage for what it made unless
	// Usage.Input is below zero.
	Images int
	// ImageGap, in a streamed image generation, is the time the provider
	// takes to make each image after the first (the pause before its
	// completed event).
	ImageGap time.Duration
	// WebSearches, on the responses endpoint, are web_search_call items
	// (their queries) before the message; Citations are url_citation
	// annotations of its text.
	WebSearches []string
	Citations   []string
	// TopLogprobs are the top log-probabilities of the answer's first token
	// (chat completions asked with logprobs): the first is the token
	// chosen. Empty: logprobs is null.
	TopLogprobs []Logprob
	// Audio is what POST /v1/audio/speech answers, sent in Chunks pieces
	// (each flushed); empty means DefaultSpeechAudio. With Gate the
	// stream blocks after the first piece; with MidStreamError the
	// connection is cut after it (a transcription's answer: after its
	// first bytes); EmptyAudio answers 200 with no bytes
	// (with a Gate: the headers, then nothing until the Gate opens).
	Audio      []byte
	EmptyAudio bool
	// EmbeddingTokens is the prompt_tokens an embeddings answer reports;
	// 0: the fake's own count (EmbeddingTokens of the input).
	EmbeddingTokens int
	// AudioSeconds is the duration a transcription reports (Text is the
	// transcript); 0: the length heard in an uploaded WAV.
	AudioSeconds float64
}

// Logprob is one token and its log-probability.
type Logprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
}

// logprobs is the choice's logprobs object for a request asking for them,
// in the chat-completions shape: content[0] is the chosen token with its
// top_logprobs (as many as the request asked for).
func (s Script) logprobs(req map[string]any) any {
	if asked, _ := req["logprobs"].(bool); !asked || len(s.TopLogprobs) == 0 {
		return nil
	}
	top := s.TopLogprobs
	if n, ok := req["top_logprobs"].(float64); ok && int(n) < len(top) {
		top = top[:int(n)]
	}
	entries := make([]map[string]any, len(top))
	for i, t := range top {
		entries[i] = map[string]any{"token": t.Token, "logprob": t.Logprob, "bytes": []byte(t.Token)}
	}
	first := s.TopLogprobs[0]
	return map[string]any{"content": []any{map[string]any{"token": first.Token, "logprob": first.Logprob, "bytes": []byte(first.Token),
		"top_logprobs": entries}}, "refusal": nil}
}

// DefaultScript is what a new Upstream answers when nothing was pushed.
func DefaultScript() Script {
	return Script{Text: "Hello from the fake upstream.", Usage: Usage{Input: 12, Output: 6}}
}

// Request is one request the fake received.
type Request struct {
	Method string
	// Path is the URL path, e.g. /v1/chat/completions.
	Path string
	// Query is the raw query string, without '?'.
	Query  string
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object; nil when it is not one.
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

type format int

const (
	formatOpenAI format = iota
	formatAnthropic
)

// Upstream is one running fake provider.
type Upstream struct {
	// URL is the base URL as the gateway's configuration wants it: OpenAI
	// fakes end in /v1, Anthropic fakes do not.
	URL string
	// Default answers requests when the queue is empty. Set it before the
	// gateway sends requests, or use SetDefault while requests are running.
	Default Script
	// APIKey, when set, is the only key accepted (OpenAI bearer token,
	// Anthropic x-api-key); when empty any non-empty key is accepted.
	APIKey string
	// Auth, on an OpenAI fake, is where it reads the key: "" a bearer
	// token (OpenAI), "api-key" the api-key header (Azure OpenAI), "none"
	// nowhere (a self-hosted server started without a key).
	Auth string
	// Models is what the OpenAI fake lists at GET /v1/models.
	Models []string
	// Choose, when set, picks the script of a request from its body
	// before the queue is consulted (false: the queue, then Default), so
	// concurrent requests can each carry their own script. Set it before
	// the gateway sends requests.
	Choose func(body []byte) (Script, bool)
	// CountStatus, when set, is the status the Anthropic fake's
	// count_tokens answers with its error body (529: overloaded), as a
	// count endpoint that is down or rate limited does. Set it before the
	// gateway sends requests.
	CountStatus int
	// CountError, when its Status is set, is what count_tokens answers
	// instead (its status, error type and message), as CountStatus does
	// with the status's default error. Set it before the gateway sends
	// requests.
	CountError Script

	srv       *httptest.Server
	format    format
	done      chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	queue   []Script
	reqs    []Request
	arrived chan struct{} // closed and replaced on every request

	// vertexKey signs a Vertex fake's key files; tokens are the access
	// tokens it issued.
	vertexKey *rsa.PrivateKey
	tokens    map[string]bool
}

func newUpstream(f format, h func(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte)) *Upstream {
	u := &Upstream{
		Default: DefaultScript(),
		Models:  []string{"gpt-4o", "gpt-4o-mini"},
		format:  f,
		done:    make(chan struct{}),
		arrived: make(chan struct{}),
	}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.record(r, body)
		if s, ok := u.choose(body); ok {
			r = r.WithContext(context.WithValue(r.Context(), chosenScript{}, s))
		}
		h(u, w, r, body)
	}))
	u.URL = u.srv.URL
	if f == formatOpenAI {
		u.URL += "/v1"
	}
	return u
}

// Requests returns a copy of every request received so far, in order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Request, len(u.reqs))
	for i, r := range u.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Push queues scripts, answered in order by the next completion requests;
// when the queue is empty, Default answers.
func (u *Upstream) Push(s ...Script) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.queue = append(u.queue, s...)
}

// Pending is how many pushed scripts are still waiting for a request.
func (u *Upstream) Pending() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue)
}

// SetDefault replaces Default safely while requests may be running.
func (u *Upstream) SetDefault(s Script) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.Default = s
}

// Reset forgets the recorded requests and the queued scripts.
func (u *Upstream) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reqs = nil
	u.queue = nil
}

// Close stops the server. Requests blocked on a Gate or a Delay are released
// (their connections are closed) so Close never hangs.
func (u *Upstream) Close() {
	u.closeOnce.Do(func() {
		close(u.done)
		u.srv.CloseClientConnections()
		u.srv.Close()
	})
}

func (u *Upstream) record(r *http.Request, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reqs = append(u.reqs, Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
		Body:   bytes.Clone(body),
	})
	close(u.arrived)
	u.arrived = make(chan struct{})
}

// Arrived returns how many requests have been received and a channel
// closed when the next one arrives, so a test can wait for requests
// without polling.
func (u *Upstream) Arrived() (int, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs), u.arrived
}

// chosenScript is the context key of the script Choose picked for a
// request.
type chosenScript struct{}

// choose asks Choose, when set, for body's script.
func (u *Upstream) choose(body []byte) (Script, bool) {
	u.mu.Lock()
	c := u.Choose
	u.mu.Unlock()
	if c == nil {
		return Script{}, false
	}
	return c(body)
}

// next takes the script for a completion request r: the one Choose
// picked, else the queue's first, else Default.
func (u *Upstream) next(r *http.Request) Script {
	if s, ok := r.Context().Value(chosenScript{}).(Script); ok {
		return s
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.queue) > 0 {
		s := u.queue[0]
		u.queue = u.queue[1:]
		return s
	}
	return u.Default
}

// wait blocks until gate is closed, or until d elapses when gate is nil;
// false when the request or the server ended first.
func (u *Upstream) wait(r *http.Request, gate <-chan struct{}, d time.Duration) bool {
	var timer <-chan time.Time
	if gate == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-gate:
		return true
	case <-timer:
		return true
	case <-r.Context().Done():
		return false
	case <-u.done:
		return false
	}
}

// prelude applies Delay and, for non-streaming answers, Gate, then sets the
// script's extra headers. When the client or the server goes away first it
// aborts the handler (the connection is cut).
func (u *Upstream) prelude(w http.ResponseWriter, r *http.Request, s Script, stream bool) {
	if s.Delay > 0 && !u.wait(r, nil, s.Delay) {
		panic(http.ErrAbortHandler)
	}
	if !stream && s.Gate != nil && !u.wait(r, s.Gate, 0) {
		panic(http.ErrAbortHandler)
	}
	for k, vs := range s.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}

// sseEvent is one server-sent event; name is empty for data-only events.
type sseEvent struct {
	name    string
	data    []byte
	content bool // carries text or tool-call arguments
}

// writeStream sends events, flushing each. After the first content event (or
// the first event when none carries content) it waits for s.Gate and, with
// s.MidStreamError, sends errEvent(index) in place of the rest.
func (u *Upstream) writeStream(w http.ResponseWriter, r *http.Request, s Script, events []sseEvent, errEvent func(seq int) sseEvent) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	gateAt := 0
	for i, e := range events {
		if e.content {
			gateAt = i
			break
		}
	}
	for i, e := range events {
		if s.NoUsage {
			e.data = stripUsage(e.data)
		}
		if !writeEvent(w, rc, e) {
			return
		}
		if i != gateAt {
			continue
		}
		if s.Gate != nil && !u.wait(r, s.Gate, 0) {
			// Cut the connection so the client sees a broken stream,
			// not a clean end.
			panic(http.ErrAbortHandler)
		}
		if s.MidStreamError {
			writeEvent(w, rc, errEvent(i+1))
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, rc *http.ResponseController, e sseEvent) bool {
	var b bytes.Buffer
	if e.name != "" {
		b.WriteString("event: ")
		b.WriteString(e.name)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(e.data)
	b.WriteString("\n\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// outputLimits are the request fields that limit a model's output.
var outputLimits = []string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// capped is s with its output usage at most req's output limit when
// s.CapOutput is set.
func (s Script) capped(req map[string]any) Script {
	if !s.CapOutput {
		return s
	}
	for _, f := range outputLimits {
		if n, ok := req[f].(float64); ok && int(n) < s.Usage.Output {
			s.Usage.Output = int(n)
		}
	}
	return s
}

// usagePaths are where the formats carry a usage object: a whole answer
// or a chunk, message_start's message, a responses event's response.
var usagePaths = []string{"usage", "message.usage", "response.usage"}

// stripUsage is data without its usage objects.
func stripUsage(data []byte) []byte {
	for _, p := range usagePaths {
		if out, err := sjson.DeleteBytes(data, p); err == nil {
			data = out
		}
	}
	return data
}

// writeAnswer writes a whole answer of s with status 200 (without its
// usage when s.NoUsage).
func writeAnswer(w http.ResponseWriter, s Script, v any) {
	b := mustJSON(v)
	if s.NoUsage {
		b = stripUsage(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(mustJSON(v))
}

// mustJSON marshals without HTML escaping, as the providers do.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("fake: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// split cuts s into n pieces of nearly equal rune counts; fewer (one rune
// each) when s is shorter, none when s is empty.
func split(s string, n int) []string {
	if n <= 0 {
		n = 3
	}
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return nil
	}
	if n > runes {
		n = runes
	}
	out := make([]string, 0, n)
	rest := s
	for i := range n {
		take := runes / n
		if i < runes%n {
			take++
		}
		cut := 0
		for range take {
			_, size := utf8.DecodeRuneInString(rest[cut:])
			cut += size
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	return out
}

func args(tc ToolCall) string {
	if strings.TrimSpace(tc.Arguments) == "" {
		return "{}"
	}
	return tc.Arguments
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by n random base62 characters.
func newID(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	max := big.NewInt(int64(len(base62)))
	for range n {
		i, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("fake: " + err.Error())
		}
		b.WriteByte(base62[i.Int64()])
	}
	return b.String()
}

const hexDigits = "0123456789abcdef"

func newHexID(prefix string, n int) string {
	buf := make([]byte, (n+1)/2)
	if _, err := rand.Read(buf); err != nil {
		panic("fake: " + err.Error())
	}
	var b strings.Builder
	b.WriteString(prefix)
	for i := range n {
		c := buf[i/2]
		if i%2 == 0 {
			c >>= 4
		}
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// countedMembers are the members of a messages body whose text the
// Anthropic fake counts, as the provider bills them as prompt: the system
// prompt, the messages, the tool definitions and choice, and the output
// format's schema (beta output_format or output_config.format).
var countedMembers = []string{"system", "messages", "tools", "tool_choice", "output_format", "output_config"}

// CountTokens is the Anthropic fake's count_tokens estimate for a request
// body: the runes of every JSON string value under the members the
// provider bills as prompt ("system", "messages", "tools", "tool_choice",
// "output_format", "output_config"; keys excluded), divided by four and
// rounded up, at least 1. What it counts of a body sent to /v1/messages
// is what a test has the fake bill for it.
func CountTokens(body []byte) int {
	var req map[string]any
	if json.Unmarshal(body, &req) != nil {
		return 1
	}
	n := 0
	for _, k := range countedMembers {
		n += stringRunes(req[k])
	}
	if t := (n + 3) / 4; t > 1 {
		return t
	}
	return 1
}

func stringRunes(v any) int {
	switch v := v.(type) {
	case string:
		return utf8.RuneCountInString(v)
	case []any:
		n := 0
		for _, e := range v {
			n += stringRunes(e)
		}
		return n
	case map[string]any:
		n := 0
		for _, e := range v {
			n += stringRunes(e)
		}
		return n
	}
	return 0
}

// jobj is a JSON object that keeps its keys in the order given (alternating
// key, value), so events read like the providers' ("type" first).
type jobj []any

func o(kv ...any) jobj { return jobj(kv) }

// with returns a copy of the object with more keys appended.
func (j jobj) with(kv ...any) jobj {
	out := make(jobj, 0, len(j)+len(kv))
	return append(append(out, j...), kv...)
}

func (j jobj) MarshalJSON() ([]byte, error) {
	if len(j)%2 != 0 {
		panic("fake: odd jobj")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < len(j); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(j[i].(string)))
		b.WriteByte(':')
		b.Write(mustJSON(j[i+1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// scriptedCalls are s's tool calls as a fake sends them: each without an
// id given one of prefix and n random characters, its arguments as args
// makes them.
func scriptedCalls(s Script, prefix string, n int) []ToolCall {
	calls := make([]ToolCall, len(s.ToolCalls))
	for i, tc := range s.ToolCalls {
		if tc.ID == "" {
			tc.ID = newID(prefix, n)
		}
		tc.Arguments = args(tc)
		calls[i] = tc
	}
	return calls
}
