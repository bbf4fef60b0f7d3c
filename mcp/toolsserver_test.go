package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// prettySet is a tool set whose one tool answers a result written over
// several lines, as an upstream server may.
type prettySet struct{}

func (prettySet) Info() (string, string) { return "pretty", "" }
func (prettySet) List(*pipeline.Call) ([]Tool, *gwerr.Error) {
	return []Tool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}
func (prettySet) Known(_ *pipeline.Call, name string) bool { return name == "t" }
func (prettySet) Call(context.Context, *pipeline.Call, string, json.RawMessage) json.RawMessage {
	return json.RawMessage("{\n  \"content\": [{\"type\": \"text\", \"text\": \"a\\nb\"}],\n  \"isError\": false\n}")
}

// A tools/call's answer is one event whose data, read back as a stream
// reader joins its lines, is the JSON-RPC response, whatever lines the
// result was written over.
func TestServeToolsCallEvent(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{}}}`
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Host = "127.0.0.1" // a loopback name, as the servers take
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	if err := ServeTools(&pipeline.Call{W: w, R: r}, prettySet{}, nil); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	events := sse.NewReader(w.Body)
	ev, err := events.Next()
	if err != nil || ev.Event != eventMessage {
		t.Fatalf("event %q: %v", ev.Event, err)
	}
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(ev.Data, &msg); err != nil || msg.ID != 7 || len(msg.Result.Content) != 1 || msg.Result.Content[0].Text != "a\nb" {
		t.Fatalf("data %q: %v", ev.Data, err)
	}
	if _, err := events.Next(); err == nil {
		t.Fatal("more than one event")
	}
}
