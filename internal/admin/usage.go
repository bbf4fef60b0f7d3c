package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/usage"
)

// usage answers GET /gw/usage: usage figures of every account, or of the
// one ?account= names, or of the accounts of the organization ?org= names
// (404 when either does not exist).
func (a *API) usage(w http.ResponseWriter, r *http.Request) {
	q, err := usage.Parse(r.URL.Query(), a.now(), usage.Scope{})
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if q.AccountID != "" {
		if _, err := a.Store.Account(r.Context(), q.AccountID); err != nil {
			storeError(w, err)
			return
		}
	}
	if q.OrgID != "" {
		if _, err := a.Store.Org(r.Context(), q.OrgID); err != nil {
			storeError(w, err)
			return
		}
	}
	rep, err := usage.Run(r.Context(), a.Store, q)
	var bad *usage.Error
	if errors.As(err, &bad) {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Bounds of GET /gw/accounts?limit=.
const (
	DefaultAccountsLimit = 100
	MaxAccountsLimit     = 1000
)

// listAccounts answers GET /gw/accounts: accounts in the order of their
// ids, each as GET /gw/accounts/{id} shows it, a page of ?limit= at a time
// after the id ?after= names, only those of the organization ?org= names
// when it is given (404 when it does not exist); has_more says whether
// more follow.
func (a *API) listAccounts(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	for name := range v {
		if name != "limit" && name != "after" && name != "org" {
			writeError(w, http.StatusBadRequest, "%s: unknown parameter (known: limit, after, org)", name)
			return
		}
	}
	limit := DefaultAccountsLimit
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxAccountsLimit {
			writeError(w, http.StatusBadRequest, "limit: must be a whole number from 1 to %d", MaxAccountsLimit)
			return
		}
		limit = n
	}
	org := v.Get("org")
	if v.Has("org") {
		if org == "" {
			writeError(w, http.StatusBadRequest, "org: empty; leave it out for every account")
			return
		}
		if _, err := a.Store.Org(r.Context(), org); err != nil {
			storeError(w, err)
			return
		}
	}
	accounts, err := a.accountsAfter(r.Context(), v.Get("after"), limit+1, org)
	if err != nil {
		storeError(w, err)
		return
	}
	more := len(accounts) > limit
	if more {
		accounts = accounts[:limit]
	}
	out := make([]Account, 0, len(accounts))
	for _, acc := range accounts {
		j, err := a.view(r, acc)
		if err != nil {
			storeError(w, err)
			return
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out, "has_more": more})
}

// orgScanPage is how many accounts GET /gw/accounts?org= reads from the
// store at a time while it looks for an organization's accounts.
const orgScanPage = MaxAccountsLimit

// accountsAfter returns at most n accounts whose ids sort after after, in
// that order, only those of organization org when it is not empty. The
// store keeps no index of accounts by organization, so those are found by
// reading every account after after, orgScanPage at a time, until n are
// found.
func (a *API) accountsAfter(ctx context.Context, after string, n int, org string) ([]store.Account, error) {
	if org == "" {
		return a.Store.ListAccounts(ctx, after, n)
	}
	var out []store.Account
	for {
		batch, err := a.Store.ListAccounts(ctx, after, orgScanPage)
		if err != nil {
			return nil, err
		}
		for _, acc := range batch {
			if acc.Org != org {
				continue
			}
			if out = append(out, acc); len(out) == n {
				return out, nil
			}
		}
		if len(batch) < orgScanPage {
			return out, nil
		}
		after = batch[len(batch)-1].ID
	}
}
