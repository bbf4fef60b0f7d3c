// Package models serves GET /v1/models (and /models): the gateway's ids
// that the calling key may use, with capability and entitlement per row.
package models

import (
	"net/http"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// Handler answers the model list for the call's key and account.
func Handler(c *pipeline.Call) error {
	rows := c.Gateway.Catalog.Rows(c.Key.Models, c.Account.PaidCleared())
	return pipeline.WriteJSON(c.W, http.StatusOK, map[string]any{"object": "list", "data": rows})
}
