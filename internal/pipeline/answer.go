package pipeline

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteWhole answers status with body, of type contentType, whole: its
// length goes with it, so the pipeline hands the answer to the client as
// soon as the call is counted (see statusWriter.flushWhole), before Caddy
// writes its access log entry.
func WriteWhole(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteJSON is WriteWhole of v in JSON, ended by a newline as
// json.Encoder writes it.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	WriteWhole(w, status, "application/json", append(b, '\n'))
	return nil
}

// flushWhole sends a whole answer on to the client now: one whose
// Content-Length the handler set and wrote in full (WriteWhole). It runs
// once the call is counted in the metrics and its log fields are set, so a
// client that has its answer finds it counted; what Caddy does after the
// handler (its access log entry) then costs the client no time. An answer of unknown length,
// or one another handler re-encodes (Caddy's encode drops the length), is
// left to net/http, which then sends it whole with its length: flushing
// it early would make it chunked.
func (w *statusWriter) flushWhole() {
	if w.status == 0 || w.wrote == 0 {
		return
	}
	if n, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64); err != nil || n != w.wrote {
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}
