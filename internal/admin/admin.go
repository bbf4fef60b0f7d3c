// Package admin serves the accounts-and-keys API over a
// store. The admin.api.gw Caddy module mounts it under /gw/ on Caddy's
// admin endpoint.
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of the admin API.
const (
	// MaxBody is the largest request body read.
	MaxBody = 1 << 20
	// DefaultLedgerLimit and MaxLedgerLimit bound GET .../ledger?limit=.
	DefaultLedgerLimit = 100
	MaxLedgerLimit     = 1000
	// MaxAccountID is the longest account id, in characters of validID.
	MaxAccountID = 64
	// MaxKeyName is the longest key name, in printable characters.
	MaxKeyName = 128
	// MaxReason is the longest reason of an adjustment, in printable
	// characters.
	MaxReason = 500
	// MaxModelID is the longest model id a key's allowlist holds.
	MaxModelID = 256
	// MaxMCPToolGlob is the longest glob a key's mcp_tools holds, in
	// printable characters.
	MaxMCPToolGlob = 200
	// MaxMCPTools is how many globs a key's mcp_tools holds at most.
	MaxMCPTools = 100
)

// minTime and maxTime bound the times the API accepts, within the range of
// Unix nanoseconds in an int64 (1677-09-21 to 2262-04-11) that stores use.
var (
	minTime = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// validID is the shape of an account id: letters, digits, '.', '_' and
// '-', a letter or digit first, at most MaxAccountID long. Account ids go
// into URLs, logs and terminals as they are.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,` + strconv.Itoa(MaxAccountID-1) + `}$`)

// API is the admin API over a store.
type API struct {
	Store store.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	mux *http.ServeMux
}

// New returns the API for st.
func New(st store.Store) *API {
	a := &API{Store: st}
	m := http.NewServeMux()
	m.HandleFunc("POST /gw/accounts", a.createAccount)
	m.HandleFunc("GET /gw/accounts", a.listAccounts)
	m.HandleFunc("GET /gw/accounts/{id}", a.getAccount)
	m.HandleFunc("PATCH /gw/accounts/{id}", a.patchAccount)
	m.HandleFunc("POST /gw/accounts/{id}/keys", a.createKey)
	m.HandleFunc("GET /gw/accounts/{id}/keys", a.listKeys)
	m.HandleFunc("GET /gw/keys/{key_id}", a.getKey)
	m.HandleFunc("PATCH /gw/keys/{key_id}", a.patchKey)
	m.HandleFunc("DELETE /gw/keys/{key_id}", a.deleteKey)
	m.HandleFunc("GET /gw/accounts/{id}/ledger", a.ledger)
	m.HandleFunc("GET /gw/accounts/{id}/journal", a.journal)
	m.HandleFunc("GET /gw/journal/check", a.checkJournal)
	m.HandleFunc("GET /gw/usage", a.usage)
	m.HandleFunc("POST /gw/orgs", a.createOrg)
	m.HandleFunc("GET /gw/orgs", a.listOrgs)
	m.HandleFunc("GET /gw/orgs/{id}", a.getOrg)
	m.HandleFunc("PATCH /gw/orgs/{id}", a.patchOrg)
	m.HandleFunc("DELETE /gw/orgs/{id}", a.deleteOrg)
	m.HandleFunc("POST /gw/webhooks", a.createWebhook)
	m.HandleFunc("GET /gw/webhooks", a.listWebhooks)
	m.HandleFunc("GET /gw/webhooks/{id}", a.getWebhook)
	m.HandleFunc("DELETE /gw/webhooks/{id}", a.deleteWebhook)
	m.HandleFunc("GET /gw/webhooks/{id}/deliveries", a.deliveries)
	a.mux = m
	return a
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// ServeHTTP serves the admin routes; anything else is a JSON 404 (or 405).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern == "" {
		// ServeMux would answer in plain text; keep every answer JSON.
		rec := &probe{header: http.Header{}}
		a.mux.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
			return
		}
		writeError(w, http.StatusNotFound, "no admin route %s %s", r.Method, r.URL.Path)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// probe captures what ServeMux would answer for an unmatched request.
type probe struct {
	header http.Header
	status int
}

func (p *probe) Header() http.Header         { return p.header }
func (p *probe) Write(b []byte) (int, error) { return len(b), nil }
func (p *probe) WriteHeader(s int)           { p.status = s }

// Account is an account as the admin API shows it.
type Account struct {
	ID          string         `json:"id"`
	Plan        store.Plan     `json:"plan"`
	Cleared     bool           `json:"cleared"`
	PAYG        bool           `json:"payg"`
	LaneBilling bool           `json:"lane_billing"`
	Balance     *pricing.Money `json:"balance_usd"`
	DailyCap    *pricing.Money `json:"daily_cap_usd"`
	MonthlyCap  *pricing.Money `json:"monthly_cap_usd"`
	Abilities   []string       `json:"abilities"`
	// Org is the organization the account belongs to; null for none.
	Org *string `json:"org"`
	// LowBalance is the prepaid balance below which a charge raises a
	// balance.low alert; null for none.
	LowBalance *pricing.Money `json:"low_balance_usd"`
	CreatedAt  time.Time      `json:"created_at"`
	Spend      Spend          `json:"spend"`
}

// Spend is what an account spent today, this month and in all.
type Spend struct {
	Today pricing.Money `json:"today_usd"`
	Month pricing.Money `json:"month_usd"`
	Total pricing.Money `json:"total_usd"`
}

func (a *API) show(w http.ResponseWriter, r *http.Request, status int, acc store.Account) {
	j, err := a.view(r, acc)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, status, j)
}

