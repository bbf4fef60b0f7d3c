package integration

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestPersistence(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-persistence-test-0123456789"
	g := startGateway(t, gwOptions{BootstrapKey: boot})

	created := g.createAccount(t, map[string]any{
		"id": "keeper", "plan": "paid", "cleared": true, "payg": true, "lane_billing": true,
		"balance_usd": "12.50", "daily_cap_usd": "3", "monthly_cap_usd": "40.25",
		"abilities": []string{"search", "fetch"},
	})
	allow := []string{"gw-auto", "gw-pinned-o4-mini"}
	key, keyID := g.createKey(t, "keeper", map[string]any{
		"name": "ci", "models": allow, "expires_at": time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339),
	})
	gone, goneID := g.createKey(t, "keeper", map[string]any{"name": "gone"})
	g.deleteKey(t, goneID)

	account := g.getAccount(t, "keeper")
	if !reflect.DeepEqual(account, created) {
		t.Errorf("GET account %v\ndiffers from the 201 answer %v", account, created)
	}
	for field, want := range map[string]any{
		"plan": "paid", "cleared": true, "payg": true, "lane_billing": true,
		"balance_usd": "12.50", "daily_cap_usd": "3.00", "monthly_cap_usd": "40.25",
	} {
		if account[field] != want {
			t.Errorf("account %s = %#v, want %#v", field, account[field], want)
		}
	}
	keys := g.adminJSON(t, http.MethodGet, "/gw/accounts/keeper/keys", nil, http.StatusOK).JSON(t)
	var listed []map[string]any
	b, _ := json.Marshal(keys["data"])
	_ = json.Unmarshal(b, &listed)
	if len(listed) != 1 || listed[0]["id"] != keyID {
		t.Fatalf("keys %v: want only %s", keys, keyID)
	}
	if _, secret := listed[0]["key"]; secret {
		t.Errorf("the key list shows a secret: %v", listed[0])
	}

	check := func(t *testing.T) {
		if got := g.getAccount(t, "keeper"); !reflect.DeepEqual(got, account) {
			t.Errorf("account %v\nwant unchanged %v", got, account)
		}
		if got := g.adminJSON(t, http.MethodGet, "/gw/accounts/keeper/keys", nil, http.StatusOK).JSON(t); !reflect.DeepEqual(got, keys) {
			t.Errorf("keys %v\nwant unchanged %v", got, keys)
		}
		if ids := modelIDs(t, g.do(t, "GET", "/v1/models", "", bearer(key)...)); !sameSet(ids, allow) {
			t.Errorf("key's list %v, want %v", ids, allow)
		}
		expectError(t, g.do(t, "GET", "/v1/models", "", bearer(gone)...), 401, unauthChat, "req-")
		if r := g.do(t, "GET", "/v1/models", "", bearer(boot)...); r.Status != http.StatusOK {
			t.Errorf("bootstrap key: %d %s", r.Status, r.Body)
		}
		// The bootstrap account is ensured, not duplicated, at every start.
		def := g.adminJSON(t, http.MethodGet, "/gw/accounts/default/keys", nil, http.StatusOK).JSON(t)
		if data, _ := def["data"].([]any); len(data) != 1 {
			t.Errorf("account default has keys %v, want exactly the bootstrap key", def)
		}
		// The store still takes writes.
		g.adminJSON(t, http.MethodPost, "/gw/accounts", map[string]any{"id": "keeper"}, http.StatusConflict)
	}

	t.Run("as created", check)
	g.reload(t)
	t.Run("after reload", check)
	g.restart(t)
	t.Run("after restart", check)
	g.reload(t)
	g.restart(t)
	t.Run("after reload and restart", check)
}
