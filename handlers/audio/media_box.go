package audio

import (
	"encoding/binary"
	"math"
)

// ---- WebM (EBML) ----

// EBML element ids the reader uses.
const (
	ebmlHeader        = 0x1A45DFA3
	ebmlDocTypeID     = 0x4282
	mkvSegment        = 0x18538067
	mkvInfo           = 0x1549A966
	mkvTimecodeScale  = 0x2AD7B1
	mkvDuration       = 0x4489
	mkvCluster        = 0x1F43B675
	mkvTracks         = 0x1654AE6B
	mkvTrackEntry     = 0xAE
	mkvTrackNumber    = 0xD7
	mkvTrackType      = 0x83
	mkvTrackAudio     = 2
	mkvCodecID        = 0x86
	mkvLacing         = 0x06 // the lacing bits of a block's flags
	mkvTimecode       = 0xE7
	mkvSimpleBlock    = 0xA3
	mkvBlockGroup     = 0xA0
	mkvBlock          = 0xA1
	mkvBlockDuration  = 0x9B
	mkvDefaultScaleNS = 1_000_000
	ebmlUnknownSize   = -1
)

// mkvTopLevel are the children of a Segment: one of them ends a Cluster
// of unknown size (a live recording writes clusters without sizes).
var mkvTopLevel = map[uint64]bool{
	mkvCluster: true, mkvInfo: true, 0x1654AE6B: true, 0x1C53BB6B: true, 0x1254C367: true,
	0x114D9B74: true, 0x1043A770: true, 0x1941A469: true,
}

// ebmlID reads an element id (its length marker kept, as the spec writes
// ids) and returns it with its length in bytes.
func ebmlID(b []byte) (uint64, int, bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n := 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if n > 4 || len(b) < n {
		return 0, 0, false
	}
	var id uint64
	for _, c := range b[:n] {
		id = id<<8 | uint64(c)
	}
	return id, n, true
}

// ebmlSize reads an element size; ebmlUnknownSize when every value bit is
// set (a size not written).
func ebmlSize(b []byte) (int64, int, bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n := 1
	for mask := byte(0x80); b[0]&mask == 0; mask >>= 1 {
		n++
	}
	if len(b) < n {
		return 0, 0, false
	}
	v := uint64(b[0] & (0xFF >> n))
	all := v == uint64(0xFF>>n)
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
		all = all && c == 0xFF
	}
	if all {
		return ebmlUnknownSize, n, true
	}
	if v > math.MaxInt32 {
		return 0, 0, false
	}
	return int64(v), n, true
}

// ebmlElement is one element: its id, and its data (cut to what b holds).
type ebmlElement struct {
	id      uint64
	data    []byte
	unknown bool // size not written: data runs to the end of b
	next    int  // offset after the element (len(b) when cut short)
}

// ebmlNext reads the element at the start of b.
func ebmlNext(b []byte) (ebmlElement, bool) {
	id, n, ok := ebmlID(b)
	if !ok {
		return ebmlElement{}, false
	}
	size, m, ok := ebmlSize(b[n:])
	if !ok {
		return ebmlElement{}, false
	}
	start := n + m
	e := ebmlElement{id: id}
	if size == ebmlUnknownSize || int64(start)+size > int64(len(b)) {
		e.unknown = size == ebmlUnknownSize
		e.data, e.next = b[start:], len(b)
		return e, true
	}
	end := start + int(size)
	e.data, e.next = b[start:end], end
	return e, true
}

// ebmlUint reads an unsigned integer element's data.
func ebmlUint(b []byte) uint64 {
	var v uint64
	for _, c := range b[:min(len(b), 8)] {
		v = v<<8 | uint64(c)
	}
	return v
}

// ebmlDocType returns the DocType of the EBML header at the start of b.
func ebmlDocType(b []byte) string {
	e, ok := ebmlNext(b)
	if !ok || e.id != ebmlHeader {
		return ""
	}
	for d := e.data; len(d) > 0; {
		c, ok := ebmlNext(d)
		if !ok {
			return ""
		}
		if c.id == ebmlDocTypeID {
			return string(c.data)
		}
		d = d[c.next:]
	}
	return ""
}

