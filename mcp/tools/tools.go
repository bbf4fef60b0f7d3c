// Package tools is the tools server's tool set (docs/mcp.md): the
// tools, their arguments and results, list_capabilities, and the paid-tool
// listing states. Each tool calls its API route in-process with the
// caller's key (Invoker), so the route authenticates, gates, limits and
// bills exactly as a direct call; the tools server adds no charge. A
// failure is a tool result carrying the tool error object, never a
// protocol fault. The JSON-RPC transport lives in the mcp package.
package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// ServerName is the tools server's name.
const ServerName = "gw-tools"

// Limits of the tools' arguments (docs/mcp.md, Tools server).
const (
	// MaxSpeakChars bounds speak's text per call.
	MaxSpeakChars = 1000
	// MaxSearchQueryChars bounds web_search's query.
	MaxSearchQueryChars = 2000
	// MaxAudioBytes bounds transcribe's audio, as the route's file limit.
	MaxAudioBytes = 8 << 20
)

// Names of the tools.
const (
	ToolListCapabilities = "list_capabilities"
	ToolWebFetch         = "web_fetch"
	ToolWebSearch        = "web_search"
	ToolImageGenerate    = "image_generate"
	ToolTranscribe       = "transcribe"
	ToolSpeak            = "speak"
	ToolAppsList         = "apps_list"
	ToolAppsConnect      = "apps_connect"
	ToolAppsFindActions  = "apps_find_actions"
	ToolAppsExecute      = "apps_execute"
)

// Invoker serves a gateway route in-process (routes.Router.Invoke): the
// same key, checks, limits and billing as a direct call, the answer
// collected, a refusal handed back unrendered.
type Invoker interface {
	Invoke(r *http.Request) (*pipeline.Recorded, *gwerr.Error)
}

// Tool is one tool of the server.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema json.RawMessage
	// Ability is the account ability the tool uses ("" for none); it is
	// the tool error object's capability.
	Ability string
	// Paid tools need a paid, cleared plan and follow the paid-tool
	// listing states.
	Paid bool
	// Route is the API path the tool calls ("" for tools served here).
	Route string
	// Alias is the ability alias whose price is the advisory cost.
	Alias string
	// CostBasis says what a paid tool's advisory cost per call assumes.
	CostBasis string
}

// Result is a tool's answer: MCP content blocks, the structured content,
// and whether it is a failure.
type Result struct {
	Content    []map[string]any
	Structured map[string]any
	IsError    bool
}

// Server is the tool set.
type Server struct {
	// Invoker calls the API routes.
	Invoker Invoker
	// Prices gives each ability alias's plan price per unit (microcents),
	// for advisory costs; false when unpublished. Page reading and search,
	// which have no alias, are asked as "fetch" (a plain read) and
	// "search" (one search).
	Prices func(alias string) (int64, bool)
	// States keeps the paid-tool listing states.
	States States
	// Fetch downloads transcribe's audio_url through the address guard;
	// nil refuses audio_url.
	Fetch func(ctx context.Context, url string, limit int64) ([]byte, error)
	// UpgradeURL is where premium_locked and payment_required point.
	UpgradeURL string
	// DefaultVoice is speak's voice when none is given.
	DefaultVoice string
	// Apps are the connected apps; nil offers none (the apps tools are not
	// listed).
	Apps *Apps
}

