package audio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// makeTracks has ffmpeg mux one audio track per input (a lavfi source)
// into a file of dir with the output options args, and returns its bytes
// and ffprobe's length of each track (0 where it gives none).
func makeTracks(t *testing.T, dir, name string, inputs []string, args ...string) ([]byte, []float64) {
	t.Helper()
	ffmpeg, ffprobe := needTool(t, "ffmpeg"), needTool(t, "ffprobe")
	cmd := []string{"-v", "error"}
	for _, in := range inputs {
		cmd = append(cmd, "-f", "lavfi", "-i", in)
	}
	for i := range inputs {
		cmd = append(cmd, "-map", fmt.Sprintf("%d:a", i))
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command(ffmpeg, append(append(cmd, args...), "-y", out)...).CombinedOutput(); err != nil {
		if strings.Contains(string(b), "Unknown encoder") {
			t.Skipf("this ffmpeg lacks the encoder: %s", b)
		}
		t.Fatalf("ffmpeg: %v %s", err, b)
	}
	b, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "stream=duration", "-of", "csv=p=0", out).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var lengths []float64
	for _, l := range strings.Fields(string(b)) {
		d, _ := strconv.ParseFloat(l, 64) // N/A: 0
		lengths = append(lengths, d)
	}
	return readAudio(t, out), lengths
}

// tone and silence are ffmpeg sources of seconds of sound.
func tone(seconds float64) string {
	return fmt.Sprintf("sine=frequency=440:sample_rate=48000:duration=%g", seconds)
}

func silence(seconds float64) string {
	return fmt.Sprintf("anullsrc=r=48000:cl=mono,atrim=duration=%g", seconds)
}

// Encoder options of the tests' tracks: AAC, and Opus made quickly (long
// frames, least effort).
var (
	aacTrack  = []string{"aac", "-b:a:%d", "24k"}
	opusTrack = []string{"libopus", "-b:a:%d", "6k", "-frame_duration:a:%d", "120", "-compression_level:a:%d", "0"}
)

// codecs are the output options giving track i the codec of each of
// tracks (aacTrack, opusTrack or a plain encoder name).
func codecs(tracks ...[]string) []string {
	var out []string
	for i, tr := range tracks {
		out = append(out, fmt.Sprintf("-c:a:%d", i), tr[0])
		for _, o := range tr[1:] {
			if strings.Contains(o, "%d") {
				o = fmt.Sprintf(o, i)
			}
			out = append(out, o)
		}
	}
	return out
}

// TestProbeEverySoundTrack: files of several sound tracks (or Ogg
// streams), the first of them short, made with ffmpeg: the longest track
// is measured, whichever a decoder picks; an Ogg chain's links add up.
func TestProbeEverySoundTrack(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		inputs []string
		args   []string
		want   float64
		tol    float64
	}{
		// The file of the report: a 1 s AAC track, then the default track,
		// 1,200 s of Opus.
		{"long.mp4", []string{tone(1), silence(1200)},
			append(codecs(aacTrack, opusTrack), "-disposition:a:0", "0", "-disposition:a:1", "default"), 1200, 0.02},
		{"long-first.mp4", []string{tone(65.5), tone(1)}, codecs(opusTrack, aacTrack), 65.5, 0.02},
		{"aac-aac.m4a", []string{tone(1), tone(65.5)}, codecs(aacTrack, aacTrack), 65.5, 0.001},
		{"fragmented.mp4", []string{tone(1), tone(65.5)},
			append(codecs(aacTrack, opusTrack), "-movflags", "frag_keyframe+empty_moov"), 65.5, 0.02},
		{"alac.mov", []string{tone(1), tone(65.5)}, codecs(aacTrack, []string{"alac"}), 65.5, 0.001},
		{"vorbis.webm", []string{tone(1), tone(65.5)}, codecs(opusTrack, []string{"libvorbis"}), 65.5, 0.03},
		{"grouped.ogg", []string{tone(1), tone(65.5)}, codecs(opusTrack, opusTrack), 65.5, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, lengths := makeTracks(t, dir, tc.name, tc.inputs, tc.args...)

			t.Logf("%d bytes, ffprobe's tracks %v", len(b), lengths)
			expectLength(t, b, tc.want, tc.tol)
		})
	}

	t.Run("chained.opus", func(t *testing.T) {
		// Two Ogg Opus files one after the other: a chain of two links.
		short, _ := makeAudio(t, dir, "short.opus", 1, "-c:a", "libopus", "-b:a", "16k")
		long, _ := makeAudio(t, dir, "long.opus", 65.5, "-c:a", "libopus", "-b:a", "16k")
		expectLength(t, short, 1, 0.02)
		expectLength(t, append(bytes.Clone(short), long...), 66.5, 0.02)
		expectLength(t, append(bytes.Clone(long), short...), 66.5, 0.02)
	})
}

