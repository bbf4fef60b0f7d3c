package chat

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/obs"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// laneServer is a chat-completions provider answering each model with the
// function of its id, recording the models asked for.
type laneServer struct {
	mu     sync.Mutex
	models []string
}

// answerEmpty answers an empty message; answerHi one with text.
const (
	answerEmpty = `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
	answerHi    = `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
)

// laneHandler serves chat calls through a catalogue of one provider (at
// url) with a model in each lane (m-fast, m-standard, m-reasoning),
// counting each failed and unpaid attempt.
type laneHandler struct {
	h                *Handler
	gw               *pipeline.Gateway
	ep               *pipeline.Endpoint
	mu               sync.Mutex
	failed, unbilled []string
}

func newLaneHandler(t *testing.T, url string) *laneHandler {
	t.Helper()
	var models []catalog.Model
	for _, lane := range catalog.Lanes {
		models = append(models, catalog.Model{ID: "m-" + lane, Provider: "o", Lane: lane, InputPrice: 1, OutputPrice: 1})
	}
	cat, err := catalog.New([]catalog.Provider{{Name: "o", Format: "openai", BaseURL: url, APIKey: "k",
		HeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond}}, models, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	chatSpend := money.Chat
	return &laneHandler{
		h:  &Handler{Picker: &lanes.Picker{Catalog: cat, Health: lanes.NewHealth()}, Upstream: upstream.New()},
		gw: gwtest.New(t, gwtest.Options{Catalog: cat}).Gateway,
		ep: &pipeline.Endpoint{Name: "chat", Family: gwerr.Chat, Billing: &chatSpend},
	}
}

// call serves body and returns the response and the handler's error.
func (l *laneHandler) call(body string) (*httptest.ResponseRecorder, error) {
	rec := &obs.Record{Reporter: obs.Funcs{
		Failed:   func(p, r string) { l.mu.Lock(); l.failed = append(l.failed, p+"/"+r); l.mu.Unlock() },
		Unbilled: func(p, r string) { l.mu.Lock(); l.unbilled = append(l.unbilled, p+"/"+r); l.mu.Unlock() },
	}}
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
	r = r.WithContext(obs.With(r.Context(), rec))
	w := httptest.NewRecorder()
	c := &pipeline.Call{W: w, R: r, Endpoint: l.ep, RequestID: "r", Account: store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true}, Gateway: l.gw}
	err := l.h.ChatCompletions(c)
	c.Release()
	return w, err
}

// serve starts a provider answering model m with answer(m); "" holds the
// call until the gateway gives up.
func (s *laneServer) serve(t *testing.T, answer func(model string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := gjson.GetBytes(b, "model").String()
		s.mu.Lock()
		s.models = append(s.models, m)
		s.mu.Unlock()
		a := answer(m)
		if a == "" {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, a)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// An empty answer escalates once per call: when the stronger model answers
// empty too, the call fails with its empty answer and no third model is
// asked; when it answers, the call is served. Each empty answer is a
// failed attempt and an unpaid one.
func TestEmptyAnswerEscalatesOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[string]string
		asked   []string
		served  bool
	}{
		{"empty twice", map[string]string{"m-fast": answerEmpty, "m-standard": answerEmpty, "m-reasoning": answerHi},
			[]string{"m-fast", "m-standard"}, false},
		{"empty, then served", map[string]string{"m-fast": answerEmpty, "m-standard": answerHi},
			[]string{"m-fast", "m-standard"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s laneServer
			l := newLaneHandler(t, s.serve(t, func(m string) string { return tc.answers[m] }))
			w, err := l.call(`{"model":"gw-fast","messages":[{"role":"user","content":"hi"}]}`)
			if !slices.Equal(s.models, tc.asked) {
				t.Errorf("models asked %v, want %v", s.models, tc.asked)
			}
			empties := len(tc.asked)
			if tc.served {
				empties--
				if err != nil || w.Code != http.StatusOK || w.Header().Get(pipeline.HeaderEscalated) != "true" || w.Header().Get(pipeline.HeaderModel) != "m-standard" {
					t.Fatalf("%v %d %v, want m-standard's answer, escalated", err, w.Code, w.Header())
				}
			} else if !isEmpty(err) || gwerr.As(err).Kind != gwerr.Upstream {
				t.Fatalf("err %v, want the empty answer's failure", err)
			}
			wantFailed := slices.Repeat([]string{"o/cut"}, empties)
			wantUnbilled := slices.Repeat([]string{"o/empty"}, empties)
			if !slices.Equal(l.failed, wantFailed) || !slices.Equal(l.unbilled, wantUnbilled) {
				t.Errorf("failed %v, unpaid %v; want %v and %v", l.failed, l.unbilled, wantFailed, wantUnbilled)
			}
		})
	}
}

// A call stops escalating once it has waited out its time-outs, whether
// they were waits for the answer's headers or a begun stream falling
// silent: the caller gets a time-out.
func TestTimeoutsStopEscalation(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			var s laneServer
			url := s.serve(t, func(string) string { return "" })
			if stream {
				// Headers at once, then silence past the idle time-out.
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					s.mu.Lock()
					s.models = append(s.models, gjson.GetBytes(b, "model").String())
					s.mu.Unlock()
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					http.NewResponseController(w).Flush()
					<-r.Context().Done()
				}))
				t.Cleanup(srv.Close)
				url = srv.URL + "/v1"
			}
			l := newLaneHandler(t, url)
			_, err := l.call(fmt.Sprintf(`{"model":"gw-fast","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream))
			if gwerr.As(err).Kind != gwerr.Timeout {
				t.Fatalf("err %v, want a time-out", err)
			}
			if want := []string{"m-fast", "m-standard"}; !slices.Equal(s.models, want) {
				t.Errorf("models asked %v, want %v (two time-outs, then none)", s.models, want)
			}
			want := []string{"o/timeout", "o/timeout"}
			if !slices.Equal(l.failed, want) || !slices.Equal(l.unbilled, want) {
				t.Errorf("failed %v, unpaid %v; want %v for both", l.failed, l.unbilled, want)
			}
		})
	}
}
