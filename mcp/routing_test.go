package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// failingSessions is a session store that cannot answer.
type failingSessions struct{}

func (failingSessions) Create(context.Context, Session) error { return errors.New("down") }
func (failingSessions) Get(context.Context, string, string) (Session, bool, error) {
	return Session{}, false, errors.New("down")
}
func (failingSessions) Delete(context.Context, string, string) error { return errors.New("down") }

// A session store that cannot answer is -32603 (internal error; retry),
// with HTTP 503.
func TestRoutingInternalError(t *testing.T) {
	s := &Routing{Sessions: failingSessions{}}
	for _, tc := range []struct{ body, session string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, NewSessionID()},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(tc.body))
		if tc.session != "" {
			r.Header.Set(HeaderSession, tc.session)
		}
		w := httptest.NewRecorder()
		if err := s.Serve(&pipeline.Call{W: w, R: r, Key: store.Key{ID: "k"}}); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusServiceUnavailable || gjson.Get(w.Body.String(), "error.code").Int() != -32603 {
			t.Fatalf("%s: %d %s", tc.body, w.Code, w.Body)
		}
	}
}
