package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// MaxOrgName is the longest name of an organization, in printable
// characters.
const MaxOrgName = 128

// errNoOrg answers an account's org naming no organization.
const errNoOrg = "org: no such organization"

// Org is an organization as the admin API shows it, with what its
// accounts spent while they belonged to it.
type Org struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	DailyCap   *pricing.Money `json:"daily_cap_usd"`
	MonthlyCap *pricing.Money `json:"monthly_cap_usd"`
	CreatedAt  time.Time      `json:"created_at"`
	Spend      Spend          `json:"spend"`
}

// orgFields are the settable fields of an organization, in the order
// their errors are reported.
var orgFields = []string{"name", "daily_cap_usd", "monthly_cap_usd"}

// orgOf reads an account's org: an organization's id, or null for none.
func orgOf(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil || !validID.MatchString(id) {
		return "", errors.New("must be an organization's id, or null for none")
	}
	return id, nil
}

// applyOrg sets the fields present in body on o: a printable name of at
// most MaxOrgName characters, and caps as an account's are read (null
// removes one).
func applyOrg(o *store.Org, body map[string]json.RawMessage) error {
	for _, f := range orgFields {
		raw, ok := body[f]
		if !ok {
			continue
		}
		var err error
		switch f {
		case "name":
			if isNull(raw) {
				err = errors.New("must be a string")
			} else if err = json.Unmarshal(raw, &o.Name); err == nil {
				err = printable.Check(o.Name, MaxOrgName)
			}
		case "daily_cap_usd":
			o.DailyCap, err = money(raw, false)
		case "monthly_cap_usd":
			o.MonthlyCap, err = money(raw, false)
		}
		if err != nil {
			return fieldError(f, err)
		}
	}
	return nil
}

// orgView is o as the API shows it, with its spend.
func (a *API) orgView(r *http.Request, o store.Org) (Org, error) {
	sp, err := a.Store.OrgSpend(r.Context(), o.ID, a.now())
	if err != nil {
		return Org{}, err
	}
	return Org{ID: o.ID, Name: o.Name, DailyCap: o.DailyCap, MonthlyCap: o.MonthlyCap, CreatedAt: o.CreatedAt,
		Spend: Spend{sp.Today, sp.Month, sp.Total}}, nil
}

// showOrg answers o with its spend.
func (a *API) showOrg(w http.ResponseWriter, r *http.Request, status int, o store.Org) {
	v, err := a.orgView(r, o)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, status, v)
}

// createOrg answers POST /gw/orgs: 201 with the organization made, 409
// when its id is taken.
func (a *API) createOrg(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, append([]string{"id"}, orgFields...))
	if !ok {
		return
	}
	id, ok := readID(w, body)
	if !ok {
		return
	}
	o := store.Org{ID: id, CreatedAt: a.now()}
	if err := applyOrg(&o, body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := a.Store.CreateOrg(r.Context(), o); err != nil {
		if errors.Is(err, store.ErrExists) {
			writeError(w, http.StatusConflict, "organization %q already exists", id)
			return
		}
		storeError(w, err)
		return
	}
	a.showOrg(w, r, http.StatusCreated, o)
}

// listOrgs answers GET /gw/orgs: every organization in the order of their
// ids, each as GET /gw/orgs/{id} shows it.
func (a *API) listOrgs(w http.ResponseWriter, r *http.Request) {
	orgs, err := a.Store.ListOrgs(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Org, 0, len(orgs))
	for _, o := range orgs {
		v, err := a.orgView(r, o)
		if err != nil {
			storeError(w, err)
			return
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (a *API) getOrg(w http.ResponseWriter, r *http.Request) {
	o, err := a.Store.Org(r.Context(), r.PathValue("id"))
	if err != nil {
		storeError(w, err)
		return
	}
	a.showOrg(w, r, http.StatusOK, o)
}

// patchOrg changes an organization's name and caps (null removes a cap).
func (a *API) patchOrg(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, orgFields)
	if !ok {
		return
	}
	if err := applyOrg(&store.Org{}, body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	o, err := a.Store.UpdateOrg(r.Context(), r.PathValue("id"), func(o *store.Org) error { return applyOrg(o, body) })
	if err != nil {
		storeError(w, err)
		return
	}
	a.showOrg(w, r, http.StatusOK, o)
}

// deleteOrg answers DELETE /gw/orgs/{id}: 204, or 409 while accounts
// belong to it.
func (a *API) deleteOrg(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := a.Store.DeleteOrg(r.Context(), id)
	if errors.Is(err, store.ErrInUse) {
		writeError(w, http.StatusConflict, "%s", fmt.Sprintf("organization %q still has accounts; move them out first", id))
		return
	}
	if err != nil {
		storeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