// mp4Boxes calls fn with the path (such as "moov/trak/mdia/mdhd") and the
// payload of every box of b, containers' boxes included, in file order.
// fn may change the payload in place.
func mp4Boxes(b []byte, fn func(path string, payload []byte)) {
	var walk func(d []byte, path string)
	walk = func(d []byte, path string) {
		for len(d) >= 8 {
			size, hdr := int(binary.BigEndian.Uint32(d)), 8
			switch size {
			case 0:
				size = len(d)
			case 1:
				size, hdr = int(binary.BigEndian.Uint64(d[8:])), 16
			}
			if size < hdr || size > len(d) {
				return
			}
			p := path + string(d[4:8])
			fn(p, d[hdr:size])
			switch string(d[4:8]) {
			case "moov", "trak", "mdia", "minf", "stbl", "edts", "mvex", "moof", "traf":
				walk(d[hdr:size], p+"/")
			}
			d = d[size:]
		}
	}
	walk(b, "")
}

// forgeMP4 returns a copy of an MP4 whose durations are forged: the box
// durations (mvhd, tkhd, mdhd) set to seconds when seconds > 0, and each
// sample's duration (stts, trun, and the fragment defaults of tfhd and
// trex) multiplied by sampleTimes when it is not 1.
func forgeMP4(t *testing.T, b []byte, seconds float64, sampleTimes float64) []byte {
	t.Helper()
	out := bytes.Clone(b)
	var movieScale uint32
	put := func(p []byte, long bool, v float64) {
		if long {
			binary.BigEndian.PutUint64(p, uint64(v))
		} else {
			binary.BigEndian.PutUint32(p, uint32(v))
		}
	}
	scale := func(p []byte) {
		binary.BigEndian.PutUint32(p, uint32(math.Max(1, float64(binary.BigEndian.Uint32(p))*sampleTimes)))
	}
	forged := map[string]int{}
	mp4Boxes(out, func(path string, p []byte) {
		box := path[strings.LastIndex(path, "/")+1:]
		v1 := len(p) > 0 && p[0] == 1
		switch {
		case seconds > 0 && (box == "mvhd" || box == "mdhd"):
			ts, dur := 12, 16
			if v1 {
				ts, dur = 20, 24
			}
			timescale := binary.BigEndian.Uint32(p[ts:])
			if box == "mvhd" {
				movieScale = timescale
			}
			put(p[dur:], v1, seconds*float64(timescale))
		case seconds > 0 && box == "tkhd":
			dur := 20
			if v1 {
				dur = 28
			}
			put(p[dur:], v1, seconds*float64(movieScale))
		case sampleTimes == 1:
			return
		case box == "stts":
			for i := range int(binary.BigEndian.Uint32(p[4:])) {
				scale(p[8+8*i+4:])
			}
		case box == "trex":
			scale(p[12:])
		case box == "tfhd":
			flags := binary.BigEndian.Uint32(p) & 0xFFFFFF
			off := 8
			for _, f := range []uint32{0x01, 0x02} {
				if flags&f != 0 {
					off += map[uint32]int{0x01: 8, 0x02: 4}[f]
				}
			}
			if flags&0x08 != 0 {
				scale(p[off:])
			}
		case box == "trun":
			flags := binary.BigEndian.Uint32(p) & 0xFFFFFF
			if flags&0x100 == 0 {
				return
			}
			off, per := 8, 0
			for _, f := range []uint32{0x01, 0x04} {
				if flags&f != 0 {
					off += 4
				}
			}
			for _, f := range []uint32{0x100, 0x200, 0x400, 0x800} {
				if flags&f != 0 {
					per += 4
				}
			}
			for i := range int(binary.BigEndian.Uint32(p[4:])) {
				scale(p[off+i*per:])
			}
		default:
			return
		}
		forged[box]++
	})
	t.Logf("forged boxes: %v", forged)
	return out
}

