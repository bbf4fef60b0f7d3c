package chat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/answercache"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     Format
		body  string
		param string // "" when valid
		check func(*request) bool
	}{
		{"chat minimal", ChatCompletions, `{"messages":[{"role":"user","content":"hi"}]}`, "", func(r *request) bool { return r.model == "" && !r.stream && r.needs.Text == "hi" }},
		{"chat full", ChatCompletions, `{"model":"gw-fast","stream":true,"temperature":0,"max_completion_tokens":77,"tools":[{"type":"function"}],"response_format":{"type":"json_object"},"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:"}}]}]}`, "",
			func(r *request) bool {
				return r.model == "gw-fast" && r.stream && r.temperatureZero && r.needs.MaxTokens == 77 && r.needs.Tools && r.needs.JSON && r.needs.Vision && r.needs.Text == "see\n"
			}},
		{"assistant tool calls without content", ChatCompletions, `{"messages":[{"role":"assistant","tool_calls":[{"id":"x"}]}]}`, "", nil},
		{"not an object", ChatCompletions, `[1]`, "body", nil},
		{"model not a string", ChatCompletions, `{"model":3,"messages":[{"role":"user","content":"x"}]}`, "model", nil},
		{"stream not a bool", ChatCompletions, `{"stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream", nil},
		{"temperature not a number", ChatCompletions, `{"temperature":"0","messages":[{"role":"user","content":"x"}]}`, "temperature", nil},
		{"no messages", ChatCompletions, `{"model":"gw-auto"}`, "messages", nil},
		{"empty messages", ChatCompletions, `{"messages":[]}`, "messages", nil},
		{"message without role", ChatCompletions, `{"messages":[{"content":"x"}]}`, "messages", nil},
		{"messages without max_tokens", Messages, `{"messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"messages zero max_tokens", Messages, `{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"messages image", Messages, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "", func(r *request) bool { return r.needs.Vision && r.needs.MaxTokens == 5 }},
		{"responses string input", Responses, `{"input":"hello","max_output_tokens":9}`, "", func(r *request) bool { return r.needs.Text == "hello" && r.needs.MaxTokens == 9 }},
		{"responses items", Responses, `{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"}]}]}`, "", func(r *request) bool { return r.needs.Vision && r.needs.Text == "a\n" }},
		{"responses without input", Responses, `{"model":"gw-auto"}`, "input", nil},
		{"second opinion", ChatCompletions, `{"second_opinion":true,"messages":[{"role":"user","content":"x"}]}`, "", func(r *request) bool { return r.secondOpinion }},
		// One reading of the body: what the gateway reads is what
		// the upstream gets.
		{"duplicate model", ChatCompletions, `{"model":"gpt-4.1-nano","messages":[{"role":"user","content":"x"}],"model":"o4-mini"}`, "body", nil},
		{"duplicate stream_options", ChatCompletions, `{"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":false}}`, "body", nil},
		{"duplicate include_usage", ChatCompletions, `{"stream":true,"stream_options":{"include_usage":true,"include_usage":false},"messages":[{"role":"user","content":"x"}]}`, "body", nil},
		{"duplicate max_tokens", Messages, `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"max_tokens":100000}`, "body", nil},
		{"duplicate model escaped", Responses, `{"model":"gw-fast","input":"x","mod\u0065l":"o4-mini"}`, "body", nil},
		{"duplicate max_output_tokens", Responses, `{"max_output_tokens":5,"input":"x","max_output_tokens":100000}`, "body", nil},
		// Nothing unpriced passes: hosted tools, dearer tiers,
		// background runs, stored conversations.
		{"linked image reserved at its ceiling", ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://a.example/p.png"}},{"type":"image_url","image_url":{"url":"https://a.example/q.png"}}]}]}`, "",
			func(r *request) bool { return r.needs.Vision && r.needs.PromptTokens >= 2*ImageTokenCeiling }},
		{"n", ChatCompletions, `{"n":3,"messages":[{"role":"user","content":"x"}]}`, "", func(r *request) bool { return r.needs.Answers == 3 }},
		{"n zero", ChatCompletions, `{"n":0,"messages":[{"role":"user","content":"x"}]}`, "n", nil},
		{"n fraction", ChatCompletions, `{"n":1.5,"messages":[{"role":"user","content":"x"}]}`, "n", nil},
		{"n huge", ChatCompletions, `{"n":1000,"messages":[{"role":"user","content":"x"}]}`, "n", nil},
		{"function tools", ChatCompletions, `{"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`, "", nil},
		{"chat hosted tool", ChatCompletions, `{"tools":[{"type":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "tools", nil},
		{"chat web_search_options", ChatCompletions, `{"web_search_options":{},"messages":[{"role":"user","content":"x"}]}`, "web_search_options", nil},
		{"chat audio output", ChatCompletions, `{"modalities":["text","audio"],"messages":[{"role":"user","content":"x"}]}`, "modalities", nil},
		{"chat priority tier", ChatCompletions, `{"service_tier":"priority","messages":[{"role":"user","content":"x"}]}`, "service_tier", nil},
		{"chat default tier", ChatCompletions, `{"service_tier":"default","messages":[{"role":"user","content":"x"}]}`, "", nil},
		{"responses file search", Responses, `{"input":"x","tools":[{"type":"file_search","vector_store_ids":["vs"]}]}`, "tools", nil},
		{"responses code interpreter", Responses, `{"input":"x","tools":[{"type":"function","name":"f"},{"type":"code_interpreter"}]}`, "tools", nil},
		{"responses image generation", Responses, `{"input":"x","tools":[{"type":"image_generation"}]}`, "tools", nil},
		{"responses background", Responses, `{"input":"x","background":true}`, "background", nil},
		{"responses previous id", Responses, `{"input":"x","previous_response_id":"resp_other_tenant"}`, "previous_response_id", nil},
		{"responses scale tier", Responses, `{"input":"x","service_tier":"scale"}`, "service_tier", nil},
		{"messages server tool", Messages, `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "tools", nil},
		{"messages client tools", Messages, `{"max_tokens":5,"tools":[{"name":"f","input_schema":{}},{"type":"custom","name":"g"},{"type":"bash_20250124","name":"bash"}],"messages":[{"role":"user","content":"x"}]}`, "", nil},
		{"messages mcp connector", Messages, `{"max_tokens":5,"mcp_servers":[{"url":"https://x"}],"messages":[{"role":"user","content":"x"}]}`, "mcp_servers", nil},
		{"messages priority", Messages, `{"max_tokens":5,"service_tier":"priority","messages":[{"role":"user","content":"x"}]}`, "service_tier", nil},
		// The reservation is an upper bound: output limits are
		// read as the provider reads them, the prompt at a token a byte.
		{"both output limits: the larger", ChatCompletions, `{"max_completion_tokens":5,"max_tokens":900,"messages":[{"role":"user","content":"x"}]}`, "", func(r *request) bool { return r.needs.MaxTokens == 900 }},
		{"null output limit is none", ChatCompletions, `{"max_completion_tokens":null,"messages":[{"role":"user","content":"x"}]}`, "", func(r *request) bool { return r.needs.MaxTokens == 0 }},
		{"null output limit on responses", Responses, `{"max_output_tokens":null,"input":"x"}`, "", func(r *request) bool { return r.needs.MaxTokens == 0 }},
		{"messages null max_tokens", Messages, `{"max_tokens":null,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"output limit past any model", ChatCompletions, `{"max_completion_tokens":9000000000000000000,"messages":[{"role":"user","content":"x"}]}`, "max_completion_tokens", nil},
		{"output limit 1e30", ChatCompletions, `{"max_tokens":1e30,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"output limit a string", ChatCompletions, `{"max_tokens":"100","messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"output limit a fraction", Responses, `{"max_output_tokens":10.5,"input":"x"}`, "max_output_tokens", nil},
		{"messages max_tokens past any model", Messages, `{"max_tokens":2000000,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", nil},
		{"prompt bound a token a byte", ChatCompletions, `{"messages":[{"role":"user","content":"` + strings.Repeat("a ", 500) + `"}]}`, "",
			func(r *request) bool { return r.needs.PromptBound >= 1000 && r.needs.PromptTokens < 1000 }},
		{"inline image counted at its ceiling, not its bytes", ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 40000) + `"}}]}]}`, "",
			func(r *request) bool {
				return r.needs.PromptBound < ImageTokenCeiling+200 && r.needs.PromptBound > ImageTokenCeiling
			}},
		{"tool result image", Messages, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}]}`, "",
			func(r *request) bool { return r.needs.Vision && r.needs.PromptBound >= ImageTokenCeiling }},
		{"tools add the provider's prompt", Messages, `{"max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"x"}]}`, "",
			func(r *request) bool { return r.needs.PromptBound >= ToolUseOverheadTokens }},
		// A longer prompt cache lifetime is billed at a dearer write price.
		{"messages one-hour cache", Messages, `{"max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"x"}]}`, "cache_control", nil},
		{"one-hour cache deep in a tool result", Messages, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}]}`, "cache_control", nil},
		{"one-hour cache escaped", Messages, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"r","cache_contro\u006c":{"type":"ephemeral","t\u0074l":"1h"}}]}]}`, "cache_control", nil},
		{"one-hour cache from a chat client", ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, "cache_control", nil},
		{"chat audio input", ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "messages", nil},
		{"chat audio input escaped", ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"input\u005faudio","input\u005faudio":{"data":"AAAA","format":"wav"}}]}]}`, "messages", nil},
		{"responses audio input", Responses, `{"input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "input", nil},
		{"five-minute cache", Messages, `{"max_tokens":5,"tools":[{"name":"f","input_schema":{},"cache_control":{"type":"ephemeral","ttl":"5m"}}],"messages":[{"role":"user","content":[{"type":"text","text":"r","cache_control":{"type":"ephemeral"}}]}]}`, "", nil},
		{"too deep", ChatCompletions, `{"messages":[{"role":"user","content":"x"}],"metadata":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "body", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parse([]byte(tc.body), tc.f)
			if tc.param != "" {
				var e *gwerr.Error
				if !errors.As(err, &e) || e.Kind != gwerr.Invalid || e.Param != tc.param {
					t.Fatalf("err %v, want Invalid with param %q", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil && !tc.check(r) {
				t.Fatalf("parsed %+v", r)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), 0)
	f.Add([]byte(`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`), 2)
	f.Add([]byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}]}`), 1)
	pdf := base64.StdEncoding.EncodeToString(pdftest.Make(2, pdftest.Options{ObjectStreams: true}))
	for i, tc := range documentBodies {
		f.Add([]byte(tc.body(pdf)), int(tc.f)+3*i)
	}
	f.Fuzz(func(t *testing.T, body []byte, format int) {
		fm := Format(((format % 3) + 3) % 3)
		r, err := parse(body, fm)
		if err != nil {
			var e *gwerr.Error
			if !errors.As(err, &e) || e.Kind != gwerr.Invalid || e.Param == "" {
				t.Fatalf("refusal %v must be Invalid with a param", err)
			}
			return
		}
		if r.needs.PromptTokens < 0 || r.needs.PromptBound < 0 || r.needs.MaxTokens > MaxOutputTokens || !gjson.ValidBytes(body) {
			t.Fatalf("accepted %q", body)
		}
	})
}

