package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestDayAndMonthOf holds DayOf and MonthOf to the calendar's own answer,
// across day and month edges, before 1970, leap days and other zones.
func TestDayAndMonthOf(t *testing.T) {
	east := time.FixedZone("east", 14*3600)
	west := time.FixedZone("west", -11*3600)
	times := []time.Time{
		time.Unix(0, 0),
		time.Unix(-1, 0),
		time.Unix(0, -1),
		time.Unix(-secondsPerDay, 0),
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1969, 12, 31, 12, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2026, 11, 26, 1, 0, 0, 0, east),  // the 25th in UTC
		time.Date(2026, 11, 30, 20, 0, 0, 0, west), // December in UTC
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		times = append(times, time.Unix(r.Int64N(8e9)-4e9, r.Int64N(1e9)))
	}
	for _, tm := range times {
		u := tm.UTC()
		wantDay := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
		from, to := DayOf(tm)
		if from != wantDay || to != wantDay.AddDate(0, 0, 1) {
			t.Errorf("DayOf(%v) = %v, %v; want %v, %v", tm, from, to, wantDay, wantDay.AddDate(0, 0, 1))
		}
		wantMonth := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
		from, to = MonthOf(tm)
		if from != wantMonth || to != wantMonth.AddDate(0, 1, 0) {
			t.Errorf("MonthOf(%v) = %v, %v; want %v, %v", tm, from, to, wantMonth, wantMonth.AddDate(0, 1, 0))
		}
	}
}

func BenchmarkDayOf(b *testing.B) {
	now := time.Now()
	for b.Loop() {
		DayOf(now)
	}
}

// KeyRoom is the least that the key's caps leave of its spend in each
// cap's period: NoRoom with no cap, below zero past one.
func TestKeyRoom(t *testing.T) {
	m := func(n pricing.Money) *pricing.Money { return &n }
	sp := Spend{Today: 10, Month: 40, Total: 100}
	for _, c := range []struct {
		name string
		key  Key
		want pricing.Money
	}{
		{"no cap", Key{}, NoRoom},
		{"daily", Key{DailyCap: m(25)}, 15},
		{"monthly", Key{MonthlyCap: m(45)}, 5},
		{"total", Key{TotalCap: m(130)}, 30},
		{"the least of three", Key{DailyCap: m(25), MonthlyCap: m(60), TotalCap: m(107)}, 7},
		{"at a cap", Key{MonthlyCap: m(40)}, 0},
		{"past a cap", Key{DailyCap: m(4), TotalCap: m(1000)}, -6},
		{"a cap of zero", Key{TotalCap: m(0)}, -100},
	} {
		if got := KeyRoom(&c.key, sp); got != c.want {
			t.Errorf("%s: KeyRoom = %d, want %d", c.name, got, c.want)
		}
		if c.key.HasCaps() != (c.want != NoRoom) {
			t.Errorf("%s: HasCaps = %v", c.name, c.key.HasCaps())
		}
	}
}

// CopyMoneys gives each amount a copy of its own, nil stays nil, and the
// original is never written through the copies.
func TestCopyMoneys(t *testing.T) {
	a, b := pricing.Money(7), pricing.Money(9)
	x, y, z := &a, (*pricing.Money)(nil), &b
	CopyMoneys(&x, &y, &z)
	if x == &a || z == &b || y != nil || *x != 7 || *z != 9 {
		t.Fatalf("copies %v %v %v of 7, nil, 9", x, y, z)
	}
	*x, *z = 1, 2
	if a != 7 || b != 9 || *x != 1 || *z != 2 {
		t.Fatalf("originals %d %d, copies %d %d: they share", a, b, *x, *z)
	}
	CopyMoneys(&y) // nothing to copy
	if y != nil {
		t.Fatal("a nil amount copied")
	}
}
