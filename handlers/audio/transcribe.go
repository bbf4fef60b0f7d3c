package audio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"regexp"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upload"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of transcription (docs/abilities.md, Audio).
const (
	// MaxFileBytes bounds the uploaded file (8 MB; the tools server's
	// transcribe takes the same).
	MaxFileBytes = 8 << 20
	// MaxPromptChars is where prompt is cut before it goes upstream.
	MaxPromptChars = 2000
	// TranscriptionTimeout: 60 seconds of processing, then 504.
	TranscriptionTimeout = 60 * time.Second
	// MaxTranscriptBytes bounds the provider's answer read.
	MaxTranscriptBytes = 16 << 20
	// PathTranscriptions is the provider's endpoint (after its /v1 base).
	PathTranscriptions = "/audio/transcriptions"
)

// Response formats of transcription.
const (
	formatJSON    = "json"
	formatVerbose = "verbose_json"
	formatText    = "text"
)

// Form fields of a transcription upload.
const (
	fieldFile        = "file"
	fieldModel       = "model"
	fieldLanguage    = "language"
	fieldPrompt      = "prompt"
	fieldTemperature = "temperature"
	fieldFormat      = "response_format"
	fieldStream      = "stream"
	// fieldGranularity is repeatable; the official SDKs send the bracketed
	// name, curl users often the bare one.
	fieldGranularity     = "timestamp_granularities[]"
	fieldGranularityBare = "timestamp_granularities"
)

// languageCode is an ISO-639-1 code.
var languageCode = regexp.MustCompile(`^[a-z]{2}$`)

func invalid(param, format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}

// capabilityUnavailable is a failed (502) or slow (504) backing service.
func capabilityUnavailable(timeout bool, format string, args ...any) error {
	k := gwerr.Upstream
	if timeout {
		k = gwerr.Timeout
	}
	return gwerr.New(k, format, args...).WithCode(gwerr.CodeCapabilityUnavailable)
}

// transcription is a checked transcription request.
type transcription struct {
	alias       string // the alias billed (gw-voice for unknown ids)
	format      string
	words       bool // word timestamps asked (verbose_json only)
	language    string
	prompt      string
	temperature string
	file        upload.File
	info        Info
}

// Transcribe serves POST /v1/audio/transcriptions.
func (h *Handler) Transcribe(c *pipeline.Call) error {
	form, err := upload.Read(c.R, upload.Limits{MaxFileBytes: MaxFileBytes, MaxFiles: 1})
	if err != nil {
		return uploadError(err)
	}
	t, err := parseTranscription(form)
	if err != nil {
		return err
	}
	if err := c.AllowModel(t.alias); err != nil {
		return err
	}
	if t.info, err = Probe(t.file.Data); err != nil {
		var ue *UnreadableError
		if errors.As(err, &ue) {
			return invalid(fieldFile, "%s", ue.Error())
		}
		return gwerr.New(gwerr.Invalid, "the file is not audio in a supported format (wav, mp3, mp4/m4a, ogg, webm, flac)").
			WithParam(fieldFile).WithCode(gwerr.CodeUnsupportedFileFormat)
	}
	cat := c.Gateway.Catalog
	routed := h.route(t.alias, t.info.Duration, func(a string) bool { return cat.Abilities[a] != nil })
	ab := cat.Abilities[routed]
	if ab == nil || cat.Providers[ab.Provider] == nil {
		return capabilityUnavailable(false, "transcription is not configured on this gateway")
	}
	// The reservation, the money check and the hourly audio budget all
	// go by the file's own length, which no header can shrink.
	billed := pricing.BilledSeconds(t.info.Duration)
	cost, ok := c.AbilityCost(t.alias, billed)
	if !ok {
		return capabilityUnavailable(false, "%s has no published price; it is not served", t.alias)
	}
	if err := c.Take(limits.AudioSeconds, audioSeconds(t.info.Duration)); err != nil {
		return err
	}
	if err := c.Reserve(cost); err != nil {
		return err
	}
	model := ab.Model
	if t.format == formatVerbose {
		model = h.cfg.VerboseModel
	}
	parts, contentType := t.upstreamBody(model)
	ctx, cancel := context.WithTimeout(c.R.Context(), h.timeout(h.cfg.TranscriptionTimeout, TranscriptionTimeout))
	defer cancel()
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: cat.Providers[ab.Provider], Path: PathTranscriptions,
		ContentType: contentType, Parts: parts})
	if err != nil {
		return transcriptionFailure(ctx, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxTranscriptBytes))
	if err != nil {
		upstream.Failed(ctx, resp.Body)
		return transcriptionFailure(ctx, err)
	}
	out, err := t.answer(raw)
	if err != nil {
		upstream.Failed(ctx, resp.Body)
		return err
	}
	// The settlement bills what the provider heard when it says so, never
	// less than the file's own length.
	if heard, ok := reportedSeconds(raw); ok && heard > t.info.Duration {
		billed = pricing.BilledSeconds(heard)
		cost, _ = c.AbilityCost(t.alias, billed)
	}
	if _, err := c.Charge(pipeline.Bill{Units: billed, Unit: pricing.UnitAudioSecond, Model: model, Alias: t.alias, Cost: cost, Receipt: pipeline.AbilityReceipt}); err != nil {
		return err
	}
	answerType := "application/json"
	if t.format == formatText {
		answerType = "text/plain; charset=utf-8"
	}
	pipeline.WriteWhole(c.W, http.StatusOK, answerType, out)
	return nil
}

