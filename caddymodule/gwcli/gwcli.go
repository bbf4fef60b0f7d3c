// Package gwcli is the `caddy gw` command line: accounts, keys,
// organizations, alert webhooks, balances, the journal, the ledger and
// usage figures, through the gw routes of Caddy's admin endpoint (so the
// admin API's own code does the work), as a table for people or, with
// --json, the admin API's JSON for scripts.
package gwcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/printable"
)

// Long is the help text of `caddy gw`.
const Long = `
Manages the gateway's accounts, keys, organizations, alert webhooks,
balances and usage through the gw routes of Caddy's admin endpoint,
running the admin API's own code. The gateway must be running.

The admin endpoint is --address when given, else the admin address of the
config that 'caddy reload' would load (--config and --adapter, or the
Caddyfile in the current folder), else localhost:2019.

Output is a table for people; --json prints the admin API's JSON instead,
with money as exact decimal strings of US dollars. A call that fails prints
its error on stderr and exits with status 1.

Examples:

  caddy gw accounts create acme --plan paid --cleared --balance 20
  caddy gw keys create acme --name laptop --daily-cap 5
  caddy gw keys update key_5f0c2a9e81d4b7f3a6c1e290 --daily-cap none --total-cap 100
  caddy gw keys update key_5f0c2a9e81d4b7f3a6c1e290 --mcp-tools 'github__*,docs__search'
  caddy gw orgs create acme-group --name "Acme Group" --monthly-cap 500
  caddy gw accounts update acme --org acme-group --low-balance 5
  caddy gw webhooks create --url https://ops.example.com/gw --events cap.threshold,balance.low
  caddy gw accounts top-up acme 10
  caddy gw accounts top-up acme -2.50 --reason "refund of a duplicate top-up"
  caddy gw usage --account acme --from 2026-03-01 --by day,model
  caddy gw journal --check`

// DefaultKeyName names a key created without --name.
const DefaultKeyName = "cli"

// listPage is how many accounts `accounts list` asks for at a time: as
// many as the admin API gives at once.
const listPage = admin.MaxAccountsLimit

