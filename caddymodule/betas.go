package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-gw/caddy-gw/handlers/chat"
)

// parseBeta reads one beta line into betas:
//
//	beta <name> neutral|refused|priced <input percent> [<output percent>]
//
// neutral forwards the beta; refused refuses a call that carries it;
// priced bills such a call at the percentages of the model's list prices
// (output at the input percentage when it is not given). A name given
// twice is refused.
func parseBeta(d *caddyfile.Dispenser, betas *chat.Betas) error {
	args := d.RemainingArgs()
	if len(args) < 2 {
		return d.ArgErr()
	}
	name, mark := args[0], args[1]
	if _, ok := (*betas)[name]; ok {
		return d.Errf("beta %s: already specified", name)
	}
	var p chat.BetaPrice
	switch {
	case mark == "neutral" && len(args) == 2:
	case mark == "refused" && len(args) == 2:
		p.Refused = true
	case mark == "priced" && (len(args) == 3 || len(args) == 4):
		pcts := []int64{0, 0}
		for i, a := range args[2:] {
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil || n < 1 || n > chat.MaxBetaPercent {
				return d.Errf("beta %s priced: %q: want a whole percentage from 1 to %d", name, a, chat.MaxBetaPercent)
			}
			pcts[i] = n
		}
		if len(args) == 3 {
			pcts[1] = pcts[0]
		}
		p.InputPercent, p.OutputPercent = pcts[0], pcts[1]
	default:
		return d.Errf("beta %s: want neutral, refused or priced <input percent> [<output percent>]", name)
	}
	if *betas == nil {
		*betas = chat.Betas{}
	}
	(*betas)[name] = p
	return nil
}
