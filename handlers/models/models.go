// Package models serves GET /v1/models (and /models): the gateway's ids
// that the calling key may use, with capability and entitlement per row.
package models

import (
	"encoding/json"
	"net/http"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// Handler answers the model list for the call's key and account.
func Handler(c *pipeline.Call) error {
	rows := c.Gateway.Catalog.Rows(c.Key.Models, c.Account.PaidCleared())
	c.W.Header().Set("Content-Type", "application/json")
	c.W.WriteHeader(http.StatusOK)
	return json.NewEncoder(c.W).Encode(map[string]any{"object": "list", "data": rows})
}
