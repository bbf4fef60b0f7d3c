package cached

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/caddy-gw/caddy-gw/internal/dsync"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// LogFile and LogFile2 are the charge log's two segments in the store's
// folder. Charges are written to one until it holds LogTruncateSize; the
// writer then goes over to the other once that one is empty, and the
// first is emptied once the backend holds everything in it. So the log
// stays small under a load that never pauses, and a start replays little.
const (
	LogFile  = "charges.log"
	LogFile2 = "charges.2.log"
)

// LogPrealloc is how much of the charge log is written with zeros ahead
// of the charges. A charge then overwrites blocks the file already has
// and its batch is synced with fdatasync, which writes that data alone:
// appending would change the file's size, and the file system's journal
// commit for that waits for every other file's pending writes (the
// access log's, the database's). The file grows by as much again when
// the charges reach its end (the backend far behind).
const LogPrealloc = 1 << 20

// LogTruncateSize is how far a segment of the charge log fills before the
// writer goes over to the other (once that is empty); the full one is
// emptied (zeroed, to be written again from its start) once everything in
// it is in the backend.
const LogTruncateSize = LogPrealloc / 4

// chargeLog is the file that makes a charge durable before its answer
// completes: one JSON line per charge, a batch written at once and synced
// with one fsync, the lines followed by zeros to the end of the file. The
// backend is brought up to date from it behind the answers; at start,
// whatever it holds is applied again (the backend ignores a request id it
// already has), so a crash loses no charge whose answer completed.
type chargeLog struct {
	f    logFile
	size int64 // where the next line goes; zeros from here on
	cap  int64 // the file's length
	buf  []byte
	// broken is set when a failed batch could not be zeroed again: the
	// log takes no more charges (a later start would read that batch).
	broken error
	// holds: the lines carry their charges' hold records and organization
	// (the spool's, whose charges keep their holds until the database has
	// them); the charge log's leave them out.
	holds bool
	// sync, in interval mode, syncs what append wrote behind its caller
	// (nil: append always syncs).
	sync *syncer
}

// logFile is what the log does with its file (tests fail it on purpose).
type logFile interface {
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	// Datasync makes the written data durable (fdatasync where there is
	// one): the blocks and length are as they were, so no metadata.
	Datasync() error
	Close() error
}

// osLogFile is a segment's file on disk, synced through ring (nil: where
// the system has no io_uring, or refuses it, the plain way). The ring is
// the store's, shared by both segments.
type osLogFile struct {
	*os.File
	ring *dsync.Syncer
}

func (f osLogFile) Datasync() error { return f.ring.Datasync(f.File) }

// logLine is one charge in the log.
type logLine struct {
	RequestID string `json:"id"`
	Account   string `json:"a"`
	Endpoint  string `json:"e,omitempty"`
	Model     string `json:"m,omitempty"`
	Units     int64  `json:"u,omitempty"`
	Unit      string `json:"un,omitempty"`
	Cost      int64  `json:"c"`
	Time      int64  `json:"t"`
	Free      int64  `json:"f,omitempty"`
	Key       string `json:"k,omitempty"`
	Input     int64  `json:"ti,omitempty"`
	Output    int64  `json:"to,omitempty"`
	Shortfall int64  `json:"s,omitempty"`
	// LimitMonth and LimitTotal are the entry's Limits, which a charge
	// applied later (from the spool) is still held to.
	LimitMonth int64 `json:"lm,omitempty"`
	LimitTotal int64 `json:"lt,omitempty"`
	// Hold is the entry's HoldID; KeyHold, OrgHold and Org its
	// KeyHoldID, OrgHoldID and OrgID.
	Hold    string `json:"h,omitempty"`
	KeyHold string `json:"hk,omitempty"`
	OrgHold string `json:"ho,omitempty"`
	Org     string `json:"o,omitempty"`
}

