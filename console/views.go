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
	// Keys are the account's keys, each with its spend.
	Keys    []admin.Key
	Journal []admin.Movement
	// NewKey is the key just created, shown this once.
	NewKey *admin.Key
	// Form keeps what a refused form held; CapsKey and ToolsKey name the
	// key whose caps form or MCP tools form it was, if it was one.
	Form     url.Values
	CapsKey  string
	ToolsKey string
}

// mcpToolsField is the field of a key's MCP tools, in the create form and
// the tools form, named as the admin API names it.
const mcpToolsField = "mcp_tools"

// toolsText writes a key's MCP tools as its tools form holds them: "" for
// every tool (nil), "none" for none, else the globs comma-separated.
func toolsText(list []string) string {
	switch {
	case list == nil:
		return ""
	case len(list) == 0:
		return "none"
	}
	return strings.Join(list, ", ")
}

// toolsValue is what the MCP tools form of key k holds: what a refused
// form held, else the key's tools as toolsText writes them.
func toolsValue(v accountView, k admin.Key) string {
	if v.ToolsKey == k.ID {
		return v.Form.Get(mcpToolsField)
	}
	return toolsText(k.MCPTools)
}

// toolsOf reads what a form holds as a key's MCP tools, for the admin
// API: empty or "all" is null (every tool), "none" an empty list, else
// the comma-separated globs, blanks dropped.
func toolsOf(s string) any {
	switch s = strings.TrimSpace(s); s {
	case "", "all":
		return nil
	case "none":
		return []string{}
	}
	globs := []string{}
	for _, g := range strings.Split(s, ",") {
		if g = strings.TrimSpace(g); g != "" {
			globs = append(globs, g)
		}
	}
	return globs
}

// keyCapFields are the fields of a key's caps form, named as the admin
// API names them.
var keyCapFields = []string{"daily_cap_usd", "monthly_cap_usd", "total_cap_usd"}

// capValue is what the caps form of key k holds in field: what a refused
// form held, else the cap's decimal amount ("" for none).
func capValue(v accountView, k admin.Key, field string) string {
	var held url.Values
	if v.CapsKey == k.ID {
		held = v.Form
	}
	var m *pricing.Money
	switch field {
	case "daily_cap_usd":
		m = k.DailyCap
	case "monthly_cap_usd":
		m = k.MonthlyCap
	case "total_cap_usd":
		m = k.TotalCap
	}
	return fieldValue(held, field, m)
}

// fieldValue is what a caps form holds in field: what the refused form
// held (when held is not nil), else m's decimal amount ("" for none).
func fieldValue(held url.Values, field string, m *pricing.Money) string {
	if held != nil {
		return held.Get(field)
	}
	if m == nil {
		return ""
	}
	return m.String()
}

// capsBody is the admin API's body for what a caps form holds, over the
// fields a caps form may have: an amount sets a cap, an empty field
// removes it (null), a field the form lacks is left out.
func capsBody(form url.Values, fields []string) map[string]any {
	body := map[string]any{}
	for _, f := range fields {
		if _, ok := form[f]; !ok {
			continue
		}
		if v := strings.TrimSpace(form.Get(f)); v != "" {
			body[f] = v
		} else {
			body[f] = nil
		}
	}
	return body
}

// noCaps is the refusal of a caps form that holds none of fields.
func noCaps(fields []string) string {
	return "caps: the form holds none of " + strings.Join(fields, ", ")
}

// keyPath is the admin API's path of a key.
func keyPath(id string) string { return "/gw/keys/" + url.PathEscape(id) }

// loadAccount reads what an account's page shows.
func (c *Console) loadAccount(r *http.Request, id string) (accountView, int, string) {
	var v accountView
	base := "/gw/accounts/" + url.PathEscape(id)
	if status, msg := c.call(r, "GET", base, nil, &v.Account); msg != "" {
		return v, status, msg
	}
	keys, status, msg := c.accountKeys(r, id)
	if msg != "" {
		return v, status, msg
	}
	var journal struct {
		Data []admin.Movement `json:"data"`
	}
	if status, msg := c.call(r, "GET", base+"/journal?limit="+itoa(JournalRows), nil, &journal); msg != "" {
		return v, status, msg
	}
	for _, k := range keys {
		// Read alone, a key comes with its spend; one revoked meanwhile
		// is left out.
		var shown admin.Key
		status, msg := c.call(r, "GET", keyPath(k.ID), nil, &shown)
		if status == http.StatusNotFound {
			continue
		}
		if msg != "" {
			return v, status, msg
		}
		if shown.Spend == nil {
			shown.Spend = &admin.Spend{}
		}
		v.Keys = append(v.Keys, shown)
	}
	v.Journal = journal.Data
	return v, http.StatusOK, ""
}

// accountKeys lists an account's keys (without their spend).
func (c *Console) accountKeys(r *http.Request, id string) ([]admin.Key, int, string) {
	var keys struct {
		Data []admin.Key `json:"data"`
	}
	status, msg := c.call(r, "GET", "/gw/accounts/"+url.PathEscape(id)+"/keys", nil, &keys)
	return keys.Data, status, msg
}

