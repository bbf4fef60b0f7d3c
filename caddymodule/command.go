package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-gw/caddy-gw/internal/store/move"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "gw-move-store",
		Usage: "--from <data dir> [--to <postgres URL>]",
		Short: "Copies the embedded store into an empty PostgreSQL database",
		Long: `
Copies the gateway's embedded SQLite store (accounts, keys, the ledger, the
running totals and the balance journal) into an empty PostgreSQL database,
in one transaction: the step from one node to several. Stop the gateway
first: a data folder a running gateway holds is refused. --to defaults
to $GW_DATABASE_URL. The URL is never printed.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("from", "", "The data folder of the embedded store (GW_DATA_DIR)")
			cmd.Flags().String("to", "", "The PostgreSQL URL (default: $GW_DATABASE_URL)")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(moveStore)
		},
	})
}

func moveStore(fl caddycmd.Flags) (int, error) {
	from, to := fl.String("from"), fl.String("to")
	if to == "" {
		to = os.Getenv("GW_DATABASE_URL")
	}
	if from == "" || to == "" {
		return exitFailed, errors.New("--from and --to (or GW_DATABASE_URL) are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	counts, err := move.Copy(ctx, from, to)
	if err != nil {
		return exitFailed, err
	}
	fmt.Printf("copied %d accounts, %d keys, %d ledger entries, %d totals, %d journal entries\n",
		counts["accounts"], counts["keys"], counts["ledger"], counts["spend"], counts["journal"])
	return 0, nil
}

// exitFailed is caddycmd's exit code of a command that
// could not do its work.
const exitFailed = 1
