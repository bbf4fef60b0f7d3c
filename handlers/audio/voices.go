package audio

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

// VoiceRow is one row of GET /v1/audio/voices (sorted by model, then id).
type VoiceRow struct {
	ID          string   `json:"id"`
	Model       string   `json:"model"`
	Name        string   `json:"name"`
	Gender      string   `json:"gender"`
	Description string   `json:"description"`
	Languages   []string `json:"languages"`
	Entitlement string   `json:"entitlement"`
}

// Caching headers of the voice list (docs/abilities.md, Voice list).
const (
	voicesCacheControl = "private, no-cache"
	voicesVary         = "Authorization"
)

// Voices serves GET /v1/audio/voices: the voices whose model is on the
// key's model list (as GET /v1/models filters it), sorted by model then
// id, with one entitlement (the account's) on every row. The ETag is a
// hash of the body; If-None-Match with it answers 304 without a body.
// Not billed, and served whether or not speech is switched on.
func (h *Handler) Voices(c *pipeline.Call) error {
	ent := catalog.EntitlementPremiumLocked
	if c.Account.PaidCleared() {
		ent = catalog.EntitlementPaidCleared
	}
	rows := make([]VoiceRow, 0, len(h.voices))
	for _, v := range h.voices {
		if catalog.Allowed(c.Key.Models, v.Model) {
			v.Entitlement = ent
			rows = append(rows, v)
		}
	}
	body, err := json.Marshal(map[string]any{"object": "list", "data": rows})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	hd := c.W.Header()
	hd.Set("ETag", etag)
	hd.Set("Cache-Control", voicesCacheControl)
	hd.Set("Vary", voicesVary)
	if etagMatch(c.R.Header.Values("If-None-Match"), etag) {
		c.W.WriteHeader(http.StatusNotModified)
		return nil
	}
	hd.Set("Content-Type", "application/json")
	c.W.WriteHeader(http.StatusOK)
	_, _ = c.W.Write(body)
	return nil
}

// etagMatch reports whether an If-None-Match header names etag (weakly
// compared, as RFC 9110 asks for If-None-Match) or is "*".
func etagMatch(values []string, etag string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
