package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Format is an audio container the transcription route accepts (POST
// /v1/audio/transcriptions: wav, mp3, mp4/m4a, ogg (Vorbis and Opus),
// webm, flac). It is read from the file's bytes, never from its name or
// declared type.
type Format string

// The accepted formats.
const (
	FormatWAV  Format = "wav"
	FormatMP3  Format = "mp3"
	FormatMP4  Format = "mp4"
	FormatOgg  Format = "ogg"
	FormatWebM Format = "webm"
	FormatFLAC Format = "flac"
)

// Extension is the file name extension the format is sent upstream with
// (the provider identifies a file by its name).
func (f Format) Extension() string {
	if f == FormatMP4 {
		return "m4a"
	}
	return string(f)
}

// ErrNotAudio is a file in none of the accepted formats (400
// unsupported_file_format).
var ErrNotAudio = errors.New("not audio in a supported format")

// UnreadableError is a file in an accepted format whose length cannot be
// read (400, param file): truncated, corrupt, or without the timing a
// length needs.
type UnreadableError struct {
	Format Format
	Reason string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("the %s file cannot be read: %s", e.Format, e.Reason)
}

func unreadable(f Format, format string, args ...any) error {
	return &UnreadableError{Format: f, Reason: fmt.Sprintf(format, args...)}
}

// MaxDuration bounds a length the readers report: a container claiming
// more than a day of audio in at most 8 MB is not believed.
const MaxDuration = 24 * 3600.0

// ClaimTolerance is how far a length the file's headers claim may exceed
// the most its bytes can hold before the file is refused as forged or
// broken.
const ClaimTolerance = 1.1

// Plausible bitrates of the compressed formats, in bytes a second. A
// file's audio bytes at the highest rate are the least length it is
// billed for, whatever its headers say; at the lowest rate they are the
// most length it can hold, and a file claiming more is refused.
const (
	// MP3HighestRate is Layer III's top bitrate, 320 kbit/s.
	MP3HighestRate = 320_000 / 8
	// MP3LowestRate is Layer III's bottom bitrate, 8 kbit/s (MPEG-2.5).
	MP3LowestRate = 8_000 / 8
	// LossyHighestRate bounds Opus, Vorbis and AAC: 512 kbit/s, above
	// what their encoders write for stereo.
	LossyHighestRate = 512_000 / 8
	// LossyLowestRate is 0.8 kbit/s: silence coded by Opus, Vorbis or
	// AAC stays above it.
	LossyLowestRate = 800 / 8
	// LosslessHighestRate bounds ALAC or PCM in MP4: 192 kHz stereo of
	// 24 bits.
	LosslessHighestRate = 192_000 * 2 * 3
	// FLACLowestRate: FLAC codes silence in a few bytes a frame.
	FLACLowestRate = 16
	// FLACOverhead is how far a FLAC stream may exceed the PCM it codes
	// (frames stored verbatim, plus their headers).
	FLACOverhead = 1.05
)

// Limits of a WAV file's fmt chunk: outside them it is not believed (a
// higher rate or a wider frame would make the same bytes shorter).
const (
	MaxWAVSampleRate = 384_000
	MaxWAVChannels   = 8
	MaxWAVBits       = 64
)

// Info is what Probe reads of an audio file.
type Info struct {
	Format Format
	// Duration is the audio length in seconds that the call is measured
	// by: what the file holds, never less than its audio bytes can carry
	// at the format's highest plausible bitrate.
	Duration float64
}

// reading is what one format's reader learns of a file.
type reading struct {
	length float64 // measured from what the file holds
	claim  float64 // what its headers say (0: they say nothing)
	least  float64 // the least its audio bytes can hold
	most   float64 // the most its audio bytes can hold
}

// Probe sniffs the format of b from its bytes and reads its length: the
// length the file holds, never below the floor its size sets. It returns
// ErrNotAudio when b is in no accepted format, and an *UnreadableError
// when its length cannot be read or its headers claim more than its bytes
// can hold.
func Probe(b []byte) (Info, error) {
	f := Sniff(b)
	var (
		r   reading
		err error
	)
	switch f {
	case FormatWAV:
		r, err = wavRead(b)
	case FormatMP3:
		r, err = mp3Read(b)
	case FormatFLAC:
		r, err = flacRead(b)
	case FormatOgg:
		r, err = oggRead(b)
	case FormatWebM:
		r, err = webmRead(b)
	case FormatMP4:
		r, err = mp4Read(b)
	default:
		return Info{}, ErrNotAudio
	}
	if err != nil {
		return Info{Format: f}, err
	}
	d, err := r.seconds(f)
	if err != nil {
		return Info{Format: f}, err
	}
	if math.IsNaN(d) || d <= 0 || d > MaxDuration {
		return Info{Format: f}, unreadable(f, "its length (%g s) is not believable", d)
	}
	return Info{Format: f, Duration: d}, nil
}

// seconds is the length a reading measures: its length, never below its
// floor; an *UnreadableError when it claims more than its bytes can hold.
// A container of several sound tracks or streams checks each this way.
func (r reading) seconds(f Format) (float64, error) {
	if r.claim > r.most*ClaimTolerance {
		return 0, unreadable(f, "it claims %.1f s of audio, more than its size can hold (%.1f s at most)", r.claim, r.most)
	}
	return max(r.length, r.least), nil
}

// bounds are the least and most seconds n audio bytes hold at the
// highest and lowest bitrates (bytes a second).
func bounds(n int, highest, lowest float64) (least, most float64) {
	return float64(n) / highest, float64(n) / lowest
}

// WalkTolerance is how far, in seconds, the length of the frames walked
// may exceed the length a header claims before the walk is taken instead:
// in an honest file the two differ by the codec's priming and padding.
const WalkTolerance = 0.5

// walked is the length of a file whose header claims claim seconds and
// whose frames add up to walk seconds: the claim, unless the frames hold
// more than it by over WalkTolerance (or it claims nothing).
func walked(claim, walk float64) float64 {
	if walk > claim+WalkTolerance || !(claim > 0) {
		return walk
	}
	return claim
}

// Sniff returns the format of b, or "" when it is none of the accepted
// ones. Only the leading bytes are looked at (plus, for MP3, that a second
// frame follows the first, so random bytes with a sync word are not MP3).
func Sniff(b []byte) Format {
	switch {
	case len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return FormatWAV
	case bytes.HasPrefix(b, []byte("fLaC")):
		return FormatFLAC
	case bytes.HasPrefix(b, []byte("OggS")):
		if _, _, err := oggCodec(b); err == nil {
			return FormatOgg
		}
		return ""
	case bytes.HasPrefix(b, []byte{0x1A, 0x45, 0xDF, 0xA3}):
		if ebmlDocType(b) == "webm" {
			return FormatWebM
		}
		return ""
	case len(b) >= 12 && string(b[4:8]) == "ftyp":
		return FormatMP4
	}
	rest := skipID3v2(b)
	if len(rest) < len(b) && bytes.HasPrefix(rest, []byte("fLaC")) {
		return FormatFLAC // FLAC with a leading ID3v2 tag
	}
	if h, ok := parseMP3Header(rest); ok {
		// A second header where the first frame ends, or the end of a
		// one-frame file.
		if h.size >= len(rest) {
			return FormatMP3
		}
		if _, ok := parseMP3Header(rest[h.size:]); ok {
			return FormatMP3
		}
	}
	return ""
}

// skipID3v2 returns b after a leading ID3v2 tag (all of b when none).
func skipID3v2(b []byte) []byte {
	if len(b) < 10 || string(b[0:3]) != "ID3" {
		return b
	}
	size := 0
	for _, c := range b[6:10] {
		if c&0x80 != 0 {
			return b
		}
		size = size<<7 | int(c)
	}
	size += 10
	if b[5]&0x10 != 0 { // footer present
		size += 10
	}
	if size > len(b) {
		return nil
	}
	return b[size:]
}

// ---- WAV ----

// WAV format tags whose length the reader measures (uncompressed
// samples; WAVE_FORMAT_EXTENSIBLE names its own in its sub-format).
const (
	wavPCM        = 1
	wavFloat      = 3
	wavALaw       = 6
	wavMuLaw      = 7
	wavExtensible = 0xFFFE
)

// wavRead reads a RIFF WAVE file of uncompressed samples: its length is
// the bytes of its data chunks over the sample rate times the bytes of a
// sample frame (channels times sample size), as a decoder plays it; the
// byte rate field is only the file's claim. A data size larger than what
// follows (a file written to a pipe says 0xFFFFFFFF or 0) counts only the
// bytes present; every data chunk is counted, as a decoder goes on to the
// next one.
func wavRead(b []byte) (reading, error) {
	var (
		rate, byteRate uint32
		frame          int64
		data           int64
		haveData       bool
	)
	pos := 12
	for pos+8 <= len(b) {
		id := string(b[pos : pos+4])
		size := int64(binary.LittleEndian.Uint32(b[pos+4 : pos+8]))
		body := b[pos+8:]
		switch id {
		case "fmt ":
			if frame > 0 {
				break // a second fmt chunk changes nothing
			}
			var err error
			if rate, byteRate, frame, err = wavFmt(body); err != nil {
				return reading{}, err
			}
		case "data":
			if frame == 0 {
				return reading{}, unreadable(FormatWAV, "no fmt chunk before its data")
			}
			n := size
			if n == 0 || n > int64(len(body)) {
				n = int64(len(body))
			}
			data += n - n%frame
			haveData = true
		}
		next := int64(pos) + 8 + size + size&1
		if next > int64(len(b)) {
			break
		}
		pos = int(next)
	}
	if !haveData {
		return reading{}, unreadable(FormatWAV, "it has no data chunk")
	}
	length := float64(data) / (float64(rate) * float64(frame))
	r := reading{length: length, least: length, most: length}
	if byteRate > 0 {
		r.claim = float64(data) / float64(byteRate)
	}
	return r, nil
}

// wavFmt reads a fmt chunk: the sample rate, the byte rate it claims and
// the bytes of one sample frame.
func wavFmt(body []byte) (rate, byteRate uint32, frame int64, err error) {
	if len(body) < 16 {
		return 0, 0, 0, unreadable(FormatWAV, "its fmt chunk is cut short")
	}
	tag := binary.LittleEndian.Uint16(body[0:2])
	channels := int64(binary.LittleEndian.Uint16(body[2:4]))
	rate = binary.LittleEndian.Uint32(body[4:8])
	byteRate = binary.LittleEndian.Uint32(body[8:12])
	align := int64(binary.LittleEndian.Uint16(body[12:14]))
	bits := int64(binary.LittleEndian.Uint16(body[14:16]))
	if tag == wavExtensible {
		if len(body) < 26 {
			return 0, 0, 0, unreadable(FormatWAV, "its extensible fmt chunk is cut short")
		}
		tag = binary.LittleEndian.Uint16(body[24:26])
	}
	switch tag {
	case wavPCM, wavFloat, wavALaw, wavMuLaw:
	default:
		return 0, 0, 0, unreadable(FormatWAV, "its samples are compressed (format %#x); send PCM", tag)
	}
	switch {
	case rate == 0 || rate > MaxWAVSampleRate:
		return 0, 0, 0, unreadable(FormatWAV, "its sample rate (%d Hz) is out of range", rate)
	case channels < 1 || channels > MaxWAVChannels:
		return 0, 0, 0, unreadable(FormatWAV, "its channel count (%d) is out of range", channels)
	case bits < 1 || bits > MaxWAVBits:
		return 0, 0, 0, unreadable(FormatWAV, "its sample size (%d bits) is out of range", bits)
	}
	frame = channels * ((bits + 7) / 8)
	if align != frame {
		return 0, 0, 0, unreadable(FormatWAV, "its block align (%d) disagrees with its %d channel(s) of %d bits", align, channels, bits)
	}
	return rate, byteRate, frame, nil
}

// ---- FLAC ----

// flacRead reads the STREAMINFO block: total samples over sample rate.
// The audio bytes are those after the metadata blocks (a cover picture is
// not audio); at the PCM rate STREAMINFO gives (with a little for frames
// stored verbatim) they set the least length.
func flacRead(b []byte) (reading, error) {
	b = skipID3v2(b)
	if len(b) < 4+4+34 {
		return reading{}, unreadable(FormatFLAC, "it is cut short")
	}
	hdr := b[4:8]
	if hdr[0]&0x7F != 0 || int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]) < 34 {
		return reading{}, unreadable(FormatFLAC, "its first block is not STREAMINFO")
	}
	si := b[8:]
	rate := uint32(si[10])<<12 | uint32(si[11])<<4 | uint32(si[12])>>4
	channels := uint32(si[12]>>1&7) + 1
	bits := uint32(si[12]&1)<<4 | uint32(si[13]>>4) + 1
	total := uint64(si[13]&0x0F)<<32 | uint64(binary.BigEndian.Uint32(si[14:18]))
	if rate == 0 {
		return reading{}, unreadable(FormatFLAC, "its sample rate is 0")
	}
	if total == 0 {
		return reading{}, unreadable(FormatFLAC, "it does not say how many samples it holds")
	}
	// The metadata blocks, each with a last-block flag and a 24-bit size.
	pos := 4
	for pos+4 <= len(b) {
		h := b[pos : pos+4]
		pos += 4 + (int(h[1])<<16 | int(h[2])<<8 | int(h[3]))
		if h[0]&0x80 != 0 {
			break
		}
	}
	audio := max(len(b)-pos, 0)
	pcm := float64(rate) * float64(channels) * float64((bits+7)/8) * FLACOverhead
	least, most := bounds(audio, pcm, FLACLowestRate)
	d := float64(total) / float64(rate)
	var walk float64
	if pos < len(b) {
		walk = float64(flacWalk(b[pos:])) / float64(rate)
	}
	return reading{length: walked(d, walk), claim: d, least: least, most: most}, nil
}

