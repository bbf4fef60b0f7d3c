package store

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// A threshold is the cap's share rounded up, for caps too large to
// multiply by a hundred.
func TestThresholdAt(t *testing.T) {
	for _, c := range []struct {
		limit pricing.Money
		pct   int
		want  pricing.Money
	}{
		{0, 50, 0},
		{1, 50, 1},
		{3, 50, 2},
		{100, 80, 80},
		{101, 80, 81},
		{199, 100, 199},
		{math.MaxInt64, 100, math.MaxInt64},
		{math.MaxInt64, 50, math.MaxInt64/2 + 1},
	} {
		if got := ThresholdAt(c.limit, c.pct); got != c.want {
			t.Errorf("ThresholdAt(%d, %d) = %d, want %d", c.limit, c.pct, got, c.want)
		}
	}
}

// A charge raises each threshold it crosses, none it started at or
// above, none of a zero or absent cap, and none when it costs nothing;
// the same threshold in the same period has the same id, in another
// period another.
func TestAlertsCap(t *testing.T) {
	at := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	day, _ := DayOf(at)
	limit := pricing.Money(1000)
	zero := pricing.Money(0)
	for _, c := range []struct {
		limit        *pricing.Money
		before, cost pricing.Money
		want         []int
	}{
		{&limit, 0, 499, nil},
		{&limit, 0, 500, []int{50}},
		{&limit, 499, 1, []int{50}},
		{&limit, 500, 300, []int{80}},
		{&limit, 0, 1000, []int{50, 80, 100}},
		{&limit, 800, 199, nil},
		{&limit, 1000, 5, nil},
		{&limit, 10, 0, nil},
		{&zero, 0, 5, nil},
		{nil, 0, 5000, nil},
	} {
		var al Alerts
		al.Cap(Capped{Account: "a"}, CapDaily, c.limit, c.before, c.cost, at, day)
		var got []int
		for _, ev := range al.Events {
			got = append(got, ev.Threshold)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("cap %v from %d by %d: thresholds %v, want %v", c.limit, c.before, c.cost, got, c.want)
		}
	}
	var al Alerts
	al.Cap(Capped{Account: "a"}, CapDaily, &limit, 0, 500, at, day)
	al.Cap(Capped{Account: "a"}, CapDaily, &limit, 0, 500, at.Add(time.Hour), day)
	next, _ := DayOf(at.AddDate(0, 0, 1))
	al.Cap(Capped{Account: "a"}, CapDaily, &limit, 0, 500, at.AddDate(0, 0, 1), next)
	al.Cap(Capped{Account: "a", KeyID: "k"}, CapKeyDaily, &limit, 0, 500, at, day)
	ids := []string{al.Events[0].ID, al.Events[1].ID, al.Events[2].ID, al.Events[3].ID}
	if ids[0] != ids[1] || ids[0] == ids[2] || ids[0] == ids[3] || len(ids[0]) != len(eventIDPrefix)+eventIDHexChars {
		t.Fatalf("event ids %q", ids)
	}
	if got := string(al.Events[3].Body()); got != `{"id":"`+ids[3]+`","type":"cap.threshold","time":"2026-03-10T12:00:00Z","account":"a","key_id":"k","cap":"key_daily_cap","threshold":50,"spend_usd":"0.0000005","limit_usd":"0.000001"}` {
		t.Fatalf("body %s", got)
	}
}
