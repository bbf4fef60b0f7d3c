package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// webhookCols are the columns of the webhooks table, in scanWebhook's
// order.
const webhookCols = `id, url, secret, events, created_at`

// deliveryCols are the outbox's columns a Delivery holds, in
// scanDelivery's order (the table's alias o).
const deliveryCols = `o.seq, o.webhook_id, o.event_id, o.type, o.account_id, o.body, o.created_at, o.next_at, o.attempts,
	o.delivered_at, o.last_status, o.last_error`

// Raise stores events in the outbox on c, a write transaction that
// raised them: a row for each webhook subscribed to its type, none when an
// event with its id reached that webhook before.
func (s *SQL) Raise(ctx context.Context, c Conn, evs []Event) error {
	a := s.d.Arg
	q := `INSERT INTO webhook_outbox (webhook_id, event_id, type, account_id, body, created_at, next_at)
		SELECT id, ` + a(1) + `, ` + a(2) + `, ` + a(3) + `, ` + a(4) + `, ` + a(5) + `, ` + a(6) + ` FROM webhooks WHERE events LIKE ` + a(7) + `
		ON CONFLICT (webhook_id, event_id) DO NOTHING`
	for i := range evs {
		ev := &evs[i]
		at, err := Nanos(ev.Time)
		if err != nil {
			at = time.Now().UnixNano()
		}
		if err := c.Exec(ctx, q, ev.ID, ev.Type, ev.Account, string(ev.Body()), at, at, `%"`+ev.Type+`"%`); err != nil {
			return fmt.Errorf("raising %s: %w", ev.Type, err)
		}
	}
	return nil
}

// RevokeKey revokes key id at on c, a write transaction, and raises its
// key.revoked alert there; ErrNotFound if no such active key.
func (s *SQL) RevokeKey(ctx context.Context, c Conn, id string, at time.Time) error {
	a := s.d.Arg
	k := Key{ID: id}
	err := c.QueryRow(ctx, `UPDATE keys SET revoked_at = `+a(1)+` WHERE id = `+a(2)+` AND revoked_at IS NULL RETURNING account_id`,
		at.UnixNano(), id).Scan(&k.AccountID)
	if err != nil {
		return s.d.Classify(err)
	}
	return s.Raise(ctx, c, []Event{KeyRevoked(&k, at)})
}

// CreateWebhook stores a subscription; ErrExists if the id is taken. A
// zero CreatedAt is set to now.
func (s *SQL) CreateWebhook(ctx context.Context, w Webhook) error {
	if w.CreatedAt.IsZero() {
		w.CreatedAt = time.Now()
	}
	created, err := Nanos(w.CreatedAt)
	if err != nil {
		return err
	}
	events, err := EncodeList(w.Events)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(c Conn) error {
		return c.Exec(ctx, `INSERT INTO webhooks (`+webhookCols+`) VALUES (`+placeholders(s.d.Arg, 5)+`)`, w.ID, w.URL, w.Secret, events, created)
	})
	if err != nil {
		return fmt.Errorf("%s: create webhook %q: %w", s.d.Name, w.ID, s.d.Classify(err))
	}
	return nil
}

