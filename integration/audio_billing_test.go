package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A transcription is billed for the audio the provider hears: the file's
// own length, read so that no header can shrink it, or the provider's
// report of what it heard when that is longer. A file whose headers claim
// more than its bytes can hold is refused before anything is reserved.

// forgedByteRate is a WAV of seconds of 8 kHz 8-bit mono whose byte rate
// field says 100 times the truth: a reader that trusts it finds a
// hundredth of the audio.
func forgedByteRate(seconds int) []byte {
	b := wavOf(8000, seconds)
	binary.LittleEndian.PutUint32(b[28:], 8000*100)
	return b
}

// forgedXing is tone.mp3 (12.672 s, 8 kbit/s) with the frame count of its
// Xing/Info header multiplied: it claims far more than its 13 KB can hold.
func forgedXing(t *testing.T, times uint32) []byte {
	t.Helper()
	b := bytes.Clone(fixture(t, "tone.mp3"))
	i := bytes.Index(b, []byte("Info"))
	if i < 0 || binary.BigEndian.Uint32(b[i+4:i+8])&1 == 0 {
		t.Fatal("tone.mp3 has no Info frame count")
	}
	binary.BigEndian.PutUint32(b[i+8:], binary.BigEndian.Uint32(b[i+8:])*times)
	return b
}

func TestTranscriptionBilledForWhatIsHeard(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "hearer", nil)

	t.Run("forged byte rate is billed for its real length", func(t *testing.T) {
		// json on gw-voice: gpt-4o-transcribe reports tokens, so the
		// file's own length (120 s) is billed, not the 1.2 s its byte
		// rate claims.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "long", Usage: fake.Usage{Input: 900, Output: 3}})
		wav := forgedByteRate(120)
		r := e.upload(t, key, "clip.wav", wav)
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "hearer", r.Header, "gpt-4o-transcribe", "X-Gw-Billed-Seconds", 120, "audio_second", abilityCost(voicePrice, 120))
		if reqs := e.OA.Requests(); len(reqs) != 1 || reqs[0].Form().File["file"][0].Size != int64(len(wav)) {
			t.Fatalf("the provider did not get the whole file: %+v", reqs)
		}
		// verbose_json on whisper-1: the provider reports what it heard
		// (the fake measures the WAV as a decoder plays it), 120 s.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "long"})
		r = e.upload(t, key, "clip.wav", wav, "response_format", "verbose_json")
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if d := r.JSON(t)["duration"]; d != 120.0 {
			t.Errorf("verbose duration %v, want 120", d)
		}
		expectReceipt(t, e.gateway, "hearer", r.Header, "whisper-1", "X-Gw-Billed-Seconds", 120, "audio_second", abilityCost(voicePrice, 120))
	})

	t.Run("provider reports longer than the file", func(t *testing.T) {
		// tone.wav holds 1.5 s (10 billed, and reserved); the provider
		// says it heard 42.5 s: 43 are billed.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "more", AudioSeconds: 42.5})
		r := e.upload(t, key, "a.wav", fixture(t, "tone.wav"), "response_format", "verbose_json")
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "hearer", r.Header, "whisper-1", "X-Gw-Billed-Seconds", 43, "audio_second", abilityCost(voicePrice, 43))
		// A prepaid balance pays the 43 s in full, though 10 were reserved.
		prepaid := e.account(t, "prepaid-hearer", map[string]any{"balance_usd": "1.00"})
		e.OA.Push(fake.Script{Text: "more", AudioSeconds: 42.5})
		r = e.upload(t, prepaid, "a.wav", fixture(t, "tone.wav"), "response_format", "verbose_json")
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "prepaid-hearer", r.Header, "whisper-1", "X-Gw-Billed-Seconds", 43, "audio_second", abilityCost(voicePrice, 43))
		if got, want := balanceOf(t, e.gateway, "prepaid-hearer"), usdOf(t, "1.00")-abilityCost(voicePrice, 43); got != want {
			t.Errorf("balance %s, want %s", got, want)
		}
		if check := e.adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK).JSON(t); check["ok"] != true {
			t.Errorf("journal check: %v", check)
		}
		// Shorter than the file: the file's length stands.
		e.OA.Reset()
		e.OA.Push(fake.Script{Text: "less", AudioSeconds: 3})
		r = e.upload(t, key, "a.mp3", fixture(t, "tone.mp3"), "response_format", "verbose_json")
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "hearer", r.Header, "whisper-1", "X-Gw-Billed-Seconds", 13, "audio_second", abilityCost(voicePrice, 13))
	})

	t.Run("a claimed length the size cannot hold is refused", func(t *testing.T) {
		e.OA.Reset()
		before := len(e.ledger(t, "hearer"))
		slow := wavOf(8000, 20)
		binary.LittleEndian.PutUint32(slow[28:], 80) // claims 2,000 s
		for name, file := range map[string][]byte{"x.mp3": forgedXing(t, 1000), "x.wav": slow} {
			r := e.upload(t, key, name, file)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("%s: %d %s", name, r.Status, r.Body)
			}
			v := r.JSON(t)["error"].(map[string]any)
			if v["type"] != "invalid_request_error" || v["param"] != "file" || v["code"] != nil {
				t.Errorf("%s: %s", name, r.Body)
			}
			if r.Header.Get("X-Gw-Cost-Usd") != "" || r.Header.Get("X-Gw-Billed-Seconds") != "" {
				t.Errorf("%s: receipt headers on a refusal: %v", name, r.Header)
			}
		}
		if n := len(e.OA.Requests()); n != 0 {
			t.Errorf("%d refused files reached the provider", n)
		}
		if n := len(e.ledger(t, "hearer")); n != before {
			t.Errorf("refusals were billed: %d ledger entries, want %d", n, before)
		}
	})

	t.Run("the money check goes by the real length", func(t *testing.T) {
		// A prepaid balance that covers 60 s: a forged file of 120 s is
		// refused before the provider hears it (its byte rate would have
		// made it 10 s), and nothing is charged.
		e.OA.Reset()
		payer := e.account(t, "thrifty", map[string]any{"balance_usd": abilityCost(voicePrice, 60).String()})
		r := e.upload(t, payer, "clip.wav", forgedByteRate(120))
		if r.Status != http.StatusPaymentRequired {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if n := len(e.OA.Requests()); n != 0 {
			t.Errorf("the provider heard a call the balance could not pay")
		}
		if l := e.ledger(t, "thrifty"); len(l) != 0 {
			t.Errorf("refusal billed: %+v", l)
		}
		// The true 50 s fits.
		e.OA.Push(fake.Script{Text: "fits"})
		r = e.upload(t, payer, "clip.wav", forgedByteRate(50))
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "thrifty", r.Header, "gpt-4o-transcribe", "X-Gw-Billed-Seconds", 50, "audio_second", abilityCost(voicePrice, 50))
	})
}