// webmRead reads the Segment's Info Duration, never below the start of
// the last block; a file written live (a browser's MediaRecorder) has
// none, and then the length is read from the block timestamps: the end of
// the last block, its BlockDuration when written, else the gap between
// the track's last two blocks. Both are claims, and the bytes of the
// audio tracks' blocks bound them at the lossy bitrates.
func webmRead(b []byte) (reading, error) {
	hdr, ok := ebmlNext(b)
	if !ok {
		return reading{}, unreadable(FormatWebM, "its header is cut short")
	}
	seg, ok := ebmlNext(b[hdr.next:])
	if !ok || seg.id != mkvSegment {
		return reading{}, unreadable(FormatWebM, "it has no segment")
	}
	scale := uint64(mkvDefaultScaleNS)
	var stored float64
	t := &blockTimes{last: map[uint64]int64{}, gap: map[uint64]int64{}, bytes: map[uint64]int{}, opus: map[uint64]int64{}}
	audio := map[uint64]string{}
	for d := seg.data; len(d) > 0; {
		e, ok := ebmlNext(d)
		if !ok {
			break
		}
		switch e.id {
		case mkvInfo:
			for i := e.data; len(i) > 0; {
				c, ok := ebmlNext(i)
				if !ok {
					break
				}
				switch c.id {
				case mkvTimecodeScale:
					if s := ebmlUint(c.data); s > 0 {
						scale = s
					}
				case mkvDuration:
					switch len(c.data) {
					case 4:
						stored = float64(math.Float32frombits(binary.BigEndian.Uint32(c.data)))
					case 8:
						stored = math.Float64frombits(binary.BigEndian.Uint64(c.data))
					}
				}
				i = i[c.next:]
			}
		case mkvTracks:
			mkvAudioTracks(e.data, audio)
		case mkvCluster:
			rest := t.cluster(e.data, e.unknown)
			if e.unknown {
				// The cluster ended where the next top-level element began.
				d = rest
				continue
			}
		}
		d = d[e.next:]
	}
	if !(stored > 0 && !math.IsInf(stored, 0)) {
		stored = 0
	}
	if stored == 0 && !t.any {
		return reading{}, unreadable(FormatWebM, "it has neither a stored duration nor timed blocks")
	}
	// A stored Duration is taken as it is, but never below the start of
	// the last block (its end is an estimate).
	d := float64(t.end)
	if stored > 0 {
		d = max(stored, float64(t.start))
	}
	d = d * float64(scale) / 1e9
	n := 0
	for tr, c := range t.bytes {
		if _, ok := audio[tr]; ok || len(audio) == 0 {
			n += c
		}
	}
	least, most := bounds(n, LossyHighestRate, LossyLowestRate)
	// An Opus track's packets are counted (a Duration and block
	// timestamps are claims).
	var walk float64
	for tr, codec := range audio {
		if codec == "A_OPUS" {
			walk = max(walk, float64(t.opus[tr])/48000)
		}
	}
	return reading{length: walked(d, walk), claim: d, least: least, most: most}, nil
}

// mkvAudioTracks notes the numbers of the audio tracks of a Tracks
// element, with their codec ids.
func mkvAudioTracks(d []byte, audio map[uint64]string) {
	for len(d) > 0 {
		e, ok := ebmlNext(d)
		if !ok {
			return
		}
		if e.id == mkvTrackEntry {
			var number, typ uint64
			var codec string
			for c := e.data; len(c) > 0; {
				f, ok := ebmlNext(c)
				if !ok {
					break
				}
				switch f.id {
				case mkvTrackNumber:
					number = ebmlUint(f.data)
				case mkvTrackType:
					typ = ebmlUint(f.data)
				case mkvCodecID:
					codec = string(f.data)
				}
				c = c[f.next:]
			}
			if typ == mkvTrackAudio {
				audio[number] = codec
			}
		}
		d = d[e.next:]
	}
}

