package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// speakFormats are speak's formats and their MIME types (the speech
// route's Content-Types).
var speakFormats = map[string]string{"mp3": "audio/mpeg", "wav": "audio/wav"}

// DefaultSpeakFormat is speak's format when none is given.
const DefaultSpeakFormat = "mp3"

// DefaultVoice is speak's voice when the server names none.
const DefaultVoice = "alloy"

// transcribe sends the audio to the transcription route. An audio_url is
// downloaded only when the route reads its body, so the route's own checks
// (key, ability, plan, rate budget) come first; downloadChecks adds the
// key's model list and room for the least a file is billed before the
// download, and the route then holds the exact cost by the audio's length.
func (s *Server) transcribe(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	audioURL, audioB64 := a.Get("audio_url"), a.Get("audio_base64")
	hasURL, hasB64 := audioURL.Type == gjson.String && audioURL.Str != "", audioB64.Type == gjson.String && audioB64.Str != ""
	// file gives the audio and its name when the route reads the body.
	var file func() ([]byte, string, *gwerr.Error)
	switch {
	case hasURL == hasB64:
		return Result{}, invalid("audio_url", "give exactly one of audio_url and audio_base64")
	case hasURL:
		u, err := url.Parse(audioURL.Str)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return Result{}, invalid("audio_url", "audio_url must be a public https URL")
		}
		if s.Fetch == nil {
			return Result{}, gwerr.New(gwerr.Unavailable, "audio_url is not available on this gateway; send audio_base64")
		}
		file = func() ([]byte, string, *gwerr.Error) {
			release, e := downloadChecks(ctx, c, t)
			if e != nil {
				return nil, "", e
			}
			defer release()
			b, err := s.Fetch(ctx, audioURL.Str, MaxAudioBytes)
			if err != nil {
				if e, ok := err.(*gwerr.Error); ok {
					return nil, "", e
				}
				return nil, "", gwerr.New(gwerr.Upstream, "the audio could not be downloaded")
			}
			return b, path.Base(u.Path), nil
		}
	default:
		// Refuse an oversized payload before decoding it.
		if int64(base64.StdEncoding.DecodedLen(len(audioB64.Str))) > MaxAudioBytes+3 {
			return Result{}, gwerr.New(gwerr.TooLarge, "audio is larger than 8 MB").WithParam("audio_base64")
		}
		b, err := decodeBase64(audioB64.Str)
		if err != nil {
			return Result{}, invalid("audio_base64", "audio_base64 is not valid base64")
		}
		filename := a.Get("filename").String()
		file = func() ([]byte, string, *gwerr.Error) { return b, filename, nil }
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	body := &deferredBody{open: func() ([]byte, *gwerr.Error) {
		data, filename, e := file()
		if e != nil {
			return nil, e
		}
		if int64(len(data)) > MaxAudioBytes {
			return nil, gwerr.New(gwerr.TooLarge, "audio is larger than 8 MB").WithParam("file")
		}
		if filename == "" || filename == "." || filename == "/" {
			filename = "audio"
		}
		fw, _ := mw.CreateFormFile("file", filename)
		_, _ = fw.Write(data)
		for _, f := range []string{"language", "prompt"} {
			if v := a.Get(f); v.Type == gjson.String && v.Str != "" {
				_ = mw.WriteField(f, v.Str)
			}
		}
		_ = mw.WriteField("response_format", "json")
		_ = mw.Close()
		return buf.Bytes(), nil
	}}
	rec, e := s.route(ctx, c, t, body, mw.FormDataContentType())
	if body.err != nil {
		// The body's refusal is the cause of the route's.
		return Result{}, body.err
	}
	if e != nil {
		return Result{}, e
	}
	text := gjson.GetBytes(rec.Body.Bytes(), "text")
	if text.Type != gjson.String {
		return Result{}, gwerr.New(gwerr.Upstream, "the transcription gave an unreadable answer")
	}
	return ok(map[string]any{"text": text.Str, "billed_seconds": billed(rec), "cost_usd": rec.Cost().String()}), nil
}

func (s *Server) speak(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	text := a.Get("text")
	if text.Type != gjson.String || strings.TrimSpace(text.Str) == "" {
		return Result{}, invalid("text", "text is required")
	}
	if utf8.RuneCountInString(text.Str) > MaxSpeakChars {
		return Result{}, gwerr.New(gwerr.TooLarge, "text is longer than %d characters", MaxSpeakChars).WithParam("text")
	}
	format := DefaultSpeakFormat
	if f := a.Get("format"); f.Exists() {
		if _, known := speakFormats[f.String()]; f.Type != gjson.String || !known {
			return Result{}, invalid("format", "format must be mp3 or wav")
		}
		format = f.Str
	}
	voice := s.DefaultVoice
	if voice == "" {
		voice = DefaultVoice
	}
	if v := a.Get("voice"); v.Exists() {
		if v.Type != gjson.String || v.Str == "" {
			return Result{}, invalid("voice", "voice must be a voice id")
		}
		voice = v.Str
	}
	req := map[string]any{"model": "gw-voice-speak", "input": text.Str, "voice": voice, "response_format": format}
	if sp := a.Get("speed"); sp.Exists() {
		if sp.Type != gjson.Number {
			return Result{}, invalid("speed", "speed must be a number")
		}
		req["speed"] = sp.Num
	}
	body, _ := json.Marshal(req)
	rec, e := s.route(ctx, c, t, bytes.NewReader(body), "application/json")
	if e != nil {
		return Result{}, e
	}
	audio := rec.Body.Bytes()
	mime := speakFormats[format]
	block := map[string]any{"type": "audio", "data": base64.StdEncoding.EncodeToString(audio), "mimeType": mime}
	return ok(map[string]any{"voice": voice, "format": format, "mime_type": mime, "bytes": len(audio),
		"billed_chars": billed(rec), "cost_usd": rec.Cost().String()}, block), nil
}

// downloadChecks are what the transcription route checks only once it has
// the file, made before the gateway downloads one: the key's model list
// and room for the least a file is billed. The room is held during the
// download; release drops it before the route holds the exact cost.
func downloadChecks(ctx context.Context, c *pipeline.Call, t Tool) (release func(), e *gwerr.Error) {
	if err := c.AllowModel(t.Alias); err != nil {
		return nil, gwerr.As(err)
	}
	least, ok := c.AbilityCost(t.Alias, pricing.TranscriptionMinBilledSeconds)
	if !ok {
		return nil, gwerr.New(gwerr.Upstream, "%s has no published price; it is not served", t.Alias).WithCode(gwerr.CodeCapabilityUnavailable)
	}
	h, err := c.Gateway.Money.ReserveFor(ctx, c.Payer(), money.Ability, least)
	if err != nil {
		return nil, gwerr.As(err)
	}
	return func() { h.Release(ctx) }, nil
}

// deferredBody is a request body made only when it is first read: a route
// that refuses before reading its body never makes it. err is why it
// could not be made.
type deferredBody struct {
	open func() ([]byte, *gwerr.Error)
	r    *bytes.Reader
	err  *gwerr.Error
}

// Read implements io.Reader.
func (b *deferredBody) Read(p []byte) (int, error) {
	if b.r == nil && b.err == nil {
		data, e := b.open()
		if e != nil {
			b.err = e
		} else {
			b.r = bytes.NewReader(data)
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.r.Read(p)
}
