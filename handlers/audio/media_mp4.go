package audio

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// ---- MP4 / M4A / MOV (ISO base media, QuickTime) ----

// MaxMP4SamplesWalked bounds the samples whose bytes the MP4 reader reads
// (an Opus packet's table of contents, an MP3 frame header), over all the
// tracks of one file. Real packets take a few bytes each, so an 8 MB file
// holds under 3 million; tables that lead to more point at the same bytes
// again and again, and such a file is refused.
const MaxMP4SamplesWalked = 1 << 23

// Samples one frame decodes to, for the codecs whose frames all have one
// length.
const (
	// aacFrameSamples is one AAC frame, at its core rate.
	aacFrameSamples = 1024
	// ac3FrameSamples is one AC-3 frame (six blocks of 256).
	ac3FrameSamples = 1536
	// opusRate is the rate of Opus sample counts, whatever the input's.
	opusRate = 48000
)

// mp4Lossy are the sample entries of lossy codecs; a sound track of any
// other is bounded at the lossless rate.
var mp4Lossy = map[string]bool{"mp4a": true, "Opus": true, "ac-3": true, "ec-3": true, ".mp3": true}

// mp4Box is one box: its type, where it starts in the bytes it was read
// from, and its payload (cut to what they hold).
type mp4Box struct {
	typ  string
	at   int
	data []byte
	next int
}

// mp4Next reads the box at the start of b.
func mp4Next(b []byte) (mp4Box, bool) {
	if len(b) < 8 {
		return mp4Box{}, false
	}
	size := uint64(binary.BigEndian.Uint32(b[0:4]))
	typ := string(b[4:8])
	hdr := uint64(8)
	switch size {
	case 0: // to the end of the file
		size = uint64(len(b))
	case 1:
		if len(b) < 16 {
			return mp4Box{}, false
		}
		size, hdr = binary.BigEndian.Uint64(b[8:16]), 16
	}
	if size < hdr {
		return mp4Box{}, false
	}
	end := min(size, uint64(len(b)))
	return mp4Box{typ: typ, data: b[hdr:end], next: int(end)}, true
}

// mp4Children calls f for each box inside b.
func mp4Children(b []byte, f func(mp4Box)) {
	for at := 0; at < len(b); {
		c, ok := mp4Next(b[at:])
		if !ok {
			return
		}
		c.at = at
		f(c)
		at += c.next
	}
}

// mp4Entry is what the reader learns of a track's (first) sample
// description.
type mp4Entry struct {
	codec       string  // its type: mp4a (AAC), Opus, .mp3, ac-3, alac, ...
	rate        float64 // its sample rate
	preSkip     uint16  // Opus: the samples a decoder drops first (dOps)
	frameLength uint32  // ALAC: the samples of a frame (alac)
}

// readsFrames reports a codec whose frames have lengths of their own,
// read from each sample's first bytes.
func (e mp4Entry) readsFrames() bool { return e.codec == "Opus" || e.codec == ".mp3" }

// mp4Track is what the reader learns of one track.
type mp4Track struct {
	id           uint32
	sound        bool
	presentation uint64 // tkhd duration, in the movie's time scale
	timescale    uint32 // mdhd
	duration     uint64 // mdhd duration
	entry        mp4Entry
	// The sample tables: stts, stsz (or stz2), stsc and stco (or co64) of
	// the movie, and the runs (trun) of its fragments.
	ticks     uint64 // the samples' durations, in timescale
	samples   uint64 // the samples (frames of the codec)
	bytes     uint64 // their bytes
	sizes     mp4Sizes
	chunks    []byte // chunk offsets, chunkWidth bytes each
	width     int
	stsc      []byte  // sample-to-chunk entries, 12 bytes each
	trexDur   uint32  // trex default_sample_duration
	trexSize  uint32  // trex default_sample_size
	opus      int64   // 48 kHz samples of the Opus packets read
	mp3Length float64 // seconds of the MP3 frames read
}

// mp4Sizes is a sample size table (stsz or stz2).
type mp4Sizes struct {
	fixed uint32 // every sample's size (stsz), 0 when listed
	table []byte // the listed sizes
	field int    // bits of a listed size: 32 (stsz), or 4, 8, 16 (stz2)
	count uint64 // the samples it lists
}

