package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// Limits of a webhook's fields.
const (
	// MaxWebhookURL is the longest URL a webhook may have, in bytes.
	MaxWebhookURL = 2048
	// MinWebhookSecret and MaxWebhookSecret bound the length of a secret
	// the operator gives, in characters: shorter ones are guessable.
	MinWebhookSecret = 16
	MaxWebhookSecret = 256
	// webhookSecretPrefix starts a secret the gateway makes.
	webhookSecretPrefix = "whsec_"
)

// Webhook is a subscription as the admin API shows it. Its secret is
// shown once, in the answer to the POST that made it.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Delivery is a line of a webhook's delivery log.
type Delivery struct {
	EventID string `json:"event_id"`
	Type    string `json:"type"`
	Account string `json:"account"`
	// Status is "pending" until a 2xx answer, then "delivered".
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	LastStatus    *int            `json:"last_status"`
	LastError     *string         `json:"last_error"`
	NextAttemptAt *time.Time      `json:"next_attempt_at"`
	DeliveredAt   *time.Time      `json:"delivered_at"`
	CreatedAt     time.Time       `json:"created_at"`
	Event         json.RawMessage `json:"event"`
}

// webhookView is w as the API lists it: without its secret.
func webhookView(w store.Webhook) Webhook {
	return Webhook{ID: w.ID, URL: w.URL, Events: w.Events, CreatedAt: w.CreatedAt}
}

// webhookURL checks a webhook's url: absolute http or https with a host,
// no credentials, at most MaxWebhookURL bytes.
func webhookURL(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("url: required, an http or https URL")
	}
	if len(s) > MaxWebhookURL {
		return "", fmt.Errorf("url: longer than %d bytes", MaxWebhookURL)
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return "", errors.New("url: required, an http or https URL")
	}
	if u.User != nil {
		return "", errors.New("url: must not hold credentials; the signature authenticates the gateway")
	}
	return s, nil
}

// webhookEvents checks a webhook's events: a non-empty list of known
// types, each once.
func webhookEvents(raw json.RawMessage) ([]string, error) {
	known := strings.Join(store.EventTypes, ", ")
	var events []string
	if err := json.Unmarshal(raw, &events); err != nil || len(events) == 0 {
		return nil, fmt.Errorf("events: required, a list of event types (known: %s)", known)
	}
	for i, e := range events {
		if !slices.Contains(store.EventTypes, e) {
			return nil, fmt.Errorf("events: %q is not an event type (known: %s)", e, known)
		}
		if slices.Contains(events[:i], e) {
			return nil, fmt.Errorf("events: %q is listed twice", e)
		}
	}
	return events, nil
}

// webhookSecret reads the secret the operator gives, or makes one when
// raw is absent or null.
func webhookSecret(raw json.RawMessage) (string, error) {
	if raw == nil || isNull(raw) {
		return store.RandomSecret(webhookSecretPrefix), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("secret: must be a string")
	}
	if n := len([]rune(s)); n < MinWebhookSecret {
		return "", fmt.Errorf("secret: at least %d characters, or leave it out for one made for you", MinWebhookSecret)
	}
	if err := printable.Check(s, MaxWebhookSecret); err != nil {
		return "", fmt.Errorf("secret: %v", err)
	}
	return s, nil
}

// createWebhook answers POST /gw/webhooks: 201 with the subscription and
// its secret.
func (a *API) createWebhook(w http.ResponseWriter, r *http.Request) {
	body, ok := readObject(w, r, []string{"url", "secret", "events"})
	if !ok {
		return
	}
	hook := store.Webhook{ID: store.NewID("wh"), CreatedAt: a.now()}
	var err error
	if hook.URL, err = webhookURL(body["url"]); err == nil {
		if hook.Secret, err = webhookSecret(body["secret"]); err == nil {
			hook.Events, err = webhookEvents(body["events"])
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := a.Store.CreateWebhook(r.Context(), hook); err != nil {
		storeError(w, err)
		return
	}
	made := webhookView(hook)
	made.Secret = hook.Secret
	writeJSON(w, http.StatusCreated, made)
}

// listWebhooks answers GET /gw/webhooks: every subscription, oldest
// first, without secrets.
func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request) {
	hooks, err := a.Store.ListWebhooks(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Webhook, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, webhookView(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// getWebhook answers GET /gw/webhooks/{id}.
func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) {
	hooks, err := a.Store.ListWebhooks(r.Context())
	if err != nil {
		storeError(w, err)
		return
	}
	for _, h := range hooks {
		if h.ID == r.PathValue("id") {
			writeJSON(w, http.StatusOK, webhookView(h))
			return
		}
	}
	storeError(w, store.ErrNotFound)
}

// deleteWebhook answers DELETE /gw/webhooks/{id}: 204, its pending
// deliveries and its log gone with it.
func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := a.Store.DeleteWebhook(r.Context(), r.PathValue("id")); err != nil {
		storeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deliveries answers GET /gw/webhooks/{id}/deliveries?limit=: the
// webhook's delivery log, newest first.
func (a *API) deliveries(w http.ResponseWriter, r *http.Request) {
	limit, ok := listLimit(w, r)
	if !ok {
		return
	}
	ds, err := a.Store.Deliveries(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		storeError(w, err)
		return
	}
	out := make([]Delivery, 0, len(ds))
	for _, d := range ds {
		v := Delivery{EventID: d.EventID, Type: d.Type, Account: d.Account, Status: "pending", Attempts: d.Attempts,
			DeliveredAt: d.Delivered, CreatedAt: d.CreatedAt, Event: json.RawMessage(d.Body)}
		if d.Delivered != nil {
			v.Status = "delivered"
		} else {
			next := d.NextAt
			v.NextAttemptAt = &next
		}
		if d.Attempts > 0 {
			v.LastStatus, v.LastError = &d.LastStatus, &d.LastError
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}