// Responses go upstream with store false; n multiplies the output estimate.
func TestStoreFalseAndAnswers(t *testing.T) {
	out, _, err := requestFor([]byte(`{"model":"gw-fast","input":"hi","store":true}`), Responses, Responses, "m1", false)
	if err != nil || gjson.GetBytes(out, "store").Type != gjson.False {
		t.Fatalf("%s %v", out, err)
	}
	m := &catalog.Model{ID: "m", InputPrice: pricing.USD(1), OutputPrice: pricing.USD(2)}
	one := pricing.Cost(false, lanes.EstimateLines(m, lanes.Needs{PromptTokens: 1000, MaxTokens: 100})...)
	three := pricing.Cost(false, lanes.EstimateLines(m, lanes.Needs{PromptTokens: 1000, MaxTokens: 100, Answers: 3})...)
	if one != pricing.Micro(1200) || three != pricing.Micro(1600) {
		t.Fatalf("estimates %v and %v", one, three)
	}
	m.CacheWritePrice = pricing.USD(3) // dearer than input: the prompt is reserved at it
	if got := pricing.Cost(false, lanes.EstimateLines(m, lanes.Needs{PromptTokens: 1000, MaxTokens: 100})...); got != pricing.Micro(3200) {
		t.Fatalf("estimate with a cache write price %v", got)
	}
	// Cache writes are billed at their own price, cache reads at the input
	// price when the model names no cached price.
	u := translate.Usage{Input: 1000, CachedInput: 200, CacheWrite: 300, Output: 10}
	if got := pricing.Cost(false, usageLines(m, u)...); got != pricing.Micro(500+200+900+20) {
		t.Fatalf("usage cost %v", got)
	}
}

