package audio

import (
	"bytes"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upload"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func testCatalog(t *testing.T, speak, hd *catalog.Ability) *catalog.Catalog {
	t.Helper()
	abs := []catalog.Ability{}
	for _, a := range []*catalog.Ability{speak, hd} {
		if a != nil {
			a.Provider = "p"
			a.Model = "m-" + a.Alias
			abs = append(abs, *a)
		}
	}
	cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, BaseURL: "http://127.0.0.1:1/v1"}}, nil, abs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func voices(ids ...string) []catalog.Voice {
	var out []catalog.Voice
	for _, id := range ids {
		out = append(out, catalog.Voice{ID: id})
	}
	return out
}

// TestNewVoiceCatalogue: the hd subset rules and the config mistakes.
func TestNewVoiceCatalogue(t *testing.T) {
	speak := func(ids ...string) *catalog.Ability {
		return &catalog.Ability{Alias: AliasSpeak, Voices: voices(ids...)}
	}
	h, err := New(nil, testCatalog(t, speak("verse", "alloy", "ballad", "sage"), &catalog.Ability{Alias: AliasSpeakHD}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range h.voices {
		ids = append(ids, v.ID)
		if v.Name != v.ID || v.Languages == nil {
			t.Errorf("row %+v: want the id as name and an empty language list", v)
		}
	}
	if strings.Join(ids, " ") != "alloy ballad sage verse" {
		t.Errorf("rows %v, want sorted by id", ids)
	}
	// By default hd takes those of HDVoices that are declared.
	if !h.allowed[AliasSpeakHD]["alloy"] || !h.allowed[AliasSpeakHD]["sage"] || h.allowed[AliasSpeakHD]["ballad"] || len(h.allowed[AliasSpeakHD]) != 2 {
		t.Errorf("hd voices %v", h.allowed[AliasSpeakHD])
	}
	if h.cfg.AccurateUpTo != DefaultAccurateUpTo || h.cfg.VerboseModel != DefaultVerboseModel {
		t.Errorf("defaults %+v", h.cfg)
	}
	for _, tc := range []struct {
		name      string
		speak, hd *catalog.Ability
		want      string
	}{
		{"hd voice rows", speak("alloy"), &catalog.Ability{Alias: AliasSpeakHD, Voices: voices("alloy")}, "no voices of its own"},
		{"hd subset outside the nine", speak("alloy", "ballad"), &catalog.Ability{Alias: AliasSpeakHD, VoiceSubset: []string{"ballad"}}, "not one tts-1-hd speaks"},
		{"hd subset not declared", speak("alloy"), &catalog.Ability{Alias: AliasSpeakHD, VoiceSubset: []string{"sage"}}, "not a gw-voice-speak voice"},
		{"subset on speak", &catalog.Ability{Alias: AliasSpeak, VoiceSubset: []string{"alloy"}}, nil, "declare voice rows"},
		{"duplicate", speak("alloy", "alloy"), nil, "declared twice"},
		{"no id", speak(""), nil, "without an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(nil, testCatalog(t, tc.speak, tc.hd), Config{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRoute: gw-voice picks by clip length; the pinned aliases stay.
func TestRoute(t *testing.T) {
	h := &Handler{cfg: Config{AccurateUpTo: time.Minute}}
	all := func(string) bool { return true }
	for _, tc := range []struct {
		alias   string
		seconds float64
		have    func(string) bool
		want    string
	}{
		{AliasVoice, 60, all, AliasVoiceAccurate},
		{AliasVoice, 60.001, all, AliasVoiceFast},
		{AliasVoiceFast, 1, all, AliasVoiceFast},
		{AliasVoiceAccurate, 3600, all, AliasVoiceAccurate},
		{AliasVoice, 1, func(a string) bool { return a != AliasVoiceAccurate }, AliasVoice},
	} {
		if got := h.route(tc.alias, tc.seconds, tc.have); got != tc.want {
			t.Errorf("route(%s, %g) = %s, want %s", tc.alias, tc.seconds, got, tc.want)
		}
	}
}

// form builds an upload the way a client does and reads it back.
func form(t testing.TB, file []byte, fields ...string) (*upload.Form, error) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "x.wav")
		fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	r := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", &b)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return upload.Read(r, upload.Limits{MaxFileBytes: MaxFileBytes, MaxFiles: 1})
}

func paramOf(err error) string {
	var e *gwerr.Error
	if errors.As(err, &e) {
		return e.Param
	}
	return "<not a gwerr>"
}

// TestParseTranscription: the field checks of the transcription table.
func TestParseTranscription(t *testing.T) {
	wav := []byte("RIFF")
	for _, tc := range []struct {
		name   string
		file   []byte
		fields []string
		param  string // "" when accepted
	}{
		{"minimal", wav, nil, ""},
		{"no file", nil, []string{"model", "gw-voice"}, "file"},
		{"stream true", wav, []string{"stream", "true"}, "stream"},
		{"stream false", wav, []string{"stream", "false"}, ""},
		{"stream odd", wav, []string{"stream", "maybe"}, "stream"},
		{"srt", wav, []string{"response_format", "srt"}, "response_format"},
		{"vtt", wav, []string{"response_format", "vtt"}, "response_format"},
		{"verbose", wav, []string{"response_format", "verbose_json", "timestamp_granularities[]", "word"}, ""},
		{"bare granularity", wav, []string{"timestamp_granularities", "segment"}, ""},
		{"bad granularity", wav, []string{"timestamp_granularities[]", "line"}, "timestamp_granularities[]"},
		{"language", wav, []string{"language", "de"}, ""},
		{"bad language", wav, []string{"language", "deu"}, "language"},
		{"temperature", wav, []string{"temperature", "0.5"}, ""},
		{"temperature too hot", wav, []string{"temperature", "1.5"}, "temperature"},
		{"temperature NaN", wav, []string{"temperature", "NaN"}, "temperature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := form(t, tc.file, tc.fields...)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := parseTranscription(f)
			if tc.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || paramOf(err) != tc.param {
				t.Fatalf("err %v (param %q), want param %q", err, paramOf(err), tc.param)
			}
			_ = tr
		})
	}
	f, _ := form(t, wav, "model", "nope", "prompt", strings.Repeat("ü", 2001), "response_format", "json", "timestamp_granularities[]", "word")
	tr, err := parseTranscription(f)
	if err != nil || tr.alias != AliasVoice || len([]rune(tr.prompt)) != MaxPromptChars || tr.words {
		t.Fatalf("%+v %v: want gw-voice, prompt cut to %d, no words on json", tr, err, MaxPromptChars)
	}
}

// TestUploadErrors maps the upload package's refusals.
func TestUploadErrors(t *testing.T) {
	e := gwerr.As(uploadError(&upload.TooLargeError{Field: "file", Size: 9 << 20, Limit: MaxFileBytes}))
	if e.Kind != gwerr.TooLarge || e.Code != gwerr.CodeFileTooLarge || e.Message != "the file is 9.0 MiB, over the limit of 8.0 MiB" {
		t.Errorf("too large: %+v", e)
	}
	if p := paramOf(uploadError(upload.ErrNotMultipart)); p != "file" {
		t.Errorf("not multipart: param %q", p)
	}
	if p := paramOf(uploadError(&upload.FieldError{Field: "prompt", Reason: "long"})); p != "prompt" {
		t.Errorf("field: param %q", p)
	}
	if p := paramOf(uploadError(&upload.TooManyFilesError{Limit: 1})); p != "file" {
		t.Errorf("two files: param %q", p)
	}
}

// TestUpstreamBody: the three parts frame one valid multipart body
// holding the very bytes of the upload.
func TestUpstreamBody(t *testing.T) {
	data := bytes.Repeat([]byte("\r\n--x"), 100)
	tr := &transcription{format: formatVerbose, words: true, language: "en", prompt: "Caddy", temperature: "0", file: upload.File{Data: data},
		info: Info{Format: FormatMP4}}
	parts, ct := tr.upstreamBody("whisper-1")
	if len(parts) != 3 || &parts[1][0] != &data[0] {
		t.Fatalf("want the file itself as the middle part")
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatal(err)
	}
	f, err := multipart.NewReader(bytes.NewReader(bytes.Join(parts, nil)), params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	fh := f.File["file"]
	if len(fh) != 1 || fh[0].Filename != "audio.m4a" {
		t.Fatalf("file parts %+v", fh)
	}
	rc, _ := fh[0].Open()
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, data) {
		t.Errorf("file bytes differ")
	}
	want := map[string]string{"model": "whisper-1", "response_format": "verbose_json", "timestamp_granularities[]": "segment,word",
		"language": "en", "prompt": "Caddy", "temperature": "0"}
	for k, v := range want {
		if got := strings.Join(f.Value[k], ","); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// TestAnswer: the client's answer built from the provider's JSON.
func TestAnswer(t *testing.T) {
	tr := &transcription{format: formatVerbose, info: Info{Duration: 2.5}}
	out, err := tr.answer([]byte(`{"text":"hi","words":[{"word":"hi","start":0,"end":1}]}`))
	if err != nil || string(out) != `{"text":"hi","duration":2.5,"segments":[{"end":2.5,"id":0,"start":0,"text":"hi"}]}` {
		t.Errorf("verbose without segments: %s %v", out, err)
	}
	tr.format = formatText
	if out, _ := tr.answer([]byte(`{"text":"hi"}`)); string(out) != "hi\n" {
		t.Errorf("text: %q", out)
	}
	for _, bad := range []string{`{"text":5}`, `not json`, `{"text":"a","text":"b"}`, `{}`} {
		if _, err := tr.answer([]byte(bad)); gwerr.As(err).Code != gwerr.CodeCapabilityUnavailable {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestReportedSeconds: the audio length read from the provider's answer,
// in the shapes it answers (verbose_json's duration, a whisper-style
// usage of type duration, a gpt-4o-transcribe usage of tokens), and the
// values not taken.
func TestReportedSeconds(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want float64
		ok   bool
	}{
		{`{"text":"a","duration":42.5,"usage":{"type":"duration","seconds":43}}`, 43, true},
		{`{"text":"a","duration":42.5}`, 42.5, true},
		{`{"text":"a","usage":{"type":"duration","seconds":7.25}}`, 7.25, true},
		{`{"text":"a","usage":{"type":"tokens","input_tokens":14,"input_token_details":{"text_tokens":0,"audio_tokens":14},"output_tokens":45,"total_tokens":59}}`, 0, false},
		{`{"text":"a","usage":{"type":"tokens","seconds":99}}`, 0, false},
		{`{"text":"a","duration":"42"}`, 0, false},
		{`{"text":"a","duration":-1}`, 0, false},
		{`{"text":"a","duration":1e300}`, 0, false},
		{`{"text":"a","duration":0}`, 0, true},
		{`{"text":"a"}`, 0, false},
	} {
		got, ok := reportedSeconds([]byte(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %g %v, want %g %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

// TestParseSpeech: the speech tables' field checks.
func TestParseSpeech(t *testing.T) {
	h, err := New(nil, testCatalog(t, &catalog.Ability{Alias: AliasSpeak, Voices: voices("alloy", "ballad")}, &catalog.Ability{Alias: AliasSpeakHD}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := &pipeline.Call{}
	for _, tc := range []struct{ body, param string }{
		{`{"input":"hi","voice":"alloy"}`, ""},
		{`{"input":"hi","voice":"ballad","model":"gw-voice-speak","speed":0.25,"instructions":"x","stream_format":"audio","response_format":"pcm"}`, ""},
		{`{"input":"hi","voice":"alloy","model":"gw-voice-speak-hd","instructions":""}`, ""},
		{`[]`, "body"},
		{`{"input":"hi","voice":"alloy","model":"gw-voice"}`, "model"},
		{`{"input":["hi"],"voice":"alloy"}`, "input"},
		{`{"input":"` + strings.Repeat("日", MaxInputChars+1) + `","voice":"alloy"}`, "input"},
		{`{"input":"hi","voice":"ballad","model":"gw-voice-speak-hd"}`, "voice"},
		{`{"input":"hi","voice":"alloy","response_format":"MP3"}`, "response_format"},
		{`{"input":"hi","voice":"alloy","speed":0.249}`, "speed"},
		{`{"input":"hi","voice":"alloy","speed":null}`, "speed"},
		{`{"input":"hi","voice":"alloy","instructions":5}`, "instructions"},
		{`{"input":"hi","voice":"alloy","model":"gw-voice-speak-hd","instructions":"calm"}`, "instructions"},
		{`{"input":"hi","voice":"alloy","stream_format":"sse"}`, "stream_format"},
	} {
		s, err := h.parseSpeech(c, []byte(tc.body))
		if tc.param == "" {
			if err != nil || s == nil {
				t.Errorf("%.60s: refused %v", tc.body, err)
			}
			continue
		}
		if paramOf(err) != tc.param {
			t.Errorf("%.60s: %v (param %q), want param %q", tc.body, err, paramOf(err), tc.param)
		}
	}
}

// TestSpeechSeconds: the audio budget's estimate of speech.
func TestSpeechSeconds(t *testing.T) {
	for _, tc := range []struct {
		chars int
		speed float64
		want  int64
	}{{1, 1, 1}, {15, 1, 1}, {16, 1, 2}, {4096, 1, 274}, {4096, 0.25, 1093}, {4096, 4, 69}, {0, 1, 1}, {30, 0, 2}} {
		if got := speechSeconds(tc.chars, tc.speed); got != tc.want {
			t.Errorf("speechSeconds(%d, %g) = %d, want %d", tc.chars, tc.speed, got, tc.want)
		}
	}
	if audioSeconds(0.2) != 1 || audioSeconds(12.0001) != 13 || audioSeconds(35000) != 35000 {
		t.Errorf("audioSeconds")
	}
}

func TestETagMatch(t *testing.T) {
	const tag = `"abc"`
	for _, tc := range []struct {
		h    []string
		want bool
	}{{nil, false}, {[]string{`"abc"`}, true}, {[]string{`W/"abc"`}, true}, {[]string{`"x", "abc"`}, true}, {[]string{"*"}, true}, {[]string{`"abd"`}, false}} {
		if got := etagMatch(tc.h, tag); got != tc.want {
			t.Errorf("etagMatch(%q) = %v", tc.h, got)
		}
	}
}

// TestProbeEdges: truncated and hand-made files of each container.
func TestProbeEdges(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error // ErrNotAudio, or nil for an *UnreadableError
	}{
		{"wav header only", read("tone.wav")[:12], nil},
		{"flac cut", read("tone.flac")[:20], nil},
		{"ogg first page only", read("tone.opus")[:200], nil},
		{"ogg flac", append([]byte("OggS\x00\x02"+strings.Repeat("\x00", 20)+"\x01\x20"), []byte("\x7fFLAC"+strings.Repeat("\x00", 27))...), ErrNotAudio},
		{"matroska not webm", []byte("\x1a\x45\xdf\xa3\x88\x42\x82\x88matroska"), ErrNotAudio},
		{"webm header only", read("tone.webm")[:40], nil},
		{"mp4 without moov", []byte("\x00\x00\x00\x10ftypheic\x00\x00\x00\x00"), ErrNotAudio},
		{"empty", nil, ErrNotAudio},
		{"id3 only", []byte("ID3\x04\x00\x00\x00\x00\x00\x05hello"), ErrNotAudio},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Probe(tc.b)
			var ue *UnreadableError
			switch {
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("err %v, want %v", err, tc.want)
			case tc.want == nil && !errors.As(err, &ue):
				t.Errorf("err %v, want an *UnreadableError", err)
			}
		})
	}
	// A WAV claiming more bytes than it holds counts what it holds.
	wav := read("tone.wav")
	cut := wav[:len(wav)-4000]
	info, err := Probe(cut)
	if err != nil || math.Abs(info.Duration-1.0) > 0.001 {
		t.Errorf("cut wav: %+v %v, want 1.0 s", info, err)
	}
}

// fixtures are every file of testdata, the fuzz seeds.
func fixtures(f *testing.F) [][]byte {
	names, _ := filepath.Glob("testdata/*")
	var out [][]byte
	for _, n := range names {
		if st, err := os.Stat(n); filepath.Base(n) == "README" || err == nil && st.IsDir() {
			continue // the fuzz corpus is read by FuzzProbe itself
		}
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzProbe: the sniffer and every duration reader take any bytes
// without panicking, whatever they accept has a believable length, and no
// header brings a compressed file's length below its size-based floor:
// an MP3's bytes (after its ID3v2 tag) at 320 kbit/s, an Ogg's at
// 512 kbit/s, and each format's own floor of its reader.
func FuzzProbe(f *testing.F) {
	for _, b := range fixtures(f) {
		f.Add(b)
		f.Add(b[:len(b)/2])
		// Headers forged: every fourth byte of the first 64 zeroed, and
		// set to all ones.
		for _, v := range []byte{0, 0xFF} {
			forged := bytes.Clone(b)
			for i := 8; i < min(64, len(forged)); i += 4 {
				forged[i] = v
			}
			f.Add(forged)
		}
	}
	// Headers cut short, which each reader is given alone.
	for _, b := range []string{"OggS", "OggS\x00\x02", "\x00\x00\x00\x08moov", "\x00\x00\x00\x10ftypisom\x00\x00\x00\x00\x00\x00\x00\x08moof",
		"\x1a\x45\xdf\xa3\x84\x42\x82\x84webm\x18\x53\x80\x67\x01"} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Probe(b)
		if err == nil && (info.Format == "" || !(info.Duration > 0 && info.Duration <= MaxDuration)) {
			t.Fatalf("accepted %+v", info)
		}
		if err != nil && !errors.Is(err, ErrNotAudio) {
			var ue *UnreadableError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T %v", err, err)
			}
		}
		if err == nil {
			// The floors set from the size alone.
			var floor float64
			switch info.Format {
			case FormatMP3:
				floor = float64(len(skipID3v2(b))) / MP3HighestRate
			case FormatOgg:
				floor = float64(len(b)) / LossyHighestRate
			}
			// And each format's own, from the reader's count of its
			// audio bytes.
			r, rerr := readers[info.Format](b)
			if rerr != nil {
				t.Fatalf("Probe took what its reader refused: %v", rerr)
			}
			if info.Duration < max(floor, r.least) || info.Duration < r.length {
				t.Fatalf("%s of %d bytes read as %g s, below its floor (%g s, %g s) or its length %g s",
					info.Format, len(b), info.Duration, floor, r.least, r.length)
			}
		}
		// Each reader alone, whatever the sniffer says.
		for _, read := range readers {
			_, _ = read(b)
		}
	})
}

// readers are the length readers of the formats.
var readers = map[Format]func([]byte) (reading, error){FormatWAV: wavRead, FormatMP3: mp3Read, FormatFLAC: flacRead,
	FormatOgg: oggRead, FormatWebM: webmRead, FormatMP4: mp4Read}

// FuzzTranscriptionForm: any multipart body is read, checked and probed
// without panicking, every refusal naming its field.
func FuzzTranscriptionForm(f *testing.F) {
	const boundary = "fuzzboundary"
	for _, b := range fixtures(f)[:3] {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.SetBoundary(boundary)
		fw, _ := mw.CreateFormFile("file", "a.bin")
		fw.Write(b[:min(len(b), 2048)])
		mw.WriteField("response_format", "verbose_json")
		mw.WriteField("timestamp_granularities[]", "word")
		mw.Close()
		f.Add(buf.Bytes())
	}
	f.Add([]byte("--fuzzboundary\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\ntrue\r\n--fuzzboundary--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/audio/transcriptions", bytes.NewReader(body))
		r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		form, err := upload.Read(r, upload.Limits{MaxFileBytes: 1 << 16, MaxFiles: 1})
		if err != nil {
			if paramOf(uploadError(err)) == "" {
				t.Fatalf("upload refusal without a param: %v", err)
			}
			return
		}
		tr, err := parseTranscription(form)
		if err != nil {
			if paramOf(err) == "" {
				t.Fatalf("refusal without a param: %v", err)
			}
			return
		}
		if info, err := Probe(tr.file.Data); err == nil {
			tr.info = info
			parts, _ := tr.upstreamBody("m")
			if len(parts) != 3 {
				t.Fatal("parts")
			}
		}
	})
}

// FuzzParseSpeech: any body is checked without panicking; a refusal
// names its field.
func FuzzParseSpeech(f *testing.F) {
	h := &Handler{allowed: map[string]map[string]bool{AliasSpeak: {"alloy": true}, AliasSpeakHD: {"alloy": true}}}
	for _, s := range []string{`{"input":"hi","voice":"alloy"}`, `{"input":"hi","voice":"alloy","speed":0.5,"model":"gw-voice-speak-hd","instructions":""}`, `[]`, `{"input":"\u00e9"}`,
		`{"input":"hi","voice":"alloy","speed":0.3,"instructions":"calm \ud83d\ude42"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := h.parseSpeech(&pipeline.Call{}, b)
		if err != nil {
			if paramOf(err) == "" {
				t.Fatalf("refusal without a param: %v", err)
			}
			return
		}
		if s.chars < 1 || s.chars > MaxInputChars || (s.speedSet && !(s.speed >= MinSpeed && s.speed <= MaxSpeed)) ||
			s.instructionsChars != pricing.CharCount(s.instructions) || s.instructionsChars > MaxInstructionsChars {
			t.Fatalf("accepted %+v", s)
		}
	})
}

// TestCRCTables: the tables give the catalogued check values of their
// CRCs over "123456789" (CRC-8/SMBUS, CRC-16/UMTS, and Ogg's CRC-32:
// CRC-32/CKSUM without its final inversion).
func TestCRCTables(t *testing.T) {
	data := []byte("123456789")
	var c8 uint8
	var c16 uint16
	var c32 uint32
	for _, b := range data {
		c8 = flacCRC8Table[c8^b]
		c16 = c16<<8 ^ flacCRC16Table[byte(c16>>8)^b]
		c32 = c32<<8 ^ oggCRCTable[byte(c32>>24)^b]
	}
	if c8 != 0xF4 || c16 != 0xFEE8 || c32 != 0x89A1897F {
		t.Errorf("CRC-8 %#x, CRC-16 %#x, CRC-32 %#x; want 0xf4, 0xfee8, 0x89a1897f", c8, c16, c32)
	}
}
