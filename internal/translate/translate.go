// Package translate converts chat requests, responses and event streams
// between the gateway's three wire formats:
//
//   - chat: chat-completions-style (/v1/chat/completions),
//   - responses: responses-style (/v1/responses),
//   - messages: messages-style (/alt/v1/messages).
//
// Bodies are read with gjson and written with sjson: nothing is decoded into
// big structs. A translated body is built anew, so fields of the source format
// that have no counterpart are dropped; when the formats are the same, use
// SetModel, which rewrites only "model" and leaves every other byte alone.
//
// # Where the formats do not map one to one
//
// Requests, chat → messages:
//   - system and developer messages (wherever they stand) become the
//     top-level "system", in order: a string when there is one text, else an
//     array of text blocks.
//   - max_tokens is required by messages: max_completion_tokens, else
//     max_tokens, else DefaultMaxTokens.
//   - temperature is clamped to [0, 1], the messages range.
//   - stop (string or array) becomes stop_sequences; empty strings are dropped.
//   - response_format json_object or json_schema becomes an instruction
//     appended to the system prompt (JSONInstruction, with the schema for
//     json_schema); messages has no JSON mode that every model accepts.
//   - tool_choice auto/none/required/{function} becomes {type:auto|none|any|tool};
//     parallel_tool_calls false becomes disable_parallel_tool_use. A
//     tool_choice without tools is dropped. Non-function tools are dropped; a
//     tool without parameters gets {"type":"object","properties":{}}.
//   - assistant tool_calls become tool_use blocks whose input is the parsed
//     arguments. Arguments that are not a JSON object are kept as a string
//     under RawArgumentsKey ({"_raw_arguments": "..."}); the way back restores
//     the original string exactly.
//   - tool messages become tool_result blocks in a user message; consecutive
//     tool results, and a user message right after them, share one user message.
//   - tool call ids are reduced to the characters messages accepts
//     ([A-Za-z0-9_-], others become '_'), the same way on both sides.
//   - images: a data: URL becomes a base64 source, any other URL a url
//     source; the detail hint is dropped. A PDF file part (file_data data: URL)
//     becomes a document block. Audio and other parts are dropped.
//   - empty text parts and messages left without content are dropped
//     (messages rejects them). n, logprobs, penalties, seed, logit_bias,
//     stream_options, metadata, reasoning settings and the legacy function-call
//     fields are dropped; user becomes metadata.user_id.
//
// Requests, messages → chat:
//   - system (string or blocks, joined with a blank line) becomes the first
//     system message; max_tokens becomes max_completion_tokens; stop_sequences
//     becomes stop (at most the first 4, the chat limit); top_k, thinking and
//     output_config.effort are dropped; metadata.user_id becomes user.
//   - tool_result blocks become tool messages placed before the rest of the
//     user message; images inside a tool result follow in that user message
//     (tool messages carry text only); is_error is dropped.
//   - assistant text blocks are concatenated; thinking and server-tool blocks
//     are dropped.
//   - output_config.format (or the beta output_format) json_schema becomes
//     response_format json_schema (name "output", not strict).
//   - server tools (any tool whose type is not "custom") are dropped.
//   - a streaming request asks for stream_options.include_usage.
//
// Requests, responses → chat:
//   - instructions becomes the first system message; input items become
//     messages: message items keep their role, consecutive function_call
//     items (and an assistant message before them) become one assistant
//     message with tool_calls, function_call_output items become tool
//     messages (images in an output follow in a user message). Reasoning,
//     item_reference and built-in tool items are dropped.
//   - previous_response_id and conversation cannot be honoured (nothing is
//     stored): the request is refused with a FieldError.
//   - max_output_tokens becomes max_completion_tokens; text.format becomes
//     response_format; reasoning, store, include, truncation and metadata are
//     dropped; input_image with only a file_id is dropped.
//
// Responses (upstream → client):
//   - stop reasons: end_turn, stop_sequence and pause_turn → stop;
//     max_tokens and model_context_window_exceeded → length; tool_use →
//     tool_calls; refusal → content_filter. Back: stop → end_turn (chat does
//     not say whether a stop sequence matched), length → max_tokens,
//     tool_calls and function_call → tool_use, content_filter → refusal. A
//     chat response that carries tool calls but says "stop" becomes tool_use.
//   - a responses client gets status "incomplete" with incomplete_details
//     reason max_output_tokens (length) or content_filter.
//   - ids keep their suffix and change prefix (msg_X ↔ chatcmpl-X, resp_X);
//     a missing id is generated. created is the upstream's when it has one,
//     else now.
//   - a responses body echoes no request settings (tools, temperature, ...):
//     the upstream chat response does not carry them; defaults are shown.
//
// Usage: see Usage. Streams: see Stream.
package translate