// view is acc as the API shows it, with its spend.
func (a *API) view(r *http.Request, acc store.Account) (Account, error) {
	sp, err := a.Store.Spend(r.Context(), acc.ID, a.now())
	if err != nil {
		return Account{}, err
	}
	abilities := acc.Abilities
	if abilities == nil {
		abilities = store.AllAbilities
	}
	var org *string
	if acc.Org != "" {
		org = &acc.Org
	}
	return Account{
		ID: acc.ID, Plan: acc.Plan, Cleared: acc.Cleared, PAYG: acc.PAYG, LaneBilling: acc.LaneBilling,
		Balance: acc.Balance, DailyCap: acc.DailyCap, MonthlyCap: acc.MonthlyCap, Abilities: abilities, Org: org,
		LowBalance: acc.LowBalance, CreatedAt: acc.CreatedAt, Spend: Spend{sp.Today, sp.Month, sp.Total},
	}, nil
}

// accountFields are the settable fields of an account, in the order their
// errors are reported.
var accountFields = []string{"plan", "cleared", "payg", "lane_billing", "balance_usd", "daily_cap_usd", "monthly_cap_usd", "abilities", "org", "low_balance_usd"}

// apply sets the fields present in body on acc. A field sent as null
// clears a money value (balance: billed afterwards; cap: none), switches
// every ability on or leaves the organization.
func apply(acc *store.Account, body map[string]json.RawMessage) error {
	for _, f := range accountFields {
		raw, ok := body[f]
		if !ok {
			continue
		}
		var err error
		switch f {
		case "plan":
			var p string
			if err = json.Unmarshal(raw, &p); err == nil && p != string(store.PlanFree) && p != string(store.PlanPaid) {
				err = errors.New(`must be "free" or "paid"`)
			}
			acc.Plan = store.Plan(p)
		case "cleared":
			err = json.Unmarshal(raw, &acc.Cleared)
		case "payg":
			err = json.Unmarshal(raw, &acc.PAYG)
		case "lane_billing":
			err = json.Unmarshal(raw, &acc.LaneBilling)
		case "balance_usd":
			// A balance is never set below zero.
			acc.Balance, err = money(raw, false)
		case "daily_cap_usd":
			acc.DailyCap, err = money(raw, false)
		case "monthly_cap_usd":
			acc.MonthlyCap, err = money(raw, false)
		case "abilities":
			acc.Abilities, err = abilities(raw)
		case "org":
			acc.Org, err = orgOf(raw)
		case "low_balance_usd":
			acc.LowBalance, err = money(raw, false)
		}
		if err != nil {
			return fieldError(f, err)
		}
	}
	return nil
}