// opusWalkTolerance is how far the Opus packets walked may exceed a
// track's length: the last packet's padding, up to one of the 120 ms
// packets of opusTrack.
const opusWalkTolerance = 0.12

// TestProbeForgedMP4: real MP4 files from ffmpeg whose durations are
// forged. Box durations (mvhd, tkhd, mdhd) below what the samples hold
// are not believed (a decoder goes by the sample tables); sample durations
// (stts, trun) below what the frames hold are not believed either (a
// decoder decodes every frame); sample durations past what the bytes can
// hold are refused.
func TestProbeForgedMP4(t *testing.T) {
	dir := t.TempDir()
	opus, _ := makeTracks(t, dir, "opus.mp4", []string{silence(1200)}, codecs(opusTrack)...)
	aac, _ := makeAudio(t, dir, "aac.m4a", 65.5, "-ar", "16000", "-c:a", "aac", "-b:a", "24k")
	frag, _ := makeTracks(t, dir, "frag.mp4", []string{silence(300)}, append(codecs(opusTrack), "-movflags", "frag_keyframe+empty_moov")...)
	two, _ := makeTracks(t, dir, "two.mp4", []string{tone(1), silence(1200)}, codecs(aacTrack, opusTrack)...)

	t.Run("opus box durations", func(t *testing.T) {
		// The file of the report: 1,200 s of Opus whose mvhd, tkhd and
		// mdhd say 1 s.
		forged := forgeMP4(t, opus, 1, 1)
		if got := probeForged(t, dir, "boxes.mp4", forged); got > 2 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		expectLength(t, forged, 1200, 0.02)
	})
	t.Run("opus sample durations", func(t *testing.T) {
		// The sample durations too, a thousandth of the truth: the Opus
		// packets' own lengths are read.
		forged := forgeMP4(t, opus, 1, 0.001)
		if got := probeForged(t, dir, "samples.mp4", forged); got > 2 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		expectLength(t, forged, 1200, opusWalkTolerance)
	})
	t.Run("aac sample durations", func(t *testing.T) {
		// Every AAC frame is 1,024 samples at the entry's rate.
		forged := forgeMP4(t, aac, 1, 0.001)
		expectLength(t, forged, 65.5, 0.2)
	})
	t.Run("fragmented opus run durations", func(t *testing.T) {
		// The runs' sample durations (and the fragments' defaults): each
		// packet is read where its run puts it.
		forged := forgeMP4(t, frag, 0, 0.001)
		if got := probeForged(t, dir, "runs.mp4", forged); got > 2 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		expectLength(t, forged, 300, opusWalkTolerance)
	})
	t.Run("two tracks, box durations", func(t *testing.T) {
		expectLength(t, forgeMP4(t, two, 1, 1), 1200, 0.02)
	})
	t.Run("sample durations past the bytes", func(t *testing.T) {
		// 65.5 s of 24 kbit/s AAC claiming 65,500 s: more than 0.8 kbit/s
		// could hold.
		expectRefused(t, forgeMP4(t, aac, 0, 1000))
	})
}