// Setup adds the subcommands and flags of `caddy gw` to cmd, and extra
// subcommands after them.
func Setup(cmd *cobra.Command, extra ...*cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.String("address", "", "The admin endpoint's address (default: the config's admin address, else localhost:2019)")
	pf.StringP("config", "c", "", "The config file whose admin address to use, if --address is not given")
	pf.StringP("adapter", "a", "", "The config adapter of --config")
	pf.Bool("json", false, "Print the admin API's JSON instead of a table")
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }

	accounts := &cobra.Command{Use: "accounts", Short: "Lists, shows, creates and changes accounts, and moves their balance", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	accounts.AddCommand(
		leaf(&cobra.Command{Use: "list", Short: "Lists every account with its balance and spend", Args: cobra.NoArgs}, listAccounts),
		leaf(&cobra.Command{Use: "show ID", Short: "Shows an account with its balance and spend", Args: cobra.ExactArgs(1)}, showAccount),
		accountFlags(leaf(&cobra.Command{Use: "create ID --plan paid|free", Short: "Creates an account", Args: cobra.ExactArgs(1)}, createAccount), true),
		accountFlags(leaf(&cobra.Command{Use: "update ID", Short: "Changes the settings given of an account", Args: cobra.ExactArgs(1)}, updateAccount), false),
		topUpCommand(),
	)
	keys := &cobra.Command{Use: "keys", Short: "Creates, shows, lists, changes and revokes API keys", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	create := keyCapFlags(leaf(&cobra.Command{Use: "create ID", Short: "Creates a key for an account and prints it, the only time it is shown", Args: cobra.ExactArgs(1)}, createKey), true)
	create.Flags().String("name", DefaultKeyName, "The key's name")
	create.Flags().StringSlice("models", nil, "The model ids the key may use, comma-separated (default: every model)")
	create.Flags().String("expires", "", "When the key stops working, an RFC 3339 time (default: never)")
	create.Flags().StringSlice(mcpToolsFlag, nil, `The MCP gateway's tools the key may call: globs over <server>__<tool> names, comma-separated, or "none" (default: every tool)`)
	update := keyCapFlags(leaf(&cobra.Command{Use: "update KEY_ID", Short: "Changes the name, caps or MCP tools given of a key", Args: cobra.ExactArgs(1)}, updateKey), false)
	update.Flags().String("name", "", "The key's new name")
	update.Flags().StringSlice(mcpToolsFlag, nil, `The MCP gateway's tools the key may call: globs over <server>__<tool> names, comma-separated, "none", or "all" for every tool`)
	keys.AddCommand(create,
		leaf(&cobra.Command{Use: "show KEY_ID", Short: "Shows a key with its caps and what was spent with it", Args: cobra.ExactArgs(1)}, showKey),
		update,
		leaf(&cobra.Command{Use: "list ID", Short: "Lists an account's keys with their caps (never their secrets)", Args: cobra.ExactArgs(1)}, listKeys),
		leaf(&cobra.Command{Use: "revoke KEY_ID", Short: "Revokes a key: it stops working at once, on every node", Args: cobra.ExactArgs(1)}, revokeKey),
	)
	journal := leaf(&cobra.Command{Use: "journal [ID | --check]", Short: "Lists an account's balance movements, or checks every account's journal",
		Long: `Lists an account's balance movements, newest first: every set, top-up,
adjustment and charge, with the balance after each. With --check, checks
every account instead: its journal adds up to its balance and every
charge has its ledger entry; differences are listed and the exit status
is 1.`, Args: cobra.MaximumNArgs(1)}, showJournal)
	journal.Flags().Bool("check", false, "Check every account's journal against its balance and the ledger")
	journal.Flags().Int("limit", 100, "How many movements to list, newest first (at most 1000)")
	ledger := leaf(&cobra.Command{Use: "ledger ID", Short: "Lists an account's charges, newest first", Args: cobra.ExactArgs(1)}, showLedger)
	ledger.Flags().Int("limit", 100, "How many charges to list (at most 1000)")
	usage := leaf(&cobra.Command{Use: "usage", Short: "Shows requests, tokens and cost per day, model, account or key",
		Long: `Shows usage figures from the ledger: requests, input and output tokens
and cost, summed per UTC day, model, account or key as --by says, with
their total. Days are UTC dates (YYYY-MM-DD), --from and --to included;
--to defaults to today and --from to 30 days ending on --to.`, Args: cobra.NoArgs}, showUsage)
	usage.Flags().String("account", "", "Only this account (default: every account)")
	usage.Flags().String("from", "", "The first day, YYYY-MM-DD (UTC)")
	usage.Flags().String("to", "", "The last day, YYYY-MM-DD (UTC)")
	usage.Flags().String("by", "day", "What to sum per, comma-separated: day, model, account, key")

	cmd.AddCommand(accounts, keys, orgsCommand(), webhooksCommand(), journal, ledger, usage)
	cmd.AddCommand(extra...)
}

// run is a subcommand's work with its environment.
type run func(e *env, args []string) error

// env is what a subcommand runs with.
type env struct {
	ctx   context.Context
	cmd   *cobra.Command
	api   *client
	json  bool
	out   io.Writer
	flags *pflag.FlagSet
}

// leaf makes cmd run f once the admin endpoint is known.
func leaf(cmd *cobra.Command, f run) *cobra.Command {
	cmd.RunE = func(c *cobra.Command, args []string) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		return shown(f(e, args))
	}
	return cmd
}

// shownError is an error printed as text: the admin endpoint's messages,
// and the values they repeat, reach the terminal with what is not
// printable escaped.
type shownError struct{ err error }

func (e shownError) Error() string { return printable.Escape(e.err.Error()) }
func (e shownError) Unwrap() error { return e.err }

// shown wraps err (nil stays nil) so that it prints as text.
func shown(err error) error {
	if err == nil {
		return nil
	}
	return shownError{err}
}