func TestRequestFor(t *testing.T) {
	body := []byte(`{"model":"gw-fast","second_opinion":false,"x_unknown":{"a":1},"messages":[{"role":"user","content":"hi"}]}`)
	out, path, err := requestFor(body, ChatCompletions, ChatCompletions, "m1", true)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/chat/completions" || gjson.GetBytes(out, "model").String() != "m1" || gjson.GetBytes(out, "second_opinion").Exists() ||
		gjson.GetBytes(out, "x_unknown").Raw != `{"a":1}` || !gjson.GetBytes(out, "stream_options.include_usage").Bool() {
		t.Fatalf("%s %s", path, out)
	}
	out, _, _ = requestFor(body, ChatCompletions, ChatCompletions, "m1", false)
	if gjson.GetBytes(out, "stream_options").Exists() {
		t.Fatalf("non-streaming request asks for stream usage: %s", out)
	}
	out, path, err = requestFor(body, ChatCompletions, Messages, "claude", false)
	if err != nil || path != "/v1/messages" || gjson.GetBytes(out, "model").String() != "claude" || !gjson.GetBytes(out, "max_tokens").Exists() {
		t.Fatalf("%v %s %s", err, path, out)
	}
}

// A same-format body is edited in place: what the client wrote stays as
// written, byte for byte.
func TestSameFormatInPlace(t *testing.T) {
	for _, tc := range []struct {
		f          Format
		stream     bool
		body, want string
	}{
		{ChatCompletions, false, "{\"model\":\"gw-fast\", \"messages\":[ {\"role\":\"user\",\"content\":\"hi\"} ],\n \"max_tokens\":5}\n",
			"{\"model\":\"m1\", \"messages\":[ {\"role\":\"user\",\"content\":\"hi\"} ],\n \"max_tokens\":5}\n"},
		{ChatCompletions, true, `{"second_opinion":true, "model":"a","max_tokens":null}`,
			`{"model":"m1","max_completion_tokens":4096,"stream_options":{"include_usage":true}}`},
		{Responses, false, "{ \"input\":\"hi\" ,\"store\":true }", "{ \"input\":\"hi\" ,\"model\":\"m1\",\"max_output_tokens\":4096,\"store\":false}"},
		{Messages, false, `{}`, `{"model":"m1","max_tokens":4096}`},
	} {
		out, ok := sameFormat([]byte(tc.body), tc.f, "m1", tc.stream)
		if !ok || string(out) != tc.want {
			t.Errorf("%q (format %d): %v %q, want %q", tc.body, tc.f, ok, out, tc.want)
		}
	}
	if _, ok := sameFormat([]byte(`{"stream_options":{}}`), ChatCompletions, "m1", true); ok {
		t.Error("a client's stream_options was not left to the general path")
	}
}

