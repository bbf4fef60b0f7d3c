package gwcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/printable"
)

// webhookFields pairs each field of a webhook the admin API names in its
// refusals with the flag that sets it.
var webhookFields = [][2]string{{"url", "--url"}, {"secret", "--secret"}, {"events", "--events"}}

// webhooksCommand is `caddy gw webhooks` and its subcommands.
func webhooksCommand() *cobra.Command {
	hooks := &cobra.Command{Use: "webhooks", Short: "Creates, lists, shows and deletes alert webhooks, and shows their deliveries", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	create := leaf(&cobra.Command{Use: "create --url URL --events TYPE,... [--secret S]", Short: "Creates a webhook and prints its signing secret, the only time it is shown",
		Long: `Creates a webhook: every alert event of the types given is POSTed to
URL as JSON, signed in the X-Gw-Signature header ("sha256=" and the hex
HMAC-SHA256 of the body keyed with the secret), until the receiver
answers 2xx. Event types: cap.threshold (a cap's spend reached 50, 80 or
100 %), balance.low (a prepaid balance fell below the account's
low-balance mark), key.revoked. The secret is printed once: store it.`, Args: cobra.NoArgs}, createWebhook)
	fl := create.Flags()
	fl.String("url", "", "Where events are POSTed: an http or https URL")
	fl.StringSlice("events", nil, "The event types sent, comma-separated: cap.threshold, balance.low, key.revoked")
	fl.String("secret", "", "The signing secret, at least 16 characters (default: one the gateway makes)")
	_ = create.MarkFlagRequired("url")
	_ = create.MarkFlagRequired("events")
	deliveries := leaf(&cobra.Command{Use: "deliveries ID", Short: "Lists a webhook's deliveries, newest first: pending or delivered, attempts and last answer",
		Args: cobra.ExactArgs(1)}, listDeliveries)
	deliveries.Flags().Int("limit", admin.DefaultLedgerLimit, "How many deliveries to list, newest first (at most "+strconv.Itoa(admin.MaxLedgerLimit)+")")
	hooks.AddCommand(create,
		leaf(&cobra.Command{Use: "list", Short: "Lists every webhook with its events (never its secret)", Args: cobra.NoArgs}, listWebhooks),
		leaf(&cobra.Command{Use: "show ID", Short: "Shows a webhook with its events (never its secret)", Args: cobra.ExactArgs(1)}, showWebhook),
		leaf(&cobra.Command{Use: "delete ID", Short: "Deletes a webhook; its pending deliveries are not sent", Args: cobra.ExactArgs(1)}, deleteWebhook),
		deliveries,
	)
	return hooks
}

// webhookPath is the admin API's path of a webhook.
func webhookPath(id string, rest ...string) string {
	return "/gw/webhooks/" + url.PathEscape(id) + strings.Join(rest, "")
}

func createWebhook(e *env, _ []string) error {
	body := map[string]any{}
	body["url"], _ = e.flags.GetString("url")
	events, _ := e.flags.GetStringSlice("events")
	body["events"] = append([]string{}, events...)
	if e.flags.Changed("secret") {
		body["secret"], _ = e.flags.GetString("secret")
	}
	b, err := e.api.call(e.ctx, http.MethodPost, "/gw/webhooks", body)
	var ae *apiError
	if errors.As(err, &ae) {
		return fmt.Errorf("creating a webhook: %s", inFlagTerms(ae.Message, webhookFields))
	}
	if err != nil {
		return err
	}
	return render(e, b, webhookCreated)
}

func listWebhooks(e *env, _ []string) error {
	b, err := e.call("webhooks", http.MethodGet, "/gw/webhooks", nil)
	if err != nil {
		return err
	}
	return renderList(e, b, webhookTable)
}

func showWebhook(e *env, args []string) error {
	b, err := e.call("webhook "+args[0], http.MethodGet, webhookPath(args[0]), nil)
	if err != nil {
		return err
	}
	return render(e, b, webhookCard)
}

func deleteWebhook(e *env, args []string) error {
	if _, err := e.call("webhook "+args[0], http.MethodDelete, webhookPath(args[0]), nil); err != nil {
		return err
	}
	if e.json {
		b, _ := json.Marshal(map[string]any{"id": args[0], "deleted": true})
		return e.printJSON(b)
	}
	_, err := fmt.Fprintf(e.out, "Deleted webhook %s: its pending deliveries will not be sent.\n", printable.Escape(args[0]))
	return err
}

func listDeliveries(e *env, args []string) error {
	limit, _ := e.flags.GetInt("limit")
	b, err := e.call("deliveries of webhook "+args[0], http.MethodGet, webhookPath(args[0], "/deliveries?limit="+strconv.Itoa(limit)), nil)
	if err != nil {
		return err
	}
	return renderList(e, b, deliveryTable)
}