// reportedSeconds is the audio length the provider reports in its
// answer: verbose_json's duration and a usage of type duration (the usage
// of whisper-style models, on json too), the longer of the two. Models
// that report only tokens give none. A value that is not a number from 0
// to MaxDuration is not taken.
func reportedSeconds(raw []byte) (float64, bool) {
	var heard float64
	ok := false
	take := func(v gjson.Result) {
		if v.Type == gjson.Number && !math.IsNaN(v.Num) && v.Num >= 0 && v.Num <= MaxDuration {
			heard, ok = max(heard, v.Num), true
		}
	}
	take(gjson.GetBytes(raw, "duration"))
	if gjson.GetBytes(raw, "usage.type").Str == "duration" {
		take(gjson.GetBytes(raw, "usage.seconds"))
	}
	return heard, ok
}

// audioSeconds is what a clip takes of the hourly audio budget: its length
// rounded up, at least one second.
func audioSeconds(d float64) int64 { return max(1, int64(math.Ceil(d))) }

// route picks the alias that serves: gw-voice-fast and gw-voice-accurate
// are pinned; gw-voice takes gw-voice-accurate for clips up to
// AccurateUpTo and gw-voice-fast for longer ones (its own model when the
// one it picks is not configured).
func (h *Handler) route(alias string, seconds float64, configured func(string) bool) string {
	if alias != AliasVoice {
		return alias
	}
	pick := AliasVoiceFast
	if seconds <= h.cfg.AccurateUpTo.Seconds() {
		pick = AliasVoiceAccurate
	}
	if configured(pick) {
		return pick
	}
	return AliasVoice
}

// transcriptionFailure maps an upstream failure: too slow is 504, the
// provider refusing the gateway's own account 503, anything else 502, all
// capability_unavailable, none of them billed.
func transcriptionFailure(ctx context.Context, err error) error {
	if upstream.AccountRefused(err) {
		return gwerr.New(gwerr.Unavailable, "transcription is unavailable; retry later").WithCode(gwerr.CodeCapabilityUnavailable)
	}
	e := gwerr.As(err)
	timeout := e.Kind == gwerr.Timeout || errors.Is(ctx.Err(), context.DeadlineExceeded)
	if timeout {
		return capabilityUnavailable(true, "the transcription took too long")
	}
	if e.Kind == gwerr.Unavailable && ctx.Err() != nil {
		return e // the client left
	}
	return capabilityUnavailable(false, "the transcription failed")
}

// uploadError maps a refused upload: too large is 413 file_too_large with
// both sizes, everything else a 400 naming the field.
func uploadError(err error) error {
	var tl *upload.TooLargeError
	var fe *upload.FieldError
	var tm *upload.TooManyFilesError
	switch {
	case errors.As(err, &tl):
		size := humanize.IBytes(uint64(tl.Size))
		if tl.AtLeast {
			size = "at least " + size
		}
		return gwerr.New(gwerr.TooLarge, "the file is %s, over the limit of %s", size, humanize.IBytes(uint64(tl.Limit))).
			WithCode(gwerr.CodeFileTooLarge).WithParam(fieldFile)
	case errors.As(err, &fe):
		return invalid(fe.Field, "%s", fe.Error())
	case errors.As(err, &tm):
		return invalid(fieldFile, "send one file")
	}
	return invalid(fieldFile, "the body must be multipart/form-data with the audio in a file field")
}