// TestMP4Samples: hand-made files of one Opus track whose packets (one
// byte each, 20 ms of CELT) are found through the sample tables, as a
// decoder finds them: their lengths are read whatever the durations say;
// tables that point again and again at the same bytes are refused past
// MaxMP4SamplesWalked; a sound track without samples holds no sound.
func TestMP4Samples(t *testing.T) {
	box := func(typ string, parts ...[]byte) []byte {
		body := bytes.Join(parts, nil)
		return append(binary.BigEndian.AppendUint32(nil, uint32(8+len(body))), append([]byte(typ), body...)...)
	}
	u32 := func(vs ...uint32) []byte {
		var out []byte
		for _, v := range vs {
			out = binary.BigEndian.AppendUint32(out, v)
		}
		return out
	}
	// An Opus sample entry of 48 kHz (a version 0 sound description).
	entry := box("Opus", make([]byte, 6), []byte{0, 1}, make([]byte, 8), []byte{0, 1, 0, 16}, make([]byte, 4), u32(48000<<16))
	const packets, size = 500, 10
	head := append(box("ftyp", []byte("isom"), u32(0)), box("mdat", bytes.Repeat(append([]byte{0xFC}, make([]byte, size-1)...), packets))...)
	const first = 24 // the first packet's offset
	// file has every box say 1 s, each sample last delta ticks of 48 kHz,
	// and perChunk samples in each chunk of offsets.
	file := func(samples, delta, perChunk uint32, offsets []uint32) []byte {
		declared := uint32(1)
		if samples == 0 {
			declared = 0
		}
		trak := box("trak",
			box("tkhd", u32(0, 0, 0, 1, 0, 1000*declared)),
			box("mdia",
				box("hdlr", u32(0, 0), []byte("soun"), make([]byte, 13)),
				box("mdhd", u32(0, 0, 0, 48000, 48000*declared)),
				box("minf", box("stbl",
					box("stsd", u32(0, 1), entry),
					box("stts", u32(0, 1, samples, delta)),
					box("stsc", u32(0, 1, 1, perChunk, 1)),
					box("stsz", u32(0, size, samples)),
					box("stco", u32(0, uint32(len(offsets))), u32(offsets...))))))
		return append(bytes.Clone(head), box("moov", box("mvhd", u32(0, 0, 0, 1000, 1000*declared)), trak)...)
	}
	chunks := func(n, step int) []uint32 {
		var out []uint32
		for i := range n {
			out = append(out, uint32(first+i*step))
		}
		return out
	}
	// 500 packets in 10 chunks, each sample said to last one tick: 10 s.
	expectLength(t, file(packets, 1, 50, chunks(10, 50*size)), 10, 1e-9)
	// The sample durations are believed where they say more (20 s).
	expectLength(t, file(packets, 1920, 50, chunks(10, 50*size)), 20, 1e-9)
	// Every chunk at the first packet: more samples than the file holds.
	n := MaxMP4SamplesWalked/packets + 1
	expectRefused(t, file(uint32(n*packets), 1, packets, chunks(n, 0)))
	// A sound track whose tables are empty holds nothing.
	expectRefused(t, file(0, 0, 0, nil))
}