import (
	"crypto/rand"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// DefaultMaxTokens is the max_tokens sent to a messages-style upstream when
// a chat or responses request sets no limit (messages requires one).
const DefaultMaxTokens = 4096

// MaxChatStop is the most stop sequences a chat-style upstream accepts.
const MaxChatStop = 4

// RawArgumentsKey holds, in a messages tool_use input, tool-call arguments
// that were not a JSON object, as the original string.
const RawArgumentsKey = "_raw_arguments"

// JSONInstruction is appended to the system prompt of a messages request when
// the chat request asked for a JSON response (response_format json_object or
// json_schema; the schema follows for json_schema).
const JSONInstruction = "Respond only with a single valid JSON object, with no text, code fences or formatting around it."

// Usage is the token usage of one response, with the same meaning whatever
// the format it was read from:
//
//   - Input is every input token, cached or not: chat prompt_tokens,
//     responses input_tokens, and for messages input_tokens +
//     cache_read_input_tokens + cache_creation_input_tokens (messages counts
//     the three apart).
//   - CachedInput is the part of Input read from the cache (chat
//     prompt_tokens_details.cached_tokens, responses
//     input_tokens_details.cached_tokens, messages cache_read_input_tokens).
//   - CacheWrite is the part of Input written to the cache (chat
//     prompt_tokens_details.cache_write_tokens, responses
//     input_tokens_details.cache_write_tokens, messages
//     cache_creation_input_tokens).
//   - Output is every output token, reasoning included.
type Usage struct {
	Input, Output, CachedInput, CacheWrite int64
}

// MaxUsageTokens bounds any token count of one call's usage: a provider
// reporting more (or less than zero) is answering nonsense, and the call
// fails unbilled instead of charging, or crediting, it.
const MaxUsageTokens = 100_000_000

// Valid reports whether u is usage a provider can really have reported:
// no count below zero or above MaxUsageTokens, and no more cached input
// than input.
func (u Usage) Valid() bool {
	for _, n := range []int64{u.Input, u.Output, u.CachedInput, u.CacheWrite} {
		if n < 0 || n > MaxUsageTokens {
			return false
		}
	}
	return u.CachedInput+u.CacheWrite <= u.Input
}

// Uncached is the input that was neither read from nor written to the cache
// (messages' input_tokens), never below zero.
func (u Usage) Uncached() int64 {
	return max(u.Input-u.CachedInput-u.CacheWrite, 0)
}

// ChatUsage reads the usage of a chat response body or stream chunk.
func ChatUsage(body []byte) Usage {
	return ChatUsageOf(gjson.GetBytes(body, "usage"))
}

// ChatUsageOf reads a chat usage object.
func ChatUsageOf(u gjson.Result) Usage {
	return nestedUsage(u, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
}

// nestedUsage reads a usage object whose cached and cache-written input
// are in a member of their own (details), in one pass over each object (of
// a repeated key the first counts, as a path lookup reads it). A path
// lookup tries each repeated details member in turn, so when details is
// repeated the nested counts are read by their paths.
func nestedUsage(u gjson.Result, input, output, details string) Usage {
	var x Usage
	if !u.IsObject() {
		return x
	}
	var d gjson.Result
	var seenIn, seenOut bool
	n := 0
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case input:
			if !seenIn {
				x.Input, seenIn = v.Int(), true
			}
		case output:
			if !seenOut {
				x.Output, seenOut = v.Int(), true
			}
		case details:
			if n++; n == 1 {
				d = v
			}
		}
		return true
	})
	if n > 1 {
		x.CachedInput, x.CacheWrite = u.Get(details+".cached_tokens").Int(), u.Get(details+".cache_write_tokens").Int()
		return x
	}
	var cached, written gjson.Result
	jsonbody.Members(d, jsonbody.Member{Key: "cached_tokens", To: &cached}, jsonbody.Member{Key: "cache_write_tokens", To: &written})
	x.CachedInput, x.CacheWrite = cached.Int(), written.Int()
	return x
}

