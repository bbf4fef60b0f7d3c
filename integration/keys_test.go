package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// unauthChat is the 401 of the chat and model family.
const unauthChat = `{"error":{"message":"<string>","type":"authentication_error","param":null,"code":"invalid_api_key"}}`

func TestKeys(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	all := expectedIDs(parseExample(t, exampleCaddyfile(t)))
	g.createAccount(t, map[string]any{"id": "team", "plan": "paid", "cleared": true})

	t.Run("a new key works at once on both list paths and both headers", func(t *testing.T) {
		key, _ := g.createKey(t, "team", map[string]any{"name": "fresh"})
		for _, path := range []string{"/v1/models", "/models"} {
			for _, h := range [][]string{bearer(key), apiKey(key)} {
				r := g.do(t, "GET", path, "", h...)
				if ids := modelIDs(t, r); !sameSet(ids, all) {
					t.Errorf("GET %s with %s: ids %v, want %v", path, h[0], ids, all)
				}
				expectRequestID(t, r, "req-")
			}
		}
	})

	t.Run("allowlist filters the list", func(t *testing.T) {
		allow := []string{"gw-auto", "gw-pinned-gpt-4.1-mini"}
		key, _ := g.createKey(t, "team", map[string]any{"name": "narrow", "models": allow})
		for _, path := range []string{"/v1/models", "/models"} {
			if ids := modelIDs(t, g.do(t, "GET", path, "", bearer(key)...)); !sameSet(ids, allow) {
				t.Errorf("GET %s: ids %v, want exactly %v", path, ids, allow)
			}
		}
		client := openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		page, err := client.Models.List(context.Background())
		if err != nil {
			t.Fatalf("Models.List: %v", err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if !sameSet(ids, allow) {
			t.Errorf("openai-go: ids %v, want exactly %v", ids, allow)
		}
	})

	t.Run("empty allowlist lists nothing", func(t *testing.T) {
		key, _ := g.createKey(t, "team", map[string]any{"name": "none", "models": []string{}})
		if ids := modelIDs(t, g.do(t, "GET", "/v1/models", "", bearer(key)...)); len(ids) != 0 {
			t.Errorf("ids %v, want none: an empty allowlist admits no model", ids)
		}
	})

	t.Run("deleted key is refused on the very next request", func(t *testing.T) {
		key, id := g.createKey(t, "team", map[string]any{"name": "doomed"})
		if r := g.do(t, "GET", "/v1/models", "", bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("before delete: %d %s", r.Status, r.Body)
		}
		g.deleteKey(t, id)
		expectError(t, g.do(t, "GET", "/v1/models", "", bearer(key)...), 401, unauthChat, "req-")
		expectError(t, g.do(t, "GET", "/models", "", apiKey(key)...), 401, unauthChat, "req-")
		g.adminJSON(t, http.MethodDelete, "/gw/keys/"+id, nil, http.StatusNotFound)
	})

	t.Run("expiry", func(t *testing.T) {
		past, _ := g.createKey(t, "team", map[string]any{"name": "old", "expires_at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})
		future, _ := g.createKey(t, "team", map[string]any{"name": "young", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		expectError(t, g.do(t, "GET", "/v1/models", "", bearer(past)...), 401, unauthChat, "req-")
		expectError(t, g.do(t, "GET", "/v1/models", "", apiKey(past)...), 401, unauthChat, "req-")
		if ids := modelIDs(t, g.do(t, "GET", "/v1/models", "", bearer(future)...)); !sameSet(ids, all) {
			t.Errorf("key expiring in an hour: ids %v", ids)
		}
	})

	t.Run("unknown and missing keys", func(t *testing.T) {
		unknown := "sk-this-key-was-never-issued-0123456789"
		expectError(t, g.do(t, "GET", "/v1/models", "", bearer(unknown)...), 401, unauthChat, "req-")
		expectError(t, g.do(t, "GET", "/models", "", apiKey(unknown)...), 401, unauthChat, "req-")
		expectError(t, g.do(t, "GET", "/v1/models", ""), 401, unauthChat, "req-")
		expectError(t, g.do(t, "GET", "/v1/models", "", "Authorization", "Bearer "), 401, unauthChat, "req-")
	})

	t.Run("admin refuses keys of unknown accounts", func(t *testing.T) {
		g.adminJSON(t, http.MethodPost, "/gw/accounts/nobody/keys", map[string]any{"name": "x"}, http.StatusNotFound)
	})
}