func TestReadVerdict(t *testing.T) {
	for _, tc := range []struct{ reply, verdict, notes string }{
		{`{"verdict":"disagree","notes":"wrong sum"}`, "disagree", "wrong sum"},
		{"Here you go: {\"verdict\": \"agree\", \"notes\": \"fine\"} done", "agree", "fine"},
		{"I disagree with this answer.", "disagree", "I disagree with this answer."},
		{"I agree.", "agree", "I agree."},
		{"Looks right.", "unavailable", "Looks right."},
		{`{"verdict":"maybe"}`, "unavailable", `{"verdict":"maybe"}`},
		{"", "unavailable", ""},
	} {
		op := readVerdict("m", tc.reply)
		if op.Verdict != tc.verdict || op.Notes != tc.notes || op.Model != "m" {
			t.Errorf("%q → %+v", tc.reply, op)
		}
	}
}

// A second opinion is refused up front when every slot is taken, and a
// slot is held only while a check runs.
func TestOpinionsAdmit(t *testing.T) {
	o := NewOpinions(1)
	ok := &request{}
	if err := o.admit(ok, "gw-auto", 10); err != nil {
		t.Fatal(err)
	}
	// Admission takes no slot: a second request is admitted too.
	if err := o.admit(ok, "gw-auto", 10); err != nil {
		t.Fatalf("admission held a slot: %v", err)
	}
	rel, err := o.take()
	if err != nil {
		t.Fatal(err)
	}
	if err := o.admit(ok, "gw-auto", 10); gwerr.As(err).Kind != gwerr.Unavailable || gwerr.As(err).RetryAfter != SecondOpinionRetryAfter {
		t.Fatalf("admission while a check runs: %v", err)
	}
	if _, err := o.take(); gwerr.As(err).Kind != gwerr.Unavailable {
		t.Fatalf("second concurrent check: %v", err)
	}
	rel()
	if err := o.admit(ok, "gw-auto", 10); err != nil {
		t.Fatalf("after the check: %v", err)
	}
	for _, tc := range []struct {
		req   *request
		model string
		size  int
		kind  gwerr.Kind
	}{
		{&request{stream: true}, "gw-auto", 10, gwerr.Invalid},
		{ok, "gw-fast", 10, gwerr.Invalid},
		{ok, "gw-auto", SecondOpinionMaxBytes + 1, gwerr.TooLarge},
	} {
		if err := o.admit(tc.req, tc.model, tc.size); gwerr.As(err).Kind != tc.kind {
			t.Errorf("%+v %s %d: %v", tc.req, tc.model, tc.size, err)
		}
	}
}

// Each format keeps its answers in a space of the answer cache of its
// own, apart from the other formats' and from the embeddings endpoint's.
func TestCacheSpaces(t *testing.T) {
	seen := map[answercache.Space]Format{}
	for f := range formats {
		s := Format(f).cacheSpace()
		if other, ok := seen[s]; ok || s >= answercache.Embeddings {
			t.Errorf("format %d keys the cache in space %d (taken by format %d: %v; embeddings' is %d)", f, s, other, ok, answercache.Embeddings)
		}
		seen[s] = Format(f)
	}
	c := answercache.New(time.Minute, 0)
	body := []byte(`{"a":1}`)
	c.Put("acc", ChatCompletions.cacheSpace(), body, answercache.Hit{Body: []byte("answer"), Model: "m"})
	if _, ok := c.Get("acc", Messages.cacheSpace(), body); ok {
		t.Fatal("a messages request was answered from a chat completions answer")
	}
}

func TestPassthroughUsage(t *testing.T) {
	p := &passthrough{format: Messages}
	for _, ev := range []sse.Event{
		{Event: "message_start", Data: []byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`)},
		{Event: "message_delta", Data: []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":42}}`)},
		{Event: "message_stop", Data: []byte(`{"type":"message_stop"}`)},
	} {
		out, _ := p.Event(ev)
		if len(out) != 1 || string(out[0].Data) != string(ev.Data) {
			t.Fatal("passthrough changed an event")
		}
	}
	if u := p.Usage(); u.Input != 15 || u.CachedInput != 5 || u.Output != 42 || !p.Done() {
		t.Fatalf("usage %+v done %v", u, p.Done())
	}
	c := &passthrough{format: ChatCompletions}
	c.Event(sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`)})
	c.Event(sse.Event{Data: []byte(`[DONE]`)})
	if u := c.Usage(); u.Input != 7 || u.CachedInput != 2 || u.Output != 3 || !c.Done() {
		t.Fatalf("chat usage %+v", u)
	}
}

func TestFinalUsagePath(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		ev   sse.Event
		path string
		ok   bool
	}{
		{ChatCompletions, sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":1}}`)}, "usage", true},
		{ChatCompletions, sse.Event{Data: []byte(`{"choices":[{"delta":{}}],"usage":null}`)}, "usage", false},
		{ChatCompletions, sse.Event{Data: []byte(`[DONE]`)}, "usage", false},
		{Messages, sse.Event{Event: "message_delta", Data: []byte(`{"usage":{"output_tokens":1}}`)}, "usage", true},
		{Messages, sse.Event{Event: "message_start", Data: []byte(`{"message":{"usage":{}}}`)}, "usage", false},
		{Responses, sse.Event{Event: "response.completed", Data: []byte(`{"type":"response.completed","response":{}}`)}, "response.usage", true},
		{Responses, sse.Event{Event: "response.incomplete", Data: []byte(`{"type":"response.incomplete","response":{}}`)}, "response.usage", true},
		{Responses, sse.Event{Event: "response.output_text.delta", Data: []byte(`{"type":"response.output_text.delta"}`)}, "", false},
	} {
		path, ok := finalUsagePath(tc.f, tc.ev)
		if ok != tc.ok || ok && path != tc.path {
			t.Errorf("%d %s: %q %v", tc.f, tc.ev.Data, path, ok)
		}
	}
}

