package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Audio through the built gateway (Caddyfile.example with short time-outs)
// against the fake provider's /audio/transcriptions and /audio/speech,
// driven with openai-go: every row of the transcription, speech and
// voice list error tables, the receipts equal to the ledger, and the speech
// streams that stall, are cut, or lose their client.

// Plan prices of Caddyfile.example's audio aliases, in microcents a unit.
const (
	voicePrice   = 1667 // gw-voice, -fast, -accurate: per second
	speakPrice   = 26   // gw-voice-speak: per character
	speakHDPrice = 30   // gw-voice-speak-hd
)

// audioEnv is a gateway on Caddyfile.example whose audio time-outs are
// short (transcription 2 s, first audio and gaps 1 s).
type audioEnv struct {
	*gateway
	OA *fake.Upstream
}

func newAudioEnv(t *testing.T) *audioEnv {
	t.Helper()
	cfg := exampleCaddyfile(t)
	const marker = "verbose_model whisper-1"
	if !strings.Contains(cfg, marker) {
		t.Fatalf("Caddyfile.example has no %q line to add test time-outs to", marker)
	}
	cfg = strings.Replace(cfg, marker, marker+"\n\t\t\ttranscription_timeout 2s\n\t\t\tfirst_audio_timeout 1s\n\t\t\tgap_timeout 1s", 1)
	g, oa := startWithFakes(t, cfg)
	return &audioEnv{gateway: g, OA: oa}
}

// account makes a paid, cleared account with one key (fields override).
func (e *audioEnv) account(t *testing.T, id string, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"id": id, "plan": "paid", "cleared": true}
	for k, v := range fields {
		body[k] = v
	}
	return e.newAccountKey(t, body)
}