// blockTimes follows the blocks of the clusters read so far.
type blockTimes struct {
	any   bool
	end   int64            // the latest block end, in timecode ticks
	start int64            // the latest block start
	last  map[uint64]int64 // each track's last block time
	gap   map[uint64]int64 // each track's last gap between two blocks
	// bytes are each track's block bytes.
	bytes map[uint64]int
	// opus are each track's samples at 48 kHz if its blocks are Opus
	// packets (blocks without lacing).
	opus map[uint64]int64
}

// cluster reads one cluster's blocks; for a cluster of unknown size it
// stops at the next top-level element and returns the bytes from there.
func (t *blockTimes) cluster(d []byte, unknown bool) []byte {
	var base int64
	for len(d) > 0 {
		c, ok := ebmlNext(d)
		if !ok {
			return nil
		}
		if unknown && mkvTopLevel[c.id] {
			return d
		}
		switch c.id {
		case mkvTimecode:
			base = int64(ebmlUint(c.data))
		case mkvSimpleBlock:
			t.block(base, c.data, -1)
		case mkvBlockGroup:
			var block []byte
			dur := int64(-1)
			for g := c.data; len(g) > 0; {
				gc, ok := ebmlNext(g)
				if !ok {
					break
				}
				switch gc.id {
				case mkvBlock:
					block = gc.data
				case mkvBlockDuration:
					dur = int64(ebmlUint(gc.data))
				}
				g = g[gc.next:]
			}
			if block != nil {
				t.block(base, block, dur)
			}
		}
		d = d[c.next:]
	}
	return nil
}

// block notes one block: track number, a timestamp relative to the
// cluster's, and its duration (-1 when not written).
func (t *blockTimes) block(base int64, b []byte, dur int64) {
	track, n, ok := ebmlSize(b)
	if !ok || track < 0 || len(b) < n+2 {
		return
	}
	ts := base + int64(int16(binary.BigEndian.Uint16(b[n:n+2])))
	tr := uint64(track)
	t.bytes[tr] += len(b)
	if len(b) > n+3 && b[n+2]&mkvLacing == 0 {
		t.opus[tr] += int64(opusSamples(b[n+3:]))
	}
	if prev, seen := t.last[tr]; seen && ts > prev {
		t.gap[tr] = ts - prev
	}
	t.last[tr] = ts
	if dur < 0 {
		dur = t.gap[tr]
	}
	t.any = true
	t.end = max(t.end, ts+dur)
	t.start = max(t.start, ts)
}

// ---- MP4 / M4A (ISO base media) ----

// mp4Box is one box: its type and its payload (cut to what b holds).
type mp4Box struct {
	typ  string
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
	end := uint64(len(b))
	if size < end {
		end = size
	}
	return mp4Box{typ: typ, data: b[hdr:end], next: int(end)}, true
}

// mp4Children calls f for each box inside b.
func mp4Children(b []byte, f func(mp4Box)) {
	for len(b) > 0 {
		c, ok := mp4Next(b)
		if !ok {
			return
		}
		f(c)
		b = b[c.next:]
	}
}

// mp4Track is what the reader learns of one track.
type mp4Track struct {
	id               uint32
	sound            bool
	presentation     uint64 // tkhd duration, in the movie's time scale
	timescale        uint32
	duration         uint64
	defaultDuration  uint32 // trex default_sample_duration
	fragmentDuration uint64 // sum of its fragments' sample durations
	defaultSize      uint32 // trex default_sample_size
	bytes            uint64 // its samples' bytes (stsz, and trun in fragments)
	lossless         bool   // its codec is not a lossy one (ALAC, PCM)
	codec            string // its sample entry's type (mp4a: AAC)
	rate             uint32 // its sample entry's sample rate
	samples          uint64 // its samples (frames of the codec), stsz and trun
}

// aacFrameSamples is what one AAC frame decodes to (its core rate).
const aacFrameSamples = 1024

// mp4Lossy are the sample entries of lossy codecs; a sound track of any
// other is bounded at the lossless rate.
var mp4Lossy = map[string]bool{"mp4a": true, "Opus": true, "ac-3": true, "ec-3": true, ".mp3": true}