// at is the size of sample i, false when the table does not list it.
func (s *mp4Sizes) at(i uint64) (uint64, bool) {
	switch {
	case i >= s.count:
		return 0, false
	case s.fixed != 0:
		return uint64(s.fixed), true
	case s.field == 32 && i*4+4 <= uint64(len(s.table)):
		return uint64(binary.BigEndian.Uint32(s.table[i*4:])), true
	case s.field == 16 && i*2+2 <= uint64(len(s.table)):
		return uint64(binary.BigEndian.Uint16(s.table[i*2:])), true
	case s.field == 8 && i < uint64(len(s.table)):
		return uint64(s.table[i]), true
	case s.field == 4 && i/2 < uint64(len(s.table)):
		return uint64(s.table[i/2]>>(4*(1-i%2))) & 0x0F, true
	}
	return 0, false
}

// mp4File is what the reader learns of a whole file.
type mp4File struct {
	b          []byte
	tracks     []*mp4Track
	movieScale uint32 // mvhd
	mehd       uint64 // the fragmented movie's duration, in movieScale
	walked     int    // samples read so far (MaxMP4SamplesWalked)
}

// mp4Read reads every sound track of the file and bills the longest:
// whichever track a decoder picks (the default one, the first, the one
// with most channels), its length is covered. A track's length is what
// its samples hold: the sum of their durations in its sample tables (stts,
// and trun in fragments), never below its frames counted (an AAC frame is
// 1,024 samples at the entry's rate, an AC-3 frame 1,536, an ALAC frame
// its frame length; an Opus packet's and an MP3 frame's own lengths are
// read from their first bytes). The durations the boxes declare (tkhd,
// mdhd, mehd) are claims: they are taken when the samples agree (within
// WalkTolerance: an encoder's priming and padding) or when they claim
// more, bounded like every claim by what the bytes can hold, and never
// shrink what the samples hold. Every track's floor is its samples' bytes
// (the whole file when they are not written) at the highest plausible
// bitrate. A file without a sound track (an image, a silent video) is not
// audio.
func mp4Read(b []byte) (reading, error) {
	f, err := mp4Parse(b)
	if err != nil {
		return reading{}, err
	}
	var out reading
	heard := false
	for _, t := range f.tracks {
		if !t.sound || t.empty() {
			continue
		}
		r, err := f.trackReading(t)
		if err != nil {
			return reading{}, err
		}
		d, err := r.seconds(FormatMP4)
		if err != nil {
			return reading{}, err
		}
		heard = true
		out.length = max(out.length, d)
		out.least += r.least
		out.most += r.most
	}
	if !heard {
		for _, t := range f.tracks {
			if t.sound {
				return reading{}, unreadable(FormatMP4, "its sound tracks hold no samples")
			}
		}
		return reading{}, ErrNotAudio
	}
	// The tracks' floors add up, but never past what the whole file's
	// bytes set.
	out.least = min(out.least, float64(len(b))/LossyHighestRate)
	return out, nil
}

// empty reports a sound track without a sample or a duration: it holds
// no sound.
func (t *mp4Track) empty() bool {
	return t.samples == 0 && t.ticks == 0 && t.bytes == 0 && !known(t.presentation) && !known(t.duration)
}

// trackReading is one sound track's reading.
func (f *mp4File) trackReading(t *mp4Track) (reading, error) {
	if t.timescale == 0 {
		return reading{}, unreadable(FormatMP4, "a sound track has no time scale")
	}
	var declared float64
	switch {
	case known(t.presentation) && f.movieScale > 0:
		// As presented (its edit list applied: an AAC encoder's priming
		// samples are not heard).
		declared = float64(t.presentation) / float64(f.movieScale)
	case known(t.duration):
		declared = float64(t.duration) / float64(t.timescale)
	case f.mehd > 0 && f.movieScale > 0:
		declared = float64(f.mehd) / float64(f.movieScale)
	}
	// The frames counted hold the last frame's padding, which the sample
	// durations leave out: they count when they hold more than that.
	tables := float64(t.ticks) / float64(t.timescale)
	if t.entry.codec == "Opus" {
		// An Opus decoder drops the pre-skip, which the durations count.
		tables = max(tables-float64(t.entry.preSkip)/opusRate, 0)
	}
	held := walked(tables, t.frameSeconds())
	if declared == 0 && held == 0 {
		return reading{}, unreadable(FormatMP4, "a sound track has no duration")
	}
	length := walked(declared, held)
	n := int(min(t.bytes, uint64(len(f.b))))
	if n == 0 {
		n = len(f.b)
	}
	highest := float64(LossyHighestRate)
	if !mp4Lossy[t.entry.codec] {
		highest = LosslessHighestRate
	}
	least, most := bounds(n, highest, LossyLowestRate)
	return reading{length: length, claim: max(declared, tables), least: least, most: most}, nil
}

