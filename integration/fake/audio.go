package fake

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
)

// DefaultSpeechAudio is what the speech endpoint answers when the script
// gives no Audio: 3 KiB of bytes that start like an MP3 frame.
var DefaultSpeechAudio = func() []byte {
	b := make([]byte, 3<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	copy(b, []byte{0xFF, 0xFB, 0x90, 0x64})
	return b
}()

// transcriptionExtensions are the file name extensions the real API
// accepts (it reads the format from the name).
var transcriptionExtensions = map[string]bool{"flac": true, "m4a": true, "mp3": true, "mp4": true, "mpeg": true,
	"mpga": true, "oga": true, "ogg": true, "wav": true, "webm": true}

// jsonOnlyTranscription are the models that answer only json and text.
func jsonOnlyTranscription(model string) bool {
	return strings.HasPrefix(model, "gpt-4o") || strings.HasPrefix(model, "gpt-transcribe")
}

// Form parses a recorded multipart/form-data request (nil when it is not one).
func (r Request) Form() *multipart.Form {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil
	}
	f, err := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"]).ReadForm(32 << 20)
	if err != nil {
		return nil
	}
	return f
}

// transcription answers POST /v1/audio/transcriptions.
func (u *Upstream) transcription(w http.ResponseWriter, r *http.Request, body []byte) {
	req := Request{Header: r.Header, Body: body}
	form := req.Form()
	if form == nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil, "Could not parse multipart form")
		return
	}
	value := func(k string) string {
		if v := form.Value[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	model := value("model")
	if model == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("model"), str("missing_required_parameter"), "Missing required parameter: 'model'.")
		return
	}
	files := form.File["file"]
	if len(files) == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("file"), str("missing_required_parameter"), "Missing required parameter: 'file'.")
		return
	}
	if ext := strings.TrimPrefix(path.Ext(files[0].Filename), "."); !transcriptionExtensions[ext] {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("file"), str("invalid_value"),
			"Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']")
		return
	}
	format := value("response_format")
	if format == "" {
		format = "json"
	}
	grans := form.Value["timestamp_granularities[]"]
	if jsonOnlyTranscription(model) && format != "json" && format != "text" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("response_format"), str("unsupported_value"),
			fmt.Sprintf("response_format '%s' is not compatible with model '%s'. Use 'json' or 'text' instead.", format, model))
		return
	}
	if len(grans) > 0 && format != "verbose_json" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("timestamp_granularities"), nil,
			"timestamp_granularities is only supported with response_format=verbose_json")
		return
	}
	s := u.next(r)
	u.prelude(w, r, s, false)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}
	if s.MidStreamError {
		// Half an answer, then the connection is cut.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "64")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"text":"`)
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	if s.AudioSeconds == 0 {
		if f, err := files[0].Open(); err == nil {
			audio, _ := io.ReadAll(f)
			f.Close()
			s.AudioSeconds = heardSeconds(audio)
		}
	}
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, s.Text)
	case "verbose_json":
		segments, words := false, false
		for _, g := range grans {
			segments = segments || g == "segment"
			words = words || g == "word"
		}
		if len(grans) == 0 {
			segments = true
		}
		v := o("task", "transcribe", "language", "english", "duration", s.AudioSeconds, "text", s.Text)
		if segments {
			v = v.with("segments", []any{o("id", 0, "seek", 0, "start", 0.0, "end", s.AudioSeconds, "text", " "+s.Text,
				"tokens", []int{50364, 2425}, "temperature", 0.0, "avg_logprob", -0.25, "compression_ratio", 0.9, "no_speech_prob", 0.01)})
		}
		if words {
			ws := strings.Fields(s.Text)
			list := make([]any, len(ws))
			step := s.AudioSeconds / float64(max(len(ws), 1))
			for i, word := range ws {
				list[i] = o("word", word, "start", float64(i)*step, "end", float64(i+1)*step)
			}
			v = v.with("words", list)
		}
		v = v.with("usage", o("type", "duration", "seconds", int(s.AudioSeconds+0.999)))
		writeJSON(w, http.StatusOK, v)
	default:
		usage := any(o("type", "duration", "seconds", int(s.AudioSeconds+0.999)))
		if jsonOnlyTranscription(model) {
			usage = o("type", "tokens", "input_tokens", s.Usage.Input, "input_token_details", o("text_tokens", 0, "audio_tokens", s.Usage.Input),
				"output_tokens", s.Usage.Output, "total_tokens", s.Usage.Input+s.Usage.Output)
		}
		writeJSON(w, http.StatusOK, o("text", s.Text, "usage", usage))
	}
}

