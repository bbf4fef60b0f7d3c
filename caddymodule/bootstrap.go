package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// BootstrapAccount is the account GW_BOOTSTRAP_KEY's key belongs to.
const BootstrapAccount = "default"

// MinBootstrapKeyChars is how many characters a bootstrap key must have
// after its "sk-" prefix, and minBootstrapDistinct how many different
// ones: a short or patterned key is guessable, and it opens a paid account.
const (
	MinBootstrapKeyChars = 32
	minBootstrapDistinct = 10
)

// bootstrapPrefix starts every API key (Authorization: Bearer sk-...).
const bootstrapPrefix = "sk-"

// checkBootstrapKey refuses a weak bootstrap key (never repeating it).
func checkBootstrapKey(secret string) error {
	rest, ok := strings.CutPrefix(secret, bootstrapPrefix)
	distinct := map[rune]bool{}
	for _, r := range rest {
		distinct[r] = true
	}
	if !ok || len(rest) < MinBootstrapKeyChars || len(distinct) < minBootstrapDistinct {
		return fmt.Errorf("the bootstrap key must be %q followed by at least %d random characters", bootstrapPrefix, MinBootstrapKeyChars)
	}
	return nil
}

// ensureBootstrap makes sure account "default" (paid, cleared) exists and
// holds the key secret. The key is created once: a bootstrap key revoked
// through the admin API stays revoked across restarts and reloads.
func ensureBootstrap(ctx context.Context, st store.Store, secret string) error {
	err := st.CreateAccount(ctx, store.Account{ID: BootstrapAccount, Plan: store.PlanPaid, Cleared: true, CreatedAt: time.Now().UTC()})
	if err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	if issued, err := st.KeyIssued(ctx, store.HashSecret(secret)); err != nil || issued {
		return err
	}
	err = st.CreateKey(ctx, store.Key{ID: store.NewID("key"), AccountID: BootstrapAccount, Name: "bootstrap", Hash: store.HashSecret(secret), CreatedAt: time.Now().UTC()})
	if errors.Is(err, store.ErrExists) {
		return nil // another node made it first
	}
	return err
}
