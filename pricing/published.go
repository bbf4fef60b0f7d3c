package pricing

import (
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// Units of the price_unit field (model rows of GET /v1/models), plus
// the unit of chat ledger entries, which have no model-row price.
const (
	// UnitImage prices one generated image; a call's units are its n.
	UnitImage = "image"
	// UnitAudioSecond prices one second of transcribed audio, as returned by
	// BilledSeconds.
	UnitAudioSecond = "audio_second"
	// UnitCharacter prices one character of speech input or instructions,
	// as returned by SpeechBilledChars.
	UnitCharacter = "character"
	// UnitToken is the unit of chat and decision-mode ledger entries. It is
	// never a model row's price_unit.
	UnitToken = "token"
)

// Published plan (list) prices: images, speech, transcription and
// decision mode. Each is the price of one unit of the row's price_unit;
// Microcents of it is the row's list_price_microcents. Pay as you go adds
// PAYGMarkupPercent on top, once per call, in Cost.
const (
	// ImageListPrice is 0.01 USD per image (10,000 microdollars).
	ImageListPrice Money = 10_000 * NanoPerMicro

	// SpeechListPrice is 26 USD per 1M characters: 26 microdollars per
	// character, exactly.
	SpeechListPrice Money = 26 * NanoPerMicro

	// TranscriptionListPrice is the published 0.10 USD per minute heard,
	// expressed per audio_second. The model row publishes
	// list_price_microcents as an integer per audio_second, and a receipt must
	// equal that row's price times the billed units, so the per-second price
	// is 0.10/60 USD = 1,666.67 microdollars rounded to the row's unit:
	// 1,667 microdollars per second (0.10002 USD per full minute). Billing
	// 0.10 USD/minute exactly would make receipts disagree with the row.
	TranscriptionListPrice Money = 1_667 * NanoPerMicro

	// TranscriptionMinBilledSeconds is the fewest seconds billed per
	// transcribed file (the row's min_billed_units).
	TranscriptionMinBilledSeconds = 10

	// DecideListPrice is decision mode's 0.1008 USD per million input tokens,
	// identical on every paid plan. Use DecideRate to price a call.
	DecideListPrice Money = 100_800 * NanoPerMicro
)

// Rates of the published prices, ready for Line.
var (
	// ImageRate is ImageListPrice per image.
	ImageRate = PerUnit(ImageListPrice)
	// SpeechRate is SpeechListPrice per billed character.
	SpeechRate = PerUnit(SpeechListPrice)
	// TranscriptionRate is TranscriptionListPrice per billed second.
	TranscriptionRate = PerUnit(TranscriptionListPrice)
	// DecideRate is 0.1008 USD per million input tokens (100.8 nano-dollars
	// per token, kept exact by Cost).
	DecideRate = PerMillion(DecideListPrice)
)

// durationTolerance is how far above a whole second a measured duration may
// be and still count as that second. Audio is quantised to samples (at most a
// few microseconds each, even at 384 kHz), so a real clip one sample longer
// than N seconds exceeds N by more than this; anything closer is float noise
// from computing samples/rate or frames×frame-length (30.000000000000004).
const durationTolerance = 1e-6

// BilledSeconds returns the seconds a transcription of audio lasting
// durationSeconds is billed: the length rounded up to whole seconds, and at
// least TranscriptionMinBilledSeconds. Durations within a microsecond above
// a whole second are float noise and round down to it. NaN or negative
// durations bill the minimum; callers must refuse audio they cannot measure
// before billing. Absurdly long durations saturate at math.MaxInt64.
func BilledSeconds(durationSeconds float64) int64 {
	d := durationSeconds
	if math.IsNaN(d) || d <= TranscriptionMinBilledSeconds {
		return TranscriptionMinBilledSeconds
	}
	if d >= math.MaxInt64 { // also +Inf
		return math.MaxInt64
	}
	fl := math.Floor(d)
	if d-fl <= durationTolerance {
		return int64(fl)
	}
	return int64(fl) + 1
}

// CharCount counts characters the way the gateway bills speech: as Unicode
// code points of the UTF-8 text, an invalid byte counting as one. No
// normalisation is applied: "é" sent precomposed (U+00E9) is one character,
// sent as "e" plus a combining accent (U+0065 U+0301) it is two; an emoji
// made of several code points counts each of them.
func CharCount(s string) int { return utf8.RuneCountInString(s) }

// SpeechBilledChars returns the characters a speech call is billed: its
// input's, per speech's billing rule (for gw-voice-speak, hd false, the
// input length divided by speed when speed < 1, rounded up; for
// gw-voice-speak-hd, the input length), plus its instructions'. The
// provider reads the instructions as text input, as it reads the input;
// they make no audio, so the speed does not stretch them.
// inputChars and instructionsChars are CharCount of the two fields.
//
// The division is done in exact rational arithmetic on the decimal the
// client wrote: the speed is turned into its shortest decimal form (the
// digits strconv prints, which read back as the same float64), so 0.25 is
// 1/4 and 0.7 is 7/10. Using the float's exact binary value instead would
// bill 7 characters at speed 0.7 as 11, since the float nearest 0.7 is
// slightly below it (7/0.69999999999999995559 = 10.0000000000000006); an
// epsilon would have to guess a tolerance. So 10 characters at 0.25 are
// exactly 40, and at 0.3 are ceil(33.33…) = 34.
//
// Speeds are validated to [0.25, 4] before billing; a speed that is zero,
// negative, NaN or infinite is treated as 1 (the default, e.g. an omitted
// field). A count <= 0 bills 0. The result saturates at math.MaxInt64.
func SpeechBilledChars(inputChars, instructionsChars int, speed float64, hd bool) int64 {
	n := speechInputChars(inputChars, speed, hd)
	if instructionsChars <= 0 {
		return n
	}
	if n > math.MaxInt64-int64(instructionsChars) {
		return math.MaxInt64
	}
	return n + int64(instructionsChars)
}

// speechInputChars is the input's part of SpeechBilledChars.
func speechInputChars(inputChars int, speed float64, hd bool) int64 {
	if inputChars <= 0 {
		return 0
	}
	n := int64(inputChars)
	if hd || !(speed > 0 && speed < 1) {
		return n
	}
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(speed, 'g', -1, 64))
	if !ok || r.Sign() <= 0 {
		return n
	}
	// ceil(n / (p/q)) = ceil(n*q / p)
	num := new(big.Int).Mul(big.NewInt(n), r.Denom())
	q, rem := new(big.Int).QuoRem(num, r.Num(), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}
