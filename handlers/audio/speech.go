package audio

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of speech (docs/abilities.md, Audio).
const (
	// MaxInputChars bounds input, in characters (not bytes).
	MaxInputChars = 4096
	// MaxInstructionsChars bounds instructions.
	MaxInstructionsChars = 4096
	// MinSpeed and MaxSpeed bound speed.
	MinSpeed, MaxSpeed = 0.25, 4.0
	// FirstAudioTimeout: no audio in 30 seconds is a 504, not billed.
	FirstAudioTimeout = 30 * time.Second
	// GapTimeout: a 30-second gap between chunks ends the stream.
	GapTimeout = 30 * time.Second
	// MaxSpeechBody bounds the request body: input and instructions at
	// their limits, every character escaped as \uXXXX, plus the rest.
	MaxSpeechBody = (MaxInputChars+MaxInstructionsChars)*12 + 4096
	// SpeechCharsPerSecond is how many characters the audio budget
	// assumes one second of speech takes at speed 1 (about 150 words a
	// minute): a call takes ceil(chars / (SpeechCharsPerSecond × speed))
	// seconds of the hourly audio budget.
	SpeechCharsPerSecond = 15
	// relayChunk is the largest piece relayed at once.
	relayChunk = 32 << 10
	// PathSpeech is the provider's endpoint (after its /v1 base).
	PathSpeech = "/audio/speech"
)

// SpeechContentTypes are the Content-Types of the response formats (opus
// is Opus in Ogg; pcm is raw 24 kHz 16-bit little-endian mono).
var SpeechContentTypes = map[string]string{
	"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac",
	"flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm",
}

// speechRequest is a checked speech request.
type speechRequest struct {
	alias, input, voice, format, instructions string
	speed                                     float64
	speedSet                                  bool
	// chars and instructionsChars count the input and the instructions
	// (pricing.CharCount): both are billed.
	chars, instructionsChars int
}

// Speech serves POST /v1/audio/speech: the fields and each model's rules
// checked, then the provider's audio relayed as it arrives. The call is
// billed for the characters of its input and of its instructions (which
// the provider reads as text too), reserved before the provider is called
// and charged when the first audio byte arrives: a failure before it
// costs nothing, and once audio has started the charge stands even if the
// client leaves.
func (h *Handler) Speech(c *pipeline.Call) error {
	b, err := jsonbody.Read(c.R.Body, MaxSpeechBody)
	if err != nil {
		var tl *jsonbody.TooLargeError
		if errors.As(err, &tl) {
			return invalid("body", "the body is larger than %d bytes", tl.Limit)
		}
		return invalid("body", "the body must be one JSON object: %v", err)
	}
	s, err := h.parseSpeech(c, b)
	if err != nil {
		return err
	}
	cat := c.Gateway.Catalog
	ab := cat.Abilities[s.alias]
	if ab == nil || cat.Providers[ab.Provider] == nil {
		return capabilityUnavailable(false, "speech is not configured on this gateway")
	}
	speed := 1.0
	if s.speedSet {
		speed = s.speed
	}
	billed := pricing.SpeechBilledChars(s.chars, s.instructionsChars, speed, s.alias == AliasSpeakHD)
	cost, ok := c.AbilityCost(s.alias, billed)
	if !ok {
		return capabilityUnavailable(false, "%s has no published price; it is not served", s.alias)
	}
	if err := c.Take(limits.AudioSeconds, speechSeconds(s.chars, speed)); err != nil {
		return err
	}
	if err := c.Reserve(cost); err != nil {
		return err
	}
	req := map[string]any{"model": ab.Model, "input": s.input, "voice": s.voice, "response_format": s.format}
	if s.speedSet {
		req["speed"] = s.speed
	}
	if s.instructions != "" {
		req["instructions"] = s.instructions
	}
	body, _ := json.Marshal(req)

	// One clock for the first audio (headers and first byte), then one per
	// gap between chunks; the clock runs only while waiting on the
	// provider, never while writing to a slow client.
	ctx, cancel := context.WithCancel(c.R.Context())
	defer cancel()
	var stalled atomic.Bool
	clock := time.AfterFunc(h.timeout(h.cfg.FirstAudioTimeout, FirstAudioTimeout), func() { stalled.Store(true); cancel() })
	defer clock.Stop()
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: cat.Providers[ab.Provider], Path: PathSpeech, Body: body})
	if err != nil {
		return speechFailure(c.R.Context(), stalled.Load(), err)
	}
	defer resp.Body.Close()
	buf := make([]byte, relayChunk)
	n, rerr := readSome(resp.Body, buf)
	clock.Stop()
	if n == 0 {
		if stalled.Load() {
			upstream.Stalled(resp.Body)
			return capabilityUnavailable(true, "no audio came back in time")
		}
		if c.R.Context().Err() != nil {
			return gwerr.New(gwerr.Unavailable, "request cancelled")
		}
		upstream.Broke(resp.Body)
		if rerr == io.EOF {
			return capabilityUnavailable(false, "no audio came back")
		}
		return capabilityUnavailable(false, "the speech failed")
	}
	// The first audio byte: the charge lands now.
	if _, err := c.Charge(pipeline.Bill{Units: billed, Unit: pricing.UnitCharacter, Model: ab.Model, Alias: ab.Alias, Cost: cost, Receipt: pipeline.AbilityReceipt}); err != nil {
		return err
	}
	hd := c.W.Header()
	hd.Set("Content-Type", SpeechContentTypes[s.format])
	hd.Set("Cache-Control", "no-store")
	hd.Del("Content-Length")
	c.W.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.W)
	gap := h.timeout(h.cfg.GapTimeout, GapTimeout)
	for {
		if _, werr := c.W.Write(buf[:n]); werr != nil {
			return nil // the client left; the charge stands
		}
		if rc.Flush() != nil {
			return nil
		}
		if rerr != nil {
			break
		}
		clock.Reset(gap)
		n, rerr = readSome(resp.Body, buf)
		clock.Stop()
		if n == 0 && rerr != nil {
			break
		}
	}
	if rerr == io.EOF {
		return nil
	}
	// The provider stalled past the gap or broke off: the stream ends
	// early, and the client must see it cut rather than complete.
	if c.R.Context().Err() == nil {
		if stalled.Load() {
			upstream.Stalled(resp.Body)
		} else {
			upstream.Broke(resp.Body)
		}
		c.Abort()
	}
	return nil
}

