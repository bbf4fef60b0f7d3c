package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/admin"
)

// orgCapFields are the fields of an organization's caps form, named as
// the admin API names them.
var orgCapFields = []string{"daily_cap_usd", "monthly_cap_usd"}

// orgsView is the organizations page.
type orgsView struct {
	Orgs []admin.Org
	// Form keeps what a refused creation form held.
	Form url.Values
}

// orgView is an organization's page.
type orgView struct {
	Org admin.Org
	// Members are the organization's accounts, a page of AccountsPerPage
	// at most; Next is the id the next page follows, if one does.
	Members []admin.Account
	Next    string
	// Form keeps what a refused caps form held.
	Form url.Values
}

// orgCapValue is what an organization's caps form holds in field: what a
// refused form held, else the cap's decimal amount ("" for none).
func orgCapValue(v orgView, field string) string {
	m := v.Org.DailyCap
	if field == "monthly_cap_usd" {
		m = v.Org.MonthlyCap
	}
	return fieldValue(v.Form, field, m)
}

// orgPath is the admin API's path of an organization.
func orgPath(id string) string { return "/gw/orgs/" + url.PathEscape(id) }

func (c *Console) orgs(w http.ResponseWriter, r *http.Request) {
	c.showOrgs(w, r, http.StatusOK, "", nil)
}

// showOrgs renders the organizations page with status, an error message
// and what a refused creation form held (nil for none).
func (c *Console) showOrgs(w http.ResponseWriter, r *http.Request, status int, errMsg string, form url.Values) {
	var list struct {
		Data []admin.Org `json:"data"`
	}
	if st, msg := c.call(r, "GET", "/gw/orgs", nil, &list); msg != "" {
		c.fail(w, st, msg)
		return
	}
	c.render(w, "orgs", page{Title: "Organizations", Status: status, Error: errMsg, Data: orgsView{Orgs: list.Data, Form: form}})
}

// createOrg makes the organization its form describes (fields left empty
// are left out) and shows its page.
func (c *Console) createOrg(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	id := strings.TrimSpace(r.PostForm.Get("id"))
	body := map[string]any{"id": id}
	for _, f := range append([]string{"name"}, orgCapFields...) {
		if v := strings.TrimSpace(r.PostForm.Get(f)); v != "" {
			body[f] = v
		}
	}
	if status, msg := c.call(r, "POST", "/gw/orgs", body, nil); msg != "" {
		c.showOrgs(w, r, status, msg, r.PostForm)
		return
	}
	http.Redirect(w, r, "/orgs/"+url.PathEscape(id), http.StatusSeeOther)
}

func (c *Console) org(w http.ResponseWriter, r *http.Request) {
	c.showOrg(w, r, http.StatusOK, "", nil)
}

// showOrg renders an organization's page, its members from the one ?after=
// names, with status, an error message and what a refused caps form held
// (nil for none).
func (c *Console) showOrg(w http.ResponseWriter, r *http.Request, status int, errMsg string, form url.Values) {
	id := r.PathValue("id")
	v := orgView{Form: form}
	if st, msg := c.call(r, "GET", orgPath(id), nil, &v.Org); msg != "" {
		c.fail(w, st, msg)
		return
	}
	var list struct {
		Data    []admin.Account `json:"data"`
		HasMore bool            `json:"has_more"`
	}
	q := url.Values{"org": {id}, "limit": {itoa(AccountsPerPage)}}
	if after := r.URL.Query().Get("after"); after != "" {
		q.Set("after", after)
	}
	if st, msg := c.call(r, "GET", "/gw/accounts?"+q.Encode(), nil, &list); msg != "" {
		c.fail(w, st, msg)
		return
	}
	v.Members = list.Data
	if list.HasMore && len(list.Data) > 0 {
		v.Next = list.Data[len(list.Data)-1].ID
	}
	c.render(w, "org", page{Title: "Organization " + id, Status: status, Error: errMsg, Data: v})
}

// setOrgCaps sets the caps an organization's caps form holds: an amount
// sets a cap, an empty field removes it, a field the form lacks leaves it
// as it is.
func (c *Console) setOrgCaps(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	body := capsBody(r.PostForm, orgCapFields)
	if len(body) == 0 {
		c.showOrg(w, r, http.StatusBadRequest, noCaps(orgCapFields), r.PostForm)
		return
	}
	id := r.PathValue("id")
	if status, msg := c.call(r, "PATCH", orgPath(id), body, nil); msg != "" {
		c.showOrg(w, r, status, msg, r.PostForm)
		return
	}
	http.Redirect(w, r, "/orgs/"+url.PathEscape(id), http.StatusSeeOther)
}

// deleteOrg deletes an organization; while accounts belong to it the
// admin API refuses, and its page shows why.
func (c *Console) deleteOrg(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	if status, msg := c.call(r, "DELETE", orgPath(r.PathValue("id")), nil, nil); msg != "" {
		c.showOrg(w, r, status, msg, nil)
		return
	}
	http.Redirect(w, r, "/orgs", http.StatusSeeOther)
}