func (e *audioEnv) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// fixture reads a real audio file of handlers/audio/testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "handlers", "audio", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// multipartBody builds a transcription upload: the file (when data is not
// nil) and fields as name, value pairs.
func multipartBody(t testing.TB, filename string, data []byte, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if data != nil {
		fw, err := mw.CreateFormFile("file", filename)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(data)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

// upload posts a multipart transcription.
func (e *audioEnv) upload(t testing.TB, key, filename string, data []byte, fields ...string) response {
	t.Helper()
	body, ct := multipartBody(t, filename, data, fields...)
	return e.do(t, http.MethodPost, "/v1/audio/transcriptions", body, append(bearer(key), "Content-Type", ct)...)
}

// expectReceipt checks an answer's receipt headers against the ledger:
// one entry under its request id with exactly that cost, units and unit.
func expectReceipt(t testing.TB, g *gateway, account string, h http.Header, model, unitHeader string, units int64, unit string, cost pricing.Money) {
	t.Helper()
	if got := h.Get("X-Gw-Routed-Model"); got != model {
		t.Errorf("X-Gw-Routed-Model %q, want %q", got, model)
	}
	if got := h.Get(unitHeader); got != strconv.FormatInt(units, 10) {
		t.Errorf("%s %q, want %d", unitHeader, got, units)
	}
	if got := h.Get("X-Gw-Cost-Usd"); got != cost.String() {
		t.Errorf("X-Gw-Cost-Usd %q, want %s", got, cost)
	}
	g.expectLedger(t, account, ledgerEntry{RequestID: h.Get("X-Gw-Request-Id"), Model: model, Units: units, Unit: unit, Cost: cost.String()})
}

func abilityCost(price, units int64) pricing.Money {
	return pricing.Cost(false, pricing.Line{Units: units, Rate: pricing.PerUnit(pricing.Micro(price))})
}

// wavOf is a valid 8-bit mono WAV header claiming seconds of audio at
// rate bytes a second, followed by that many bytes of silence.
func wavOf(rate, seconds int) []byte {
	n := rate * seconds
	b := make([]byte, 44+n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)            // PCM
	binary.LittleEndian.PutUint16(b[22:], 1)            // mono
	binary.LittleEndian.PutUint32(b[24:], uint32(rate)) // sample rate
	binary.LittleEndian.PutUint32(b[28:], uint32(rate)) // byte rate
	binary.LittleEndian.PutUint16(b[32:], 1)            // block align
	binary.LittleEndian.PutUint16(b[34:], 8)            // bits
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(n))
	for i := 44; i < len(b); i++ {
		b[i] = 0x80
	}
	return b
}

func TestAudioTranscription(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "listener", nil)
	c := e.client(key)
	ctx := context.Background()

	// Every listed format, read from its bytes: the name the client gives
	// is not trusted (every file goes as "clip.bin"), the provider gets
	// audio.<format>, and the length from the container is billed.
	for _, tc := range []struct {
		file, ext string
		billed    int64
	}{
		{"tone.wav", "wav", 10}, {"tone.mp3", "mp3", 13}, {"cbr-noxing.mp3", "mp3", 10},
		{"tone.m4a", "m4a", 10}, {"frag.m4a", "m4a", 10}, {"tone.ogg", "ogg", 10}, {"tone.opus", "ogg", 10},
		{"tone.webm", "webm", 10}, {"stream.webm", "webm", 10}, {"tone.flac", "flac", 10},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e.OA.Reset()
			e.OA.Push(fake.Script{Text: "a tone", Usage: fake.Usage{Input: 20, Output: 2}})
			var resp *http.Response
			tr, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
				File: openai.File(bytes.NewReader(fixture(t, tc.file)), "clip.bin", "application/octet-stream"), Model: "gw-voice",
			}, option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("transcription: %v", err)
			}
			if tr.Text != "a tone" {
				t.Errorf("text %q", tr.Text)
			}
			// Short clips go to gw-voice-accurate (gpt-4o-transcribe), billed at gw-voice's price.
			expectReceipt(t, e.gateway, "listener", resp.Header, "gpt-4o-transcribe", "X-Gw-Billed-Seconds", tc.billed, "audio_second", abilityCost(voicePrice, tc.billed))
			reqs := e.OA.Requests()
			if len(reqs) != 1 || reqs[0].Path != "/v1/audio/transcriptions" {
				t.Fatalf("upstream requests %+v", reqs)
			}
			f := reqs[0].Form()
			if f == nil || len(f.File["file"]) != 1 || f.File["file"][0].Filename != "audio."+tc.ext || f.Value["model"][0] != "gpt-4o-transcribe" ||
				f.Value["response_format"][0] != "json" {
				t.Fatalf("upstream form %+v", f)
			}
			if got, want := f.File["file"][0].Size, int64(len(fixture(t, tc.file))); got != want {
				t.Errorf("upstream file %d bytes, want %d", got, want)
			}
		})
	}

	t.Run("models", func(t *testing.T) {
		for _, tc := range []struct{ model, alias, routed string }{
			{"gw-voice-fast", "gw-voice-fast", "gpt-4o-mini-transcribe"},
			{"gw-voice-accurate", "gw-voice-accurate", "gpt-4o-transcribe"},
			{"whisper-9000", "gw-voice", "gpt-4o-transcribe"}, // unknown ids are gw-voice
		} {
			e.OA.Push(fake.Script{Text: "ok"})
			r := e.upload(t, key, "x.wav", fixture(t, "tone.wav"), "model", tc.model)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", tc.model, r.Status, r.Body)
			}
			matchJSON(t, r.Body, `{"text":"ok","usage":{"type":"tokens","input_tokens":0,"input_token_details":{"text_tokens":0,"audio_tokens":0},"output_tokens":0,"total_tokens":0}}`)
			expectReceipt(t, e.gateway, "listener", r.Header, tc.routed, "X-Gw-Billed-Seconds", 10, "audio_second", abilityCost(voicePrice, 10))
		}
		// A clip over gw-voice's threshold (5 minutes) goes to gw-voice-fast.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "long"})
		r := e.upload(t, key, "x.wav", wavOf(100, 301))
		if r.Status != 200 || r.Header.Get("X-Gw-Routed-Model") != "gpt-4o-mini-transcribe" {
			t.Fatalf("long clip: %d %s %v", r.Status, r.Body, r.Header)
		}
		expectReceipt(t, e.gateway, "listener", r.Header, "gpt-4o-mini-transcribe", "X-Gw-Billed-Seconds", 301, "audio_second", abilityCost(voicePrice, 301))
	})

	t.Run("formats", func(t *testing.T) {
		// verbose_json goes to whisper-1 (the gpt-4o models answer only
		// json and text): segments always, words only when asked.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "one two", AudioSeconds: 1.5})
		tr, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
			File: openai.File(bytes.NewReader(fixture(t, "tone.wav")), "a.wav", "audio/wav"), Model: "gw-voice",
			ResponseFormat: openai.AudioResponseFormatVerboseJSON,
		})
		if err != nil {
			t.Fatal(err)
		}
		v := tr.AsTranscriptionVerbose()
		if len(v.Segments) != 1 || v.Duration != 1.5 || v.Text != "one two" || tr.JSON.Words.Valid() {
			t.Fatalf("verbose %s", tr.RawJSON())
		}
		f := e.OA.Requests()[0].Form()
		if f.Value["model"][0] != "whisper-1" || f.Value["response_format"][0] != "verbose_json" || strings.Join(f.Value["timestamp_granularities[]"], ",") != "segment" {
			t.Fatalf("verbose upstream form %v", f.Value)
		}
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "one two", AudioSeconds: 1.5})
		var resp *http.Response
		tr, err = c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
			File: openai.File(bytes.NewReader(fixture(t, "tone.wav")), "a.wav", "audio/wav"), Model: "gw-voice",
			ResponseFormat: openai.AudioResponseFormatVerboseJSON, TimestampGranularities: []string{"word"},
		}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if v := tr.AsTranscriptionVerbose(); len(v.Words) != 2 || len(v.Segments) != 1 || v.Words[1].Word != "two" {
			t.Fatalf("verbose with words %s", tr.RawJSON())
		}
		expectReceipt(t, e.gateway, "listener", resp.Header, "whisper-1", "X-Gw-Billed-Seconds", 10, "audio_second", abilityCost(voicePrice, 10))
		// Granularities do nothing on json.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "plain"})
		if r := e.upload(t, key, "a.wav", fixture(t, "tone.wav"), "timestamp_granularities[]", "word"); r.Status != 200 {
			t.Fatalf("json with granularities: %d %s", r.Status, r.Body)
		}
		if f := e.OA.Requests()[0].Form(); len(f.Value["timestamp_granularities[]"]) != 0 {
			t.Errorf("granularities sent with json: %v", f.Value)
		}
		// text is plain text.
		e.OA.Push(fake.Script{Text: "just words"})
		r := e.upload(t, key, "a.wav", fixture(t, "tone.wav"), "response_format", "text")
		if r.Status != 200 || string(r.Body) != "just words\n" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("text: %d %q %v", r.Status, r.Body, r.Header)
		}
		// prompt is cut to 2,000 characters before it goes upstream;
		// language and temperature pass.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "ok"})
		r = e.upload(t, key, "a.wav", fixture(t, "tone.wav"), "prompt", strings.Repeat("é", 2500), "language", "fr", "temperature", "0.2")
		if r.Status != 200 {
			t.Fatalf("prompt: %d %s", r.Status, r.Body)
		}
		f = e.OA.Requests()[0].Form()
		if f.Value["prompt"][0] != strings.Repeat("é", 2000) || f.Value["language"][0] != "fr" || f.Value["temperature"][0] != "0.2" {
			t.Errorf("upstream prompt %d runes, language %v, temperature %v", len([]rune(f.Value["prompt"][0])), f.Value["language"], f.Value["temperature"])
		}
	})

	// The same rows as the SDK sends them: every field of
	// AudioTranscriptionNewParams, text through Client.Post with a string
	// destination (the SDK's way), and its refusals as *openai.Error.
	t.Run("sdk", func(t *testing.T) {
		file := func() io.Reader { return bytes.NewReader(fixture(t, "tone.ogg")) }
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "bonjour"})
		var resp *http.Response
		tr, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
			File: openai.File(file(), "voice.ogg", "audio/ogg"), Model: "gw-voice-fast", Language: openai.String("fr"),
			Prompt: openai.String(strings.Repeat("ß", 2001)), Temperature: openai.Float(0.4),
			ResponseFormat: openai.AudioResponseFormatJSON,
		}, option.WithResponseInto(&resp))
		if err != nil || tr.Text != "bonjour" {
			t.Fatalf("transcription: %v %+v", err, tr)
		}
		expectReceipt(t, e.gateway, "listener", resp.Header, "gpt-4o-mini-transcribe", "X-Gw-Billed-Seconds", 10, "audio_second", abilityCost(voicePrice, 10))
		f := e.OA.Requests()[0].Form()
		if f.Value["model"][0] != "gpt-4o-mini-transcribe" || f.Value["language"][0] != "fr" || f.Value["temperature"][0] != "0.4" ||
			f.Value["prompt"][0] != strings.Repeat("ß", 2000) || f.File["file"][0].Filename != "audio.ogg" {
			t.Errorf("upstream form %v", f.Value)
		}
		e.OA.Push(fake.Script{Text: "plain words"})
		var text string
		err = c.Post(ctx, "audio/transcriptions", openai.AudioTranscriptionNewParams{
			File: openai.File(file(), "voice.ogg", "audio/ogg"), Model: "gw-voice", ResponseFormat: openai.AudioResponseFormatText,
		}, &text)
		if err != nil || text != "plain words\n" {
			t.Fatalf("text: %v %q", err, text)
		}
		for _, tc := range []struct {
			name  string
			p     openai.AudioTranscriptionNewParams
			param string
		}{
			{"srt", openai.AudioTranscriptionNewParams{ResponseFormat: openai.AudioResponseFormatSRT}, "response_format"},
			{"vtt", openai.AudioTranscriptionNewParams{ResponseFormat: openai.AudioResponseFormatVTT}, "response_format"},
			{"diarized_json", openai.AudioTranscriptionNewParams{ResponseFormat: openai.AudioResponseFormatDiarizedJSON}, "response_format"},
			{"language", openai.AudioTranscriptionNewParams{Language: openai.String("french")}, "language"},
			{"temperature", openai.AudioTranscriptionNewParams{Temperature: openai.Float(1.5)}, "temperature"},
			{"granularity", openai.AudioTranscriptionNewParams{ResponseFormat: openai.AudioResponseFormatVerboseJSON,
				TimestampGranularities: []string{"sentence"}}, "timestamp_granularities[]"},
		} {
			tc.p.File, tc.p.Model = openai.File(file(), "voice.ogg", "audio/ogg"), "gw-voice"
			_, err := c.Audio.Transcriptions.New(ctx, tc.p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || apiErr.Type != "invalid_request_error" {
				t.Errorf("%s: %v, want 400 param %s", tc.name, err, tc.param)
			}
		}
		// Not audio, whatever its name says.
		_, err = c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
			File: openai.File(bytes.NewReader(fixture(t, "red.png")), "voice.mp3", "audio/mpeg"), Model: "gw-voice"})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_file_format" || apiErr.Param != "file" {
			t.Errorf("png as mp3: %v", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		before := len(e.ledger(t, "listener"))
		const (
			badFile      = `{"error":{"message":"<string>","type":"invalid_request_error","param":"file"}}`
			unsupported  = `{"error":{"message":"<string>","type":"invalid_request_error","code":"unsupported_file_format","param":"file"}}`
			unavailable  = `{"error":{"message":"<string>","type":"api_error","code":"capability_unavailable"}}`
			badParamTmpl = `{"error":{"message":"<string>","type":"invalid_request_error","param":"%s"}}`
		)
		bad := func(p string) string { return fmt.Sprintf(badParamTmpl, p) }
		wav := fixture(t, "tone.wav")
		random := bytes.Repeat([]byte{0x13, 0x37, 0xFF, 0xFB}, 500)
		for _, tc := range []struct {
			name     string
			filename string
			data     []byte
			fields   []string
			push     *fake.Script
			status   int
			want     string
		}{
			{"no file", "", nil, []string{"model", "gw-voice"}, nil, 400, badFile},
			{"text named mp3", "notes.mp3", fixture(t, "notes.mp3"), nil, nil, 400, unsupported},
			{"png", "red.png", fixture(t, "red.png"), nil, nil, 400, unsupported},
			{"video without sound", "clip.mp4", fixture(t, "silent.mp4"), nil, nil, 400, unsupported},
			{"random bytes with sync words", "x.mp3", random, nil, nil, 400, unsupported},
			{"wav without data", "x.wav", wav[:36], nil, nil, 400, badFile},
			{"srt", "a.wav", wav, []string{"response_format", "srt"}, nil, 400, bad("response_format")},
			{"vtt", "a.wav", wav, []string{"response_format", "vtt"}, nil, 400, bad("response_format")},
			{"unknown format", "a.wav", wav, []string{"response_format", "xml"}, nil, 400, bad("response_format")},
			{"stream", "a.wav", wav, []string{"stream", "true"}, nil, 400, bad("stream")},
			{"bad granularity", "a.wav", wav, []string{"timestamp_granularities[]", "sentence"}, nil, 400, bad("timestamp_granularities[]")},
			{"bad language", "a.wav", wav, []string{"language", "English"}, nil, 400, bad("language")},
			{"bad temperature", "a.wav", wav, []string{"temperature", "hot"}, nil, 400, bad("temperature")},
			{"upstream failed", "a.wav", wav, nil, &fake.Script{Status: 500}, 502, unavailable},
			{"upstream refused", "a.wav", wav, nil, &fake.Script{Status: 400}, 502, unavailable},
			{"upstream too slow", "a.wav", wav, nil, &fake.Script{Delay: 10e9}, 504, unavailable},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.push != nil {
					e.OA.Push(*tc.push)
				}
				expectError(t, e.upload(t, key, tc.filename, tc.data, tc.fields...), tc.status, tc.want, "")
			})
		}
		// The other fields are small: one over 64 KiB is refused naming it;
		// a second file is refused naming file.
		expectError(t, e.upload(t, key, "a.wav", wav, "prompt", strings.Repeat("x", 64<<10+1)), 400, bad("prompt"), "")
		{
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			for range 2 {
				fw, _ := mw.CreateFormFile("file", "a.wav")
				fw.Write(wav)
			}
			mw.Close()
			expectError(t, e.do(t, http.MethodPost, "/v1/audio/transcriptions", b.String(), append(bearer(key), "Content-Type", mw.FormDataContentType())...), 400, badFile, "")
		}
		// Not multipart at all.
		expectError(t, e.do(t, http.MethodPost, "/v1/audio/transcriptions", `{"file":"x"}`, bearer(key)...), 400, badFile, "")
		// stream=true from the SDK's streaming call is refused too.
		stream := c.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{
			File: openai.File(bytes.NewReader(wav), "a.wav", "audio/wav"), Model: "gw-voice"})
		var apiErr *openai.Error
		if stream.Next() || !errors.As(stream.Err(), &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "stream" {
			t.Errorf("streaming transcription: %v", stream.Err())
		}
		// Over 8 MB: 413 file_too_large with both sizes.
		big := e.upload(t, key, "big.wav", wavOf(8000, 1100))
		expectError(t, big, 413, `{"error":{"message":"<string>","type":"invalid_request_error","code":"file_too_large","param":"file"}}`, "")
		if msg := string(big.Body); !strings.Contains(msg, "8.4 MiB") || !strings.Contains(msg, "8.0 MiB") {
			t.Errorf("413 message %s: want the file's size and the limit", big.Body)
		}
		if n := len(e.ledger(t, "listener")); n != before {
			t.Errorf("failures were billed: %d ledger entries, want %d", n, before)
		}
	})
}

