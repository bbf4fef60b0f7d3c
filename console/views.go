package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// page is what the layout renders.
type page struct {
	Title string
	// Status is the answer's status code (200 when zero).
	Status int
	Error  string
	Data   any
}

func (c *Console) render(w http.ResponseWriter, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if p.Status == 0 {
		p.Status = http.StatusOK
	}
	w.WriteHeader(p.Status)
	_ = pages.ExecuteTemplate(w, name, p)
}

// fail renders the error page for a failed admin call.
func (c *Console) fail(w http.ResponseWriter, status int, msg string) {
	c.render(w, "error", page{Title: "Error", Status: status, Error: msg})
}

func (c *Console) accounts(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after")
	var list struct {
		Data    []admin.Account `json:"data"`
		HasMore bool            `json:"has_more"`
	}
	q := url.Values{"limit": {itoa(AccountsPerPage)}}
	if after != "" {
		q.Set("after", after)
	}
	if status, msg := c.call(r, "GET", "/gw/accounts?"+q.Encode(), nil, &list); msg != "" {
		c.fail(w, status, msg)
		return
	}
	next := ""
	if list.HasMore && len(list.Data) > 0 {
		next = list.Data[len(list.Data)-1].ID
	}
	c.render(w, "accounts", page{Title: "Accounts", Data: map[string]any{"Accounts": list.Data, "Next": next}})
}

// accountView is an account's page.
type accountView struct {
	Account admin.Account
	Keys    []admin.Key
	Journal []admin.Movement
	// NewKey is the key just created, shown this once.
	NewKey *admin.Key
	// Form keeps what a refused form held.
	Form url.Values
}

// loadAccount reads what an account's page shows.
func (c *Console) loadAccount(r *http.Request, id string) (accountView, int, string) {
	var v accountView
	base := "/gw/accounts/" + url.PathEscape(id)
	if status, msg := c.call(r, "GET", base, nil, &v.Account); msg != "" {
		return v, status, msg
	}
	var keys struct {
		Data []admin.Key `json:"data"`
	}
	if status, msg := c.call(r, "GET", base+"/keys", nil, &keys); msg != "" {
		return v, status, msg
	}
	var journal struct {
		Data []admin.Movement `json:"data"`
	}
	if status, msg := c.call(r, "GET", base+"/journal?limit="+itoa(JournalRows), nil, &journal); msg != "" {
		return v, status, msg
	}
	v.Keys, v.Journal = keys.Data, journal.Data
	return v, http.StatusOK, ""
}

func (c *Console) account(w http.ResponseWriter, r *http.Request) {
	c.showAccount(w, r, http.StatusOK, "", nil, nil)
}

// showAccount renders an account's page with status, an error message, the
// key just created or the form that was refused.
func (c *Console) showAccount(w http.ResponseWriter, r *http.Request, status int, errMsg string, newKey *admin.Key, form url.Values) {
	id := r.PathValue("id")
	v, st, msg := c.loadAccount(r, id)
	if msg != "" {
		c.fail(w, st, msg)
		return
	}
	v.NewKey, v.Form = newKey, form
	c.render(w, "account", page{Title: "Account " + id, Status: status, Error: errMsg, Data: v})
}

// readForm parses a write's form body, or answers 400.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	body := map[string]any{"name": strings.TrimSpace(r.PostForm.Get("name"))}
	if m := strings.TrimSpace(r.PostForm.Get("models")); m != "" {
		var models []string
		for _, s := range strings.Split(m, ",") {
			if s = strings.TrimSpace(s); s != "" {
				models = append(models, s)
			}
		}
		body["models"] = models
	}
	if e := strings.TrimSpace(r.PostForm.Get("expires_at")); e != "" {
		body["expires_at"] = e
	}
	var k admin.Key
	status, msg := c.call(r, "POST", "/gw/accounts/"+url.PathEscape(r.PathValue("id"))+"/keys", body, &k)
	if msg != "" {
		c.showAccount(w, r, status, msg, nil, r.PostForm)
		return
	}
	c.showAccount(w, r, http.StatusCreated, "", &k, nil)
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	id, keyID := r.PathValue("id"), r.PathValue("key")
	// Only a key of this account is revoked from its page.
	v, status, msg := c.loadAccount(r, id)
	if msg != "" {
		c.fail(w, status, msg)
		return
	}
	found := false
	for _, k := range v.Keys {
		found = found || k.ID == keyID
	}
	if !found {
		c.showAccount(w, r, http.StatusNotFound, "no key "+keyID+" on this account", nil, nil)
		return
	}
	if status, msg := c.call(r, "DELETE", "/gw/keys/"+url.PathEscape(keyID), nil, nil); msg != "" {
		c.showAccount(w, r, status, msg, nil, nil)
		return
	}
	http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
}

func (c *Console) addBalance(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	amount := strings.TrimSpace(r.PostForm.Get("amount_usd"))
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	m, err := pricing.ParseUSD(amount)
	if err != nil || m == 0 {
		c.showAccount(w, r, http.StatusBadRequest, "amount: a decimal number of US dollars other than zero, for example 10 or -2.50", nil, r.PostForm)
		return
	}
	body := map[string]any{"add_balance_usd": amount}
	if m < 0 {
		body["reason"] = reason
	} else if reason != "" {
		c.showAccount(w, r, http.StatusBadRequest, "reason: only for a negative amount (an adjustment); a top-up takes none", nil, r.PostForm)
		return
	}
	id := r.PathValue("id")
	if status, msg := c.call(r, "PATCH", "/gw/accounts/"+url.PathEscape(id), body, nil); msg != "" {
		c.showAccount(w, r, status, msg, nil, r.PostForm)
		return
	}
	http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
}

// usageView is the usage page.
type usageView struct {
	Account  string
	From, To string
	Chart    chart
	ByModel  []usage.Row
	ByDay    []usage.Row
	Total    usage.Total
}

func (c *Console) usage(w http.ResponseWriter, r *http.Request) {
	account := r.URL.Query().Get("account")
	for name := range r.URL.Query() {
		if name != "account" {
			c.fail(w, http.StatusBadRequest, name+": unknown parameter (known: account)")
			return
		}
	}
	to := c.now()
	from := to.AddDate(0, 0, 1-UsageDays)
	v := usageView{Account: account, From: from.Format(usage.DateLayout), To: to.Format(usage.DateLayout)}
	query := func(groups string) (usage.Report, int, string) {
		q := url.Values{"from": {v.From}, "to": {v.To}, "group_by": {groups}}
		if account != "" {
			q.Set("account", account)
		}
		var rep usage.Report
		status, msg := c.call(r, "GET", "/gw/usage?"+q.Encode(), nil, &rep)
		return rep, status, msg
	}
	dayModel, status, msg := query("day,model")
	if msg != "" {
		c.fail(w, status, msg)
		return
	}
	byModel, status, msg := query("model")
	if msg != "" {
		c.fail(w, status, msg)
		return
	}
	byDay, status, msg := query("day")
	if msg != "" {
		c.fail(w, status, msg)
		return
	}
	v.Chart = spendChart(dayModel.Data, from, UsageDays)
	v.ByModel, v.ByDay, v.Total = byModel.Data, byDay.Data, byModel.Total
	title := "Usage"
	if account != "" {
		title = "Usage of " + account
	}
	c.render(w, "usage", page{Title: title, Data: v})
}