// money reads a decimal string (or number) of US dollars, or null.
func money(raw json.RawMessage, allowNegative bool) (*pricing.Money, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m pricing.Money
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, pricing.ErrBadAmount
	}
	if m < 0 && !allowNegative {
		return nil, errors.New("must not be negative")
	}
	return &m, nil
}

func abilities(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a list of ability names")
	}
	out := []string{}
	for _, x := range list {
		if !slices.Contains(store.AllAbilities, x) {
			return nil, fmt.Errorf("unknown ability %q (known: %v)", x, store.AllAbilities)
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

// readID reads the id of a new account or organization from body,
// answering 400 itself (and reporting false) when it is missing or not of
// validID's shape.
func readID(w http.ResponseWriter, body map[string]json.RawMessage) (string, bool) {
	var id string
	if err := json.Unmarshal(body["id"], &id); err != nil || !validID.MatchString(id) {
		writeError(w, http.StatusBadRequest, "id: required, 1 to %d letters, digits, '.', '_' or '-'", MaxAccountID)
		return "", false
	}
	return id, true
}

func (a *API) createAccount(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, append([]string{"id"}, accountFields...))
	if !ok {
		return
	}
	id, ok := readID(w, body)
	if !ok {
		return
	}
	acc := store.Account{ID: id, Plan: store.PlanFree, CreatedAt: a.now()}
	if err := apply(&acc, body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := a.Store.CreateAccount(r.Context(), acc); err != nil {
		if errors.Is(err, store.ErrExists) {
			writeError(w, http.StatusConflict, "account %q already exists", id)
			return
		}
		if errors.Is(err, store.ErrNoOrg) {
			writeError(w, http.StatusBadRequest, "%s", errNoOrg)
			return
		}
		storeError(w, err)
		return
	}
	a.show(w, r, http.StatusCreated, acc)
}

func (a *API) getAccount(w http.ResponseWriter, r *http.Request) {
	acc, err := a.Store.Account(r.Context(), r.PathValue("id"))
	if err != nil {
		storeError(w, err)
		return
	}
	a.show(w, r, http.StatusOK, acc)
}

func (a *API) patchAccount(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, append([]string{"add_balance_usd", "reason"}, accountFields...))
	if !ok {
		return
	}
	var add *pricing.Money
	why := store.Movement{Kind: store.JournalSet}
	if raw, ok := body["add_balance_usd"]; ok {
		m, err := money(raw, true)
		if err != nil || m == nil {
			writeError(w, http.StatusBadRequest, "add_balance_usd: %v", orDefault(err, pricing.ErrBadAmount))
			return
		}
		add = m
		why.Kind = store.JournalTopUp
		if *m < 0 {
			// Taking money back needs a reason, recorded in the journal.
			why.Kind = store.JournalAdjustment
			if err := json.Unmarshal(body["reason"], &why.Reason); err != nil || strings.TrimSpace(why.Reason) == "" {
				writeError(w, http.StatusBadRequest, "reason: required (a non-empty string) when add_balance_usd is below zero")
				return
			}
			if err := printable.Check(why.Reason, MaxReason); err != nil {
				writeError(w, http.StatusBadRequest, "reason: %v", err)
				return
			}
		}
	}
	if _, ok := body["reason"]; ok && why.Kind != store.JournalAdjustment {
		writeError(w, http.StatusBadRequest, "reason: only with an add_balance_usd below zero")
		return
	}
	var badField error
	acc, err := a.Store.UpdateAccount(r.Context(), r.PathValue("id"), func(acc *store.Account) error {
		if err := apply(acc, body); err != nil {
			badField = err
			return err
		}
		if add != nil {
			if acc.Balance == nil {
				badField = errors.New("add_balance_usd: the account is billed afterwards (balance_usd is null); set balance_usd to make it prepaid")
				return badField
			}
			b := *acc.Balance + *add
			if (*add > 0 && b < *acc.Balance) || (*add < 0 && b > *acc.Balance) {
				badField = errors.New("add_balance_usd: the new balance is out of range")
				return badField
			}
			if b < 0 {
				badField = fmt.Errorf("add_balance_usd: the balance would go below zero (it is %s)", acc.Balance)
				return badField
			}
			acc.Balance = &b
		}
		return nil
	}, why)
	if badField != nil {
		writeError(w, http.StatusBadRequest, "%v", badField)
		return
	}
	if errors.Is(err, store.ErrNoOrg) {
		writeError(w, http.StatusBadRequest, "%s", errNoOrg)
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	a.show(w, r, http.StatusOK, acc)
}

// Key is a key as listed; its secret (Key) only in the answer that made
// it, its spend only when it is read alone.
type Key struct {
	ID         string         `json:"id"`
	Key        string         `json:"key,omitempty"`
	Name       string         `json:"name"`
	Models     []string       `json:"models"`
	ExpiresAt  *time.Time     `json:"expires_at"`
	CreatedAt  time.Time      `json:"created_at"`
	DailyCap   *pricing.Money `json:"daily_cap_usd"`
	MonthlyCap *pricing.Money `json:"monthly_cap_usd"`
	TotalCap   *pricing.Money `json:"total_cap_usd"`
	// MCPTools are the globs over <server>__<tool> naming the MCP
	// gateway's tools the key may call; null for every tool offered.
	MCPTools []string `json:"mcp_tools"`
	Spend    *Spend   `json:"spend,omitempty"`
}

// keyView is k as the API lists it: never its hash.
func keyView(k store.Key) Key {
	return Key{ID: k.ID, Name: k.Name, Models: k.Models, ExpiresAt: k.ExpiresAt, CreatedAt: k.CreatedAt,
		DailyCap: k.DailyCap, MonthlyCap: k.MonthlyCap, TotalCap: k.TotalCap, MCPTools: k.MCPTools}
}

// mcpToolsField is the field of a key's MCP tools.
const mcpToolsField = "mcp_tools"

// mcpTools reads a key's mcp_tools: null (every tool offered) or a list
// of at most MaxMCPTools globs, each a non-empty printable string of at
// most MaxMCPToolGlob characters that path.Match accepts.
func mcpTools(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return nil, errors.New(mcpToolsField + ": must be a list of globs over <server>__<tool> names, or null for every tool")
	}
	if len(list) > MaxMCPTools {
		return nil, fmt.Errorf("%s: at most %d globs", mcpToolsField, MaxMCPTools)
	}
	for _, g := range list {
		if g == "" {
			return nil, errors.New(mcpToolsField + ": a glob must not be empty")
		}
		if err := printable.Check(g, MaxMCPToolGlob); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", mcpToolsField, g, err)
		}
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("%s: %q: not a valid glob (%v)", mcpToolsField, g, err)
		}
	}
	return list, nil
}