// frameSeconds is the length of the track's frames counted: 0 for a codec
// whose frames the reader does not count.
func (t *mp4Track) frameSeconds() float64 {
	e := t.entry
	per := 0.0
	switch e.codec {
	case "Opus":
		return float64(max(t.opus-int64(e.preSkip), 0)) / opusRate
	case ".mp3":
		return t.mp3Length
	case "mp4a":
		// More with SBR: a floor.
		per = aacFrameSamples
	case "ac-3":
		per = ac3FrameSamples
	case "alac":
		per = float64(e.frameLength)
	}
	if !(e.rate > 0) {
		return 0
	}
	return float64(t.samples) * per / e.rate
}

// frame counts one sample's frame from its first bytes.
func (t *mp4Track) frame(p []byte) {
	switch t.entry.codec {
	case "Opus":
		t.opus += int64(opusSamples(p))
	case ".mp3":
		if h, ok := parseMP3Header(p); ok {
			t.mp3Length += float64(h.samples) / float64(h.sampleRate)
		}
	}
}

// known reports a duration that is written (not 0, not all ones).
func known(d uint64) bool { return d > 0 && d != math.MaxUint32 && d != math.MaxUint64 }

// addSat and mulSat add and multiply, saturating at the largest uint64.
func addSat(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}

func mulSat(a, b uint64) uint64 {
	if hi, lo := bits.Mul64(a, b); hi == 0 {
		return lo
	}
	return math.MaxUint64
}

// addBytes adds n bytes of samples to the track, held below 2^62.
func (t *mp4Track) addBytes(n uint64) {
	t.bytes = min(addSat(t.bytes, n), math.MaxInt64>>1)
}

// mp4Parse reads the movie (moov: its header, tracks and fragment
// defaults), then every track's sample tables, then the movie fragments
// (moof) in file order.
func mp4Parse(b []byte) (*mp4File, error) {
	f := &mp4File{b: b}
	haveMoov := false
	type trex struct{ id, dur, size uint32 }
	var defaults []trex
	var moofs []mp4Box
	mp4Children(b, func(top mp4Box) {
		switch top.typ {
		case "moov":
			haveMoov = true
			mp4Children(top.data, func(m mp4Box) {
				switch m.typ {
				case "mvhd":
					f.movieScale, _ = mp4TimescaleDuration(m.data)
				case "trak":
					f.tracks = append(f.tracks, mp4ReadTrak(m.data))
				case "mvex":
					mp4Children(m.data, func(x mp4Box) {
						switch {
						case x.typ == "mehd" && len(x.data) >= 8:
							if x.data[0] == 1 && len(x.data) >= 12 {
								f.mehd = binary.BigEndian.Uint64(x.data[4:12])
							} else {
								f.mehd = uint64(binary.BigEndian.Uint32(x.data[4:8]))
							}
						case x.typ == "trex" && len(x.data) >= 16:
							e := trex{id: binary.BigEndian.Uint32(x.data[4:8]), dur: binary.BigEndian.Uint32(x.data[12:16])}
							if len(x.data) >= 20 {
								e.size = binary.BigEndian.Uint32(x.data[16:20])
							}
							defaults = append(defaults, e)
						}
					})
				}
			})
		case "moof":
			moofs = append(moofs, top)
		}
	})
	if !haveMoov {
		return nil, ErrNotAudio
	}
	for _, x := range defaults {
		if t := f.track(x.id); t != nil {
			t.trexDur, t.trexSize = x.dur, x.size
		}
	}
	for _, t := range f.tracks {
		if t.sound && t.entry.readsFrames() && !f.walkChunks(t) {
			return nil, tooManySamples()
		}
	}
	for _, moof := range moofs {
		// A track fragment's data starts where the previous one's ended,
		// the first at the movie fragment's first byte (unless it says).
		implicit := uint64(moof.at)
		ok := true
		mp4Children(moof.data, func(traf mp4Box) {
			if traf.typ == "traf" && ok {
				ok = f.readTraf(traf.data, uint64(moof.at), &implicit)
			}
		})
		if !ok {
			return nil, tooManySamples()
		}
	}
	return f, nil
}