func newEnv(c *cobra.Command) (*env, error) {
	fl := c.Flags()
	address, _ := fl.GetString("address")
	config, _ := fl.GetString("config")
	adapter, _ := fl.GetString("adapter")
	asJSON, _ := fl.GetBool("json")
	addr, err := AdminAddress(address, config, adapter)
	if err != nil {
		return nil, err
	}
	api, err := newClient(addr)
	if err != nil {
		return nil, err
	}
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return &env{ctx: ctx, cmd: c, api: api, json: asJSON, out: c.OutOrStdout(), flags: fl}, nil
}

// call is client.call with what the call was about in its error.
func (e *env) call(what, method, path string, body any) ([]byte, error) {
	b, err := e.api.call(e.ctx, method, path, body)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("%s: %s", what, ae.Message)
		}
		return nil, err
	}
	return b, nil
}

// printJSON writes an answer as it came, on a line of its own, but for
// characters inside its strings that are not printable: those are written
// as \u escapes, so the JSON holds the same values and a terminal shows
// it as text.
func (e *env) printJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return errNotJSON
	}
	_, err := fmt.Fprintf(e.out, "%s\n", printable.JSON(b))
	return err
}

// errNotJSON is the error of an answer that is not JSON.
var errNotJSON = errors.New("the admin endpoint answered what is not the gateway's JSON")

// render prints an answer: as it came with --json, else decoded into a T
// and drawn by draw.
func render[T any](e *env, b []byte, draw func(io.Writer, T) error) error {
	if e.json {
		return e.printJSON(b)
	}
	var v T
	if err := decode(b, &v); err != nil {
		return err
	}
	return draw(e.out, v)
}

// renderList is render of a list answer: draw gets its data.
func renderList[T any](e *env, b []byte, draw func(io.Writer, []T) error) error {
	return render(e, b, func(w io.Writer, l struct {
		Data []T `json:"data"`
	}) error {
		return draw(w, l.Data)
	})
}

func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", errNotJSON, err)
	}
	return nil
}

func accountPath(id string, rest ...string) string {
	return "/gw/accounts/" + url.PathEscape(id) + strings.Join(rest, "")
}

func listAccounts(e *env, _ []string) error {
	var all []json.RawMessage
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listPage)}}
		if after != "" {
			q.Set("after", after)
		}
		b, err := e.call("accounts", http.MethodGet, "/gw/accounts?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		var page struct {
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
		}
		if err := decode(b, &page); err != nil {
			return err
		}
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			break
		}
		var last admin.Account
		if err := decode(page.Data[len(page.Data)-1], &last); err != nil {
			return err
		}
		after = last.ID
	}
	if e.json {
		// Every page in one list, as the admin API's answer of one page.
		b, err := json.Marshal(struct {
			Object  string            `json:"object"`
			Data    []json.RawMessage `json:"data"`
			HasMore bool              `json:"has_more"`
		}{"list", append([]json.RawMessage{}, all...), false})
		if err != nil {
			return err
		}
		return e.printJSON(b)
	}
	list := make([]admin.Account, len(all))
	for i, raw := range all {
		if err := decode(raw, &list[i]); err != nil {
			return err
		}
	}
	return accountTable(e.out, list)
}

func showAccount(e *env, args []string) error {
	b, err := e.call("account "+args[0], http.MethodGet, accountPath(args[0]), nil)
	if err != nil {
		return err
	}
	return render(e, b, accountCard)
}

// accountFlags adds the settings of an account to cmd; create says
// whether --plan is required.
func accountFlags(cmd *cobra.Command, create bool) *cobra.Command {
	fl := cmd.Flags()
	fl.String("plan", "", "The plan: free or paid")
	fl.Bool("cleared", false, "Cleared to use the paid abilities")
	fl.Bool("payg", false, "Pay as you go: list prices plus the markup")
	fl.Bool("lane-billing", false, "Bill gw-auto at its lane's price")
	money := "A decimal amount of US dollars"
	if !create {
		money += `, or "none"`
	}
	fl.String("balance", "", money+" (prepaid balance; default: billed afterwards)")
	fl.String("daily-cap", "", money+" (default: none)")
	fl.String("monthly-cap", "", money+" (default: none)")
	fl.String("low-balance", "", money+" (a charge that takes the prepaid balance below it raises a balance.low alert; default: none)")
	abilities := "The abilities switched on, comma-separated (default: all)"
	if !create {
		abilities = `The abilities switched on, comma-separated, or "all"`
	}
	fl.String("abilities", "", abilities)
	org := "The id of the organization it belongs to (default: none)"
	if !create {
		org = `The id of the organization it belongs to, or "none" to leave it`
	}
	fl.String("org", "", org)
	if create {
		_ = cmd.MarkFlagRequired("plan")
	}
	return cmd
}

