package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
)

// ---- Ogg (Vorbis, Opus) ----

// oggCodec reads the first page's first packet: the codec of the logical
// stream and its serial number. Only Vorbis and Opus are accepted.
func oggCodec(b []byte) (codec string, serial uint32, err error) {
	if len(b) < 27 || string(b[0:4]) != "OggS" || b[4] != 0 {
		return "", 0, ErrNotAudio
	}
	segs := int(b[26])
	if len(b) < 27+segs {
		return "", 0, ErrNotAudio
	}
	if codec = oggStreamCodec(b[27+segs:]); codec != "opus" && codec != "vorbis" {
		return "", 0, ErrNotAudio
	}
	return codec, binary.LittleEndian.Uint32(b[14:18]), nil
}

// oggStreamCodec names the codec of a logical stream from its first
// packet: opus and vorbis are measured; theora, skeleton and kate (video,
// an index, subtitles) hold no sound; "" is any other, which the reader
// cannot measure.
func oggStreamCodec(p []byte) string {
	switch {
	case len(p) >= 19 && string(p[0:8]) == "OpusHead":
		return "opus"
	case len(p) >= 30 && string(p[0:7]) == "\x01vorbis":
		return "vorbis"
	case bytes.HasPrefix(p, []byte("\x80theora")), bytes.HasPrefix(p, []byte("fishead\x00")), bytes.HasPrefix(p, []byte("\x80kate")):
		return "silent"
	}
	return ""
}

// MaxOggStreams bounds the logical streams of an Ogg file (each is read
// through the pages from its first to its last); a file with more is
// refused.
const MaxOggStreams = 32

// oggStream is one logical stream of an Ogg file: its serial number, its
// codec, its first packet, the link of the chain it belongs to, and the
// bytes its pages lie in (from its first page to its last: the one
// flagged end of stream, the first page of a new stream of its serial, or
// the end of the file).
type oggStream struct {
	serial uint32
	codec  string
	head   []byte
	link   int
	start  int // the offset of its first page
	pages  []byte
}

// oggStreams lists the logical streams of an Ogg file in order, from their
// first pages (flagged beginning of stream). A file is a chain of links,
// one after the other; a link is a group of streams played together, whose
// first pages all come before any other page of the link. Only pages with
// a correct checksum count.
func oggStreams(b []byte) ([]*oggStream, error) {
	var streams []*oggStream
	open := map[uint32]*oggStream{} // the streams whose last page is to come
	link, firsts := 0, true
	for pos := 0; pos < len(b); {
		i := bytes.Index(b[pos:], []byte("OggS"))
		if i < 0 {
			break
		}
		pos += i
		var serial uint32
		if len(b)-pos >= 27 {
			serial = binary.LittleEndian.Uint32(b[pos+14 : pos+18])
		}
		_, size, ok := oggPage(b[pos:], serial)
		if !ok {
			pos++
			continue
		}
		page := b[pos : pos+size]
		if page[5]&0x02 == 0 {
			firsts = false
			if s := open[serial]; s != nil && page[5]&0x04 != 0 { // its last page
				s.pages = s.pages[:pos+size-s.start]
				delete(open, serial)
			}
			pos += size
			continue
		}
		// The first page of a stream, after other pages: a new link.
		if !firsts {
			link, firsts = link+1, true
		}
		if len(streams) == MaxOggStreams {
			return nil, unreadable(FormatOgg, "it has more than %d streams", MaxOggStreams)
		}
		if s := open[serial]; s != nil {
			s.pages = s.pages[:pos-s.start]
		}
		segs := int(page[26])
		n := 0
		for _, l := range page[27 : 27+segs] {
			if n += int(l); l < 255 {
				break
			}
		}
		s := &oggStream{serial: serial, head: page[27+segs : 27+segs+n], link: link, pages: b[pos:], start: pos}
		if s.codec = oggStreamCodec(s.head); s.codec == "" {
			return nil, unreadable(FormatOgg, "it has a stream whose codec the gateway cannot measure")
		}
		open[serial] = s
		streams = append(streams, s)
		pos += size
	}
	return streams, nil
}