func tooManySamples() error {
	return unreadable(FormatMP4, "its sample tables lead to more than %d samples", MaxMP4SamplesWalked)
}

// track is the track of the id, nil when there is none.
func (f *mp4File) track(id uint32) *mp4Track {
	for _, t := range f.tracks {
		if t.id == id {
			return t
		}
	}
	return nil
}

// visit reads the sample of size bytes at offset off in the file (its
// first bytes: a frame's length), false when the file has had its
// MaxMP4SamplesWalked. A sample outside the file is not read: no decoder
// hears it.
func (f *mp4File) visit(t *mp4Track, off, size uint64) bool {
	if f.walked++; f.walked > MaxMP4SamplesWalked {
		return false
	}
	if off < uint64(len(f.b)) && size > 0 {
		end := min(addSat(off, min(size, 4)), uint64(len(f.b)))
		t.frame(f.b[off:end])
	}
	return true
}

// mp4TimescaleDuration reads an mvhd or mdhd full box.
func mp4TimescaleDuration(b []byte) (uint32, uint64) {
	if len(b) >= 32 && b[0] == 1 {
		return binary.BigEndian.Uint32(b[20:24]), binary.BigEndian.Uint64(b[24:32])
	}
	if len(b) >= 20 {
		return binary.BigEndian.Uint32(b[12:16]), uint64(binary.BigEndian.Uint32(b[16:20]))
	}
	return 0, 0
}

// mp4ReadTrak reads a track's id (tkhd), handler (hdlr), media header
// (mdhd) and sample table (stbl).
func mp4ReadTrak(b []byte) *mp4Track {
	t := &mp4Track{}
	mp4Children(b, func(c mp4Box) {
		switch c.typ {
		case "tkhd":
			if len(c.data) >= 36 && c.data[0] == 1 {
				t.id = binary.BigEndian.Uint32(c.data[20:24])
				t.presentation = binary.BigEndian.Uint64(c.data[28:36])
			} else if len(c.data) >= 24 {
				t.id = binary.BigEndian.Uint32(c.data[12:16])
				t.presentation = uint64(binary.BigEndian.Uint32(c.data[20:24]))
			}
		case "mdia":
			mp4Children(c.data, func(m mp4Box) {
				switch m.typ {
				case "hdlr":
					t.sound = len(m.data) >= 12 && string(m.data[8:12]) == "soun"
				case "mdhd":
					t.timescale, t.duration = mp4TimescaleDuration(m.data)
				case "minf":
					mp4Children(m.data, func(n mp4Box) {
						if n.typ == "stbl" {
							mp4Children(n.data, t.sampleTable)
						}
					})
				}
			})
		}
	})
	return t
}