// MessagesUsage reads the usage of a messages response body, or of a
// message_start ("message.usage") or message_delta event.
func MessagesUsage(body []byte) Usage {
	u := gjson.GetBytes(body, "usage")
	if !u.Exists() {
		u = gjson.GetBytes(body, "message.usage")
	}
	return MessagesUsageOf(u)
}

// MessagesUsageOf reads a messages usage object (input counts the
// cache's reads and writes too).
func MessagesUsageOf(u gjson.Result) Usage {
	var uncached, output, read, written gjson.Result
	jsonbody.Members(u, jsonbody.Member{Key: "input_tokens", To: &uncached}, jsonbody.Member{Key: "output_tokens", To: &output},
		jsonbody.Member{Key: "cache_read_input_tokens", To: &read}, jsonbody.Member{Key: "cache_creation_input_tokens", To: &written})
	return Usage{Input: uncached.Int() + read.Int() + written.Int(), Output: output.Int(), CachedInput: read.Int(), CacheWrite: written.Int()}
}

// ResponsesUsage reads the usage of a responses body, or of a stream event
// that carries the response ("response.usage").
func ResponsesUsage(body []byte) Usage {
	u := gjson.GetBytes(body, "usage")
	if !u.Exists() {
		u = gjson.GetBytes(body, "response.usage")
	}
	return ResponsesUsageOf(u)
}

// ResponsesUsageOf reads a responses usage object.
func ResponsesUsageOf(u gjson.Result) Usage {
	return nestedUsage(u, "input_tokens", "output_tokens", "input_tokens_details")
}

// FieldError is a request that cannot be translated; Param names the field
// at fault when there is one.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Param == "" {
		return "translate: " + e.Message
	}
	return "translate: " + e.Param + ": " + e.Message
}

// SetModel rewrites only "model" (adding it when missing); every other byte
// of body stays as it was.
func SetModel(body []byte, model string) ([]byte, error) {
	if _, err := parseObject(body); err != nil {
		return nil, err
	}
	return sjson.SetBytes(body, "model", model)
}

// parseObject checks that body is one valid JSON object.
func parseObject(body []byte) (gjson.Result, error) {
	if !jsonbody.Valid(body) {
		return gjson.Result{}, &FieldError{Message: "body is not valid JSON"}
	}
	r := jsonbody.Parse(body)
	if !r.IsObject() {
		return gjson.Result{}, &FieldError{Message: "body is not a JSON object"}
	}
	return r, nil
}

// now is the clock of created timestamps (tests replace it).
var now = time.Now

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newID returns prefix followed by 24 random letters and digits.
func newID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 0, len(prefix)+len(b))
	out = append(out, prefix...)
	for _, c := range b {
		out = append(out, idChars[int(c)%len(idChars)])
	}
	return string(out)
}

// idPrefixes are the prefixes swapID recognises.
var idPrefixes = []string{"chatcmpl-", "msg_", "resp_"}

// swapID gives id the prefix want, keeping its suffix; a missing id is
// generated.
func swapID(id, want string) string {
	if id == "" {
		return newID(want)
	}
	if strings.HasPrefix(id, want) {
		return id
	}
	for _, p := range idPrefixes {
		if rest, ok := strings.CutPrefix(id, p); ok && rest != "" {
			return want + rest
		}
	}
	return want + id
}

// toolID reduces a tool call id to the characters messages accepts.
func toolID(id string) string {
	if id == "" {
		return newID("toolu_")
	}
	ok := true
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			ok = false
			break
		}
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i := range b {
		if !isIDChar(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

func isIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Stop and finish reasons.

// chatFinish maps a messages stop_reason to a chat finish_reason.
func chatFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	default: // end_turn, stop_sequence, pause_turn, unknown
		return "stop"
	}
}

// messagesStop maps a chat finish_reason to a messages stop_reason.
func messagesStop(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default: // stop, null, unknown
		return "end_turn"
	}
}

// JSON building helpers. Every path is a constant of this package, so sjson
// cannot fail on it; a failure would leave b unchanged.

func set(b []byte, path string, v any) []byte {
	var val [64]byte
	if raw, ok := appendValue(val[:0], v); ok {
		if out, ok := appendMember(b, path, raw); ok {
			return out
		}
	}
	if out, err := sjson.SetBytes(b, path, v); err == nil {
		return out
	}
	return b
}