// TestEmpty: an answer with nothing in it is a failure to escalate, unless
// the output limit cut it short (then it is billed as it is).
func TestEmpty(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		body string
		want bool
	}{
		{ChatCompletions, `{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}`, true},
		{ChatCompletions, `{"choices":[{"message":{"content":null},"finish_reason":"length"}]}`, false},
		{ChatCompletions, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`, false},
		{ChatCompletions, `{"choices":[{"message":{"tool_calls":[{"id":"x"}]},"finish_reason":"tool_calls"}]}`, false},
		{ChatCompletions, `{"choices":[{"message":{"refusal":"no"},"finish_reason":"stop"}]}`, false},
		{Messages, `{"content":[],"stop_reason":"end_turn"}`, true},
		{Messages, `{"content":[],"stop_reason":"max_tokens"}`, false},
		{Messages, `{"content":[{"type":"text","text":"hi"}]}`, false},
		{Responses, `{"output":[],"status":"completed"}`, true},
		{Responses, `{"output":[],"status":"incomplete"}`, false},
		// The same definition in every format: one empty text block, an
		// empty output text or reasoning alone is nothing.
		{Messages, `{"content":[{"type":"text","text":""}],"stop_reason":"end_turn"}`, true},
		{Messages, `{"content":[{"type":"thinking","thinking":"hmm"}],"stop_reason":"end_turn"}`, true},
		{Messages, `{"content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use"}`, false},
		{Messages, `{"content":[],"stop_reason":"refusal"}`, false},
		{Responses, `{"output":[{"type":"message","content":[{"type":"output_text","text":""}]}],"status":"completed"}`, true},
		{Responses, `{"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"hmm"}]}],"status":"completed"}`, true},
		{Responses, `{"output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}],"status":"completed"}`, false},
		{Responses, `{"output":[{"type":"function_call","name":"f","arguments":"{}"}],"status":"completed"}`, false},
		{ChatCompletions, `{"choices":[{"message":{"content":"","reasoning_content":"hmm"},"finish_reason":"stop"}]}`, true},
		{ChatCompletions, `{"choices":[{"message":{"content":""},"finish_reason":"stop"},{"message":{"content":"b"},"finish_reason":"stop"}]}`, false},
	} {
		if _, got := readAnswer(tc.f, []byte(tc.body)); got != tc.want {
			t.Errorf("%d %s: %v, want %v", tc.f, tc.body, got, tc.want)
		}
	}
}

// TestReadAnswerUsage: the usage is read in the same pass as emptiness;
// of a repeated key the first counts, as a path lookup reads it.
func TestReadAnswerUsage(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		body string
		want translate.Usage
	}{
		{ChatCompletions, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3}},"usage":{"prompt_tokens":99}}`,
			translate.Usage{Input: 7, Output: 2, CachedInput: 3}},
		{Messages, `{"usage":{"input_tokens":4,"output_tokens":5,"cache_read_input_tokens":2},"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`,
			translate.Usage{Input: 6, Output: 5, CachedInput: 2}},
		{Messages, `{"message":{"usage":{"input_tokens":4,"output_tokens":1}}}`, translate.Usage{Input: 4, Output: 1}},
		{Responses, `{"output":[],"usage":{"input_tokens":8,"output_tokens":3,"input_tokens_details":{"cached_tokens":1}}}`,
			translate.Usage{Input: 8, Output: 3, CachedInput: 1}},
		{Responses, `{"response":{"usage":{"input_tokens":2,"output_tokens":2}}}`, translate.Usage{Input: 2, Output: 2}},
	} {
		if got, _ := readAnswer(tc.f, []byte(tc.body)); got != tc.want {
			t.Errorf("%d %s: %+v, want %+v", tc.f, tc.body, got, tc.want)
		}
	}
}

// TestBillable: an answer is billed for what its provider reported, with
// the gateway's own count in place of usage that is missing, never at
// zero.
func TestBillable(t *testing.T) {
	prompt := func() int64 { return 40 }
	for _, tc := range []struct {
		reported, want translate.Usage
		output         int64
		counted        bool
	}{
		{translate.Usage{Input: 7, Output: 2, CachedInput: 3}, translate.Usage{Input: 7, Output: 2, CachedInput: 3}, 9, false},
		{translate.Usage{}, translate.Usage{Input: 40, Output: 9}, 9, true},
		{translate.Usage{Input: 7}, translate.Usage{Input: 7, Output: 9}, 9, true},
		{translate.Usage{Input: 7}, translate.Usage{Input: 7}, 0, false}, // nothing delivered
		{translate.Usage{Output: 5}, translate.Usage{Input: 40, Output: 5}, 9, true},
	} {
		got, counted := billable(tc.reported, prompt, func() int64 { return tc.output })
		if got != tc.want || counted != tc.counted {
			t.Errorf("%+v (output %d): %+v counted=%t, want %+v counted=%t", tc.reported, tc.output, got, counted, tc.want, tc.counted)
		}
	}
}