// heardSeconds is the length a decoder plays of an uploaded PCM WAV: the
// bytes of its data chunks over sample rate × channels × sample bytes,
// its byte rate field ignored as decoders ignore it. Other formats give 0
// (the script's AudioSeconds is reported for them).
func heardSeconds(b []byte) float64 {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return 0
	}
	var frame, rate, data int
	for pos := 12; pos+8 <= len(b); {
		id, size := string(b[pos:pos+4]), int(binary.LittleEndian.Uint32(b[pos+4:pos+8]))
		body := b[pos+8:]
		switch {
		case id == "fmt " && len(body) >= 16:
			channels, bits := int(binary.LittleEndian.Uint16(body[2:4])), int(binary.LittleEndian.Uint16(body[14:16]))
			rate, frame = int(binary.LittleEndian.Uint32(body[4:8])), channels*((bits+7)/8)
		case id == "data":
			data += min(size, len(body))
		}
		pos += 8 + size + size&1
	}
	if rate == 0 || frame == 0 {
		return 0
	}
	return float64(data) / float64(rate*frame)
}

// speechFormats are the real API's response formats.
var speechFormats = map[string]string{"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac",
	"wav": "audio/wav", "pcm": "audio/pcm"}

// speech answers POST /v1/audio/speech with a binary stream.
func (u *Upstream) speech(w http.ResponseWriter, r *http.Request, body []byte) {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil, "We could not parse the JSON body of your request.")
		return
	}
	model, _ := req["model"].(string)
	for _, k := range []string{"model", "input", "voice"} {
		if v, ok := req[k].(string); !ok || v == "" {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str(k), str("missing_required_parameter"),
				fmt.Sprintf("Missing required parameter: '%s'.", k))
			return
		}
	}
	format, _ := req["response_format"].(string)
	if format == "" {
		format = "mp3"
	}
	ctype, ok := speechFormats[format]
	if !ok {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("response_format"), str("invalid_value"),
			fmt.Sprintf("Invalid value: '%s'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'.", format))
		return
	}
	if _, has := req["instructions"]; has && strings.HasPrefix(model, "tts-1") {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("instructions"), nil,
			"instructions are not supported for tts-1 and tts-1-hd")
		return
	}
	s := u.next(r)
	u.prelude(w, r, s, true)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if s.EmptyAudio {
		// Headers, then nothing: with a Gate, nothing until it opens.
		if s.Gate != nil {
			u.wait(r, s.Gate, 0)
		}
		return
	}
	audio := s.Audio
	if len(audio) == 0 {
		audio = DefaultSpeechAudio
	}
	n := s.Chunks
	if n <= 0 {
		n = 3
	}
	size := (len(audio) + n - 1) / n
	for i := 0; len(audio) > 0; i++ {
		k := min(size, len(audio))
		if _, err := w.Write(audio[:k]); err != nil || rc.Flush() != nil {
			return
		}
		audio = audio[k:]
		if i == 0 && len(audio) > 0 {
			if s.Gate != nil && !u.wait(r, s.Gate, 0) {
				panic(http.ErrAbortHandler)
			}
			if s.MidStreamError {
				panic(http.ErrAbortHandler)
			}
		}
	}
}