// mp4Read reads the sound track's presented length (tkhd), else its
// media header (mdhd) duration; a fragmented file (duration 0) is read
// from the movie extends header (mehd), else from the sample durations of
// its fragments (tfhd, trun). All are claims: an AAC track's length is at
// least its sample count times the 1,024 samples of an AAC frame, and
// every track's at least the bytes of its samples (the whole file when
// they are not written) at the highest plausible bitrate. A file without a
// sound track (an image, a silent video) is not audio.
func mp4Read(b []byte) (reading, error) {
	sound, d, err := mp4Sound(b)
	if err != nil {
		return reading{}, err
	}
	n := int(min(sound.bytes, uint64(len(b))))
	if n == 0 {
		n = len(b)
	}
	highest := float64(LossyHighestRate)
	if sound.lossless {
		highest = LosslessHighestRate
	}
	least, most := bounds(n, highest, LossyLowestRate)
	length := d
	if sound.codec == "mp4a" && sound.rate > 0 {
		// Each AAC sample decodes to 1,024 samples at the entry's rate
		// (more with SBR): a floor the time tables cannot shrink.
		length = walked(d, float64(sound.samples)*aacFrameSamples/float64(sound.rate))
	}
	return reading{length: length, claim: d, least: least, most: most}, nil
}

// mp4Sound finds the sound track and its length.
func mp4Sound(b []byte) (*mp4Track, float64, error) {
	var (
		tracks           []*mp4Track
		movieScale       uint32
		fragmentDuration uint64
		haveMoov         bool
	)
	byID := func(id uint32) *mp4Track {
		for _, t := range tracks {
			if t.id == id {
				return t
			}
		}
		return nil
	}
	var trex []struct{ id, dur, size uint32 }
	var moofs [][]byte
	mp4Children(b, func(top mp4Box) {
		switch top.typ {
		case "moov":
			haveMoov = true
			mp4Children(top.data, func(m mp4Box) {
				switch m.typ {
				case "mvhd":
					movieScale, _ = mp4TimescaleDuration(m.data)
				case "trak":
					tracks = append(tracks, mp4ReadTrak(m.data))
				case "mvex":
					mp4Children(m.data, func(x mp4Box) {
						switch {
						case x.typ == "mehd" && len(x.data) >= 8:
							if x.data[0] == 1 && len(x.data) >= 12 {
								fragmentDuration = binary.BigEndian.Uint64(x.data[4:12])
							} else {
								fragmentDuration = uint64(binary.BigEndian.Uint32(x.data[4:8]))
							}
						case x.typ == "trex" && len(x.data) >= 16:
							e := struct{ id, dur, size uint32 }{id: binary.BigEndian.Uint32(x.data[4:8]), dur: binary.BigEndian.Uint32(x.data[12:16])}
							if len(x.data) >= 20 {
								e.size = binary.BigEndian.Uint32(x.data[16:20])
							}
							trex = append(trex, e)
						}
					})
				}
			})
		case "moof":
			moofs = append(moofs, top.data)
		}
	})
	if !haveMoov {
		return nil, 0, ErrNotAudio
	}
	var sound *mp4Track
	for _, t := range tracks {
		if t.sound {
			sound = t
			break
		}
	}
	if sound == nil {
		return nil, 0, ErrNotAudio
	}
	if sound.timescale == 0 {
		return nil, 0, unreadable(FormatMP4, "its sound track has no time scale")
	}
	for _, x := range trex {
		if t := byID(x.id); t != nil {
			t.defaultDuration, t.defaultSize = x.dur, x.size
		}
	}
	for _, moof := range moofs {
		mp4Children(moof, func(traf mp4Box) {
			if traf.typ == "traf" {
				mp4ReadTraf(traf.data, byID)
			}
		})
	}
	switch {
	case known(sound.presentation) && movieScale > 0:
		// The track's length as presented (its edit list applied: an AAC
		// encoder's priming samples are not heard).
		return sound, float64(sound.presentation) / float64(movieScale), nil
	case known(sound.duration):
		return sound, float64(sound.duration) / float64(sound.timescale), nil
	case fragmentDuration > 0 && movieScale > 0:
		return sound, float64(fragmentDuration) / float64(movieScale), nil
	case sound.fragmentDuration > 0:
		return sound, float64(sound.fragmentDuration) / float64(sound.timescale), nil
	}
	return nil, 0, unreadable(FormatMP4, "its sound track has no duration")
}