// ListWebhooks returns every subscription, oldest first.
func (s *SQL) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	rows, err := s.read.Query(ctx, `SELECT `+webhookCols+` FROM webhooks ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("%s: webhooks: %w", s.d.Name, err)
	}
	defer rows.Close()
	out := []Webhook{}
	for rows.Next() {
		var (
			w       Webhook
			events  string
			created int64
		)
		if err := rows.Scan(&w.ID, &w.URL, &w.Secret, &events, &created); err != nil {
			return nil, fmt.Errorf("%s: webhooks: %w", s.d.Name, err)
		}
		if w.Events, err = DecodeList(&events); err != nil {
			return nil, fmt.Errorf("%s: webhook %q: events: %w", s.d.Name, w.ID, err)
		}
		w.CreatedAt = FromNanos(created)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: webhooks: %w", s.d.Name, err)
	}
	return out, nil
}

// webhookExists is ErrNotFound unless webhook id is stored.
func (s *SQL) webhookExists(ctx context.Context, c Conn, id string) error {
	var one int
	return s.d.Classify(c.QueryRow(ctx, `SELECT 1 FROM webhooks WHERE id = `+s.d.Arg(1), id).Scan(&one))
}

// DeleteWebhook deletes a subscription and its outbox (the foreign key
// cascades); ErrNotFound if none.
func (s *SQL) DeleteWebhook(ctx context.Context, id string) error {
	err := s.write(ctx, func(c Conn) error {
		if err := s.webhookExists(ctx, c, id); err != nil {
			return err
		}
		return c.Exec(ctx, `DELETE FROM webhooks WHERE id = `+s.d.Arg(1), id)
	})
	if err != nil {
		return fmt.Errorf("%s: delete webhook %q: %w", s.d.Name, id, err)
	}
	return nil
}

// Due returns at most limit deliveries due at now, oldest first, each the
// oldest pending one of its webhook and account, with the webhook's URL
// and secret.
func (s *SQL) Due(ctx context.Context, now time.Time, limit int) ([]Delivery, error) {
	a := s.d.Arg
	rows, err := s.read.Query(ctx, `SELECT `+deliveryCols+`, w.url, w.secret
		FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id
		WHERE o.delivered_at IS NULL AND o.next_at <= `+a(1)+`
		AND NOT EXISTS (SELECT 1 FROM webhook_outbox p WHERE p.webhook_id = o.webhook_id AND p.account_id = o.account_id
			AND p.delivered_at IS NULL AND p.seq < o.seq)
		ORDER BY o.seq LIMIT `+a(2), now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("%s: due deliveries: %w", s.d.Name, err)
	}
	return scanDeliveries(rows, true)
}

// Claim takes d for one attempt until lease, counting the attempt: false
// when its next attempt time moved (another node claimed it) or it was
// delivered since Due read it. d's NextAt and Attempts follow.
func (s *SQL) Claim(ctx context.Context, d *Delivery, lease time.Time) (bool, error) {
	a := s.d.Arg
	var attempts int
	err := s.write(ctx, func(c Conn) error {
		return c.QueryRow(ctx, `UPDATE webhook_outbox SET next_at = `+a(1)+`, attempts = attempts + 1
			WHERE seq = `+a(2)+` AND next_at = `+a(3)+` AND delivered_at IS NULL RETURNING attempts`,
			lease.UnixNano(), d.Seq, d.NextAt.UnixNano()).Scan(&attempts)
	})
	if errors.Is(s.d.Classify(err), ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: claim delivery %d: %w", s.d.Name, d.Seq, err)
	}
	d.NextAt, d.Attempts = lease, attempts
	return true, nil
}

// MaxDeliveryError is the longest error text a delivery keeps, in bytes.
const MaxDeliveryError = 512

// Attempted records an attempt's end: delivered at when next is zero,
// else due again at next.
func (s *SQL) Attempted(ctx context.Context, seq int64, at, next time.Time, status int, msg string) error {
	if len(msg) > MaxDeliveryError {
		msg = msg[:MaxDeliveryError]
	}
	a := s.d.Arg
	q, when := `UPDATE webhook_outbox SET delivered_at = `+a(1)+`, last_status = `+a(2)+`, last_error = `+a(3)+` WHERE seq = `+a(4), at
	if !next.IsZero() {
		q, when = `UPDATE webhook_outbox SET next_at = `+a(1)+`, last_status = `+a(2)+`, last_error = `+a(3)+` WHERE seq = `+a(4), next
	}
	err := s.write(ctx, func(c Conn) error { return c.Exec(ctx, q, when.UnixNano(), status, msg, seq) })
	if err != nil {
		return fmt.Errorf("%s: delivery %d: %w", s.d.Name, seq, err)
	}
	return nil
}

// Deliveries returns a webhook's deliveries, newest first, at most limit;
// ErrNotFound if no such webhook.
func (s *SQL) Deliveries(ctx context.Context, webhookID string, limit int) ([]Delivery, error) {
	if err := s.webhookExists(ctx, s.read, webhookID); err != nil {
		return nil, fmt.Errorf("%s: deliveries of %q: %w", s.d.Name, webhookID, err)
	}
	a := s.d.Arg
	rows, err := s.read.Query(ctx, `SELECT `+deliveryCols+` FROM webhook_outbox o WHERE o.webhook_id = `+a(1)+
		` ORDER BY o.seq DESC LIMIT `+a(2), webhookID, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: deliveries of %q: %w", s.d.Name, webhookID, err)
	}
	return scanDeliveries(rows, false)
}

// scanDeliveries reads rows of deliveryCols, followed by the webhook's
// url and secret when withHook, and closes them.
func scanDeliveries(rows ClosingRows, withHook bool) ([]Delivery, error) {
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		var (
			d             Delivery
			body          string
			created, next int64
			delivered     *int64
			url, secret   string
		)
		dest := []any{&d.Seq, &d.WebhookID, &d.EventID, &d.Type, &d.Account, &body, &created, &next, &d.Attempts,
			&delivered, &d.LastStatus, &d.LastError}
		if withHook {
			dest = append(dest, &url, &secret)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		d.Body, d.URL, d.Secret = []byte(body), url, secret
		d.CreatedAt, d.NextAt = FromNanos(created), FromNanos(next)
		if delivered != nil {
			t := FromNanos(*delivered)
			d.Delivered = &t
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
