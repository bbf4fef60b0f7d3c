package integration

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// The tools server's transcribe and speak call the audio routes in-process
// with the caller's key: the same upstream request, the same charge in the
// ledger as a direct call, nothing added by the tools server, and the
// route's refusals as tool results with the tool error object.
func TestMCPToolsAudio(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "toolvoice", map[string]any{"balance_usd": "1.00"})
	ctx := context.Background()
	s := mcpSession(t, e.BaseURL+"/mcp-tools/", key)

	// transcribe: the base64 file goes up as the route's multipart upload,
	// its format read from the bytes (the given name is kept only as a
	// hint), billed like the direct call (10 s minimum at gw-voice's price).
	wav := fixture(t, "tone.wav")
	e.OA.Push(fake.Script{Text: "a tone"})
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "transcribe", Arguments: map[string]any{
		"audio_base64": base64.StdEncoding.EncodeToString(wav), "filename": "clip.m4a", "language": "en"}})
	if err != nil || res.IsError {
		t.Fatalf("transcribe: %v %+v", err, res)
	}
	wantCost := abilityCost(voicePrice, 10)
	if got := structured(t, res); got["text"] != "a tone" || got["billed_seconds"] != float64(10) || got["cost_usd"] != wantCost.String() || len(got) != 3 {
		t.Fatalf("transcribe result %v", got)
	}
	req := e.OA.Requests()[0]
	f := req.Form()
	if req.Path != "/v1/audio/transcriptions" || f == nil || f.File["file"][0].Filename != "audio.wav" || f.Value["language"][0] != "en" || f.File["file"][0].Size != int64(len(wav)) {
		t.Fatalf("upstream %s %+v", req.Path, f)
	}
	entries := e.ledger(t, "toolvoice")
	if len(entries) != 1 || entries[0].Cost != wantCost.String() || entries[0].Units != 10 || entries[0].Unit != "audio_second" || entries[0].Model != "gpt-4o-transcribe" {
		t.Fatalf("ledger after transcribe %+v", entries)
	}

	// The same clip sent directly costs the same.
	e.OA.Push(fake.Script{Text: "a tone"})
	direct := e.upload(t, key, "clip.m4a", wav)
	if direct.Status != http.StatusOK || direct.Header.Get("X-Gw-Cost-Usd") != wantCost.String() {
		t.Fatalf("direct transcription %d %s %v", direct.Status, direct.Body, direct.Header)
	}

	// speak: an audio content block with the route's bytes, its MIME type,
	// and the receipt's fields; billed per character like the direct call.
	audio := []byte("RIFF-not-really-wav-but-bytes")
	e.OA.Push(fake.Script{Audio: audio})
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "speak", Arguments: map[string]any{"text": "Hello, wörld", "format": "wav", "voice": "coral"}})
	if err != nil || res.IsError {
		t.Fatalf("speak: %v %+v", err, res)
	}
	speakCost := abilityCost(speakPrice, 12)
	got := structured(t, res)
	if got["voice"] != "coral" || got["format"] != "wav" || got["mime_type"] != "audio/wav" || got["bytes"] != float64(len(audio)) ||
		got["billed_chars"] != float64(12) || got["cost_usd"] != speakCost.String() {
		t.Fatalf("speak result %v", got)
	}
	var block *sdk.AudioContent
	for _, c := range res.Content {
		if a, ok := c.(*sdk.AudioContent); ok {
			block = a
		}
	}
	if block == nil || string(block.Data) != string(audio) || block.MIMEType != "audio/wav" {
		t.Fatalf("speak content %+v", res.Content)
	}
	sent := e.OA.Requests()[len(e.OA.Requests())-1].JSON()
	if sent["input"] != "Hello, wörld" || sent["voice"] != "coral" || sent["response_format"] != "wav" || sent["model"] != "gpt-4o-mini-tts" {
		t.Fatalf("upstream speech %v", sent)
	}

	// Three charges, each the route's own: nothing added by the tools server.
	var sum pricing.Money
	entries = e.ledger(t, "toolvoice")
	for _, le := range entries {
		c, err := pricing.ParseUSD(le.Cost)
		if err != nil {
			t.Fatal(err)
		}
		sum += c
	}
	if want := wantCost + wantCost + speakCost; len(entries) != 3 || sum != want {
		t.Fatalf("ledger %+v sums to %s, want 3 entries of %s", entries, sum, want)
	}

	// The route's refusals come back as tool results: a voice the speech
	// model does not have, and a file that only looks like audio.
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "speak", Arguments: map[string]any{"text": "hi", "voice": "nobody"}})
	if err != nil || !res.IsError {
		t.Fatalf("speak with an unknown voice: %v %+v", err, res)
	}
	if obj := structured(t, res); obj["error"] != "invalid_request" || obj["capability"] != "speech" || obj["retryable"] != false {
		t.Fatalf("unknown voice error object %v", obj)
	}
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "transcribe", Arguments: map[string]any{
		"audio_base64": base64.StdEncoding.EncodeToString(fixture(t, "red.png")), "filename": "clip.mp3"}})
	if err != nil || !res.IsError {
		t.Fatalf("transcribe of a png: %v %+v", err, res)
	}
	if obj := structured(t, res); obj["error"] != "invalid_request" || obj["capability"] != "transcription" || obj["retryable"] != false ||
		!strings.Contains(obj["message"].(string), "not audio in a supported format") {
		t.Fatalf("png error object %v", obj)
	}
	if n := len(e.ledger(t, "toolvoice")); n != 3 {
		t.Fatalf("refusals were charged: %d entries", n)
	}
}