// TestOutputTokens: the gateway's count of an answer covers every piece
// of every format: text, reasoning, refusals and tool calls, all choices.
func TestOutputTokens(t *testing.T) {
	for _, tc := range []struct {
		f    Format
		body string
		text string
	}{
		{ChatCompletions, `{"choices":[{"message":{"content":"one two","reasoning_content":"three","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}},{"message":{"refusal":"four"}}]}`,
			`threeone twof{"a":1}four`},
		{Messages, `{"content":[{"type":"thinking","thinking":"three"},{"type":"text","text":"one two"},{"type":"tool_use","name":"f","input":{"a":1}}]}`,
			`threeone twof{"a":1}`},
		{Responses, `{"output":[{"type":"reasoning","summary":[{"text":"three"}]},{"type":"message","content":[{"type":"output_text","text":"one two"}]},{"type":"function_call","name":"f","arguments":"{\"a\":1}"}]}`,
			`threeone twof{"a":1}`},
	} {
		if got, want := outputTokens(tc.f, []byte(tc.body)), int64(tokens.Count(tc.text)); got != want || want == 0 {
			t.Errorf("%d: %d tokens, want %d (%q)", tc.f, got, want, tc.text)
		}
	}
}

func TestEscalationRules(t *testing.T) {
	fast := &catalog.Model{ID: "f", Lane: catalog.LaneFast}
	std := &catalog.Model{ID: "s", Lane: catalog.LaneStandard}
	for _, tc := range []struct {
		allow     []string
		requested string
		m         *catalog.Model
		want      bool
	}{
		{nil, "gw-fast", std, true},
		{[]string{"gw-fast"}, "gw-fast", std, false},
		{[]string{"gw-fast"}, "gw-fast", fast, true},
		{[]string{"gw-fast", "gw-standard"}, "gw-fast", std, true},
		{[]string{"gw-fast", "s"}, "gw-fast", std, true},
		{[]string{"gw-auto"}, "gw-auto", std, true},
	} {
		if got := escalationAllowed(tc.allow, &lanes.Route{Requested: tc.requested}, tc.m); got != tc.want {
			t.Errorf("%v %s → %s: %v, want %v", tc.allow, tc.requested, tc.m.ID, got, tc.want)
		}
	}
	timeout := gwerr.New(gwerr.Timeout, "slow")
	big := &request{needs: lanes.Needs{MaxTokens: LargeOutputTokens + 1}}
	if !selfInflicted(timeout, big) || selfInflicted(timeout, &request{needs: lanes.Needs{MaxTokens: 100}}) ||
		selfInflicted(gwerr.New(gwerr.Upstream, "x"), big) || selfInflicted(timeout, &request{stream: true, needs: big.needs}) {
		t.Fatal("selfInflicted")
	}
}