// oggRead reads every logical stream of an Ogg file: a stream's length is
// its last granule position (a claim like any header), unless its packets
// walked hold more (Opus packets' lengths read from their first bytes,
// Vorbis packets' from their modes). The streams of one link are played
// together and the longest is taken; the links of a chain are played one
// after the other and add up. The whole file's bytes at the lossy bitrates
// bound the length.
func oggRead(b []byte) (reading, error) {
	streams, err := oggStreams(b)
	if err != nil {
		return reading{}, err
	}
	if len(streams) == 0 || streams[0].start != 0 {
		// What the sniffer took for a stream's first page is not one.
		return reading{}, unreadable(FormatOgg, "its first page is damaged")
	}
	r := reading{}
	r.least, r.most = bounds(len(b), LossyHighestRate, LossyLowestRate)
	links := map[int]float64{}
	for _, s := range streams {
		if s.codec == "silent" {
			continue
		}
		d, err := oggGranuleLength(s.pages)
		if err != nil {
			return reading{}, err
		}
		var walk float64
		switch s.codec {
		case "opus":
			walk = oggOpusWalk(s.pages, s.serial)
		case "vorbis":
			walk = oggVorbisWalk(s.pages, s.serial)
		}
		sr := reading{length: walked(d, walk), claim: d, most: r.most}
		length, err := sr.seconds(FormatOgg)
		if err != nil {
			return reading{}, err
		}
		links[s.link] = max(links[s.link], length)
	}
	for _, d := range links {
		r.length += d
	}
	return r, nil
}

// opusSamples is the number of 48 kHz samples an Opus packet decodes to,
// read from its TOC byte (and frame count byte); 0 for an empty or
// malformed packet.
func opusSamples(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	config := p[0] >> 3
	var frame int
	switch {
	case config < 12: // SILK: 10, 20, 40, 60 ms
		frame = [4]int{480, 960, 1920, 2880}[config%4]
	case config < 16: // hybrid: 10, 20 ms
		frame = [2]int{480, 960}[config%2]
	default: // CELT: 2.5, 5, 10, 20 ms
		frame = [4]int{120, 240, 480, 960}[config%4]
	}
	n := 1
	switch p[0] & 3 {
	case 1, 2:
		n = 2
	case 3:
		if len(p) < 2 {
			return 0
		}
		n = int(p[1] & 0x3F)
	}
	if n*frame > opusMaxPacketSamples {
		return 0
	}
	return n * frame
}

// opusMaxPacketSamples is 120 ms at 48 kHz, the most one packet holds.
const opusMaxPacketSamples = 5760

// oggPackets calls fn with every packet of the stream in the pages of b
// (each checksum verified; bytes between pages and pages of other
// streams skipped), in order, numbered from 0: the packet's first
// keep(index) bytes, or all of it when shorter.
func oggPackets(b []byte, serial uint32, keep func(index int) int, fn func(index int, head []byte)) {
	index, open := -1, false
	var head []byte // what is kept of the packet being read
	for pos := 0; pos < len(b); {
		i := bytes.Index(b[pos:], []byte("OggS"))
		if i < 0 {
			break
		}
		pos += i
		_, size, ok := oggPage(b[pos:], serial)
		if !ok {
			pos++
			continue
		}
		page := b[pos : pos+size]
		segs := int(page[26])
		data := page[27+segs:]
		for _, l := range page[27 : 27+segs] {
			seg := data[:l]
			data = data[l:]
			if !open {
				head = head[:0]
				index++
			}
			head = append(head, seg[:max(min(keep(index)-len(head), len(seg)), 0)]...)
			if open = l == 255; !open {
				fn(index, head)
			}
		}
		pos += size
	}
}

// oggOpusWalk adds up the samples of the stream's Opus packets, past the
// two header packets and less the pre-skip, in seconds.
func oggOpusWalk(b []byte, serial uint32) float64 {
	var total int64
	oggPackets(b, serial, func(int) int { return 2 }, func(index int, head []byte) {
		if index >= 2 {
			total += int64(opusSamples(head))
		}
	})
	preSkip := int64(0)
	if p := b[27+int(b[26]):]; len(p) >= 12 {
		preSkip = int64(binary.LittleEndian.Uint16(p[10:12]))
	}
	return float64(max(total-preSkip, 0)) / opusRate
}

// vorbisSetupMost bounds the setup header a Vorbis walk reads (real ones
// are a few kilobytes).
const vorbisSetupMost = 1 << 20

// oggVorbisWalk adds up the samples of the stream's Vorbis packets, in
// seconds (vorbisCounter); 0 when the headers cannot be read.
func oggVorbisWalk(b []byte, serial uint32) float64 {
	v := vorbisCounter{}
	keep := func(index int) int {
		if index < 3 {
			return vorbisSetupMost
		}
		return 1
	}
	oggPackets(b, serial, keep, func(index int, p []byte) {
		if index < 3 {
			v.header(index, p)
			return
		}
		v.packet(p)
	})
	return v.seconds()
}

// vorbisCounter adds up the samples of a Vorbis stream's packets: a packet
// decodes to a quarter of its block size plus a quarter of the previous
// one's (the first to nothing: it primes the decoder), the sizes given by
// the identification header and each packet's mode (its first byte),
// whose block flags close the setup header (vorbisModes).
type vorbisCounter struct {
	rate      float64
	sizes     [2]int64
	flags     []bool
	modeMask  byte
	prevMask  byte
	previous  int64
	total     int64
	broken    bool
	modeCount int
	audio     int
}

