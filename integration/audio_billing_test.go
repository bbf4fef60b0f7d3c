package integration

import (
	"bytes"
	"encoding/binary"
	"net/http"
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
