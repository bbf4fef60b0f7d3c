package pricing

import (
	"math"
	"math/big"
	"strconv"
	"testing"
)

func TestUnits(t *testing.T) {
	for got, want := range map[string]string{
		UnitImage:       "image",
		UnitAudioSecond: "audio_second",
		UnitCharacter:   "character",
		UnitToken:       "token",
	} {
		if got != want {
			t.Errorf("unit %q, want %q", got, want)
		}
	}
}

// TestPublishedPrices checks each plan price against its published
// wording: the row's list_price_microcents, and what a call costs on a plan
// and on pay as you go.
func TestPublishedPrices(t *testing.T) {
	tests := []struct {
		name           string
		rate           Rate
		unitMicrocents int64 // list_price_microcents of the row, or per-token for decide
		units          int64
		plan           string // cost on a plan
		payg           string // cost with the 12% markup
	}{
		// "images from 0.01 USD per image"
		{"one image", ImageRate, 10_000, 1, "0.01", "0.0112"},
		{"image n=4", ImageRate, 10_000, 4, "0.04", "0.0448"},
		// "speech from 26 USD per 1M characters"
		{"speech 1M chars", SpeechRate, 26, 1_000_000, "26.00", "29.12"},
		{"speech one char", SpeechRate, 26, 1, "0.000026", "0.00002912"},
		{"speech 4096 chars", SpeechRate, 26, 4096, "0.106496", "0.11927552"},
		// "transcription 0.10 USD per minute heard, each file billed at
		// least 10 seconds", at the row's 1,667 microdollars per second.
		{"transcription minimum", TranscriptionRate, 1_667, TranscriptionMinBilledSeconds, "0.01667", "0.0186704"},
		{"transcription one minute", TranscriptionRate, 1_667, 60, "0.10002", "0.1120224"},
		{"transcription one hour", TranscriptionRate, 1_667, 3600, "6.0012", "6.721344"},
		// "0.1008 USD per million input tokens"
		{"decide 1M tokens", DecideRate, 0, 1_000_000, "0.1008", "0.112896"},
		{"decide 1234 tokens", DecideRate, 0, 1234, "0.000124387", "0.000139314"}, // 124,387.2 and 139,313.664 nano
		{"decide one token", DecideRate, 0, 1, "0.000000101", "0.000000113"},      // 100.8 and 112.896 nano
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.unitMicrocents != 0 {
				if got := tt.rate.Amount.Microcents(); got != tt.unitMicrocents || tt.rate.Per != 1 {
					t.Errorf("row price %d µ$ per %d, want %d per 1", got, tt.rate.Per, tt.unitMicrocents)
				}
				// The receipt equals the row's price times the units.
				if got, want := Cost(false, Line{tt.units, tt.rate}), Micro(tt.unitMicrocents*tt.units); got != want {
					t.Errorf("receipt %s != row price × units %s", got, want)
				}
			}
			if got := Cost(false, Line{tt.units, tt.rate}).String(); got != tt.plan {
				t.Errorf("plan cost %s, want %s", got, tt.plan)
			}
			if got := Cost(true, Line{tt.units, tt.rate}).String(); got != tt.payg {
				t.Errorf("payg cost %s, want %s", got, tt.payg)
			}
		})
	}
}

func TestPublishedConstants(t *testing.T) {
	if ImageListPrice != 10_000_000 || ImageListPrice.String() != "0.01" {
		t.Errorf("ImageListPrice = %d", int64(ImageListPrice))
	}
	if SpeechListPrice.Microcents() != 26 {
		t.Errorf("SpeechListPrice = %d", int64(SpeechListPrice))
	}
	if TranscriptionListPrice.Microcents() != 1_667 {
		t.Errorf("TranscriptionListPrice = %d", int64(TranscriptionListPrice))
	}
	// 0.10/60 USD rounded to whole microdollars.
	if want := Micro(roundDiv(bigInt(100_000), bigInt(60))); TranscriptionListPrice != want {
		t.Errorf("TranscriptionListPrice = %d, want %d", int64(TranscriptionListPrice), int64(want))
	}
	if TranscriptionMinBilledSeconds != 10 {
		t.Errorf("TranscriptionMinBilledSeconds = %d", TranscriptionMinBilledSeconds)
	}
	if DecideListPrice.String() != "0.1008" || DecideRate.Per != 1_000_000 || DecideRate.Amount != DecideListPrice {
		t.Errorf("DecideRate = %+v", DecideRate)
	}
}

func TestBilledSeconds(t *testing.T) {
	tests := []struct {
		d    float64
		want int64
	}{
		{0, 10},
		{0.001, 10},
		{3.2, 10},
		{9.999, 10},
		{10, 10},
		{10.0000001, 10}, // float noise above a whole second
		{10.001, 11},
		{10.5, 11},
		{11, 11},
		{59.5, 60},
		{60, 60},
		{60.01, 61},
		{30.000000000000004, 30}, // 0.1*300 style noise
		{0.1 * 3 * 100, 30},
		{1152.0 / 44100 * 4000, 105}, // 104.489... mp3 frames
		{480000.0 / 16000, 30},
		{(480000.0 + 1) / 16000, 31}, // one sample more than 30 s
		{(11_520_000.0 + 1) / 384000, 31},
		{3600.2, 3601},
		{-5, 10},
		{math.Copysign(0, -1), 10},
		{math.NaN(), 10},
		{math.Inf(-1), 10},
		{math.Inf(1), math.MaxInt64},
		{1e300, math.MaxInt64},
		{9.3e18, math.MaxInt64},
		{1e18 + 0.5, 1e18}, // beyond float precision: 1e18 exactly
	}
	for _, tt := range tests {
		t.Run(strconv.FormatFloat(tt.d, 'g', -1, 64), func(t *testing.T) {
			if got := BilledSeconds(tt.d); got != tt.want {
				t.Errorf("BilledSeconds(%v) = %d, want %d", tt.d, got, tt.want)
			}
		})
	}
}