// lineOf is e's line in the log.
func lineOf(e *store.Entry) logLine {
	return logLine{RequestID: e.RequestID, Account: e.AccountID, Endpoint: e.Endpoint, Model: e.Model,
		Units: e.Units, Unit: e.Unit, Cost: int64(e.Cost), Time: e.Time.UnixNano(), Free: int64(e.FreeMonthlyCredit),
		Key: e.KeyID, Input: e.InputTokens, Output: e.OutputTokens, Shortfall: int64(e.Shortfall),
		LimitMonth: int64(e.Limits.Month), LimitTotal: int64(e.Limits.Total), Hold: e.HoldID,
		KeyHold: e.KeyHoldID, OrgHold: e.OrgHoldID, Org: e.OrgID}
}

// entry is the charge l holds.
func (l *logLine) entry() store.Entry {
	return store.Entry{RequestID: l.RequestID, AccountID: l.Account, Endpoint: l.Endpoint, Model: l.Model,
		Units: l.Units, Unit: l.Unit, Cost: pricing.Money(l.Cost), Time: fromNanos(l.Time), FreeMonthlyCredit: pricing.Money(l.Free),
		KeyID: l.Key, InputTokens: l.Input, OutputTokens: l.Output, Shortfall: pricing.Money(l.Shortfall),
		Limits: store.Limits{Month: pricing.Money(l.LimitMonth), Total: pricing.Money(l.LimitTotal)}, HoldID: l.Hold,
		KeyHoldID: l.KeyHold, OrgHoldID: l.OrgHold, OrgID: l.Org}
}

// appendLine appends l as JSON, byte for byte as json.Marshal writes it
// (FuzzAppendLine holds it to that), without reflection.
func appendLine(b []byte, l logLine) []byte {
	str := func(b []byte, key, v string, omitEmpty bool) []byte {
		if omitEmpty && v == "" {
			return b
		}
		b = append(append(append(b, ',', '"'), key...), '"', ':')
		return jsonbody.AppendString(b, v)
	}
	num := func(b []byte, key string, v int64, omitEmpty bool) []byte {
		if omitEmpty && v == 0 {
			return b
		}
		b = append(append(append(b, ',', '"'), key...), '"', ':')
		return strconv.AppendInt(b, v, 10)
	}
	b = jsonbody.AppendString(append(b, `{"id":`...), l.RequestID)
	b = str(b, "a", l.Account, false)
	b = str(b, "e", l.Endpoint, true)
	b = str(b, "m", l.Model, true)
	b = num(b, "u", l.Units, true)
	b = str(b, "un", l.Unit, true)
	b = num(b, "c", l.Cost, false)
	b = num(b, "t", l.Time, false)
	b = num(b, "f", l.Free, true)
	b = str(b, "k", l.Key, true)
	b = num(b, "ti", l.Input, true)
	b = num(b, "to", l.Output, true)
	b = num(b, "s", l.Shortfall, true)
	b = num(b, "lm", l.LimitMonth, true)
	b = num(b, "lt", l.LimitTotal, true)
	b = str(b, "h", l.Hold, true)
	b = str(b, "hk", l.KeyHold, true)
	b = str(b, "ho", l.OrgHold, true)
	b = str(b, "o", l.Org, true)
	return append(b, '}')
}