// sampleTable reads one box of a sample table: the codec (stsd), the
// sample durations (stts), sizes (stsz, stz2), chunks (stsc) and chunk
// offsets (stco, co64). Each table is cut to the entries its box holds.
func (t *mp4Track) sampleTable(c mp4Box) {
	d := c.data
	if len(d) < 8 {
		return
	}
	count := uint64(binary.BigEndian.Uint32(d[4:8]))
	switch c.typ {
	case "stsd":
		t.entry = mp4ReadEntry(d)
	case "stts":
		for off := 8; count > 0 && off+8 <= len(d); off, count = off+8, count-1 {
			n, delta := binary.BigEndian.Uint32(d[off:]), binary.BigEndian.Uint32(d[off+4:])
			t.ticks = addSat(t.ticks, uint64(n)*uint64(delta))
		}
	case "stsz":
		if len(d) < 12 {
			return
		}
		s := mp4Sizes{fixed: binary.BigEndian.Uint32(d[4:8]), count: uint64(binary.BigEndian.Uint32(d[8:12])), field: 32}
		if s.fixed == 0 {
			s.table = d[12:]
			s.count = min(s.count, uint64(len(s.table)/4))
		}
		t.addSizes(s)
	case "stz2":
		if len(d) < 12 {
			return
		}
		s := mp4Sizes{field: int(d[7]), count: uint64(binary.BigEndian.Uint32(d[8:12])), table: d[12:]}
		switch s.field {
		case 4, 8, 16:
			s.count = min(s.count, uint64(len(s.table))*8/uint64(s.field))
			t.addSizes(s)
		}
	case "stsc":
		t.stsc = d[8 : 8+min(count, uint64(len(d)-8)/12)*12]
	case "stco", "co64":
		t.width = 4
		if c.typ == "co64" {
			t.width = 8
		}
		t.chunks = d[8 : 8+min(count, uint64(len(d)-8)/uint64(t.width))*uint64(t.width)]
	}
}

// addSizes takes a sample size table: the samples it lists and their
// bytes.
func (t *mp4Track) addSizes(s mp4Sizes) {
	t.sizes = s
	t.samples = s.count
	if s.fixed != 0 {
		t.addBytes(mulSat(uint64(s.fixed), s.count))
		return
	}
	for i := range s.count {
		n, _ := s.at(i)
		t.addBytes(n)
	}
}

// mp4ReadEntry reads the first sample description of an stsd box: its
// codec, its sample rate (16.16 in a version 0 or 1 sound description, a
// float in a QuickTime version 2 one) and, inside it, Opus's pre-skip
// (dOps) and ALAC's frame length (alac).
func mp4ReadEntry(d []byte) mp4Entry {
	var e mp4Entry
	if len(d) < 16 {
		return e
	}
	e.codec = string(d[12:16])
	end := min(8+uint64(binary.BigEndian.Uint32(d[8:12])), uint64(len(d)))
	children := 44 // offsets in d: the sound description's fields
	if len(d) >= 26 {
		switch binary.BigEndian.Uint16(d[24:26]) {
		case 1:
			children = 60
		case 2:
			children = 80
			if len(d) >= 56 {
				e.rate = math.Float64frombits(binary.BigEndian.Uint64(d[48:56]))
			}
		}
	}
	if e.rate == 0 && len(d) >= 44 {
		e.rate = float64(binary.BigEndian.Uint32(d[40:44]) >> 16)
	}
	if math.IsNaN(e.rate) || e.rate < 0 {
		e.rate = 0
	}
	if uint64(children) >= end {
		return e
	}
	mp4Children(d[children:end], func(c mp4Box) {
		switch {
		case c.typ == "dOps" && len(c.data) >= 4:
			e.preSkip = binary.BigEndian.Uint16(c.data[2:4])
		case c.typ == "alac" && len(c.data) >= 8:
			e.frameLength = binary.BigEndian.Uint32(c.data[4:8])
		}
	})
	return e
}

// walkChunks reads the first bytes of each sample of the track's chunks
// (stsc, stco/co64 and the size table), as a decoder finds them; false
// when the file has had its MaxMP4SamplesWalked.
func (f *mp4File) walkChunks(t *mp4Track) bool {
	entries := len(t.stsc) / 12
	chunks := 0
	if t.width > 0 {
		chunks = len(t.chunks) / t.width
	}
	field := func(e, i int) uint64 { return uint64(binary.BigEndian.Uint32(t.stsc[e*12+i*4:])) }
	sample, e := uint64(0), -1
	for c := range chunks {
		// The entry of this chunk: the last whose first chunk (counted
		// from 1) is not after it.
		for e+1 < entries && field(e+1, 0) <= uint64(c)+1 {
			e++
		}
		if e < 0 {
			continue
		}
		var off uint64
		if t.width == 8 {
			off = binary.BigEndian.Uint64(t.chunks[c*8:])
		} else {
			off = uint64(binary.BigEndian.Uint32(t.chunks[c*4:]))
		}
		for k := field(e, 1); k > 0; k-- {
			size, ok := t.sizes.at(sample)
			if !ok {
				return true // the samples listed are all read
			}
			if !f.visit(t, off, size) {
				return false
			}
			off = addSat(off, size)
			sample++
		}
	}
	return true
}