func TestCharCount(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"hello", 5},
		{"héllo", 5},        // precomposed é is one code point
		{"he\u0301llo", 6},  // e + combining accent is two
		{"日本語", 3},          // three code points, nine bytes
		{"👍", 1},            // one code point, four bytes
		{"👍🏽", 2},           // emoji + skin tone modifier
		{"a\xffb", 3},       // an invalid byte counts as one
		{"line\nbreak", 10}, // control characters count
	}
	for _, tt := range tests {
		if got := CharCount(tt.s); got != tt.want {
			t.Errorf("CharCount(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func TestSpeechBilledChars(t *testing.T) {
	tests := []struct {
		chars int
		speed float64
		hd    bool
		want  int64
	}{
		// gw-voice-speak: input length; divided by speed when speed < 1, rounded up.
		{10, 1, false, 10},
		{10, 4, false, 10},
		{10, 1.5, false, 10},
		{10, 0.25, false, 40},
		{10, 0.3, false, 34}, // ceil(33.33…)
		{1, 0.3, false, 4},
		{3, 0.3, false, 10},
		{10, 0.5, false, 20},
		{3, 0.5, false, 6},
		{7, 0.7, false, 10}, // the float nearest 0.7 is below 0.7; still exactly 10
		{3, 0.6, false, 5},  // the float nearest 0.6 is below 0.6; still exactly 5
		{4, 0.8, false, 5},
		{9, 0.9, false, 10},
		{10, 0.99, false, 11}, // ceil(10.101…)
		{99, 0.99, false, 100},
		{1, 0.999, false, 2},
		{4096, 0.25, false, 16384},
		{4096, 0.3, false, 13654}, // ceil(13653.33…)
		{1000, 0.75, false, 1334}, // ceil(1333.33…)
		{0, 0.25, false, 0},
		{-3, 0.5, false, 0},
		// gw-voice-speak-hd: input length whatever the speed.
		{10, 0.25, true, 10},
		{10, 0.3, true, 10},
		{10, 1, true, 10},
		{10, 4, true, 10},
		{0, 1, true, 0},
		// Unvalidated speeds fall back to the default of 1.
		{10, 0, false, 10},
		{10, -0.5, false, 10},
		{10, math.NaN(), false, 10},
		{10, math.Inf(1), false, 10},
		{10, math.Inf(-1), false, 10},
		// Tiny speeds do not overflow.
		{10, 1e-300, false, math.MaxInt64},
		{1, 5e-324, false, math.MaxInt64},
	}
	for _, tt := range tests {
		name := strconv.Itoa(tt.chars) + "@" + strconv.FormatFloat(tt.speed, 'g', -1, 64)
		if tt.hd {
			name += "-hd"
		}
		t.Run(name, func(t *testing.T) {
			if got := SpeechBilledChars(tt.chars, 0, tt.speed, tt.hd); got != tt.want {
				t.Errorf("SpeechBilledChars(%d, 0, %v, %v) = %d, want %d", tt.chars, tt.speed, tt.hd, got, tt.want)
			}
		})
	}
}

// TestSpeechBilledCharsInstructions: the instructions' characters are
// added to the input's as they are, whatever the speed.
func TestSpeechBilledCharsInstructions(t *testing.T) {
	for _, tt := range []struct {
		input, instructions int
		speed               float64
		want                int64
	}{
		{12, 8, 1, 20},
		{10, 8, 0.3, 42}, // ceil(10 / 0.3) = 34, then 8
		{10, 7, 0.25, 47},
		{10, 5, 4, 15},
		{4096, 4096, 0.25, 16384 + 4096},
		{10, 0, 0.5, 20},
		{10, -1, 1, 10},
		{0, 9, 1, 9},
		{10, 3, 1e-300, math.MaxInt64}, // saturates
		{1, math.MaxInt, 1, math.MaxInt64},
	} {
		if got := SpeechBilledChars(tt.input, tt.instructions, tt.speed, false); got != tt.want {
			t.Errorf("SpeechBilledChars(%d, %d, %v) = %d, want %d", tt.input, tt.instructions, tt.speed, got, tt.want)
		}
	}
}

// TestSpeechBilledCharsDecimalSpeeds compares every two- and three-decimal
// speed from 0.25 to 0.999 against integer arithmetic (every input length up
// to 4,096 for two decimals, the first 512 for three): no float noise may
// add a character.
func TestSpeechBilledCharsDecimalSpeeds(t *testing.T) {
	for _, scale := range []int64{100, 1000} {
		for k := scale / 4; k < scale; k++ {
			speed, _ := strconv.ParseFloat(strconv.FormatInt(k, 10)+"e-"+strconv.Itoa(len(strconv.FormatInt(scale, 10))-1), 64)
			maxN := int64(4096)
			if scale > 100 {
				maxN = 512
			}
			for n := int64(1); n <= maxN; n++ {
				want := (n*scale + k - 1) / k
				if got := SpeechBilledChars(int(n), 0, speed, false); got != want {
					t.Fatalf("SpeechBilledChars(%d, %v) = %d, want %d", n, speed, got, want)
				}
			}
		}
	}
}

func bigInt(v int64) *big.Int { return big.NewInt(v) }