// flacWalk adds up the block sizes of the frames of b (the audio after
// the metadata). A frame is taken from a header whose CRC-8 is right to
// the next such header (or the end) when the CRC-16 before it is right
// too, so a sync code inside the coded audio is not taken for a frame.
func flacWalk(b []byte) int64 {
	var total int64
	start, size := -1, 0 // the frame being read and its block size
	var crc uint16
	q := 0 // crc covers b[start:q]
	for i := 0; i+2 <= len(b); i++ {
		if b[i] != 0xFF || b[i+1]&0xFE != 0xF8 {
			continue
		}
		n, ok := flacFrameHeader(b[i:])
		if !ok {
			continue
		}
		if start >= 0 {
			if i-2 < q {
				continue // inside the frame's own header
			}
			for ; q < i-2; q++ {
				crc = crc<<8 ^ flacCRC16Table[byte(crc>>8)^b[q]]
			}
			if crc != binary.BigEndian.Uint16(b[i-2:i]) {
				continue
			}
			total += int64(size)
		}
		start, size, q, crc = i, n, i, 0
	}
	if start >= 0 && len(b)-2 >= q {
		for ; q < len(b)-2; q++ {
			crc = crc<<8 ^ flacCRC16Table[byte(crc>>8)^b[q]]
		}
		if crc == binary.BigEndian.Uint16(b[len(b)-2:]) {
			total += int64(size)
		}
	}
	return total
}