func setRaw(b []byte, path, raw string) []byte { return setRawB(b, path, []byte(raw)) }

func setRawB(b []byte, path string, raw []byte) []byte {
	if out, ok := appendMember(b, path, raw); ok {
		return out
	}
	if out, err := sjson.SetRawBytes(b, path, raw); err == nil {
		return out
	}
	return b
}

// appendMember is the common case of the helpers above, without sjson's
// path machinery: an object b gets a new member named by a plain key it
// does not have yet, at its end, in a new slice (b is left alone). ok is
// false for anything else (a nested path, a key b has, b not ending its
// object), which sjson then handles. The bytes are the ones sjson writes.
func appendMember(b []byte, key string, raw []byte) (out []byte, ok bool) {
	if len(b) < 2 || b[len(b)-1] != '}' || !plainKey(key) {
		return nil, false
	}
	last := len(b) - 2 // the last byte before the closing brace, past spaces
	for last > 0 && (b[last] == ' ' || b[last] == '\t' || b[last] == '\n' || b[last] == '\r') {
		last--
	}
	empty := b[last] == '{'
	if !empty && gjson.GetBytes(b, key).Exists() {
		return nil, false
	}
	out = make([]byte, 0, len(b)+len(key)+len(raw)+4)
	out = append(out, b[:len(b)-1]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, raw...)
	return append(out, '}'), true
}

// plainKey reports a key that means itself as an sjson path and needs no
// escaping as a JSON string: letters, digits and underscores.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// appendValue renders v as sjson renders it, for the kinds this package
// sets (strings, booleans, integers); ok is false for any other kind.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return jsonbody.AppendString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	}
	return nil, false
}

// rawArray joins raw JSON values into an array.
func rawArray(items [][]byte) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// obj starts a new JSON object.
func obj() []byte { return []byte("{}") }

// object writes a JSON object from nothing, member by member, the bytes
// set would write: for the objects a translation builds whole, where set
// would look for each new key among the members so far and copy them all
// at every member. Its keys are distinct (the caller's literals).
type object []byte

func newObject() object { return append(make(object, 0, 256), '{') }

// raw adds a member whose value is raw JSON.
func (o object) raw(key string, raw []byte) object {
	if len(o) > 1 {
		o = append(o, ',')
	}
	o, _ = appendValue(o, key)
	o = append(o, ':')
	return append(o, raw...)
}

// rawS adds a member whose value is raw JSON given as a string.
func (o object) rawS(key, raw string) object { return o.raw(key, []byte(raw)) }

// val adds a member with a string, bool or integer value (set's others
// as sjson writes them).
func (o object) val(key string, v any) object {
	var buf [64]byte
	raw, ok := appendValue(buf[:0], v)
	if !ok {
		raw, _ = sjson.SetBytes(nil, "v", v)
		raw = []byte(gjson.GetBytes(raw, "v").Raw)
	}
	return o.raw(key, raw)
}

// done closes the object.
func (o object) done() []byte { return append(o, '}') }

// textOf returns the text of a content value: a string, or the text parts
// of an array (types text, input_text, output_text, refusal) joined with sep.
func textOf(content gjson.Result, sep string) string {
	if content.Type == gjson.String {
		return content.String()
	}
	var parts []string
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "text", "input_text", "output_text":
			parts = append(parts, p.Get("text").String())
		case "refusal":
			parts = append(parts, p.Get("refusal").String())
		}
		return true
	})
	return strings.Join(parts, sep)
}

// parseArguments turns chat tool-call arguments into a messages tool_use
// input: the object itself, {} for nothing, else the string kept under
// RawArgumentsKey.
func parseArguments(args string) string {
	t := strings.TrimSpace(args)
	if t == "" {
		return "{}"
	}
	if jsonbody.Valid([]byte(t)) && gjson.Parse(t).IsObject() {
		return t
	}
	return string(set(obj(), RawArgumentsKey, args))
}

// argumentsOf turns a messages tool_use input back into chat arguments.
func argumentsOf(input gjson.Result) string {
	if !input.Exists() || input.Type == gjson.Null {
		return "{}"
	}
	if input.IsObject() {
		if raw := input.Get(RawArgumentsKey); raw.Type == gjson.String {
			n := 0
			input.ForEach(func(_, _ gjson.Result) bool { n++; return true })
			if n == 1 {
				return raw.String()
			}
		}
	}
	return input.Raw
}