// readTraf reads a track fragment: its defaults (tfhd, else the track's
// trex) and its runs (trun), whose samples' durations and sizes are added
// to its track, each sample read where it lies (for codecs whose frames
// have lengths of their own). moof is the movie fragment's offset;
// implicit is where the previous fragment's data ended, and is moved past
// this one's. False when the file has had its MaxMP4SamplesWalked.
func (f *mp4File) readTraf(b []byte, moof uint64, implicit *uint64) bool {
	var t *mp4Track
	var def, defSize uint32
	var base, next uint64
	ok := true
	mp4Children(b, func(c mp4Box) {
		switch c.typ {
		case "tfhd":
			if len(c.data) < 8 {
				return
			}
			flags := binary.BigEndian.Uint32(c.data[0:4]) & 0xFFFFFF
			if t = f.track(binary.BigEndian.Uint32(c.data[4:8])); t == nil {
				return
			}
			def, defSize = t.trexDur, t.trexSize
			base = *implicit
			if flags&0x020000 != 0 { // default-base-is-moof
				base = moof
			}
			off := 8
			if flags&0x01 != 0 && len(c.data) >= off+8 {
				base = binary.BigEndian.Uint64(c.data[off : off+8])
				off += 8
			}
			if flags&0x02 != 0 {
				off += 4
			}
			if flags&0x08 != 0 && len(c.data) >= off+4 {
				def = binary.BigEndian.Uint32(c.data[off : off+4])
				off += 4
			}
			if flags&0x10 != 0 && len(c.data) >= off+4 {
				defSize = binary.BigEndian.Uint32(c.data[off : off+4])
			}
			next = base
		case "trun":
			if t == nil || !ok || len(c.data) < 8 {
				return
			}
			ok = f.readTrun(t, c.data, def, defSize, base, &next)
			*implicit = next
		}
	})
	return ok
}

// readTrun reads one track run: each sample's duration and size (its own,
// or the fragment's defaults) and, for codecs whose frames have lengths of
// their own, its first bytes where it lies (from base plus the run's data
// offset, or where the previous run ended: next, moved past this one).
func (f *mp4File) readTrun(t *mp4Track, d []byte, def, defSize uint32, base uint64, next *uint64) bool {
	flags := binary.BigEndian.Uint32(d[0:4]) & 0xFFFFFF
	count := uint64(binary.BigEndian.Uint32(d[4:8]))
	off := 8
	if flags&0x01 != 0 && len(d) >= 12 {
		*next = uint64(int64(base) + int64(int32(binary.BigEndian.Uint32(d[8:12]))))
		off += 4
	}
	if flags&0x04 != 0 {
		off += 4
	}
	per := 0
	for _, f := range []uint32{0x100, 0x200, 0x400, 0x800} {
		if flags&f != 0 {
			per += 4
		}
	}
	if per > 0 {
		// The samples the run lists.
		count = min(count, uint64(max(len(d)-off, 0)/per))
	}
	walk := t.sound && t.entry.readsFrames()
	if per == 0 || flags&0x300 == 0 {
		t.ticks = addSat(t.ticks, mulSat(count, uint64(def)))
		t.addBytes(mulSat(count, uint64(defSize)))
		t.samples = addSat(t.samples, count)
		if !walk {
			*next = addSat(*next, mulSat(count, uint64(defSize)))
			return true
		}
	}
	for i := range count {
		dur, size := uint64(def), uint64(defSize)
		if per > 0 {
			p := off + int(i)*per
			if flags&0x100 != 0 {
				dur = uint64(binary.BigEndian.Uint32(d[p:]))
				p += 4
			}
			if flags&0x200 != 0 {
				size = uint64(binary.BigEndian.Uint32(d[p:]))
			}
			if flags&0x300 != 0 {
				t.ticks = addSat(t.ticks, dur)
				t.addBytes(size)
				t.samples = addSat(t.samples, 1)
			}
		}
		if walk && !f.visit(t, *next, size) {
			return false
		}
		*next = addSat(*next, size)
	}
	return true
}
