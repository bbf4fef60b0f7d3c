package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Format is an audio container the transcription route accepts (spec "POST
// /v1/audio/transcriptions": wav, mp3, mp4/m4a, ogg (Vorbis and Opus),
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

// Info is what Probe reads of an audio file.
type Info struct {
	Format Format
	// Duration is the audio length in seconds.
	Duration float64
}

// Probe sniffs the format of b from its bytes and reads its length from
// the container: ErrNotAudio when it is in no accepted format, an
// *UnreadableError when the length cannot be read.
func Probe(b []byte) (Info, error) {
	f := Sniff(b)
	var (
		d   float64
		err error
	)
	switch f {
	case FormatWAV:
		d, err = wavDuration(b)
	case FormatMP3:
		d, err = mp3Duration(b)
	case FormatFLAC:
		d, err = flacDuration(b)
	case FormatOgg:
		d, err = oggDuration(b)
	case FormatWebM:
		d, err = webmDuration(b)
	case FormatMP4:
		d, err = mp4Duration(b)
	default:
		return Info{}, ErrNotAudio
	}
	if err != nil {
		return Info{Format: f}, err
	}
	if math.IsNaN(d) || d <= 0 || d > MaxDuration {
		return Info{Format: f}, unreadable(f, "its length (%g s) is not believable", d)
	}
	return Info{Format: f, Duration: d}, nil
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

// wavDuration reads a RIFF WAVE file: the data chunk's size over the fmt
// chunk's byte rate. A data size larger than what follows (a file written
// to a pipe says 0xFFFFFFFF or 0) counts only the bytes present.
func wavDuration(b []byte) (float64, error) {
	var byteRate uint32
	pos := 12
	for pos+8 <= len(b) {
		id := string(b[pos : pos+4])
		size := int64(binary.LittleEndian.Uint32(b[pos+4 : pos+8]))
		body := b[pos+8:]
		switch id {
		case "fmt ":
			if len(body) < 16 {
				return 0, unreadable(FormatWAV, "its fmt chunk is cut short")
			}
			byteRate = binary.LittleEndian.Uint32(body[8:12])
			if byteRate == 0 {
				return 0, unreadable(FormatWAV, "its byte rate is 0")
			}
		case "data":
			if byteRate == 0 {
				return 0, unreadable(FormatWAV, "no fmt chunk before its data")
			}
			n := size
			if n == 0 || n > int64(len(body)) {
				n = int64(len(body))
			}
			return float64(n) / float64(byteRate), nil
		}
		next := int64(pos) + 8 + size + size&1
		if next > int64(len(b)) {
			break
		}
		pos = int(next)
	}
	return 0, unreadable(FormatWAV, "it has no data chunk")
}

// ---- FLAC ----

// flacDuration reads the STREAMINFO block: total samples over sample rate.
func flacDuration(b []byte) (float64, error) {
	b = skipID3v2(b)
	if len(b) < 4+4+34 {
		return 0, unreadable(FormatFLAC, "it is cut short")
	}
	hdr := b[4:8]
	if hdr[0]&0x7F != 0 || int(hdr[1])<<16|int(hdr[2])<<8|int(hdr[3]) < 34 {
		return 0, unreadable(FormatFLAC, "its first block is not STREAMINFO")
	}
	si := b[8:]
	rate := uint32(si[10])<<12 | uint32(si[11])<<4 | uint32(si[12])>>4
	total := uint64(si[13]&0x0F)<<32 | uint64(binary.BigEndian.Uint32(si[14:18]))
	if rate == 0 {
		return 0, unreadable(FormatFLAC, "its sample rate is 0")
	}
	if total == 0 {
		return 0, unreadable(FormatFLAC, "it does not say how many samples it holds")
	}
	return float64(total) / float64(rate), nil
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

// mp3Duration reads the frame count of a Xing/Info or VBRI header when the
// first frame carries one, and otherwise walks every frame and adds up
// their samples (at most 8 MB, so this stays cheap).
func mp3Duration(b []byte) (float64, error) {
	b = skipID3v2(b)
	first, ok := parseMP3Header(b)
	if !ok {
		return 0, unreadable(FormatMP3, "no frame header")
	}
	if frames := xingFrames(b, first); frames > 0 {
		return float64(frames) * float64(first.samples) / float64(first.sampleRate), nil
	}
	var total float64
	pos, frames := 0, 0
	for pos < len(b) {
		h, ok := parseMP3Header(b[pos:])
		if !ok {
			break // trailing tags (ID3v1, APE) or garbage end the audio
		}
		total += float64(h.samples) / float64(h.sampleRate)
		frames++
		pos += h.size
	}
	if frames == 0 {
		return 0, unreadable(FormatMP3, "no frames")
	}
	return total, nil
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

// ---- Ogg (Vorbis, Opus) ----

// oggCodec reads the first page's first packet: the codec of the logical
// stream, its serial number and the rate of its granule positions. Only
// Vorbis and Opus are accepted.
func oggCodec(b []byte) (codec string, serial uint32, err error) {
	if len(b) < 27 || string(b[0:4]) != "OggS" || b[4] != 0 {
		return "", 0, ErrNotAudio
	}
	segs := int(b[26])
	if len(b) < 27+segs {
		return "", 0, ErrNotAudio
	}
	serial = binary.LittleEndian.Uint32(b[14:18])
	p := b[27+segs:]
	switch {
	case len(p) >= 19 && string(p[0:8]) == "OpusHead":
		return "opus", serial, nil
	case len(p) >= 16 && string(p[0:7]) == "\x01vorbis":
		return "vorbis", serial, nil
	}
	return "", 0, ErrNotAudio
}

// oggDuration reads the granule position of the stream's last page: Ogg
// stores no total length, but the last granule position is the number of
// samples decoded at the end of the stream (for Opus at 48 kHz, less the
// pre-skip). The last page is found from the end and its checksum
// verified, so bytes that merely look like a page header are not taken.
func oggDuration(b []byte) (float64, error) {
	codec, serial, err := oggCodec(b)
	if err != nil {
		return 0, err
	}
	segs := int(b[26])
	p := b[27+segs:]
	var rate float64
	var preSkip uint64
	switch codec {
	case "opus":
		rate = 48000
		preSkip = uint64(binary.LittleEndian.Uint16(p[10:12]))
	default:
		rate = float64(binary.LittleEndian.Uint32(p[12:16]))
	}
	if rate <= 0 {
		return 0, unreadable(FormatOgg, "its sample rate is 0")
	}
	for end := len(b); end > 0; {
		i := bytes.LastIndex(b[:end], []byte("OggS"))
		if i < 0 {
			break
		}
		end = i
		granule, ok := oggPage(b[i:], serial)
		if !ok || granule == math.MaxUint64 {
			continue
		}
		if granule < preSkip {
			return 0, unreadable(FormatOgg, "its last granule position is before the pre-skip")
		}
		return float64(granule-preSkip) / rate, nil
	}
	return 0, unreadable(FormatOgg, "no complete page with a granule position")
}

// oggPage checks the page at the start of b (whole, of the serial, with a
// correct checksum) and returns its granule position.
func oggPage(b []byte, serial uint32) (uint64, bool) {
	if len(b) < 27 || b[4] != 0 || binary.LittleEndian.Uint32(b[14:18]) != serial {
		return 0, false
	}
	segs := int(b[26])
	if len(b) < 27+segs {
		return 0, false
	}
	size := 27 + segs
	for _, l := range b[27 : 27+segs] {
		size += int(l)
	}
	if size > len(b) {
		return 0, false
	}
	page := b[:size]
	want := binary.LittleEndian.Uint32(page[22:26])
	if oggCRC(page) != want {
		return 0, false
	}
	return binary.LittleEndian.Uint64(page[6:14]), true
}

var oggCRCTable = func() (t [256]uint32) {
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04C11DB7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return t
}()

// oggCRC is the page checksum, computed with its own field as zero.
func oggCRC(page []byte) uint32 {
	var crc uint32
	for i, c := range page {
		if i >= 22 && i < 26 {
			c = 0
		}
		crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^c]
	}
	return crc
}