// ownKey checks that keyID is a key of account id, for a write made from
// the account's page; when it is not, it renders the page with why and
// returns false.
func (c *Console) ownKey(w http.ResponseWriter, r *http.Request, id, keyID string) bool {
	keys, status, msg := c.accountKeys(r, id)
	if msg != "" {
		c.fail(w, status, msg)
		return false
	}
	for _, k := range keys {
		if k.ID == keyID {
			return true
		}
	}
	c.showAccount(w, r, http.StatusNotFound, "no key "+keyID+" on this account", nil)
	return false
}

func (c *Console) account(w http.ResponseWriter, r *http.Request) {
	c.showAccount(w, r, http.StatusOK, "", nil)
}

// showAccount renders an account's page with status, an error message and
// what set adds to the page (the key just created, or the form that was
// refused); set may be nil.
func (c *Console) showAccount(w http.ResponseWriter, r *http.Request, status int, errMsg string, set func(*accountView)) {
	id := r.PathValue("id")
	v, st, msg := c.loadAccount(r, id)
	if msg != "" {
		c.fail(w, st, msg)
		return
	}
	if set != nil {
		set(&v)
	}
	c.render(w, "account", page{Title: "Account " + id, Status: status, Error: errMsg, Data: v})
}

// refused is a showAccount setting that keeps the refused form.
func refused(form url.Values) func(*accountView) {
	return func(v *accountView) { v.Form = form }
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
	if tools := toolsOf(r.PostForm.Get(mcpToolsField)); tools != nil {
		body[mcpToolsField] = tools
	}
	var k admin.Key
	status, msg := c.call(r, "POST", "/gw/accounts/"+url.PathEscape(r.PathValue("id"))+"/keys", body, &k)
	if msg != "" {
		c.showAccount(w, r, status, msg, refused(r.PostForm))
		return
	}
	c.showAccount(w, r, http.StatusCreated, "", func(v *accountView) { v.NewKey = &k })
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	id, keyID := r.PathValue("id"), r.PathValue("key")
	// Only a key of this account is revoked from its page.
	if !c.ownKey(w, r, id, keyID) {
		return
	}
	if status, msg := c.call(r, "DELETE", keyPath(keyID), nil, nil); msg != "" {
		c.showAccount(w, r, status, msg, nil)
		return
	}
	http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
}

// setCaps sets the caps a key's caps form holds: an amount sets a cap, an
// empty field removes it, a field the form lacks leaves it as it is.
func (c *Console) setCaps(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	id, keyID := r.PathValue("id"), r.PathValue("key")
	body := capsBody(r.PostForm, keyCapFields)
	keep := func(v *accountView) { v.Form, v.CapsKey = r.PostForm, keyID }
	if len(body) == 0 {
		c.showAccount(w, r, http.StatusBadRequest, noCaps(keyCapFields), keep)
		return
	}
	// Only a key of this account is changed from its page.
	if !c.ownKey(w, r, id, keyID) {
		return
	}
	if status, msg := c.call(r, "PATCH", keyPath(keyID), body, nil); msg != "" {
		c.showAccount(w, r, status, msg, keep)
		return
	}
	http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
}

// setTools sets the MCP tools a key's tools form holds: globs, "none" or
// empty for every tool.
func (c *Console) setTools(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	id, keyID := r.PathValue("id"), r.PathValue("key")
	keep := func(v *accountView) { v.Form, v.ToolsKey = r.PostForm, keyID }
	if !r.PostForm.Has(mcpToolsField) {
		c.showAccount(w, r, http.StatusBadRequest, mcpToolsField+": the form lacks it", keep)
		return
	}
	// Only a key of this account is changed from its page.
	if !c.ownKey(w, r, id, keyID) {
		return
	}
	body := map[string]any{mcpToolsField: toolsOf(r.PostForm.Get(mcpToolsField))}
	if status, msg := c.call(r, "PATCH", keyPath(keyID), body, nil); msg != "" {
		c.showAccount(w, r, status, msg, keep)
		return
	}
	http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
}

// orgValue is what the organization form of an account's page holds:
// what a refused one held, else the account's organization ("" for none).
func orgValue(v accountView) string {
	if v.Form.Has("org") {
		return v.Form.Get("org")
	}
	if v.Account.Org == nil {
		return ""
	}
	return *v.Account.Org
}

// setOrg puts the account in the organization its form names, or takes it
// out of its organization when the form names none.
func (c *Console) setOrg(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	if !r.PostForm.Has("org") {
		c.showAccount(w, r, http.StatusBadRequest, "org: the form lacks it", nil)
		return
	}
	var org any
	if o := strings.TrimSpace(r.PostForm.Get("org")); o != "" {
		org = o
	}
	id := r.PathValue("id")
	if status, msg := c.call(r, "PATCH", "/gw/accounts/"+url.PathEscape(id), map[string]any{"org": org}, nil); msg != "" {
		c.showAccount(w, r, status, msg, refused(r.PostForm))
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
		c.showAccount(w, r, http.StatusBadRequest, "amount: a decimal number of US dollars other than zero, for example 10 or -2.50", refused(r.PostForm))
		return
	}
	body := map[string]any{"add_balance_usd": amount}
	if m < 0 {
		body["reason"] = reason
	} else if reason != "" {
		c.showAccount(w, r, http.StatusBadRequest, "reason: only for a negative amount (an adjustment); a top-up takes none", refused(r.PostForm))
		return
	}
	id := r.PathValue("id")
	if status, msg := c.call(r, "PATCH", "/gw/accounts/"+url.PathEscape(id), body, nil); msg != "" {
		c.showAccount(w, r, status, msg, refused(r.PostForm))
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