// moneyFlag is a flag taking an amount of US dollars, and the field of
// the admin API's JSON it sets.
type moneyFlag struct{ flag, field string }

// putMoney sets in body the field of each of flags given: the amount as
// given, or null for "none".
func putMoney(fl *pflag.FlagSet, body map[string]any, flags []moneyFlag) {
	for _, f := range flags {
		if fl.Changed(f.flag) {
			v, _ := fl.GetString(f.flag)
			if v == "none" {
				body[f.field] = nil
			} else {
				body[f.field] = v
			}
		}
	}
}

// accountMoney are the money settings of an account.
var accountMoney = []moneyFlag{{"balance", "balance_usd"}, {"daily-cap", "daily_cap_usd"}, {"monthly-cap", "monthly_cap_usd"},
	{"low-balance", "low_balance_usd"}}

// accountBody is the JSON of the account settings given as flags: a
// money setting or the org given as "none", or the abilities given as
// "all", are null.
func accountBody(fl *pflag.FlagSet) map[string]any {
	body := map[string]any{}
	if fl.Changed("plan") {
		body["plan"], _ = fl.GetString("plan")
	}
	putMoney(fl, body, accountMoney)
	for _, f := range []struct{ flag, field string }{{"cleared", "cleared"}, {"payg", "payg"}, {"lane-billing", "lane_billing"}} {
		if fl.Changed(f.flag) {
			body[f.field], _ = fl.GetBool(f.flag)
		}
	}
	if fl.Changed("org") {
		v, _ := fl.GetString("org")
		if v == "none" {
			body["org"] = nil
		} else {
			body["org"] = v
		}
	}
	if fl.Changed("abilities") {
		v, _ := fl.GetString("abilities")
		if v == "all" {
			body["abilities"] = nil
		} else {
			body["abilities"] = splitList(v)
		}
	}
	return body
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	out := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func createAccount(e *env, args []string) error {
	body := accountBody(e.flags)
	body["id"] = args[0]
	b, err := e.call("creating account "+args[0], http.MethodPost, "/gw/accounts", body)
	if err != nil {
		return err
	}
	return render(e, b, accountCard)
}

func updateAccount(e *env, args []string) error {
	body := accountBody(e.flags)
	if len(body) == 0 {
		return errors.New("nothing to change: give a setting (see --help)")
	}
	b, err := e.call("account "+args[0], http.MethodPatch, accountPath(args[0]), body)
	if err != nil {
		return err
	}
	return render(e, b, accountCard)
}

// negativeAmount is an argument that is an amount below zero, which flag
// parsing would take for a flag.
var negativeAmount = regexp.MustCompile(`^-[0-9.]`)

// topUpCommand is `accounts top-up ID USD`. Its flags are parsed by hand,
// so that a negative USD ("-2.50") is an argument and not a flag.
func topUpCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "top-up ID USD [--reason TEXT]", Short: "Adds to (or, with a reason, takes from) a prepaid balance",
		Long: `Adds USD to an account's prepaid balance (a top-up), or takes it back
when USD is below zero (an adjustment, which needs --reason and never
takes the balance below zero). The journal records either.`,
		DisableFlagParsing: true}
	cmd.Flags().String("reason", "", "Why money is taken back (required when USD is below zero)")
	cmd.RunE = func(c *cobra.Command, raw []string) error { return shown(topUp(c, raw)) }
	return cmd
}