// TestMKVFrames: the three lacings of Matroska blocks, from the example of
// its specification (frames of 800, 500 and 1,000 bytes), and a lacing
// that does not fit its data.
func TestMKVFrames(t *testing.T) {
	data := make([]byte, 2300)
	for _, tc := range []struct {
		name   string
		lacing byte
		head   []byte
		want   []int
	}{
		{"none", 0, nil, []int{2300}},
		{"xiph", mkvLacingXiph, []byte{2, 255, 255, 255, 35, 255, 245}, []int{800, 500, 1000}},
		{"ebml", mkvLacingEBML, []byte{2, 0x43, 0x20, 0x5E, 0xD3}, []int{800, 500, 1000}},
		{"fixed", mkvLacingFixed, []byte{1}, []int{1150, 1150}},
		{"xiph past the data", mkvLacingXiph, []byte{1, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}, nil},
		{"ebml negative", mkvLacingEBML, []byte{2, 0x81, 0x40, 0x00}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			mkvFrames(append(bytes.Clone(tc.head), data...), tc.lacing, func(p []byte) { got = append(got, len(p)) })
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("frames %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzMKVFrames: any lacing of any data splits into frames that lie in
// the data, in order, without panicking.
func FuzzMKVFrames(f *testing.F) {
	f.Add(byte(mkvLacingXiph), []byte{2, 255, 255, 255, 35, 255, 245, 1, 2, 3})
	f.Add(byte(mkvLacingEBML), []byte{2, 0x43, 0x20, 0x5E, 0xD3, 9})
	f.Add(byte(mkvLacingFixed), []byte{3, 1, 2, 3, 4})
	f.Add(byte(0), []byte{})
	f.Fuzz(func(t *testing.T, lacing byte, d []byte) {
		total := 0
		mkvFrames(d, lacing&mkvLacing, func(p []byte) { total += len(p) })
		if total > len(d) {
			t.Fatalf("frames of %d bytes in %d", total, len(d))
		}
	})
}

// TestOggStreams: the logical streams of hand-made Ogg files, by the
// codec of their first packets: a stream the gateway cannot measure is
// refused, and so is a file of more than MaxOggStreams streams.
func TestOggStreams(t *testing.T) {
	page := func(serial uint32, flags byte, granule uint64, packet []byte) []byte {
		p := append([]byte("OggS\x00"), flags)
		p = binary.LittleEndian.AppendUint64(p, granule)
		p = binary.LittleEndian.AppendUint32(p, serial)
		p = append(p, 0, 0, 0, 0, 0, 0, 0, 0, 1, byte(len(packet)))
		p = append(p, packet...)
		binary.LittleEndian.PutUint32(p[22:], oggCRC(p))
		return p
	}
	opusHead := append([]byte("OpusHead\x01\x01"), make([]byte, 9)...)
	opus := func(serial uint32, packets int) []byte {
		out := append(page(serial, 2, 0, opusHead), page(serial, 0, 0, []byte("OpusTags"))...)
		for i := range packets {
			out = append(out, page(serial, 0, uint64(i+1)*960, []byte{0xFC})...) // 20 ms of CELT
		}
		return out
	}
	// One stream of 100 packets, and the same with a Theora stream
	// beside it (no sound).
	expectLength(t, opus(1, 100), 2, 1e-9)
	expectLength(t, append(opus(1, 100), page(7, 2, 0, []byte("\x80theora"+strings.Repeat("\x00", 40)))...), 2, 1e-9)
	// A FLAC stream beside it cannot be measured.
	expectRefused(t, append(opus(1, 100), page(7, 2, 0, []byte("\x7fFLAC"+strings.Repeat("\x00", 40)))...))
	// Two links of two streams each, their first pages first: 2 s (of
	// 2 s and 1 s) then 3 s (of 1 s and 3 s).
	var chain []byte
	for _, link := range [][2]int{{100, 50}, {50, 150}} {
		a, b := opus(uint32(len(chain)+1), link[0]), opus(uint32(len(chain)+2), link[1])
		chain = append(append(append(append(chain, a[:47]...), b[:47]...), a[47:]...), b[47:]...)
	}
	expectLength(t, chain, 5, 1e-9)
	// A stream that goes on past the first page of the next link is read
	// to its end: 2 s, then 1 s.
	a, b := opus(1, 100), opus(2, 50)
	cut := 47 + 36 + 29 // its two header pages and one packet's
	expectLength(t, append(append(bytes.Clone(a[:cut]), b...), a[cut:]...), 3, 1e-9)
	// More streams than the reader reads.
	var many []byte
	for s := range uint32(MaxOggStreams + 1) {
		many = append(many, page(s, 2, 0, opusHead)...)
	}
	for s := range uint32(MaxOggStreams + 1) {
		many = append(many, page(s, 0, 960, []byte{0xFC})...)
	}
	expectRefused(t, many)
}

// TestProbeForgedWebM: a WebM of 65.5 s of Vorbis whose Duration says
// 1 s and whose clusters all say they start at 0 (so no block seems to
// start past 32.8 s): the Vorbis packets are counted from the headers in
// the track's CodecPrivate.
func TestProbeForgedWebM(t *testing.T) {
	dir := t.TempDir()
	webm, real := makeAudio(t, dir, "vorbis.webm", 65.5, "-ar", "16000", "-c:a", "libvorbis")
	forged := bytes.Clone(webm)
	hdr, _ := ebmlNext(forged)
	seg, ok := ebmlNext(forged[hdr.next:])
	if !ok || seg.id != mkvSegment {
		t.Fatal("no segment")
	}
	durations, clusters := 0, 0
	for d := seg.data; len(d) > 0; {
		e, ok := ebmlNext(d)
		if !ok {
			break
		}
		for c := e.data; len(c) > 0 && (e.id == mkvInfo || e.id == mkvCluster); {
			f, ok := ebmlNext(c)
			if !ok {
				break
			}
			switch {
			case e.id == mkvInfo && f.id == mkvDuration && len(f.data) == 8:
				binary.BigEndian.PutUint64(f.data, math.Float64bits(1000))
				durations++
			case e.id == mkvInfo && f.id == mkvDuration && len(f.data) == 4:
				binary.BigEndian.PutUint32(f.data, math.Float32bits(1000))
				durations++
			case e.id == mkvCluster && f.id == mkvTimecode:
				clear(f.data)
				clusters++
			}
			c = c[f.next:]
		}
		d = d[e.next:]
	}
	if durations != 1 || clusters < 2 {
		t.Fatalf("forged %d durations and %d cluster timecodes", durations, clusters)
	}
	if got := probeForged(t, dir, "forged.webm", forged); got > 2 {
		t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
	}
	expectLength(t, forged, real, 0.03)
}