// parseTranscription checks the form's fields, each refusal a 400 naming
// its field.
func parseTranscription(f *upload.Form) (*transcription, error) {
	t := &transcription{alias: AliasVoice, format: formatJSON}
	if f.Has(fieldStream) {
		switch v := f.Value(fieldStream); v {
		case "false", "0", "":
		case "true", "1":
			return nil, invalid(fieldStream, "streaming is not offered for transcription; leave stream out")
		default:
			return nil, invalid(fieldStream, "stream must be true or false")
		}
	}
	files := f.FilesOf(fieldFile)
	if len(files) == 0 {
		return nil, invalid(fieldFile, "file is required: send the audio as a file field")
	}
	t.file = files[0]
	switch m := f.Value(fieldModel); m {
	case AliasVoiceFast, AliasVoiceAccurate:
		t.alias = m
	}
	if f.Has(fieldFormat) {
		switch v := f.Value(fieldFormat); v {
		case formatJSON, formatVerbose, formatText:
			t.format = v
		case "srt", "vtt":
			return nil, invalid(fieldFormat, "response_format %s is not offered; use json, verbose_json or text", v)
		default:
			return nil, invalid(fieldFormat, "response_format must be json, verbose_json or text")
		}
	}
	for _, g := range append(f.Values[fieldGranularity], f.Values[fieldGranularityBare]...) {
		switch g {
		case "word":
			t.words = true
		case "segment":
		default:
			return nil, invalid(fieldGranularity, "timestamp_granularities[] takes word and segment")
		}
	}
	if t.format != formatVerbose {
		t.words = false // affects only verbose_json
	}
	if f.Has(fieldLanguage) {
		t.language = f.Value(fieldLanguage)
		if t.language != "" && !languageCode.MatchString(t.language) {
			return nil, invalid(fieldLanguage, "language must be an ISO-639-1 code such as en")
		}
	}
	if f.Has(fieldTemperature) {
		v := f.Value(fieldTemperature)
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < 0 || x > 1 {
			return nil, invalid(fieldTemperature, "temperature must be a number from 0 to 1")
		}
		t.temperature = strconv.FormatFloat(x, 'g', -1, 64)
	}
	t.prompt = cutRunes(f.Value(fieldPrompt), MaxPromptChars)
	return t, nil
}

// cutRunes returns s cut to at most n characters.
func cutRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// upstreamBody is the provider's multipart request, in three parts: the
// framing before the file, the file itself (the upload's own bytes, not a
// copy) and the fields after it. The file goes under a name whose
// extension is the sniffed format (the provider reads the format from the
// name), never the client's name. json and text are both asked as json
// (text is written from it); verbose_json always asks for segments, and
// for words when the client did.
func (t *transcription) upstreamBody(model string) ([][]byte, string) {
	var head, tail bytes.Buffer
	mw := multipart.NewWriter(&head)
	hdr := textproto.MIMEHeader{}
	hdr.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="audio.%s"`, t.info.Format.Extension()))
	hdr.Set("Content-Type", "application/octet-stream")
	_, _ = mw.CreatePart(hdr)
	contentType := mw.FormDataContentType()
	// The writer goes on into tail: what it writes next starts with the
	// boundary that ends the file part.
	tw := multipart.NewWriter(&tail)
	_ = tw.SetBoundary(mw.Boundary())
	_ = tw.WriteField(fieldModel, model)
	format := formatJSON
	if t.format == formatVerbose {
		format = formatVerbose
		_ = tw.WriteField(fieldGranularity, "segment")
		if t.words {
			_ = tw.WriteField(fieldGranularity, "word")
		}
	}
	_ = tw.WriteField(fieldFormat, format)
	for _, kv := range [][2]string{{fieldLanguage, t.language}, {fieldPrompt, t.prompt}, {fieldTemperature, t.temperature}} {
		if kv[1] != "" {
			_ = tw.WriteField(kv[0], kv[1])
		}
	}
	_ = tw.Close()
	// A second writer's first boundary has no leading CRLF; the one that
	// ends the file part needs it.
	return [][]byte{head.Bytes(), t.file.Data, append([]byte("\r\n"), tail.Bytes()...)}, contentType
}

// answer checks the provider's JSON and shapes the client's answer: json
// as the provider gave it, text as plain text, verbose_json with
// segments always (one covering the clip when the provider gave none),
// duration (the file's, when the provider gave none) and words only when
// asked.
func (t *transcription) answer(raw []byte) ([]byte, error) {
	if jsonbody.Check(raw) != nil {
		return nil, capabilityUnavailable(false, "the transcription gave an unreadable answer")
	}
	text := gjson.GetBytes(raw, "text")
	if text.Type != gjson.String {
		return nil, capabilityUnavailable(false, "the transcription gave no text")
	}
	switch t.format {
	case formatText:
		return []byte(text.Str + "\n"), nil
	case formatVerbose:
		out := raw
		var err error
		if !gjson.GetBytes(out, "duration").Exists() {
			out, err = sjson.SetBytes(out, "duration", t.info.Duration)
		}
		if err == nil && !gjson.GetBytes(out, "segments").IsArray() {
			seg := map[string]any{"id": 0, "start": 0, "end": t.info.Duration, "text": text.Str}
			out, err = sjson.SetBytes(out, "segments", []any{seg})
		}
		if err == nil && !t.words && gjson.GetBytes(out, "words").Exists() {
			out, err = sjson.DeleteBytes(out, "words")
		}
		if err != nil {
			return nil, capabilityUnavailable(false, "the transcription gave an unreadable answer")
		}
		return out, nil
	}
	return raw, nil
}