// topUp runs `accounts top-up` on its arguments and flags, raw.
func topUp(c *cobra.Command, raw []string) error {
	var args, parse []string
	negatives := map[string]string{}
	for i, a := range raw {
		if negativeAmount.MatchString(a) {
			// Kept out of flag parsing, then put back in its place.
			ph := "\x00" + strconv.Itoa(i)
			negatives[ph] = a
			a = ph
		}
		parse = append(parse, a)
	}
	c.InitDefaultHelpFlag()
	c.DisableFlagParsing = false // ParseFlags does nothing while it is set
	err := c.ParseFlags(parse)
	c.DisableFlagParsing = true
	if err != nil {
		return err
	}
	if help, _ := c.Flags().GetBool("help"); help {
		return c.Help()
	}
	for _, a := range c.Flags().Args() {
		if n, ok := negatives[a]; ok {
			a = n
		}
		args = append(args, a)
	}
	if err := cobra.ExactArgs(2)(c, args); err != nil {
		return err
	}
	e, err := newEnv(c)
	if err != nil {
		return err
	}
	body := map[string]any{"add_balance_usd": args[1]}
	if e.flags.Changed("reason") {
		body["reason"], _ = e.flags.GetString("reason")
	}
	b, err := e.call("account "+args[0], http.MethodPatch, accountPath(args[0]), body)
	if err != nil {
		return err
	}
	return render(e, b, accountCard)
}

// keyCaps are the caps of a key.
var keyCaps = []moneyFlag{{"daily-cap", "daily_cap_usd"}, {"monthly-cap", "monthly_cap_usd"}, {"total-cap", "total_cap_usd"}}

// keyCapFlags adds the caps of a key to cmd; create says whether it makes
// the key (else "none" removes a cap).
func keyCapFlags(cmd *cobra.Command, create bool) *cobra.Command {
	money, dflt := "A decimal amount of US dollars", "; default: none"
	if !create {
		money, dflt = `A decimal amount of US dollars, or "none"`, ""
	}
	fl := cmd.Flags()
	fl.String("daily-cap", "", money+" (what calls made with the key may spend in a UTC day"+dflt+")")
	fl.String("monthly-cap", "", money+" (what calls made with the key may spend in a UTC month"+dflt+")")
	fl.String("total-cap", "", money+" (what calls made with the key may spend in all"+dflt+")")
	return cmd
}

// mcpToolsFlag is the flag of a key's MCP tools.
const mcpToolsFlag = "mcp-tools"

// putMCPTools sets in body the key's mcp_tools when the flag is given:
// "all" is null (every tool), "none" (or nothing) an empty list, else the
// globs as given.
func putMCPTools(fl *pflag.FlagSet, body map[string]any) {
	if !fl.Changed(mcpToolsFlag) {
		return
	}
	globs, _ := fl.GetStringSlice(mcpToolsFlag)
	switch {
	case len(globs) == 1 && globs[0] == "all":
		body["mcp_tools"] = nil
	case len(globs) == 1 && globs[0] == "none":
		body["mcp_tools"] = []string{}
	default:
		body["mcp_tools"] = append([]string{}, globs...)
	}
}

// keyPath is the admin API's path of a key.
func keyPath(id string) string { return "/gw/keys/" + url.PathEscape(id) }

func createKey(e *env, args []string) error {
	body := map[string]any{}
	body["name"], _ = e.flags.GetString("name")
	putMoney(e.flags, body, keyCaps)
	if e.flags.Changed("models") {
		models, _ := e.flags.GetStringSlice("models")
		body["models"] = append([]string{}, models...)
	}
	if e.flags.Changed("expires") {
		body["expires_at"], _ = e.flags.GetString("expires")
	}
	putMCPTools(e.flags, body)
	b, err := e.call("creating a key of account "+args[0], http.MethodPost, accountPath(args[0], "/keys"), body)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(b)
	}
	var k admin.Key
	if err := decode(b, &k); err != nil {
		return err
	}
	return keyCreated(e.out, args[0], k)
}

func showKey(e *env, args []string) error {
	b, err := e.call("key "+args[0], http.MethodGet, keyPath(args[0]), nil)
	if err != nil {
		return err
	}
	return render(e, b, keyCard)
}

