package caddymodule

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-gw/caddy-gw/caddymodule/gwcli"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "gw",
		Usage: "<command> [--address <admin address>] [--json]",
		Short: "Manages the gateway's accounts, keys, organizations, balances and usage",
		Long:  gwcli.Long,
		CobraFunc: func(cmd *cobra.Command) {
			gwcli.Setup(cmd, moveStoreCommand())
		},
	})
}

// moveStoreCommand is `caddy gw move-store`: the command registered as
// gw-move-store (kept under that name too), under gw.
func moveStoreCommand() *cobra.Command {
	c := caddycmd.Commands()["gw-move-store"]
	cmd := &cobra.Command{Use: "move-store " + c.Usage, Short: c.Short, Long: c.Long}
	c.CobraFunc(cmd)
	return cmd
}