// known reports a duration that is written (not 0, not all ones).
func known(d uint64) bool { return d > 0 && d != math.MaxUint32 && d != math.MaxUint64 }

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
// (mdhd), codec (stsd) and sample sizes (stsz).
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

// sampleTable reads a sample table's codec (stsd) and sample sizes (stsz).
func (t *mp4Track) sampleTable(c mp4Box) {
	switch c.typ {
	case "stsd":
		if len(c.data) >= 16 {
			t.codec = string(c.data[12:16])
			t.lossless = !mp4Lossy[t.codec]
		}
		if len(c.data) >= 44 {
			t.rate = binary.BigEndian.Uint32(c.data[40:44]) >> 16
		}
	case "stsz":
		if len(c.data) < 12 {
			return
		}
		size := uint64(binary.BigEndian.Uint32(c.data[4:8]))
		count := uint64(binary.BigEndian.Uint32(c.data[8:12]))
		t.samples += count
		if size != 0 {
			t.addBytes(size * count) // both below 2^32: no overflow
			return
		}
		for off := uint64(12); count > 0 && off+4 <= uint64(len(c.data)); off, count = off+4, count-1 {
			t.addBytes(uint64(binary.BigEndian.Uint32(c.data[off : off+4])))
		}
	}
}

// addBytes adds n to the track's sample bytes, held below 2^62.
func (t *mp4Track) addBytes(n uint64) {
	t.bytes = min(t.bytes+min(n, math.MaxInt32), math.MaxInt64>>1)
}

// mp4ReadTraf adds a track fragment's sample durations and sizes to its
// track.
func mp4ReadTraf(b []byte, byID func(uint32) *mp4Track) {
	var t *mp4Track
	var def, defSize uint32
	mp4Children(b, func(c mp4Box) {
		switch c.typ {
		case "tfhd":
			if len(c.data) < 8 {
				return
			}
			flags := binary.BigEndian.Uint32(c.data[0:4]) & 0xFFFFFF
			if t = byID(binary.BigEndian.Uint32(c.data[4:8])); t == nil {
				return
			}
			def, defSize = t.defaultDuration, t.defaultSize
			off := 8
			if flags&0x01 != 0 {
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
		case "trun":
			if t == nil || len(c.data) < 8 {
				return
			}
			flags := binary.BigEndian.Uint32(c.data[0:4]) & 0xFFFFFF
			count := uint64(binary.BigEndian.Uint32(c.data[4:8]))
			t.samples = min(t.samples+count, math.MaxUint32*uint64(math.MaxUint16))
			off := 8
			if flags&0x01 != 0 {
				off += 4
			}
			if flags&0x04 != 0 {
				off += 4
			}
			if flags&0x100 == 0 {
				t.fragmentDuration += count * uint64(def)
			}
			if flags&0x200 == 0 {
				t.addBytes(count * uint64(defSize))
			}
			if flags&0x300 == 0 {
				return
			}
			per := 0
			for _, f := range []uint32{0x100, 0x200, 0x400, 0x800} {
				if flags&f != 0 {
					per += 4
				}
			}
			for i := uint64(0); i < count && off+per <= len(c.data); i++ {
				p := off
				if flags&0x100 != 0 {
					t.fragmentDuration += uint64(binary.BigEndian.Uint32(c.data[p : p+4]))
					p += 4
				}
				if flags&0x200 != 0 {
					t.addBytes(uint64(binary.BigEndian.Uint32(c.data[p : p+4])))
				}
				off += per
			}
		}
	})
}