func updateKey(e *env, args []string) error {
	body := map[string]any{}
	if e.flags.Changed("name") {
		body["name"], _ = e.flags.GetString("name")
	}
	putMoney(e.flags, body, keyCaps)
	putMCPTools(e.flags, body)
	if len(body) == 0 {
		return errors.New("nothing to change: give a setting (see --help)")
	}
	b, err := e.call("key "+args[0], http.MethodPatch, keyPath(args[0]), body)
	if err != nil {
		return err
	}
	return render(e, b, keyCard)
}

func listKeys(e *env, args []string) error {
	b, err := e.call("keys of account "+args[0], http.MethodGet, accountPath(args[0], "/keys"), nil)
	if err != nil {
		return err
	}
	return renderList(e, b, keyTable)
}

func revokeKey(e *env, args []string) error {
	if _, err := e.call("key "+args[0], http.MethodDelete, keyPath(args[0]), nil); err != nil {
		return err
	}
	if e.json {
		b, _ := json.Marshal(map[string]any{"id": args[0], "revoked": true})
		return e.printJSON(b)
	}
	_, err := fmt.Fprintf(e.out, "Revoked key %s: it no longer works.\n", printable.Escape(args[0]))
	return err
}

// errJournal is the error of a journal check that found differences.
var errJournal = errors.New("the journal check found differences")

func showJournal(e *env, args []string) error {
	check, _ := e.flags.GetBool("check")
	switch {
	case check && len(args) > 0:
		return errors.New("--check checks every account: give no ID with it")
	case !check && len(args) == 0:
		return errors.New("give an account ID, or --check to check every account")
	}
	if check {
		b, err := e.call("journal check", http.MethodGet, "/gw/journal/check", nil)
		if err != nil {
			return err
		}
		var res checkResult
		if err := decode(b, &res); err != nil {
			return err
		}
		if e.json {
			err = e.printJSON(b)
		} else {
			err = checkReport(e.out, res)
		}
		if err == nil && !res.OK {
			err = fmt.Errorf("%w: %d accounts", errJournal, len(res.Problems))
		}
		return err
	}
	limit, _ := e.flags.GetInt("limit")
	b, err := e.call("journal of account "+args[0], http.MethodGet, accountPath(args[0], "/journal?limit="+strconv.Itoa(limit)), nil)
	if err != nil {
		return err
	}
	return renderList(e, b, journalTable)
}

func showLedger(e *env, args []string) error {
	limit, _ := e.flags.GetInt("limit")
	b, err := e.call("ledger of account "+args[0], http.MethodGet, accountPath(args[0], "/ledger?limit="+strconv.Itoa(limit)), nil)
	if err != nil {
		return err
	}
	return renderList(e, b, ledgerTable)
}

// usageParams pairs each parameter of GET /gw/usage with the flag that
// sets it.
var usageParams = [][2]string{{"group_by", "--by"}, {"from", "--from"}, {"to", "--to"}, {"account", "--account"}}

// inFlagTerms is msg, a refusal of the admin endpoint that starts by
// naming a field or parameter ("group_by: ..."), starting instead with
// the flag that sets it ("--by: "); names pairs each field with its flag.
func inFlagTerms(msg string, names [][2]string) string {
	for _, n := range names {
		if rest, ok := strings.CutPrefix(msg, n[0]+": "); ok {
			return n[1] + ": " + rest
		}
	}
	return msg
}

func showUsage(e *env, _ []string) error {
	q := url.Values{}
	for _, f := range []struct{ flag, param string }{{"account", "account"}, {"from", "from"}, {"to", "to"}, {"by", "group_by"}} {
		if v, _ := e.flags.GetString(f.flag); v != "" || e.flags.Changed(f.flag) {
			q.Set(f.param, v)
		}
	}
	path := "/gw/usage"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	b, err := e.api.call(e.ctx, http.MethodGet, path, nil)
	var ae *apiError
	if errors.As(err, &ae) {
		return fmt.Errorf("usage: %s", inFlagTerms(ae.Message, usageParams))
	}
	if err != nil {
		return err
	}
	return render(e, b, usageTable)
}