// flacFrameHeader reads a frame header at the start of b (sync code
// checked by the caller) and returns its block size, false when a field
// is reserved or its CRC-8 is wrong.
func flacFrameHeader(b []byte) (int, bool) {
	if len(b) < 6 {
		return 0, false
	}
	bsCode, rateCode := b[2]>>4, b[2]&0x0F
	if bsCode == 0 || rateCode == 15 || b[3]>>4 > 10 || b[3]&1 != 0 {
		return 0, false
	}
	// The frame or sample number, UTF-8 coded in 1 to 7 bytes.
	n := 1
	for c := b[4]; c&0x80 != 0; c <<= 1 {
		n++
	}
	if n == 2 || n > 8 {
		return 0, false // a lone continuation byte, or too long
	}
	if n > 1 {
		n--
	}
	pos := 4 + n
	size := 0
	switch {
	case bsCode == 1:
		size = 192
	case bsCode <= 5:
		size = 576 << (bsCode - 2)
	case bsCode == 6:
		if len(b) <= pos {
			return 0, false
		}
		size, pos = int(b[pos])+1, pos+1
	case bsCode == 7:
		if len(b) <= pos+1 {
			return 0, false
		}
		size, pos = int(binary.BigEndian.Uint16(b[pos:]))+1, pos+2
	default:
		size = 256 << (bsCode - 8)
	}
	switch rateCode {
	case 12:
		pos++
	case 13, 14:
		pos += 2
	}
	if len(b) <= pos {
		return 0, false
	}
	var crc byte
	for _, c := range b[:pos] {
		crc = flacCRC8Table[crc^c]
	}
	return size, crc == b[pos]
}

