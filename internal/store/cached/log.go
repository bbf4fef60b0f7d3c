package cached

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// LogFile is the charge log's name in the store's folder.
const LogFile = "charges.log"

// LogTruncateSize is how large the charge log may grow before it is
// emptied, once everything in it is in the backend.
const LogTruncateSize = 1 << 20

// chargeLog is the append-only file that makes a charge durable before its
// answer completes: one JSON line per charge, a batch written at once and
// synced with one fsync. The backend is brought up to date from it behind
// the answers; at start, whatever it holds is applied again (the backend
// ignores a request id it already has), so a crash loses no charge whose
// answer completed.
type chargeLog struct {
	f    *os.File
	size int64
	buf  []byte
}

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
}

// openLog opens (creating) the log in dir and returns the charges it
// holds. A last line cut short by a crash (its charge never answered) is
// dropped.
func openLog(dir string) (*chargeLog, []store.Entry, error) {
	path := filepath.Join(dir, LogFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	var entries []store.Entry
	r := bufio.NewReader(f)
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // a line without its newline was never synced whole
		}
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("charge log: %w", err)
		}
		var l logLine
		if json.Unmarshal(line, &l) != nil || l.RequestID == "" || l.Account == "" {
			break
		}
		good += int64(len(line))
		entries = append(entries, store.Entry{RequestID: l.RequestID, AccountID: l.Account, Endpoint: l.Endpoint, Model: l.Model,
			Units: l.Units, Unit: l.Unit, Cost: pricing.Money(l.Cost), Time: fromNanos(l.Time), FreeMonthlyCredit: pricing.Money(l.Free)})
	}
	// Drop a torn tail, so the next append starts on a line of its own.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("charge log: %w", err)
	}
	return &chargeLog{f: f, size: good}, entries, nil
}

// append writes the entries and syncs the file: when it returns nil they
// are durable.
func (l *chargeLog) append(entries []store.Entry) error {
	l.buf = l.buf[:0]
	for _, e := range entries {
		b, err := json.Marshal(logLine{RequestID: e.RequestID, Account: e.AccountID, Endpoint: e.Endpoint, Model: e.Model,
			Units: e.Units, Unit: e.Unit, Cost: int64(e.Cost), Time: e.Time.UnixNano(), Free: int64(e.FreeMonthlyCredit)})
		if err != nil {
			return err
		}
		l.buf = append(append(l.buf, b...), '\n')
	}
	n, err := l.f.Write(l.buf)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("charge log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("charge log: %w", err)
	}
	return nil
}

// truncate empties the log (everything in it is in the backend).
func (l *chargeLog) truncate() error {
	if l.size == 0 {
		return nil
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	l.size = 0
	return l.f.Sync()
}

func (l *chargeLog) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// errReplay wraps a failure to apply the log at start.
var errReplay = errors.New("cached: the charge log could not be applied")
