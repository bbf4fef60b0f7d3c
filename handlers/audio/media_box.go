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
	mkvCodecPrivate   = 0x63A2
	mkvLacing         = 0x06 // the lacing bits of a block's flags
	mkvLacingXiph     = 0x02
	mkvLacingFixed    = 0x04
	mkvLacingEBML     = 0x06
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

// ebmlID reads an element id (its length marker kept, as EBML's RFC 8794
// writes ids) and returns it with its length in bytes.
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
	v, n, ok := ebmlVint(b)
	switch {
	case !ok:
		return 0, 0, false
	case v == 1<<(7*n)-1:
		return ebmlUnknownSize, n, true
	case v > math.MaxInt32:
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
// the track's last two blocks. Both are claims, over every track, and the
// bytes of the audio tracks' blocks bound them at the lossy bitrates.
// Every audio track's frames are counted (each frame of a laced block
// too): an Opus packet's length is read from its first bytes, a Vorbis
// packet's from its mode and the headers in the track's CodecPrivate. The
// longest track's frames are taken over the claims when they hold more.
func webmRead(b []byte) (reading, error) {
	hdr, ok := ebmlNext(b)
	if !ok {
		return reading{}, unreadable(FormatWebM, "its header is cut short")
	}
	seg, ok := ebmlNext(b[hdr.next:])
	if !ok || seg.id != mkvSegment {
		return reading{}, unreadable(FormatWebM, "it has no segment")
	}
	// The tracks first: a block is counted by its track's codec.
	audio := map[uint64]*mkvTrack{}
	mkvScan(seg.data, nil, func(e ebmlElement) {
		if e.id == mkvTracks {
			mkvAudioTracks(e.data, audio)
		}
	})
	scale := uint64(mkvDefaultScaleNS)
	var stored float64
	t := &blockTimes{last: map[uint64]int64{}, gap: map[uint64]int64{}, bytes: map[uint64]int{}, audio: audio}
	mkvScan(seg.data, t, func(e ebmlElement) {
		if e.id != mkvInfo {
			return
		}
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
	})
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
	var walk float64
	for _, tr := range audio {
		walk = max(walk, tr.seconds())
	}
	return reading{length: walked(d, walk), claim: d, least: least, most: most}, nil
}

// mkvScan calls fn with each child of a Segment, and reads the blocks of
// its clusters into t (none when t is nil).
func mkvScan(d []byte, t *blockTimes, fn func(ebmlElement)) {
	for len(d) > 0 {
		e, ok := ebmlNext(d)
		if !ok {
			return
		}
		if e.id == mkvCluster {
			rest := t.cluster(e.data, e.unknown)
			if e.unknown {
				// The cluster ended where the next top-level element began.
				d = rest
				continue
			}
		} else {
			fn(e)
		}
		d = d[e.next:]
	}
}

// mkvTrack is an audio track of a WebM file, and what its frames hold.
type mkvTrack struct {
	codec  string
	opus   int64          // A_OPUS: its packets' samples at 48 kHz
	vorbis *vorbisCounter // A_VORBIS: its packets counted
}

// frame counts one frame of the track.
func (tr *mkvTrack) frame(p []byte) {
	switch {
	case tr.codec == "A_OPUS":
		tr.opus += int64(opusSamples(p))
	case tr.vorbis != nil:
		tr.vorbis.packet(p)
	}
}

// seconds is the length of the frames counted.
func (tr *mkvTrack) seconds() float64 {
	if tr.vorbis != nil {
		return tr.vorbis.seconds()
	}
	return float64(tr.opus) / opusRate
}

// mkvAudioTracks notes the audio tracks of a Tracks element by number,
// with their codecs; a Vorbis track's headers are read from its
// CodecPrivate (the three packets, Xiph-laced).
func mkvAudioTracks(d []byte, audio map[uint64]*mkvTrack) {
	for len(d) > 0 {
		e, ok := ebmlNext(d)
		if !ok {
			return
		}
		if e.id == mkvTrackEntry {
			var number, typ uint64
			var codec string
			var private []byte
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
				case mkvCodecPrivate:
					private = f.data
				}
				c = c[f.next:]
			}
			if typ == mkvTrackAudio {
				tr := &mkvTrack{codec: codec}
				if codec == "A_VORBIS" {
					tr.vorbis = &vorbisCounter{}
					index := 0
					mkvFrames(private, mkvLacingXiph, func(p []byte) {
						tr.vorbis.header(index, p)
						index++
					})
				}
				audio[number] = tr
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
	// audio are the audio tracks, whose frames are counted.
	audio map[uint64]*mkvTrack
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
	if t == nil || !ok || track < 0 || len(b) < n+2 {
		return
	}
	ts := base + int64(int16(binary.BigEndian.Uint16(b[n:n+2])))
	tr := uint64(track)
	t.bytes[tr] += len(b)
	if a := t.audio[tr]; a != nil && len(b) > n+3 {
		mkvFrames(b[n+3:], b[n+2]&mkvLacing, a.frame)
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

// mkvFrames calls fn with each frame of a block's data (after its flags
// byte) as its lacing splits it: one frame without lacing; else a count
// of frames, less one, and the sizes of all but the last, Xiph-coded
// (runs of 255), EBML-coded (the first size, then signed differences) or
// fixed (an equal share of the data). A lacing that does not fit the data
// gives the frames read until then.
func mkvFrames(d []byte, lacing byte, fn func([]byte)) {
	if lacing == 0 {
		fn(d)
		return
	}
	if len(d) == 0 {
		return
	}
	n := int(d[0]) + 1
	d = d[1:]
	sizes := make([]int, 0, n-1)
	switch lacing {
	case mkvLacingXiph:
		for range n - 1 {
			size := 0
			for {
				if len(d) == 0 {
					return
				}
				c := d[0]
				d = d[1:]
				if size += int(c); c < 255 {
					break
				}
			}
			sizes = append(sizes, size)
		}
	case mkvLacingEBML:
		size := int64(0)
		for i := range n - 1 {
			v, k, ok := ebmlVint(d)
			if !ok {
				return
			}
			d = d[k:]
			if i == 0 {
				size = int64(v)
			} else {
				size += int64(v) - (1<<(7*k-1) - 1)
			}
			if size < 0 || size > int64(len(d)) {
				return
			}
			sizes = append(sizes, int(size))
		}
	case mkvLacingFixed:
		for range n - 1 {
			sizes = append(sizes, len(d)/n)
		}
	}
	for _, size := range sizes {
		if size > len(d) {
			return
		}
		fn(d[:size])
		d = d[size:]
	}
	fn(d)
}

// ebmlVint reads a variable-size integer (an element size, a lace's
// sizes): its value (length marker removed) and its length.
func ebmlVint(b []byte) (uint64, int, bool) {
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
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, true
}