// The error event the gateway adds to a stream continues a responses
// stream's sequence_number after the last event the client got: on a
// pass-through stream that broke off, and on a translated one whose final
// event was held back (its settlement failed); chat clients get [DONE]
// after it.
func TestGatewayErrorContinuesSequence(t *testing.T) {
	numbered := func(types ...string) []sse.Event {
		var out []sse.Event
		for i, typ := range types {
			out = append(out, sse.Event{Event: typ, Data: []byte(`{"type":"` + typ + `","sequence_number":` + strconv.Itoa(i) + `}`)})
		}
		return out
	}
	// A chat stream of one text answer, translated for a responses client;
	// its last event (response.completed) is the one held back.
	translated := translate.NewChatToResponses("gw-auto")
	var chatOut []sse.Event
	for _, d := range []string{
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0}}`,
		`[DONE]`,
	} {
		out, err := translated.Event(sse.Event{Data: []byte(d)})
		if err != nil {
			t.Fatal(err)
		}
		chatOut = append(chatOut, out...)
	}
	last := chatOut[len(chatOut)-1]
	if !translated.Done() || last.Event != "response.completed" {
		t.Fatalf("translated stream: done %v, last %s", translated.Done(), last.Data)
	}
	for _, tc := range []struct {
		name    string
		f       Format
		tr      translate.Stream
		sent    []sse.Event
		settled bool // the failure came from settling the final event
		want    []string
		seq     int64 // of the error event; -1: none
	}{
		{"responses pass-through broke off", Responses, &passthrough{format: Responses},
			numbered("response.created", "response.in_progress", "response.output_item.added"), false, []string{"error"}, 3},
		{"translated responses, final event held back", Responses, translated,
			chatOut[:len(chatOut)-1], true, []string{"error"}, gjson.GetBytes(last.Data, "sequence_number").Int()},
		{"messages pass-through", Messages, &passthrough{format: Messages}, nil, false, []string{"error"}, -1},
		{"chat pass-through", ChatCompletions, &passthrough{format: ChatCompletions}, nil, false, []string{"", ""}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s := &relay{call: &call{format: tc.f}, tr: tc.tr, w: sse.NewWriter(rec), settled: tc.settled}
			if !s.write(tc.sent) {
				t.Fatal("write ended the stream")
			}
			s.fail("broke off")
			rd := sse.NewReader(rec.Body)
			var got []sse.Event
			for {
				ev, err := rd.Next()
				if err != nil {
					break
				}
				got = append(got, ev)
			}
			if len(got) != len(tc.sent)+len(tc.want) {
				t.Fatalf("%d events, want %d sent and %q", len(got), len(tc.sent), tc.want)
			}
			added := got[len(tc.sent):]
			for i, name := range tc.want {
				if added[i].Event != name {
					t.Fatalf("added event %d is %q: %s", i, added[i].Event, added[i].Data)
				}
			}
			if tc.seq >= 0 {
				if n := gjson.GetBytes(added[0].Data, "sequence_number"); n.Type != gjson.Number || n.Int() != tc.seq {
					t.Fatalf("error event %s: want sequence_number %d", added[0].Data, tc.seq)
				}
			}
			if tc.f == ChatCompletions && !sse.IsDone(added[1]) {
				t.Fatalf("chat: %s after the error, want [DONE]", added[1].Data)
			}
		})
	}
}

// An output limit sent as null is no limit to a provider: the gateway
// sends its own, which the reservation assumed.
func TestNullOutputLimitBounded(t *testing.T) {
	for _, tc := range []struct {
		from, to Format
		body     string
		field    string
	}{
		{ChatCompletions, ChatCompletions, `{"max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens"},
		{ChatCompletions, ChatCompletions, `{"max_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens"},
		{Responses, Responses, `{"max_output_tokens":null,"input":"hi"}`, "max_output_tokens"},
		{ChatCompletions, Messages, `{"max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	} {
		out, _, err := requestFor([]byte(tc.body), tc.from, tc.to, "m1", false)
		if err != nil || gjson.GetBytes(out, tc.field).Int() != lanes.DefaultMaxTokens {
			t.Errorf("%s → %s: %s %v", tc.body, tc.field, out, err)
		}
		for _, f := range tc.to.spec().outputLimit {
			if v := gjson.GetBytes(out, f); v.Exists() && v.Type == gjson.Null {
				t.Errorf("%s: %s still null in %s", tc.body, f, out)
			}
		}
	}
}

// The one-pass same-format request says what the edits one after the
// other say, for any checked body (members may move; their values not).
func FuzzSameFormat(f *testing.F) {
	for _, b := range []string{
		`{"model":"gw-fast","second_opinion":false,"x_unknown":{"a":1},"messages":[{"role":"user","content":"hi"}]}`,
		` {"messages":[],"max_tokens":null,"max_completion_tokens":12,"store":true,"stream_options":{"include_usage":false}} `,
		`{"mo\u0064el":"x","input":"hi","max_output_tokens":null}`,
		`{}`, `[]`, `{"model":1}`,
	} {
		for fi := range 3 {
			f.Add(b, uint8(fi), fi == 0)
		}
	}
	f.Fuzz(func(t *testing.T, body string, fi uint8, stream bool) {
		f := []Format{ChatCompletions, Responses, Messages}[fi%3]
		b := []byte(body)
		if jsonbody.Check(b) != nil {
			return // requestFor reads checked bodies only
		}
		fast, ok := sameFormat(b, f, "m<1>", stream)
		if !ok {
			return
		}
		slow, _, err := editRequest(b, f, f, "m<1>", stream)
		if err != nil {
			t.Fatalf("edits refuse %s: %v; one pass gives %s", b, err, fast)
		}
		if jsonbody.Check(fast) != nil {
			t.Fatalf("one pass writes a body the strict check refuses: %s", fast)
		}
		if !reflect.DeepEqual(decodeJSON(t, fast), decodeJSON(t, slow)) {
			t.Fatalf("body %s (format %d, stream %v):\none pass %s\nedits    %s", b, f, stream, fast, slow)
		}
	})
}

// A translated request's edits in one pass say what the edits one after
// the other say.
func FuzzRequestFor(f *testing.F) {
	for _, b := range []string{
		`{"model":"gw-fast","second_opinion":true,"max_tokens":null,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gw-fast","max_tokens":7,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"gw-fast","input":"hi","instructions":"x","max_output_tokens":null,"store":true}`,
	} {
		for pair := range 4 {
			f.Add(b, uint8(pair), pair%2 == 0)
		}
	}
	pairs := [][2]Format{{ChatCompletions, Messages}, {Messages, ChatCompletions}, {Responses, ChatCompletions}, {Responses, Messages}}
	f.Fuzz(func(t *testing.T, body string, pair uint8, stream bool) {
		p := pairs[int(pair)%len(pairs)]
		b := []byte(body)
		if jsonbody.Check(b) != nil {
			return
		}
		fast, _, ferr := requestFor(b, p[0], p[1], "m<1>", stream)
		slow, _, serr := editRequest(b, p[0], p[1], "m<1>", stream)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("body %s (%d to %d): one pass %v, edits %v", b, p[0], p[1], ferr, serr)
		}
		if ferr != nil {
			return
		}
		if !reflect.DeepEqual(decodeJSON(t, fast), decodeJSON(t, slow)) {
			t.Fatalf("body %s (%d to %d, stream %v):\none pass %s\nedits    %s", b, p[0], p[1], stream, fast, slow)
		}
	})
}