// keyCapFields are a key's caps, in the order their errors are reported.
var keyCapFields = []string{"daily_cap_usd", "monthly_cap_usd", "total_cap_usd"}

// applyKeyCaps sets the caps present in body on k, as the account's caps
// are read: a decimal string (or number) of US dollars, never below zero;
// null removes one.
func applyKeyCaps(k *store.Key, body map[string]json.RawMessage) error {
	for _, f := range keyCapFields {
		raw, ok := body[f]
		if !ok {
			continue
		}
		m, err := money(raw, false)
		if err != nil {
			return fieldError(f, err)
		}
		switch f {
		case "daily_cap_usd":
			k.DailyCap = m
		case "monthly_cap_usd":
			k.MonthlyCap = m
		case "total_cap_usd":
			k.TotalCap = m
		}
	}
	return nil
}

// keyName reads a key's name: a non-empty printable string of at most
// MaxKeyName characters.
func keyName(raw json.RawMessage) (string, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err != nil || name == "" {
		return "", errors.New("name: required, a non-empty string")
	}
	if err := printable.Check(name, MaxKeyName); err != nil {
		return "", fmt.Errorf("name: %v", err)
	}
	return name, nil
}

func (a *API) createKey(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, append([]string{"name", "models", "expires_at", mcpToolsField}, keyCapFields...))
	if !ok {
		return
	}
	k := store.Key{ID: store.NewID("key"), AccountID: r.PathValue("id"), CreatedAt: a.now()}
	name, err := keyName(body["name"])
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	k.Name = name
	if raw, ok := body["models"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &k.Models); err != nil || slices.Contains(k.Models, "") {
			writeError(w, http.StatusBadRequest, "models: must be a list of model ids")
			return
		}
		for _, m := range k.Models {
			if err := printable.Check(m, MaxModelID); err != nil {
				writeError(w, http.StatusBadRequest, "models: %q: %v", m, err)
				return
			}
		}
		if k.Models == nil {
			k.Models = []string{}
		}
	}
	if raw, ok := body["expires_at"]; ok && !isNull(raw) {
		var t time.Time
		if err := json.Unmarshal(raw, &t); err != nil {
			writeError(w, http.StatusBadRequest, "expires_at: must be an RFC 3339 time")
			return
		}
		// Stores keep times as Unix nanoseconds: outside that range the
		// write would fail (a 5xx) instead of refusing the field.
		if t.Before(minTime) || !t.Before(maxTime) {
			writeError(w, http.StatusBadRequest, "expires_at: must be an RFC 3339 time from 1678-01-01 to before 2262-01-01")
			return
		}
		t = t.UTC()
		k.ExpiresAt = &t
	}
	if err := applyKeyCaps(&k, body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if raw, ok := body[mcpToolsField]; ok {
		if k.MCPTools, err = mcpTools(raw); err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	secret, err := store.NewSecret()
	if err != nil {
		storeError(w, err)
		return
	}
	k.Hash = store.HashSecret(secret)
	if err := a.Store.CreateKey(r.Context(), k); err != nil {
		storeError(w, err)
		return
	}
	made := keyView(k)
	made.Key = secret
	writeJSON(w, http.StatusCreated, made)
}

func (a *API) listKeys(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.Store.Account(r.Context(), id); err != nil {
		storeError(w, err)
		return
	}
	keys, err := a.Store.Keys(r.Context(), id)
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Key, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyView(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// showKey answers k as listed, with what was charged with it today, this
// month and in all.
func (a *API) showKey(w http.ResponseWriter, r *http.Request, k store.Key) {
	sp, err := a.Store.KeySpend(r.Context(), k.ID, a.now())
	if err != nil {
		storeError(w, err)
		return
	}
	v := keyView(k)
	v.Spend = &Spend{sp.Today, sp.Month, sp.Total}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) getKey(w http.ResponseWriter, r *http.Request) {
	k, err := a.Store.Key(r.Context(), r.PathValue("key_id"))
	if err != nil {
		storeError(w, err)
		return
	}
	a.showKey(w, r, k)
}

// patchKey changes a key's name, caps (null removes a cap) and MCP tools
// (null allows every tool).
func (a *API) patchKey(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, append([]string{"name", mcpToolsField}, keyCapFields...))
	if !ok {
		return
	}
	var name string
	if raw, ok := body["name"]; ok {
		n, err := keyName(raw)
		if err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		name = n
	}
	if err := applyKeyCaps(&store.Key{}, body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var tools []string
	rawTools, setTools := body[mcpToolsField]
	if setTools {
		var err error
		if tools, err = mcpTools(rawTools); err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	k, err := a.Store.UpdateKey(r.Context(), r.PathValue("key_id"), func(k *store.Key) error {
		if name != "" {
			k.Name = name
		}
		if setTools {
			k.MCPTools = tools
		}
		return applyKeyCaps(k, body)
	})
	if err != nil {
		storeError(w, err)
		return
	}
	a.showKey(w, r, k)
}

func (a *API) deleteKey(w http.ResponseWriter, r *http.Request) {
	if err := a.Store.DeleteKey(r.Context(), r.PathValue("key_id")); err != nil {
		storeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Charge is one ledger entry as listed.
type Charge struct {
	RequestID string        `json:"request_id"`
	Endpoint  string        `json:"endpoint"`
	Model     string        `json:"model"`
	Units     int64         `json:"units"`
	Unit      string        `json:"unit"`
	Cost      pricing.Money `json:"cost_usd"`
	// Shortfall is what the call cost beyond what the account could pay:
	// "0" when none.
	Shortfall string    `json:"shortfall_usd"`
	Time      time.Time `json:"time"`
}

func (a *API) ledger(w http.ResponseWriter, r *http.Request) {
	limit, ok := listLimit(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if _, err := a.Store.Account(r.Context(), id); err != nil {
		storeError(w, err)
		return
	}
	entries, err := a.Store.Entries(r.Context(), id, limit)
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Charge, 0, len(entries))
	for _, e := range entries {
		short := "0"
		if e.Shortfall != 0 {
			short = e.Shortfall.String()
		}
		out = append(out, Charge{e.RequestID, e.Endpoint, e.Model, e.Units, e.Unit, e.Cost, short, e.Time.UTC()})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// Movement is one balance movement as listed.
type Movement struct {
	Time      time.Time     `json:"time"`
	Kind      string        `json:"kind"`
	Amount    pricing.Money `json:"amount_usd"`
	Balance   pricing.Money `json:"balance_usd"`
	RequestID string        `json:"request_id,omitempty"`
	Reason    string        `json:"reason,omitempty"`
}

func (a *API) journal(w http.ResponseWriter, r *http.Request) {
	limit, ok := listLimit(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if _, err := a.Store.Account(r.Context(), id); err != nil {
		storeError(w, err)
		return
	}
	entries, err := a.Store.Journal(r.Context(), id, limit)
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Movement, 0, len(entries))
	for _, e := range entries {
		out = append(out, Movement{e.Time.UTC(), e.Kind, e.Amount, e.Balance, e.RequestID, e.Reason})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// Problem is an account whose journal does not add up.
type Problem struct {
	Account           string        `json:"account"`
	Balance           pricing.Money `json:"balance_usd"`
	JournalSum        pricing.Money `json:"journal_sum_usd"`
	LastBalance       pricing.Money `json:"last_entry_balance_usd"`
	UnledgeredCharges []string      `json:"unledgered_charges"`
}

// checkJournal verifies every account: its journal adds up to its
// balance, and every charge has its ledger entry. 200 with ok true, or
// with ok false and the differences.
func (a *API) checkJournal(w http.ResponseWriter, r *http.Request) {
	problems, err := a.Store.CheckJournal(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Problem, 0, len(problems))
	for _, p := range problems {
		out = append(out, Problem{p.AccountID, p.Balance, p.JournalSum, p.Last, append([]string{}, p.UnledgeredCharges...)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": len(out) == 0, "problems": out})
}

// listLimit reads ?limit= (DefaultLedgerLimit when absent), or answers 400.
func listLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	limit := DefaultLedgerLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLedgerLimit {
			writeError(w, http.StatusBadRequest, "limit: must be a whole number from 1 to %d", MaxLedgerLimit)
			return 0, false
		}
		limit = n
	}
	return limit, true
}

// readObject reads a JSON object body whose fields must all be in allowed.
func readObject(w http.ResponseWriter, r *http.Request, allowed []string) (map[string]json.RawMessage, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body: larger than %d bytes", MaxBody)
		return nil, false
	}
	body := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &body); err != nil || body == nil {
			writeError(w, http.StatusBadRequest, "body: must be a JSON object")
			return nil, false
		}
	}
	for f := range body {
		if !slices.Contains(allowed, f) {
			writeError(w, http.StatusBadRequest, "%s: unknown field", f)
			return nil, false
		}
	}
	return body, true
}

func fieldError(field string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: must be a %s", field, te.Type)
	}
	return fmt.Errorf("%s: %v", field, err)
}

func storeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found")
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, "already exists")
	default:
		writeError(w, http.StatusServiceUnavailable, "store unavailable")
	}
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func orDefault(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
