package gwcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/caddy-gw/caddy-gw/internal/printable"
)

// orgsCommand is `caddy gw orgs` and its subcommands.
func orgsCommand() *cobra.Command {
	orgs := &cobra.Command{Use: "orgs", Short: "Creates, lists, shows, changes and deletes organizations", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	create := orgFlags(leaf(&cobra.Command{Use: "create ID", Short: "Creates an organization", Args: cobra.ExactArgs(1)}, createOrg), true)
	update := orgFlags(leaf(&cobra.Command{Use: "update ID", Short: "Changes the name or caps given of an organization", Args: cobra.ExactArgs(1)}, updateOrg), false)
	orgs.AddCommand(create,
		leaf(&cobra.Command{Use: "list", Short: "Lists every organization with its caps and spend", Args: cobra.NoArgs}, listOrgs),
		leaf(&cobra.Command{Use: "show ID", Short: "Shows an organization with its caps and what its accounts spent", Args: cobra.ExactArgs(1)}, showOrg),
		update,
		leaf(&cobra.Command{Use: "delete ID", Short: "Deletes an organization no account belongs to", Args: cobra.ExactArgs(1)}, deleteOrg),
	)
	return orgs
}

// orgCaps are the caps of an organization.
var orgCaps = []moneyFlag{{"daily-cap", "daily_cap_usd"}, {"monthly-cap", "monthly_cap_usd"}}

// orgFlags adds the settings of an organization to cmd; create says
// whether it makes the organization (else "none" removes a cap).
func orgFlags(cmd *cobra.Command, create bool) *cobra.Command {
	money, dflt, name := "A decimal amount of US dollars", "; default: none", "The organization's name"
	if !create {
		money, dflt, name = `A decimal amount of US dollars, or "none"`, "", "The organization's new name"
	}
	fl := cmd.Flags()
	fl.String("name", "", name)
	fl.String("daily-cap", "", money+" (what its accounts together may spend in a UTC day"+dflt+")")
	fl.String("monthly-cap", "", money+" (what its accounts together may spend in a UTC month"+dflt+")")
	return cmd
}

// orgBody is the JSON of the organization settings given as flags.
func orgBody(e *env) map[string]any {
	body := map[string]any{}
	if e.flags.Changed("name") {
		body["name"], _ = e.flags.GetString("name")
	}
	putMoney(e.flags, body, orgCaps)
	return body
}

// orgPath is the admin API's path of an organization.
func orgPath(id string) string { return "/gw/orgs/" + url.PathEscape(id) }

func createOrg(e *env, args []string) error {
	body := orgBody(e)
	body["id"] = args[0]
	b, err := e.call("creating organization "+args[0], http.MethodPost, "/gw/orgs", body)
	if err != nil {
		return err
	}
	return render(e, b, orgCard)
}

func listOrgs(e *env, _ []string) error {
	b, err := e.call("organizations", http.MethodGet, "/gw/orgs", nil)
	if err != nil {
		return err
	}
	return renderList(e, b, orgTable)
}

func showOrg(e *env, args []string) error {
	b, err := e.call("organization "+args[0], http.MethodGet, orgPath(args[0]), nil)
	if err != nil {
		return err
	}
	return render(e, b, orgCard)
}

func updateOrg(e *env, args []string) error {
	body := orgBody(e)
	if len(body) == 0 {
		return errors.New("nothing to change: give a setting (see --help)")
	}
	b, err := e.call("organization "+args[0], http.MethodPatch, orgPath(args[0]), body)
	if err != nil {
		return err
	}
	return render(e, b, orgCard)
}

// deleteOrg deletes an organization; while accounts belong to it the
// admin endpoint refuses (409), and the error says how to move them out.
func deleteOrg(e *env, args []string) error {
	_, err := e.api.call(e.ctx, http.MethodDelete, orgPath(args[0]), nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return fmt.Errorf("organization %s still has accounts: move each out first (caddy gw accounts update ID --org none)", args[0])
	}
	if errors.As(err, &ae) {
		return fmt.Errorf("organization %s: %s", args[0], ae.Message)
	}
	if err != nil {
		return err
	}
	if e.json {
		b, _ := json.Marshal(map[string]any{"id": args[0], "deleted": true})
		return e.printJSON(b)
	}
	_, err = fmt.Fprintf(e.out, "Deleted organization %s.\n", printable.Escape(args[0]))
	return err
}