// catalogue is every tool except the apps tools, in the order tools/list
// gives them. Descriptions of paid tools get the plan and advisory cost when
// listed.
var catalogue = []Tool{
	{Name: ToolListCapabilities, Description: "List what this key can do: the plan, whether premium tools are unlocked, and each ability with its advisory cost per call.",
		InputSchema: schema(`{"type":"object","properties":{}}`)},
	{Name: ToolWebFetch, Ability: store.AbilityFetch, Paid: true, Route: "/v1/fetch", Alias: "fetch",
		CostBasis:   "a plain read; a page read again within 6 hours is free",
		Description: "Read a public web page and return its main content as Markdown (a plain read, no JavaScript).",
		InputSchema: schema(`{"type":"object","properties":{"url":{"type":"string","description":"Public http or https URL"}},"required":["url"]}`)},
	{Name: ToolWebSearch, Ability: store.AbilitySearch, Paid: true, Route: "/v1/search", Alias: "search",
		CostBasis:   "one search; the tokens it reads and writes are extra",
		Description: "Search the web and answer with citations.",
		InputSchema: schema(`{"type":"object","properties":{"query":{"type":"string","maxLength":2000}},"required":["query"]}`)},
	{Name: ToolImageGenerate, Ability: store.AbilityImages, Paid: true, Route: "/v1/images/generations", Alias: "gw-image",
		CostBasis:   "one image at the lowest quality and size",
		Description: "Generate an image from a prompt; returns it base64-encoded.",
		InputSchema: schema(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)},
	{Name: ToolTranscribe, Ability: store.AbilityTranscription, Paid: true, Route: "/v1/audio/transcriptions", Alias: "gw-voice",
		CostBasis:   "a clip of up to 10 seconds, the least a file is billed; longer clips cost more per second",
		Description: "Transcribe speech to text from a public https audio_url or from audio_base64 with its filename (up to 8 MB).",
		InputSchema: schema(`{"type":"object","properties":{"audio_url":{"type":"string"},"audio_base64":{"type":"string"},"filename":{"type":"string"},"language":{"type":"string"},"prompt":{"type":"string"}}}`)},
	{Name: ToolSpeak, Ability: store.AbilitySpeech, Paid: true, Route: "/v1/audio/speech", Alias: "gw-voice-speak",
		CostBasis:   "200 characters; billed per character",
		Description: "Speak text aloud (up to 1,000 characters); returns audio.",
		InputSchema: schema(`{"type":"object","properties":{"text":{"type":"string","maxLength":1000},"voice":{"type":"string"},"format":{"type":"string","enum":["mp3","wav"]},"speed":{"type":"number","minimum":0.25,"maximum":4}},"required":["text"]}`)},
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// Tools returns the tool table (for the transport and tests).
func Tools() []Tool { return append([]Tool(nil), catalogue...) }

// find returns the tool named name.
func find(name string) (Tool, bool) {
	for _, t := range append(catalogue, appsTools...) {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// fail is the failure result of t refused with e: the tool error object,
// with the operator's upgrade_url on premium_locked and payment_required,
// and what the call would have cost on premium_locked.
func (s *Server) fail(t Tool, e *gwerr.Error) Result {
	obj := gwerr.ToolObject(e, t.Ability, s.UpgradeURL)
	if p, ok := s.advisory(t); ok && obj["error"] == gwerr.CodePremiumLocked {
		obj["price_microcents"] = p
	}
	text, _ := json.Marshal(obj)
	return Result{Content: []map[string]any{{"type": "text", "text": string(text)}}, Structured: obj, IsError: true}
}

// ok is a success result: the structured content, also as text.
func ok(obj map[string]any, extra ...map[string]any) Result {
	text, _ := json.Marshal(obj)
	content := append([]map[string]any{{"type": "text", "text": string(text)}}, extra...)
	return Result{Content: content, Structured: obj}
}

// invalid is a bad argument.
func invalid(param, format string, args ...any) *gwerr.Error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}

// Known reports whether name is one of the tools the server offers (the
// apps tools only when apps are offered).
func (s *Server) Known(name string) bool {
	for _, t := range s.all() {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Call runs tool name with args for the caller of c (whose key the routes
// see). It never returns a protocol fault: every failure is a Result with
// IsError.
func (s *Server) Call(ctx context.Context, c *pipeline.Call, name string, args json.RawMessage) Result {
	t, found := find(name)
	if c.KeyRefusal != nil {
		// The key was refused: every tool answers auth_failed (or, when the
		// key could not be checked, a retryable capability_unavailable).
		return s.fail(t, c.KeyRefusal)
	}
	if !found {
		return s.fail(Tool{Name: name}, invalid("name", "unknown tool %q", name))
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	if jsonbody.Check(args) != nil || !gjson.ParseBytes(args).IsObject() {
		return s.fail(t, invalid("arguments", "arguments must be a JSON object"))
	}
	a := gjson.ParseBytes(args)
	var res Result
	var e *gwerr.Error
	switch t.Name {
	case ToolListCapabilities:
		return ok(s.capabilities(c.Account))
	case ToolWebFetch:
		res, e = s.webFetch(ctx, c, t, a)
	case ToolWebSearch:
		res, e = s.webSearch(ctx, c, t, a)
	case ToolImageGenerate:
		res, e = s.imageGenerate(ctx, c, t, a)
	case ToolTranscribe:
		res, e = s.transcribe(ctx, c, t, a)
	case ToolSpeak:
		res, e = s.speak(ctx, c, t, a)
	default:
		res, e = s.appsFor(ctx, c, t, a)
	}
	if e != nil {
		if t.Paid && e.Kind == gwerr.PlanLocked && s.States != nil {
			s.States.Refused(ctx, c.Account.ID, t.Name)
		}
		return s.fail(t, e)
	}
	return res
}

// route calls t's route with body (contentType) under the caller's key and
// returns the answer, or the refusal.
func (s *Server) route(ctx context.Context, c *pipeline.Call, t Tool, body io.Reader, contentType string) (*pipeline.Recorded, *gwerr.Error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Route, body)
	if err != nil {
		return nil, gwerr.New(gwerr.Internal, "building the call")
	}
	r.Header.Set("Authorization", c.R.Header.Get("Authorization"))
	r.Header.Set("Content-Type", contentType)
	rec, refused := s.Invoker.Invoke(r)
	if refused != nil {
		return nil, refused
	}
	if rec.Status/100 != 2 {
		return nil, gwerr.New(gwerr.Upstream, "the %s call failed", t.Ability)
	}
	return rec, nil
}

// jsonRoute calls t's route with a JSON body and returns the answer's JSON
// object.
func (s *Server) jsonRoute(ctx context.Context, c *pipeline.Call, t Tool, body []byte) (map[string]any, *pipeline.Recorded, *gwerr.Error) {
	rec, e := s.route(ctx, c, t, bytes.NewReader(body), "application/json")
	if e != nil {
		return nil, nil, e
	}
	obj := map[string]any{}
	if err := json.Unmarshal(rec.Body.Bytes(), &obj); err != nil {
		return nil, nil, gwerr.New(gwerr.Upstream, "the %s call gave an unreadable answer", t.Ability)
	}
	return obj, rec, nil
}

// billed is the units an answer's charge billed; 0 when it charged
// nothing.
func billed(rec *pipeline.Recorded) int64 {
	if len(rec.Bills) == 0 {
		return 0
	}
	return rec.Bills[0].Units
}

func (s *Server) webFetch(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	u := a.Get("url")
	if u.Type != gjson.String || strings.TrimSpace(u.Str) == "" {
		return Result{}, invalid("url", "url is required")
	}
	body, _ := json.Marshal(map[string]any{"url": u.Str}) // always a plain read
	obj, rec, e := s.jsonRoute(ctx, c, t, body)
	if e != nil {
		return Result{}, e
	}
	out := map[string]any{"markdown": obj["markdown"], "format": obj["format"], "url": obj["url"], "cost_microcents": rec.Cost().Microcents()}
	return ok(out), nil
}

func (s *Server) webSearch(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	q := a.Get("query")
	if q.Type != gjson.String || strings.TrimSpace(q.Str) == "" {
		return Result{}, invalid("query", "query is required")
	}
	if utf8.RuneCountInString(q.Str) > MaxSearchQueryChars {
		return Result{}, gwerr.New(gwerr.TooLarge, "query is longer than %d characters", MaxSearchQueryChars).WithParam("query")
	}
	body, _ := json.Marshal(map[string]any{"query": q.Str})
	obj, _, e := s.jsonRoute(ctx, c, t, body)
	if e != nil {
		return Result{}, e
	}
	out := map[string]any{}
	for _, k := range []string{"answer", "citations", "searches", "cost_microcents", "cost_usd"} {
		out[k] = obj[k]
	}
	return ok(out), nil
}

func (s *Server) imageGenerate(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	p := a.Get("prompt")
	if p.Type != gjson.String || strings.TrimSpace(p.Str) == "" {
		return Result{}, invalid("prompt", "prompt is required")
	}
	body, _ := json.Marshal(map[string]any{"prompt": p.Str, "response_format": "b64_json"})
	obj, rec, e := s.jsonRoute(ctx, c, t, body)
	if e != nil {
		return Result{}, e
	}
	obj["cost_microcents"] = rec.Cost().Microcents()
	return ok(obj), nil
}

// advisory is t's advisory cost per call in microcents, at plan prices.
func (s *Server) advisory(t Tool) (int64, bool) {
	if t.Name == ToolAppsExecute && s.Apps != nil {
		most, ok := int64(0), false
		for _, a := range s.Apps.List {
			most, ok = max(most, a.PriceMicrocents), true
		}
		return most, ok
	}
	if t.Alias == "" || s.Prices == nil {
		return 0, false
	}
	p, ok := s.Prices(t.Alias)
	if !ok {
		return 0, false
	}
	switch t.Name {
	case ToolTranscribe:
		return p * pricing.TranscriptionMinBilledSeconds, true
	case ToolSpeak:
		return p * AdvisorySpeakChars, true
	}
	return p, true
}

// AdvisorySpeakChars is the length speak's advisory cost assumes.
const AdvisorySpeakChars = 200

// decodeBase64 accepts standard and URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ";base64,"); strings.HasPrefix(s, "data:") && i >= 0 {
		s = s[i+len(";base64,"):]
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, base64.CorruptInputError(0)
}