// The CRCs of FLAC frames: CRC-8 (polynomial 0x07) of a header, CRC-16
// (0x8005) of a whole frame.
var (
	flacCRC8Table  = crcTable[uint8](0x07)
	flacCRC16Table = crcTable[uint16](0x8005)
)

// crcTable is the byte-at-a-time table of the most-significant-bit-first
// CRC of polynomial poly, in the width of T (FLAC's CRC-8 and CRC-16,
// Ogg's CRC-32).
func crcTable[T uint8 | uint16 | uint32](poly T) (t [256]T) {
	var top T = 1
	shift := 0
	for top<<1 != 0 {
		top <<= 1
		shift++
	}
	for i := range t {
		c := T(i) << (shift - 7)
		for range 8 {
			if c&top != 0 {
				c = c<<1 ^ poly
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}

// ---- MP3 ----

// mp3Header is one MPEG audio Layer III frame header.
type mp3Header struct {
	size       int // bytes of the frame, header included
	samples    int // samples per frame
	sampleRate int
	mpeg1      bool
	mono       bool
}

var (
	mp3Bitrates = [2][16]int{ // kbit/s, Layer III: [MPEG-1, MPEG-2/2.5]
		{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},
		{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},
	}
	mp3Rates = [3]int{44100, 48000, 32000} // MPEG-1; halved for 2, quartered for 2.5
)

// parseMP3Header reads a Layer III frame header at the start of b.
func parseMP3Header(b []byte) (mp3Header, bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return mp3Header{}, false
	}
	version := (b[1] >> 3) & 3 // 0: 2.5, 1: reserved, 2: 2, 3: 1
	layer := (b[1] >> 1) & 3   // 1: Layer III
	brIdx := b[2] >> 4
	srIdx := (b[2] >> 2) & 3
	if version == 1 || layer != 1 || brIdx == 0 || brIdx == 15 || srIdx == 3 {
		return mp3Header{}, false
	}
	h := mp3Header{mpeg1: version == 3, mono: b[3]>>6 == 3}
	rate := mp3Rates[srIdx]
	table := 1
	h.samples = 576
	switch version {
	case 3:
		table, h.samples = 0, 1152
	case 2:
		rate /= 2
	case 0:
		rate /= 4
	}
	h.sampleRate = rate
	pad := int(b[2]>>1) & 1
	br := mp3Bitrates[table][brIdx] * 1000
	h.size = h.samples/8*br/rate + pad
	if h.size < 4 {
		return mp3Header{}, false
	}
	return h, true
}

// mp3Read walks every frame and adds up their samples (at most 8 MB, so
// this stays cheap): a frame that does not parse is skipped to the next
// one that does and is followed by another, as a decoder resyncs. A
// Xing/Info or VBRI header in the first frame is only the file's claim,
// and that frame holds no audio.
func mp3Read(b []byte) (reading, error) {
	b = skipID3v2(b)
	first, ok := parseMP3Header(b)
	if !ok {
		return reading{}, unreadable(FormatMP3, "no frame header")
	}
	var r reading
	pos := 0
	if frames := xingFrames(b, first); frames > 0 {
		r.claim = float64(frames) * float64(first.samples) / float64(first.sampleRate)
		pos = first.size
	}
	frames, synced := 0, true
	for pos+4 <= len(b) {
		h, ok := parseMP3Header(b[pos:])
		if ok && !synced {
			// Out of sync, a header counts only when another follows it
			// (or the file ends with its frame).
			end := pos + h.size
			if end < len(b) {
				_, ok = parseMP3Header(b[end:])
			}
		}
		if !ok {
			synced = false
			pos++
			continue
		}
		synced = true
		r.length += float64(h.samples) / float64(h.sampleRate)
		frames++
		pos += h.size
	}
	if frames == 0 && r.claim == 0 {
		return reading{}, unreadable(FormatMP3, "no frames")
	}
	r.least, r.most = bounds(len(b), MP3HighestRate, MP3LowestRate)
	return r, nil
}

// xingFrames returns the frame count of the first frame's Xing/Info or
// VBRI header, or 0 when it has none.
func xingFrames(b []byte, h mp3Header) int {
	// The side information after the 4-byte header: 32 or 17 bytes on
	// MPEG-1 (stereo, mono), 17 or 9 on MPEG-2/2.5.
	side := 17
	switch {
	case h.mpeg1 && !h.mono:
		side = 32
	case !h.mpeg1 && h.mono:
		side = 9
	}
	if off := 4 + side; len(b) >= off+12 && h.size >= off+12 {
		tag := string(b[off : off+4])
		flags := binary.BigEndian.Uint32(b[off+4 : off+8])
		if (tag == "Xing" || tag == "Info") && flags&1 != 0 {
			return int(binary.BigEndian.Uint32(b[off+8 : off+12]))
		}
	}
	if off := 4 + 32; len(b) >= off+18 && string(b[off:off+4]) == "VBRI" {
		return int(binary.BigEndian.Uint32(b[off+14 : off+18]))
	}
	return 0
}