// readSome reads until it has at least one byte or an error.
func readSome(r io.Reader, buf []byte) (int, error) {
	for {
		n, err := r.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// speechSeconds is what a speech call takes of the hourly audio budget:
// its characters at SpeechCharsPerSecond, stretched by a slow speed, at
// least one second.
func speechSeconds(chars int, speed float64) int64 {
	if !(speed > 0) {
		speed = 1
	}
	return max(1, int64(math.Ceil(float64(chars)/(SpeechCharsPerSecond*speed))))
}

// speechFailure maps an upstream failure before any audio (never
// billed): the provider refusing is 400 invalid_request_error with its
// message, a busy provider 429, too slow 504, the provider refusing the
// gateway's own account 503, anything else 502.
func speechFailure(client context.Context, stalled bool, err error) error {
	e := gwerr.As(err)
	switch {
	case upstream.AccountRefused(err):
		return gwerr.New(gwerr.Unavailable, "speech is unavailable; retry later").WithCode(gwerr.CodeCapabilityUnavailable)
	case stalled || e.Kind == gwerr.Timeout:
		return capabilityUnavailable(true, "no audio came back in time")
	case client.Err() != nil:
		return gwerr.New(gwerr.Unavailable, "request cancelled")
	case e.Kind == gwerr.Invalid || e.Kind == gwerr.Unprocessable:
		return gwerr.New(gwerr.Invalid, "the speech provider refused the request: %s", e.Message).WithCode(gwerr.CodeInvalidRequestError)
	case e.Kind == gwerr.RateLimited || e.Kind == gwerr.Overloaded:
		return &gwerr.Error{Kind: gwerr.RateLimited, Message: "the speech provider is busy; retry later", RetryAfter: max(e.RetryAfter, 1)}
	}
	return capabilityUnavailable(false, "the speech failed")
}

// parseSpeech checks a speech body (fields, per-model rules), each refusal a
// 400 naming its field; a model not on the key's list is 401.
func (h *Handler) parseSpeech(c *pipeline.Call, b []byte) (*speechRequest, error) {
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return nil, invalid("body", "the body must be a JSON object")
	}
	s := &speechRequest{alias: AliasSpeak, format: "mp3"}
	if m := root.Get("model"); m.Exists() {
		if m.Type != gjson.String || (m.Str != AliasSpeak && m.Str != AliasSpeakHD) {
			return nil, invalid("model", "model must be %s or %s", AliasSpeak, AliasSpeakHD)
		}
		s.alias = m.Str
	}
	if err := c.AllowModel(s.alias); err != nil {
		return nil, err
	}
	in := root.Get("input")
	if in.Type != gjson.String || in.Str == "" {
		return nil, invalid("input", "input is required and must not be empty")
	}
	s.input = in.Str
	if s.chars = pricing.CharCount(in.Str); s.chars > MaxInputChars {
		return nil, invalid("input", "input is longer than %d characters", MaxInputChars)
	}
	v := root.Get("voice")
	if v.Type != gjson.String || v.Str == "" {
		return nil, invalid("voice", "voice is required: a voice id of %s (GET /v1/audio/voices)", s.alias)
	}
	if !h.allowed[s.alias][v.Str] {
		return nil, invalid("voice", "voice %q is not a voice of %s (GET /v1/audio/voices)", shorten(v.Str), s.alias)
	}
	s.voice = v.Str
	if f := root.Get("response_format"); f.Exists() {
		if _, ok := SpeechContentTypes[f.Str]; f.Type != gjson.String || !ok {
			return nil, invalid("response_format", "response_format must be mp3, opus, aac, flac, wav or pcm")
		}
		s.format = f.Str
	}
	if sp := root.Get("speed"); sp.Exists() {
		if sp.Type != gjson.Number || !(sp.Num >= MinSpeed && sp.Num <= MaxSpeed) {
			return nil, invalid("speed", "speed must be a number from 0.25 to 4")
		}
		s.speed, s.speedSet = sp.Num, true
	}
	if ins := root.Get("instructions"); ins.Exists() {
		if ins.Type != gjson.String {
			return nil, invalid("instructions", "instructions must be a string")
		}
		if s.instructionsChars = pricing.CharCount(ins.Str); s.instructionsChars > MaxInstructionsChars {
			return nil, invalid("instructions", "instructions are longer than %d characters", MaxInstructionsChars)
		}
		if ins.Str != "" && s.alias == AliasSpeakHD {
			return nil, invalid("instructions", "%s takes no instructions", AliasSpeakHD)
		}
		s.instructions = ins.Str
	}
	if sf := root.Get("stream_format"); sf.Exists() {
		if sf.Type != gjson.String || sf.Str != "audio" {
			return nil, invalid("stream_format", "stream_format must be audio (or left out); sse is not offered")
		}
	}
	return s, nil
}

// shorten cuts a client's value for a message.
func shorten(s string) string {
	if len(s) > 64 {
		return cutRunes(s, 64) + "…"
	}
	return s
}
