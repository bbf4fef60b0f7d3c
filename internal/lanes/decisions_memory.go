package lanes

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/idhash"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// DecisionBytes is the memory that holds the decision records of one
// node: with records of about 170 bytes, MaxDecisions of them.
const DecisionBytes = 20 << 20

// Decisions keeps recent decisions in memory, oldest dropped first: at
// most MaxDecisions, none older than DecisionTTL, and as many as fit in
// DecisionBytes. They are encoded one after another in a ring of bytes
// and found by a hash of their id, so the garbage collector has no
// pointer to follow in them: kept as Go values, the 100,000 records were
// traced on every collection, which cost the busy node more CPU than any
// single part of a call.
type Decisions struct {
	mu   sync.Mutex
	buf  []byte
	byID map[idhash.Key]int // a record's offset in buf (Get compares its id)
	// The records lie from tail to head; when head has wrapped around
	// to the start of buf (tail >= head), the part from wrapAt to the
	// end of buf holds none.
	head, tail, wrapAt int
	n                  int
	scratch            []byte
	Now                func() time.Time
}

// NewDecisions returns an empty record.
func NewDecisions() *Decisions { return newDecisions(DecisionBytes) }

func newDecisions(size int) *Decisions {
	return &Decisions{buf: make([]byte, size), byID: map[idhash.Key]int{}}
}

func (d *Decisions) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// A record: its length (4 bytes, including these), its time (8 bytes,
// Unix nanoseconds), then the decision's fields (encodeDecision).
const recordHeader = 12

// Put keeps dec (a decision with the id of a kept one replaces it).
func (d *Decisions) Put(dec Decision) {
	dec.LatencyMS = dec.Latency.Milliseconds()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scratch = encodeDecision(append(d.scratch[:0], make([]byte, recordHeader)...), dec)
	rec := d.scratch
	if len(rec) > len(d.buf)/4 {
		return // no decision is this large; never let one empty the ring
	}
	binary.LittleEndian.PutUint32(rec, uint32(len(rec)))
	binary.LittleEndian.PutUint64(rec[4:], uint64(dec.Time.UnixNano()))
	at := d.room(len(rec))
	copy(d.buf[at:], rec)
	d.head = at + len(rec)
	d.n++
	d.byID[idhash.Of(dec.ID)] = at
	cutoff := d.now().Add(-DecisionTTL)
	for d.n > MaxDecisions || d.n > 0 && d.oldest().Before(cutoff) {
		d.drop()
	}
}

// room makes size bytes free at head, dropping the oldest records, and
// returns where they start.
func (d *Decisions) room(size int) int {
	for {
		if d.n == 0 {
			d.head, d.tail, d.wrapAt = 0, 0, len(d.buf)
			return 0
		}
		if d.tail < d.head { // not wrapped: free after head, and before tail
			if len(d.buf)-d.head >= size {
				return d.head
			}
			d.wrapAt, d.head = d.head, 0
			continue
		}
		if d.tail-d.head >= size { // wrapped: free from head to tail
			return d.head
		}
		d.drop()
	}
}

// oldest is the time of the oldest record.
func (d *Decisions) oldest() time.Time {
	return time.Unix(0, int64(binary.LittleEndian.Uint64(d.buf[d.tail+4:])))
}

// drop forgets the oldest record.
func (d *Decisions) drop() {
	size := int(binary.LittleEndian.Uint32(d.buf[d.tail:]))
	if id, ok := decisionID(d.buf[d.tail+recordHeader : d.tail+size]); ok {
		if k := idhash.Of(id); d.byID[k] == d.tail {
			delete(d.byID, k)
		}
	}
	d.n--
	d.tail += size
	if d.tail == d.wrapAt && d.head < d.tail {
		d.tail, d.wrapAt = 0, len(d.buf)
	}
}

// Get returns the decision with id, if it is still kept.
func (d *Decisions) Get(id string) (Decision, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.byID[idhash.Of(id)]
	if !ok {
		return Decision{}, false
	}
	size := int(binary.LittleEndian.Uint32(d.buf[at:]))
	dec, ok := decodeDecision(d.buf[at+recordHeader : at+size])
	if !ok || dec.ID != id {
		return Decision{}, false
	}
	dec.Time = time.Unix(0, int64(binary.LittleEndian.Uint64(d.buf[at+4:]))).UTC()
	if dec.Time.Before(d.now().Add(-DecisionTTL)) {
		return Decision{}, false
	}
	return dec, true
}

// encodeDecision appends dec's fields (all but its time) to b: strings
// with their length first, numbers as varints, the flags as one byte.
func encodeDecision(b []byte, dec Decision) []byte {
	for _, s := range []string{dec.ID, dec.AccountID, dec.Requested, string(dec.Kind), dec.Lane, dec.Chosen} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(dec.Candidates)))
	for _, c := range dec.Candidates {
		b = appendString(b, c)
	}
	var flags byte
	for i, f := range []bool{dec.Vision, dec.Tools, dec.Escalated} {
		if f {
			flags |= 1 << i
		}
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, int64(dec.Prompt))
	b = binary.AppendVarint(b, int64(dec.Cost))
	return binary.AppendVarint(b, int64(dec.Latency))
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decisionReader reads encodeDecision's fields in order; ok turns false
// at the first that does not read.
type decisionReader struct {
	b  []byte
	ok bool
}

func (r *decisionReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a uvarint, zig-zagged.
func (r *decisionReader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *decisionReader) string() string {
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.b)) {
		r.ok = false
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// decisionID reads only the id of an encoded decision.
func decisionID(b []byte) (string, bool) {
	r := decisionReader{b: b, ok: true}
	id := r.string()
	return id, r.ok
}

func decodeDecision(b []byte) (Decision, bool) {
	r := decisionReader{b: b, ok: true}
	var dec Decision
	dec.ID, dec.AccountID, dec.Requested = r.string(), r.string(), r.string()
	dec.Kind, dec.Lane, dec.Chosen = Kind(r.string()), r.string(), r.string()
	if n := r.uvarint(); r.ok && n <= uint64(len(r.b)) {
		dec.Candidates = make([]string, n)
		for i := range dec.Candidates {
			dec.Candidates[i] = r.string()
		}
	}
	if len(r.b) == 0 {
		return Decision{}, false
	}
	flags := r.b[0]
	r.b = r.b[1:]
	dec.Vision, dec.Tools, dec.Escalated = flags&1 != 0, flags&2 != 0, flags&4 != 0
	dec.Prompt, dec.Cost = int(r.varint()), pricing.Money(r.varint())
	dec.Latency = time.Duration(r.varint())
	dec.LatencyMS = dec.Latency.Milliseconds()
	return dec, r.ok
}