// openLog opens (creating) the segment name in dir, synced through ring,
// and returns the charges it holds. A last line cut short by a crash (its
// charge never answered) is dropped, and zeroed with whatever follows it,
// so no later start reads it.
func openLog(dir, name string, ring *dsync.Syncer) (*chargeLog, []store.Entry, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	var entries []store.Entry
	var good int
	for {
		n := bytes.IndexByte(data[good:], '\n')
		if n < 0 {
			break // a line without its newline was never synced whole
		}
		var l logLine
		if json.Unmarshal(data[good:good+n], &l) != nil || l.RequestID == "" || l.Account == "" {
			break
		}
		good += n + 1
		entries = append(entries, l.entry())
	}
	l := &chargeLog{f: osLogFile{f, ring}, size: int64(good), cap: int64(len(data))}
	// Zero a torn tail, so the next line starts on a line of its own and
	// no later start reads what was never answered.
	dirty := int64(len(bytes.TrimRight(data, "\x00")))
	if err := l.zero(l.size, max(dirty, l.size), LogPrealloc); err != nil {
		l.f.Close()
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	// The file's name must outlive a power cut as well as its contents.
	if err := syncDir(dir); err != nil {
		l.f.Close()
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	return l, entries, nil
}

// zero writes zeros from from to to, extends the file with zeros to at
// least length, and syncs it when it wrote anything.
func (l *chargeLog) zero(from, to, length int64) error {
	wrote, grew, err := l.fill(from, to, length)
	if err != nil || !wrote {
		return err
	}
	return l.syncFile(grew)
}

// fill is zero without the sync: it reports whether it wrote anything and
// whether the file grew.
func (l *chargeLog) fill(from, to, length int64) (wrote, grew bool, err error) {
	if length > l.cap {
		to = length
	}
	if to <= from {
		return false, false, nil
	}
	zeros := make([]byte, min(to-from, 64<<10))
	for at := from; at < to; {
		n, err := l.f.WriteAt(zeros[:min(int64(len(zeros)), to-at)], at)
		if err != nil {
			return true, false, err
		}
		at += int64(n)
	}
	grew = to > l.cap
	l.cap = max(l.cap, to)
	return true, grew, nil
}

// syncFile makes what was written durable: the data alone, or with the
// file's metadata when grew says its length changed.
func (l *chargeLog) syncFile(grew bool) error {
	if grew {
		return l.f.Sync()
	}
	return l.f.Datasync()
}

// append writes the entries and syncs the file: when it returns nil they
// are durable. In interval mode (l.sync lazy) it only writes them, and the
// syncer makes them durable within its interval: they survive a killed
// process at once, a power cut once synced.
func (l *chargeLog) append(entries []store.Entry) error {
	l.buf = l.buf[:0]
	for i := range entries {
		line := lineOf(&entries[i])
		if !l.holds {
			line.Hold, line.KeyHold, line.OrgHold, line.Org = "", "", "", ""
		}
		l.buf = append(appendLine(l.buf, line), '\n')
	}
	if l.broken != nil {
		return l.broken
	}
	end := l.size + int64(len(l.buf))
	lazy, grew := l.sync.lazy(), false
	if end > l.cap {
		// Zeros past the new lines first: the file's new length and its
		// zeros are synced with them.
		var err error
		if lazy {
			_, grew, err = l.fill(l.cap, l.cap, end+LogPrealloc)
		} else {
			err = l.zero(l.cap, l.cap, end+LogPrealloc)
		}
		if err != nil {
			return fmt.Errorf("charge log: %w", err)
		}
	}
	_, err := l.f.WriteAt(l.buf, l.size)
	if err == nil && !lazy {
		err = l.f.Datasync()
	}
	if err != nil {
		// The batch is refused, so no later start may read it: whatever
		// of it reached the disk is zeroed again, or else the log stops.
		if zerr := l.zero(l.size, end, 0); zerr != nil {
			l.broken = fmt.Errorf("charge log: a refused batch could not be taken back out (%w); restart once the disk is sound", zerr)
		}
		return fmt.Errorf("charge log: %w", err)
	}
	l.size = end
	if lazy {
		l.sync.mark(l, grew)
	}
	return nil
}

// truncate empties the log (everything in it is in the backend): its
// lines are zeroed, and the next is written at its start. The next is
// written there even when zeroing failed part way: a start reads the
// lines up to the first zero, and every line before the new ones is in
// the backend already (it ignores a request id it has).
func (l *chargeLog) truncate() error {
	if l.size == 0 {
		return nil
	}
	defer func() { l.size = 0 }()
	if l.cap > LogPrealloc {
		// A log that grew (the backend far behind) is cut back to its
		// first length rather than zeroed whole.
		if err := l.f.Truncate(0); err != nil {
			return err
		}
		l.cap = 0
		return l.zero(0, 0, LogPrealloc)
	}
	return l.zero(0, l.size, 0)
}

func (l *chargeLog) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// errReplay wraps a failure to apply the log at start.
var errReplay = errors.New("cached: the charge log could not be applied")