// TestAudioGates: the pipeline's refusals on the audio routes (the
// transcription and speech error rows, 401 to 429), none billed.
func TestAudioGates(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	ctx := context.Background()
	wav := fixture(t, "tone.wav")
	const (
		unauth  = `{"error":{"message":"<string>","type":"authentication_error"}}`
		premium = `{"error":{"message":"<string>","type":"insufficient_quota","code":"premium_locked"}}`
		credit  = `{"error":{"message":"<string>","type":"insufficient_quota","code":"credit_exhausted"}}`
		off     = `{"error":{"message":"<string>","type":"not_found_error"}}`
		limited = `{"error":{"message":"<string>","type":"rate_limit_error","code":"rate_limit_error"}}`
	)
	speech := func(key, body string) response {
		return e.do(t, http.MethodPost, "/v1/audio/speech", body, bearer(key)...)
	}
	speak := `{"input":"hi","voice":"alloy"}`

	// 401: no key, an unknown key, and a key whose model list lacks the alias.
	expectError(t, e.upload(t, "", "a.wav", wav), 401, unauth, "")
	expectError(t, e.upload(t, "sk-nobody", "a.wav", wav), 401, unauth, "")
	speakOnly := e.account(t, "speaker-only", nil)
	listKey, _ := e.createKey(t, "speaker-only", map[string]any{"name": "speak", "models": []string{"gw-voice-speak"}})
	expectError(t, e.upload(t, listKey, "a.wav", wav), 401, unauth, "")
	expectError(t, e.upload(t, listKey, "a.wav", wav, "model", "gw-voice-fast"), 401, unauth, "")
	expectError(t, speech(listKey, `{"model":"gw-voice-speak-hd","input":"hi","voice":"alloy"}`), 401, unauth, "")
	expectError(t, speech("", speak), 401, unauth, "")
	// The same key works where its list allows.
	e.OA.Push(fake.Script{})
	if r := speech(listKey, speak); r.Status != 200 {
		t.Fatalf("allowed speech: %d %s", r.Status, r.Body)
	}
	_ = speakOnly
	// Both ability routes read x-api-key too ("Authentication" 3).
	xKey := e.account(t, "x-api-key", nil)
	e.OA.Push(fake.Script{})
	if r := e.do(t, http.MethodPost, "/v1/audio/speech", speak, apiKey(xKey)...); r.Status != 200 || r.Header.Get("X-Gw-Billed-Chars") != "2" {
		t.Errorf("speech with x-api-key: %d %s", r.Status, r.Body)
	}
	e.OA.Push(fake.Script{Text: "ok"})
	body, ct := multipartBody(t, "a.wav", wav)
	if r := e.do(t, http.MethodPost, "/v1/audio/transcriptions", body, append(apiKey(xKey), "Content-Type", ct)...); r.Status != 200 || r.Header.Get("X-Gw-Billed-Seconds") != "10" {
		t.Errorf("transcription with x-api-key: %d %s", r.Status, r.Body)
	}

	// 402 premium_locked: free, and paid but not cleared.
	for _, id := range []string{"free", "uncleared"} {
		fields := map[string]any{"plan": "free"}
		if id == "uncleared" {
			fields = map[string]any{"cleared": false}
		}
		k := e.account(t, id, fields)
		expectError(t, e.upload(t, k, "a.wav", wav), 402, premium, "")
		expectError(t, speech(k, speak), 402, premium, "")
	}
	// 402 with the money code: a prepaid balance that is spent.
	broke := e.account(t, "broke", map[string]any{"balance_usd": "0.00"})
	expectError(t, e.upload(t, broke, "a.wav", wav), 402, credit, "")
	expectError(t, speech(broke, speak), 402, credit, "")
	// 404: not switched on.
	other := e.account(t, "other", map[string]any{"abilities": []string{"search"}})
	expectError(t, e.upload(t, other, "a.wav", wav), 404, off, "")
	expectError(t, speech(other, speak), 404, off, "")

	// 429: 60 requests a minute shared by transcription, speech and
	// search. The budget refills one call a second, so the calls go on
	// until each of the two audio routes has been refused once.
	busy := e.account(t, "busy", nil)
	paths := []string{"/v1/audio/speech", "/v1/audio/transcriptions", "/v1/search"}
	served, refused := 0, map[string]bool{}
	for i := 0; i < 120 && !(refused[paths[0]] && refused[paths[1]]); i++ {
		path := paths[i%3]
		r := e.do(t, http.MethodPost, path, `{}`, bearer(busy)...)
		switch r.Status {
		case 400:
			served++
		case 429:
			expectError(t, r, 429, limited, "")
			if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
				t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
			}
			refused[path] = true
		default:
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
	if !refused[paths[0]] || !refused[paths[1]] || served < 60 || served > 70 {
		t.Errorf("%d calls served before the refusals %v; want 60 (plus what refilled)", served, refused)
	}

	// 429: 36,000 audio seconds an hour shared by transcription (the
	// clip's length) and speech (an estimate from its characters); the
	// budget refills 10 seconds a second, so the margins are wide.
	hours := e.account(t, "hours", nil)
	e.OA.Push(fake.Script{Text: "long"})
	if r := e.upload(t, hours, "a.wav", wavOf(100, 35_000)); r.Status != 200 {
		t.Fatalf("35,000 s: %d %s", r.Status, r.Body)
	}
	// 1,300 s more do not fit: the wait is what the bucket needs to refill
	// them (10 s of audio a second), well over a second and at most the
	// 130 s that refill all of them.
	over := e.upload(t, hours, "a.wav", wavOf(100, 1_300))
	expectError(t, over, 429, limited, "")
	if ra, err := strconv.Atoi(over.Header.Get("Retry-After")); err != nil || ra < 2 || ra > 130 {
		t.Errorf("audio budget Retry-After %q, want 2..130 s", over.Header.Get("Retry-After"))
	}
	e.OA.Push(fake.Script{Text: "short"})
	if r := e.upload(t, hours, "a.wav", wav); r.Status != 200 {
		t.Fatalf("tone after 35,000 s: %d %s", r.Status, r.Body)
	}
	// 4,096 characters at speed 0.25 are 1,093 s of speech: refused; 15
	// characters (1 s) fit.
	long := speech(hours, `{"input":"`+strings.Repeat("a", 4096)+`","voice":"alloy","speed":0.25}`)
	expectError(t, long, 429, limited, "")
	if ra, err := strconv.Atoi(long.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 110 {
		t.Errorf("speech audio budget Retry-After %q, want 1..110 s", long.Header.Get("Retry-After"))
	}
	e.OA.Push(fake.Script{})
	if r := speech(hours, `{"input":"`+strings.Repeat("a", 15)+`","voice":"alloy"}`); r.Status != 200 {
		t.Fatalf("short speech: %d %s", r.Status, r.Body)
	}
	// The SDK sees the refusals as its error type.
	busyClient := e.client(busy)
	_, err := busyClient.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "gw-voice-speak", Input: "hi",
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_error" {
		t.Errorf("SDK speech over budget: %v", err)
	}
	for _, id := range []string{"free", "uncleared", "broke", "other", "busy"} {
		if l := e.ledger(t, id); len(l) != 0 {
			t.Errorf("%s was billed: %+v", id, l)
		}
	}
}

// audioContentTypes are the Content-Types of the speech formats.
var audioContentTypes = map[string]string{"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}

// speechParams is an SDK speech request.
func speechParams(model, voice, input string) openai.AudioSpeechNewParams {
	return openai.AudioSpeechNewParams{Model: openai.SpeechModel(model), Input: input,
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String(voice)}}
}

func TestAudioSpeech(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "talker", nil)
	c := e.client(key)
	ctx := context.Background()

	// The audio as it came, chunked without a length, with the receipt.
	audio := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	e.OA.Push(fake.Script{Audio: audio, Chunks: 4})
	p := speechParams("gw-voice-speak", "coral", "Hello, wörld")
	p.Instructions = openai.String("cheerful")
	resp, err := c.Audio.Speech.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, audio) {
		t.Fatalf("audio %d bytes (%v), want %d", len(got), err, len(audio))
	}
	h := resp.Header
	if h.Get("Content-Type") != "audio/mpeg" || h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") != "" || resp.ContentLength != -1 {
		t.Errorf("headers %v (length %d)", h, resp.ContentLength)
	}
	// 12 characters of input and 8 of instructions.
	expectReceipt(t, e.gateway, "talker", h, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", 20, "character", abilityCost(speakPrice, 20))
	sent := e.OA.Requests()[0].JSON()
	if sent["model"] != "gpt-4o-mini-tts" || sent["voice"] != "coral" || sent["input"] != "Hello, wörld" || sent["instructions"] != "cheerful" ||
		sent["response_format"] != "mp3" || e.OA.Requests()[0].Path != "/v1/audio/speech" {
		t.Fatalf("upstream body %s", e.OA.Requests()[0].Body)
	}

	// Every format's Content-Type, on /audio/speech too.
	for format, ctype := range audioContentTypes {
		e.OA.Push(fake.Script{Audio: []byte("sound")})
		r := e.do(t, http.MethodPost, "/audio/speech", `{"input":"abc","voice":"alloy","response_format":"`+format+`"}`, bearer(key)...)
		if r.Status != 200 || r.Header.Get("Content-Type") != ctype || string(r.Body) != "sound" {
			t.Errorf("%s: %d %q %q", format, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
	}

	// Billed characters: on gw-voice-speak divided by a speed below 1,
	// rounded up; on hd the input length.
	for _, tc := range []struct {
		body   string
		model  string
		billed int64
		price  int64
	}{
		{`{"input":"0123456789","voice":"alloy","speed":0.3}`, "gpt-4o-mini-tts", 34, speakPrice},
		{`{"input":"0123456789","voice":"alloy","speed":2}`, "gpt-4o-mini-tts", 10, speakPrice},
		{`{"model":"gw-voice-speak-hd","input":"0123456789","voice":"sage","speed":0.3,"instructions":""}`, "tts-1-hd", 10, speakHDPrice},
	} {
		e.OA.Push(fake.Script{})
		r := e.do(t, http.MethodPost, "/v1/audio/speech", tc.body, bearer(key)...)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", tc.body, r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "talker", r.Header, tc.model, "X-Gw-Billed-Chars", tc.billed, "character", abilityCost(tc.price, tc.billed))
	}
	if _, has := e.OA.Requests()[len(e.OA.Requests())-1].JSON()["instructions"]; has {
		t.Errorf("empty instructions went to hd upstream")
	}

	// The SDK's own fields: every format, speed, and the refusals it can
	// express, as *openai.Error naming the field.
	t.Run("sdk", func(t *testing.T) {
		for _, f := range []openai.AudioSpeechNewParamsResponseFormat{"mp3", "opus", "aac", "flac", "wav", "pcm"} {
			e.OA.Reset()
			e.OA.Push(fake.Script{Audio: []byte("sound of " + string(f))})
			p := speechParams("gw-voice-speak-hd", "nova", "abcdefghij")
			p.ResponseFormat, p.Speed, p.StreamFormat = f, openai.Float(0.5), openai.AudioSpeechNewParamsStreamFormatAudio
			resp, err := c.Audio.Speech.New(ctx, p)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != "sound of "+string(f) || resp.Header.Get("Content-Type") != audioContentTypes[string(f)] {
				t.Errorf("%s: %q %q", f, got, resp.Header.Get("Content-Type"))
			}
			// hd bills the input length whatever the speed.
			expectReceipt(t, e.gateway, "talker", resp.Header, "tts-1-hd", "X-Gw-Billed-Chars", 10, "character", abilityCost(speakHDPrice, 10))
			if sent := e.OA.Requests()[0].JSON(); sent["response_format"] != string(f) || sent["speed"] != 0.5 || sent["model"] != "tts-1-hd" {
				t.Errorf("%s: upstream %s", f, e.OA.Requests()[0].Body)
			}
		}
		for _, tc := range []struct {
			name  string
			p     openai.AudioSpeechNewParams
			param string
		}{
			{"sse", func() openai.AudioSpeechNewParams {
				p := speechParams("gw-voice-speak", "alloy", "hi")
				p.StreamFormat = openai.AudioSpeechNewParamsStreamFormatSSE
				return p
			}(), "stream_format"},
			{"speed", func() openai.AudioSpeechNewParams {
				p := speechParams("gw-voice-speak", "alloy", "hi")
				p.Speed = openai.Float(4.01)
				return p
			}(), "speed"},
			{"instructions on hd", func() openai.AudioSpeechNewParams {
				p := speechParams("gw-voice-speak-hd", "alloy", "hi")
				p.Instructions = openai.String("whisper")
				return p
			}(), "instructions"},
			{"voice not of hd", speechParams("gw-voice-speak-hd", "marin", "hi"), "voice"},
			{"unknown voice", speechParams("gw-voice-speak", "nobody", "hi"), "voice"},
			{"model", speechParams("tts-1", "alloy", "hi"), "model"},
			{"input too long", speechParams("gw-voice-speak", "alloy", strings.Repeat("日", 4097)), "input"},
		} {
			_, err := c.Audio.Speech.New(ctx, tc.p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || apiErr.Type != "invalid_request_error" {
				t.Errorf("%s: %v, want 400 param %s", tc.name, err, tc.param)
			}
		}
	})

	t.Run("field checks", func(t *testing.T) {
		before := len(e.ledger(t, "talker"))
		bad := func(p string) string {
			return `{"error":{"message":"<string>","type":"invalid_request_error","param":"` + p + `"}}`
		}
		n := e.OA.Pending()
		for _, tc := range []struct{ name, body, param string }{
			{"not JSON", `{"input":`, "body"},
			{"not an object", `["hi"]`, "body"},
			{"duplicate key", `{"input":"a","input":"b","voice":"alloy"}`, "body"},
			{"unknown model", `{"model":"tts-1","input":"hi","voice":"alloy"}`, "model"},
			{"model not text", `{"model":5,"input":"hi","voice":"alloy"}`, "model"},
			{"no input", `{"voice":"alloy"}`, "input"},
			{"empty input", `{"input":"","voice":"alloy"}`, "input"},
			{"input 4,097 characters", `{"input":"` + strings.Repeat("é", 4097) + `","voice":"alloy"}`, "input"},
			{"no voice", `{"input":"hi"}`, "voice"},
			{"unknown voice", `{"input":"hi","voice":"bob"}`, "voice"},
			{"voice not of hd", `{"model":"gw-voice-speak-hd","input":"hi","voice":"ballad"}`, "voice"},
			{"voice object", `{"input":"hi","voice":{"id":"voice_1"}}`, "voice"},
			{"unknown format", `{"input":"hi","voice":"alloy","response_format":"ogg"}`, "response_format"},
			{"speed too low", `{"input":"hi","voice":"alloy","speed":0.2}`, "speed"},
			{"speed too high", `{"input":"hi","voice":"alloy","speed":4.5}`, "speed"},
			{"speed not a number", `{"input":"hi","voice":"alloy","speed":"fast"}`, "speed"},
			{"instructions on hd", `{"model":"gw-voice-speak-hd","input":"hi","voice":"alloy","instructions":"calm"}`, "instructions"},
			{"instructions too long", `{"input":"hi","voice":"alloy","instructions":"` + strings.Repeat("x", 4097) + `"}`, "instructions"},
			{"sse", `{"input":"hi","voice":"alloy","stream_format":"sse"}`, "stream_format"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				expectError(t, e.do(t, http.MethodPost, "/v1/audio/speech", tc.body, bearer(key)...), 400, bad(tc.param), "")
			})
		}
		// The limits themselves pass: 4,096 characters, speeds 0.25 and 4.
		for _, body := range []string{`{"input":"` + strings.Repeat("é", 4096) + `","voice":"alloy"}`,
			`{"input":"hi","voice":"alloy","speed":0.25,"stream_format":"audio"}`, `{"input":"hi","voice":"alloy","speed":4}`} {
			e.OA.Push(fake.Script{})
			if r := e.do(t, http.MethodPost, "/v1/audio/speech", body, bearer(key)...); r.Status != 200 {
				t.Errorf("%.60s: %d %s", body, r.Status, r.Body)
			}
		}
		if len(e.ledger(t, "talker")) != before+3 || e.OA.Pending() != n {
			t.Errorf("refusals reached the provider or were billed")
		}
	})

	t.Run("upstream failures", func(t *testing.T) {
		before := len(e.ledger(t, "talker"))
		unavailable := `{"error":{"message":"<string>","type":"api_error","code":"capability_unavailable"}}`
		gate := make(chan struct{})
		defer close(gate)
		for _, tc := range []struct {
			name   string
			script fake.Script
			status int
			want   string
		}{
			{"provider refuses", fake.Script{Status: 400, ErrorMessage: "Input contains unsupported text."}, 400,
				`{"error":{"message":"<string>","type":"invalid_request_error","code":"invalid_request_error"}}`},
			{"provider busy", fake.Script{Status: 429}, 429, `{"error":{"message":"<string>","type":"rate_limit_error","code":"rate_limit_error"}}`},
			{"provider failed", fake.Script{Status: 500}, 502, unavailable},
			{"no audio came back", fake.Script{EmptyAudio: true}, 502, unavailable},
			{"no answer in time", fake.Script{Delay: 10e9}, 504, unavailable},
			{"headers but no audio in time", fake.Script{EmptyAudio: true, Gate: gate}, 504, unavailable},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.OA.Push(tc.script)
				r := e.do(t, http.MethodPost, "/v1/audio/speech", `{"input":"hi","voice":"alloy"}`, bearer(key)...)
				expectError(t, r, tc.status, tc.want, "")
				if tc.status == 429 && r.Header.Get("Retry-After") == "" {
					t.Errorf("a busy provider's 429 without Retry-After")
				}
			})
		}
		if n := len(e.ledger(t, "talker")); n != before {
			t.Errorf("failures were billed: %d entries, want %d", n, before)
		}
	})

	t.Run("streams", func(t *testing.T) {
		audio := bytes.Repeat([]byte{1, 2, 3, 4}, 3000) // three chunks of 4,000 bytes
		// (a) The provider stalls after the first chunk for longer than
		// the gap time-out: the client gets the first chunk, then a cut
		// stream; the call is billed (audio had started).
		gate := make(chan struct{})
		defer close(gate)
		e.OA.Push(fake.Script{Audio: audio, Gate: gate})
		resp, err := c.Audio.Speech.New(ctx, speechParams("gw-voice-speak", "alloy", "stall"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(got) != 4000 {
			t.Errorf("stalled stream: %d bytes, error %v; want the first chunk then a cut", len(got), err)
		}
		expectReceipt(t, e.gateway, "talker", resp.Header, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", 5, "character", abilityCost(speakPrice, 5))

		// (b) The provider cuts the connection after the first chunk.
		e.OA.Push(fake.Script{Audio: audio, MidStreamError: true})
		resp, err = c.Audio.Speech.New(ctx, speechParams("gw-voice-speak", "alloy", "cut"))
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(got) != 4000 {
			t.Errorf("cut stream: %d bytes, error %v; want the first chunk then a cut", len(got), err)
		}
		expectReceipt(t, e.gateway, "talker", resp.Header, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", 3, "character", abilityCost(speakPrice, 3))

		// (c) The client leaves mid-stream: billed.
		gate2 := make(chan struct{})
		defer close(gate2)
		e.OA.Push(fake.Script{Audio: audio, Gate: gate2})
		cctx, cancel := context.WithCancel(ctx)
		resp, err = c.Audio.Speech.New(cctx, speechParams("gw-voice-speak", "alloy", "leaving"))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4000)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		expectReceipt(t, e.gateway, "talker", resp.Header, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", 7, "character", abilityCost(speakPrice, 7))

		// (d) The client leaves before the first byte: not billed, and the
		// provider's request is cancelled.
		before := len(e.ledger(t, "talker"))
		gate3 := make(chan struct{})
		defer close(gate3)
		e.OA.Push(fake.Script{EmptyAudio: true, Gate: gate3})
		n, arrived := e.OA.Arrived()
		cctx, cancel = context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Audio.Speech.New(cctx, speechParams("gw-voice-speak", "alloy", "gone"))
			done <- err
		}()
		<-arrived
		if m, _ := e.OA.Arrived(); m != n+1 {
			t.Fatalf("upstream requests %d, want %d", m, n+1)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("client that left: %v", err)
		}
		// A call after it is served and billed; the one that left is not.
		e.OA.Push(fake.Script{})
		if r := e.do(t, http.MethodPost, "/v1/audio/speech", `{"input":"after","voice":"alloy"}`, bearer(key)...); r.Status != 200 {
			t.Fatalf("after: %d", r.Status)
		}
		if n := len(e.ledger(t, "talker")); n != before+1 {
			t.Errorf("ledger has %d new entries, want 1 (the client that left before audio is not billed)", n-before)
		}
	})
}

func TestAudioVoices(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "chooser", nil)
	get := func(key string, header ...string) response {
		return e.do(t, http.MethodGet, "/v1/audio/voices", "", append(bearer(key), header...)...)
	}
	r := get(key)
	if r.Status != 200 {
		t.Fatalf("voices: %d %s", r.Status, r.Body)
	}
	body := r.JSON(t)
	rows, _ := body["data"].([]any)
	var ids []string
	for _, row := range rows {
		m := row.(map[string]any)
		if m["model"] != "gw-voice-speak" || m["entitlement"] != "paid_cleared" {
			t.Errorf("row %v", m)
		}
		ids = append(ids, m["id"].(string))
	}
	want := "alloy ash ballad cedar coral echo fable marin nova onyx sage shimmer verse"
	if body["object"] != "list" || strings.Join(ids, " ") != want {
		t.Fatalf("voices %s, want ids %s in order", r.Body, want)
	}
	matchJSON(t, []byte(mustJSONText(t, rows[0])), `{"id":"alloy","model":"gw-voice-speak","name":"Alloy","gender":"neutral","description":"Balanced and even","languages":["multilingual"],"entitlement":"paid_cleared"}`)
	etag := r.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) < 10 || r.Header.Get("Cache-Control") != "private, no-cache" || r.Header.Get("Vary") != "Authorization" {
		t.Errorf("headers %v", r.Header)
	}
	// 304 with the same ETag, no body; the alias path answers the same.
	r2 := e.do(t, http.MethodGet, "/audio/voices", "", append(bearer(key), "If-None-Match", etag)...)
	if r2.Status != 304 || len(r2.Body) != 0 || r2.Header.Get("ETag") != etag {
		t.Errorf("If-None-Match: %d %q %v", r2.Status, r2.Body, r2.Header)
	}
	if r3 := get(key, "If-None-Match", `"stale"`); r3.Status != 200 {
		t.Errorf("stale ETag: %d", r3.Status)
	}

	// Filtered by the key's model list: two keys of one account differ.
	hdOnly, _ := e.createKey(t, "chooser", map[string]any{"name": "hd", "models": []string{"gw-voice-speak-hd"}})
	if r := get(hdOnly); r.Status != 200 || !strings.Contains(string(r.Body), `"data":[]`) || r.Header.Get("ETag") == etag {
		t.Errorf("hd-only key: %d %s", r.Status, r.Body)
	}
	// Any valid key: a free account (entitlement premium_locked on every
	// row), and one with speech switched off.
	free := e.account(t, "free-chooser", map[string]any{"plan": "free", "abilities": []string{"search"}})
	r = get(free)
	if r.Status != 200 || strings.Count(string(r.Body), `"premium_locked"`) != 13 || strings.Contains(string(r.Body), "paid_cleared") {
		t.Errorf("free key: %d %s", r.Status, r.Body)
	}
	// 401: no bearer (x-api-key is not read), or a key not accepted.
	for _, h := range [][]string{nil, apiKey(key), bearer("sk-unknown")} {
		r := e.do(t, http.MethodGet, "/v1/audio/voices", "", h...)
		expectFamilyError(t, r, 401, `{"error":{"message":"Unauthorized"}}`, famVoices)
	}
	if l := e.ledger(t, "chooser"); len(l) != 0 {
		t.Errorf("voice list billed: %v", l)
	}
}
