// Package usage serves GET /v1/usage: a key's own account's usage
// figures (requests, tokens and cost per day, model and key), from the
// ledger.
package usage

import (
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/usage"
)

// Handler answers the usage of the call's account, as the query asks; a
// bad parameter is a 400 naming it.
func Handler(c *pipeline.Call) error {
	now := time.Now()
	if c.Gateway.Now != nil {
		now = c.Gateway.Now()
	}
	q, err := usage.Parse(c.R.URL.Query(), now, usage.Scope{Account: c.Account.ID})
	if err == nil {
		var rep usage.Report
		if rep, err = usage.Run(c.R.Context(), c.Gateway.Store, q); err == nil {
			return pipeline.WriteJSON(c.W, http.StatusOK, rep)
		}
	}
	var bad *usage.Error
	if errors.As(err, &bad) {
		return gwerr.New(gwerr.Invalid, "%s", bad.Error()).WithParam(bad.Param)
	}
	c.Gateway.Logger.Error("usage figures could not be read", zap.Error(err))
	return &gwerr.Error{Kind: gwerr.Unavailable, Message: "usage figures could not be read; retry", RetryAfter: pipeline.StoreRetryAfter}
}