// decodeJSON decodes b with its numbers as written, for comparing bodies
// by what they say.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// FuzzStreamEventReads holds the relay's reads of a stream event to the
// plain path lookups they stand for: the error and usage of a chunk
// looked up only when its data may hold them (mayHold), and the
// delivered text appended in place of being built as a string.
func FuzzStreamEventReads(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"hi","reasoning_content":"r","tool_calls":[{"function":{"arguments":"{\"a\":1}"}}]}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
		`{"error":{"message":"x"}}`, `{"\u0065rror":{}}`, `{"\u0075sage":{"prompt_tokens":1}}`, `[DONE]`, `{"usage":null}`, `{"choices":{"a":{"delta":{"content":"o"}}}}`,
		`{"type":"response.output_text.delta","delta":"d\u00e9"}`, `{"delta":{"text":"t","partial_json":"{","thinking":"th"}}`, `not json`,
	} {
		f.Add(s, "")
		f.Add(s, "content_block_delta")
	}
	f.Fuzz(func(t *testing.T, data, name string) {
		ev := sse.Event{Event: name, Data: []byte(data)}
		done := sse.IsDone(ev)
		if got, want := isError(ChatCompletions, ev), !done && gjson.Get(data, "error").Exists(); got != want {
			t.Fatalf("isError %v, want %v", got, want)
		}
		if _, got := finalUsagePath(ChatCompletions, ev); got != (!done && gjson.Get(data, "usage").IsObject()) {
			t.Fatalf("finalUsagePath %v", got)
		}
		p := &passthrough{format: ChatCompletions}
		p.Event(ev)
		var want translate.Usage
		if !done && gjson.Get(data, "usage").IsObject() {
			want = translate.ChatUsage(ev.Data)
		}
		if p.Usage() != want {
			t.Fatalf("passthrough usage %+v, want %+v", p.Usage(), want)
		}
		for _, format := range []Format{ChatCompletions, Messages, Responses} {
			if got, want := string(appendDelta([]byte("x"), format, ev)), "x"+deltaTextByPaths(format, ev); got != want {
				t.Fatalf("format %d: appendDelta %q, want %q", format, got, want)
			}
		}
	})
}

// deltaTextByPaths is appendDelta's text by path lookups.
func deltaTextByPaths(f Format, ev sse.Event) string {
	data := string(ev.Data)
	switch f {
	case Messages:
		if ev.Event != "content_block_delta" {
			return ""
		}
		return gjson.Get(data, "delta.text").String() + gjson.Get(data, "delta.partial_json").String() + gjson.Get(data, "delta.thinking").String()
	case Responses:
		if strings.HasSuffix(gjson.Get(data, "type").String(), ".delta") {
			return gjson.Get(data, "delta").String()
		}
		return ""
	}
	if sse.IsDone(ev) {
		return ""
	}
	var b strings.Builder
	gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
		b.WriteString(c.Get("delta.content").String() + c.Get("delta.reasoning_content").String())
		c.Get("delta.tool_calls").ForEach(func(_, tc gjson.Result) bool {
			b.WriteString(tc.Get("function.arguments").String())
			return true
		})
		return true
	})
	return b.String()
}

// flushLog records how much of the body was written at each flush.
type flushLog struct {
	*httptest.ResponseRecorder
	at []int
}

func (f *flushLog) Flush() { f.at = append(f.at, f.Body.Len()) }

// TestRelayFlushesBeforeSettling: the events queued before the usage chunk
// go out before settling (which waits for the charge's sync), not with
// what follows it. Here the charge cannot be recorded (the call holds no
// reservation), so the stream ends in an error event and [DONE], flushed
// after them (the chunks carry no text, which billing a failed stream
// would count, and flush, first).
func TestRelayFlushesBeforeSettling(t *testing.T) {
	f := &flushLog{ResponseRecorder: httptest.NewRecorder()}
	tr := &passthrough{format: ChatCompletions}
	s := &relay{call: &call{Call: &pipeline.Call{}, format: ChatCompletions, route: &lanes.Route{Requested: "m"}}, m: &catalog.Model{ID: "m"}, tr: tr, w: sse.NewWriter(f)}
	var evs []sse.Event
	for _, d := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant"}}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	} {
		out, err := tr.Event(sse.Event{Data: []byte(d)})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, out...)
	}
	if s.write(evs) {
		t.Fatal("a stream whose charge could not be recorded went on")
	}
	s.flush()
	before := "data: " + string(evs[0].Data) + "\n\ndata: " + string(evs[1].Data) + "\n\n"
	if len(f.at) == 0 || f.at[0] != len(before) || !strings.HasPrefix(f.Body.String(), before) {
		t.Fatalf("flushed at %v of %q; want the first flush at %d, the two chunks", f.at, f.Body.String(), len(before))
	}
	if !strings.HasSuffix(f.Body.String(), "data: [DONE]\n\n") || f.at[len(f.at)-1] != f.Body.Len() {
		t.Fatalf("the error and [DONE] were not flushed: %v of %q", f.at, f.Body.String())
	}
}