// header reads the stream's header packet of the index (0: the
// identification, 1: the comments, 2: the setup).
func (v *vorbisCounter) header(index int, p []byte) {
	switch {
	case v.broken:
	case index == 0:
		if len(p) < 30 || p[0] != 1 || string(p[1:7]) != "vorbis" {
			v.broken = true
			return
		}
		v.rate = float64(binary.LittleEndian.Uint32(p[12:16]))
		v.sizes = [2]int64{1 << (p[28] & 0x0F), 1 << (p[28] >> 4)}
	case index == 2:
		if v.flags = vorbisModes(p); v.flags == nil {
			v.broken = true
			return
		}
		v.modeCount = len(v.flags)
		v.modeMask = byte((1<<bits.Len(uint(v.modeCount-1)))-1) << 1
		v.prevMask = (v.modeMask | 1) + 1
		v.previous = v.sizes[b2i(v.flags[0])]
	}
}

// packet counts an audio packet (its first byte is enough).
func (v *vorbisCounter) packet(p []byte) {
	if v.broken || v.flags == nil || len(p) == 0 || p[0]&1 != 0 {
		return
	}
	mode := 0
	if v.modeCount > 1 {
		mode = int(p[0]&v.modeMask) >> 1
	}
	if mode >= v.modeCount {
		return
	}
	prev := v.previous
	if v.flags[mode] {
		prev = v.sizes[b2i(p[0]&v.prevMask != 0)]
	}
	cur := v.sizes[b2i(v.flags[mode])]
	if v.audio++; v.audio > 1 { // a decoder's first packet only primes it
		v.total += (prev + cur) / 4
	}
	v.previous = cur
}

// seconds is the length of the packets counted, 0 when the headers could
// not be read.
func (v *vorbisCounter) seconds() float64 {
	if v.broken || v.flags == nil || !(v.rate > 0) {
		return 0
	}
	return float64(v.total) / v.rate
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// vorbisModes reads the block flag of each mode from the end of a Vorbis
// setup header: the modes are its last field, before the framing bit, so
// they are read backwards (the fields before them have no lengths of their
// own). A mode is 8 bits of window type and transform type (zero), a
// 16-bit mapping number below 64 and the block flag, read from the end;
// the mode count (6 bits, less one) stands before them. nil when no count
// matches.
func vorbisModes(p []byte) []bool {
	if len(p) < 7 || p[0] != 5 || string(p[1:7]) != "vorbis" {
		return nil
	}
	n := len(p) * 8
	// bit i counted from the end of the packet, most significant first.
	bit := func(i int) uint {
		return uint(p[len(p)-1-i/8]>>(7-i%8)) & 1
	}
	read := func(pos *int, w int) uint {
		v := uint(0)
		for range w {
			v = v<<1 | bit(*pos)
			*pos++
		}
		return v
	}
	pos, framing := 0, -1
	for n-pos > 97 {
		if read(&pos, 1) == 1 {
			framing = pos
			break
		}
	}
	if framing < 0 {
		return nil
	}
	count, last := 0, 0
	for n-pos >= 97 {
		if read(&pos, 8) > 63 || read(&pos, 16) != 0 || read(&pos, 16) != 0 {
			break
		}
		pos++ // the block flag
		if count++; count > 64 {
			break
		}
		peek := pos
		if int(read(&peek, 6))+1 == count {
			last = count
		}
	}
	if last == 0 {
		return nil
	}
	flags := make([]bool, last)
	pos = framing
	for i := last - 1; i >= 0; i-- {
		pos += 40
		flags[i] = read(&pos, 1) == 1
	}
	return flags
}

// oggGranuleLength reads the granule position of the stream's last page: Ogg
// stores no total length, but the last granule position is the number of
// samples decoded at the end of the stream (for Opus at 48 kHz, less the
// pre-skip). The last page is found from the end and its checksum
// verified, so bytes that merely look like a page header are not taken.
func oggGranuleLength(b []byte) (float64, error) {
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
		rate = opusRate
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
		granule, _, ok := oggPage(b[i:], serial)
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
// correct checksum) and returns its granule position and size.
func oggPage(b []byte, serial uint32) (granule uint64, size int, ok bool) {
	if len(b) < 27 || b[4] != 0 || binary.LittleEndian.Uint32(b[14:18]) != serial {
		return 0, 0, false
	}
	segs := int(b[26])
	if len(b) < 27+segs {
		return 0, 0, false
	}
	size = 27 + segs
	for _, l := range b[27 : 27+segs] {
		size += int(l)
	}
	if size > len(b) {
		return 0, 0, false
	}
	page := b[:size]
	want := binary.LittleEndian.Uint32(page[22:26])
	if oggCRC(page) != want {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(page[6:14]), size, true
}

var oggCRCTable = crcTable[uint32](0x04C11DB7)

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