// ffmpegTracks has ffmpeg mux one sound track per input (a lavfi source)
// with the output options args, and returns the file's bytes. Without
// ffmpeg the test is skipped, or fails under CI, which installs it.
func ffmpegTracks(t *testing.T, name string, inputs []string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no ffmpeg on this machine (apt-get install ffmpeg); CI runs this test")
		}
		t.Fatal("no ffmpeg on this machine, want Debian's ffmpeg package")
	}
	cmd := []string{"-v", "error"}
	for _, in := range inputs {
		cmd = append(cmd, "-f", "lavfi", "-i", in)
	}
	for i := range inputs {
		cmd = append(cmd, "-map", fmt.Sprintf("%d:a", i))
	}
	out := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command(bin, append(append(cmd, args...), "-y", out)...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// opusOptions encode sound track i as Opus quickly (120 ms packets, least
// effort).
func opusOptions(i int) []string {
	return []string{fmt.Sprintf("-c:a:%d", i), "libopus", fmt.Sprintf("-b:a:%d", i), "6k",
		fmt.Sprintf("-frame_duration:a:%d", i), "120", fmt.Sprintf("-compression_level:a:%d", i), "0"}
}

// silenceOf is an ffmpeg source of seconds of silence.
func silenceOf(seconds int) string {
	return fmt.Sprintf("anullsrc=r=48000:cl=mono,atrim=duration=%d", seconds)
}

// forgeBoxDurations sets the durations that an MP4's movie, track and
// media headers declare (mvhd, tkhd, mdhd) to seconds, as a forger would;
// its sample tables are left as they are.
func forgeBoxDurations(t *testing.T, b []byte, seconds uint32) []byte {
	t.Helper()
	out := bytes.Clone(b)
	var movieScale uint32
	forged := 0
	var walk func(d []byte)
	walk = func(d []byte) {
		for len(d) >= 8 {
			size := int(binary.BigEndian.Uint32(d))
			if size < 8 || size > len(d) {
				return
			}
			p := d[8:size]
			switch string(d[4:8]) {
			case "moov", "trak", "mdia":
				walk(p)
			case "mvhd", "mdhd":
				if p[0] != 0 {
					t.Fatalf("a version %d %s", p[0], d[4:8])
				}
				scale := binary.BigEndian.Uint32(p[12:])
				if string(d[4:8]) == "mvhd" {
					movieScale = scale
				}
				binary.BigEndian.PutUint32(p[16:], seconds*scale)
				forged++
			case "tkhd":
				binary.BigEndian.PutUint32(p[20:], seconds*movieScale)
				forged++
			}
			d = d[size:]
		}
	}
	walk(out)
	if forged != 3 {
		t.Fatalf("%d durations forged, want mvhd, tkhd and mdhd", forged)
	}
	return out
}

// TestTranscriptionBilledForEverySoundTrack: the two files of a report
// against the built gateway, each 1,200 s of sound that a reader of the
// first track's boxes takes for about a second: an MP4 whose first track
// is 1 s of AAC and whose default track is 1,200 s of Opus, and an Opus
// MP4 whose mvhd, tkhd and mdhd say 1 s. Each is reserved and billed for
// its 1,200 s (routed to gw-voice-fast, past gw-voice's five minutes); a
// prepaid balance that cannot pay them is refused before the provider
// hears a second, and one that can is spent to its last cent.
func TestTranscriptionBilledForEverySoundTrack(t *testing.T) {
	t.Parallel()
	tracks := ffmpegTracks(t, "tracks.mp4", []string{"sine=frequency=440:sample_rate=48000:duration=1", silenceOf(1200)},
		append(append([]string{"-c:a:0", "aac", "-b:a:0", "24k"}, opusOptions(1)...), "-disposition:a:0", "0", "-disposition:a:1", "default")...)
	forged := forgeBoxDurations(t, ffmpegTracks(t, "opus.mp4", []string{silenceOf(1200)}, opusOptions(0)...), 1)
	e := newAudioEnv(t)
	full := abilityCost(voicePrice, 1200)
	for name, file := range map[string][]byte{"tracks": tracks, "forged": forged} {
		t.Run(name, func(t *testing.T) {
			// Billed afterwards: gpt-4o-mini-transcribe reports tokens,
			// so the file's own length is billed.
			e.OA.Reset()
			e.OA.Push(fake.Script{Text: "long", Usage: fake.Usage{Input: 900, Output: 3}})
			key := e.account(t, name+"-after", nil)
			r := e.upload(t, key, "clip.mp4", file)
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			expectReceipt(t, e.gateway, name+"-after", r.Header, "gpt-4o-mini-transcribe", "X-Gw-Billed-Seconds", 1200, "audio_second", full)

			// A balance of 600 s: refused before the provider is called (a
			// hold of 10 s would let it through, and its report of the
			// 1,200 s it heard be charged past the hold).
			e.OA.Reset()
			e.OA.Push(fake.Script{Text: "long", AudioSeconds: 1200})
			short := e.account(t, name+"-short", map[string]any{"balance_usd": abilityCost(voicePrice, 600).String()})
			r = e.upload(t, short, "clip.mp4", file, "response_format", "verbose_json")
			expectError(t, r, http.StatusPaymentRequired, `{"error":{"message":"<string>","type":"insufficient_quota","code":"credit_exhausted"}}`, "")
			if n := len(e.OA.Requests()); n != 0 {
				t.Errorf("the provider heard %d calls the balance could not pay", n)
			}
			if l := e.ledger(t, name+"-short"); len(l) != 0 {
				t.Errorf("a refusal was billed: %+v", l)
			}
			if got, want := balanceOf(t, e.gateway, name+"-short"), abilityCost(voicePrice, 600); got != want {
				t.Errorf("balance %s, want %s", got, want)
			}

			// A balance of exactly 1,200 s: paid to its last cent.
			e.OA.Reset()
			e.OA.Push(fake.Script{Text: "long", AudioSeconds: 1200})
			exact := e.account(t, name+"-exact", map[string]any{"balance_usd": full.String()})
			r = e.upload(t, exact, "clip.mp4", file, "response_format", "verbose_json")
			if r.Status != http.StatusOK {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			expectReceipt(t, e.gateway, name+"-exact", r.Header, "whisper-1", "X-Gw-Billed-Seconds", 1200, "audio_second", full)
			if got := balanceOf(t, e.gateway, name+"-exact"); got != 0 {
				t.Errorf("balance %s, want 0", got)
			}
		})
	}
	if check := e.adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK).JSON(t); check["ok"] != true {
		t.Errorf("journal check: %v", check)
	}
}

// TestSpeechInstructionsBilled: speech is billed for its instructions'
// characters on top of its input's, as the provider reads both: in
// x-gw-billed-chars, x-gw-cost-usd and the ledger, reserved before the
// provider is called. The input's characters are divided by a speed below
// 1; the instructions' are not (they make no audio).
func TestSpeechInstructionsBilled(t *testing.T) {
	t.Parallel()
	e := newAudioEnv(t)
	key := e.account(t, "directed", nil)
	for _, tc := range []struct {
		body   string
		billed int64
	}{
		// 12 characters of input, 8 of instructions.
		{`{"input":"Hello, wörld","voice":"coral","instructions":"cheerful"}`, 20},
		// ceil(10 ÷ 0.3) = 34, and 12 (the emoji is one character).
		{`{"input":"0123456789","voice":"alloy","speed":0.3,"instructions":"slow, kind 🙂"}`, 46},
		// Speed 2: 10 + 4.
		{`{"input":"0123456789","voice":"alloy","speed":2,"instructions":"fast"}`, 14},
		// Empty instructions: the input alone.
		{`{"input":"0123456789","voice":"alloy","instructions":""}`, 10},
	} {
		e.OA.Push(fake.Script{Audio: []byte("sound")})
		r := e.do(t, http.MethodPost, "/v1/audio/speech", tc.body, bearer(key)...)
		if r.Status != http.StatusOK || string(r.Body) != "sound" {
			t.Fatalf("%s: %d %s", tc.body, r.Status, r.Body)
		}
		expectReceipt(t, e.gateway, "directed", r.Header, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", tc.billed, "character", abilityCost(speakPrice, tc.billed))
	}

	// A prepaid balance of 19 characters: the 12 of the input would fit,
	// the call does not; nothing reaches the provider or the ledger.
	body := `{"input":"Hello, wörld","voice":"coral","instructions":"cheerful"}`
	e.OA.Reset()
	short := e.account(t, "directed-short", map[string]any{"balance_usd": abilityCost(speakPrice, 19).String()})
	r := e.do(t, http.MethodPost, "/v1/audio/speech", body, bearer(short)...)
	expectError(t, r, http.StatusPaymentRequired, `{"error":{"message":"<string>","type":"insufficient_quota","code":"credit_exhausted"}}`, "")
	if n := len(e.OA.Requests()); n != 0 {
		t.Errorf("the provider was called %d times", n)
	}
	if l := e.ledger(t, "directed-short"); len(l) != 0 {
		t.Errorf("a refusal was billed: %+v", l)
	}
	// 20 characters: spent to the last cent.
	exact := e.account(t, "directed-exact", map[string]any{"balance_usd": abilityCost(speakPrice, 20).String()})
	e.OA.Push(fake.Script{Audio: []byte("sound")})
	r = e.do(t, http.MethodPost, "/v1/audio/speech", body, bearer(exact)...)
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	expectReceipt(t, e.gateway, "directed-exact", r.Header, "gpt-4o-mini-tts", "X-Gw-Billed-Chars", 20, "character", abilityCost(speakPrice, 20))
	if got := balanceOf(t, e.gateway, "directed-exact"); got != 0 {
		t.Errorf("balance %s, want 0", got)
	}
	if sent := e.OA.Requests()[0].JSON(); sent["instructions"] != "cheerful" || sent["input"] != "Hello, wörld" {
		t.Errorf("upstream body %s", e.OA.Requests()[0].Body)
	}
}
