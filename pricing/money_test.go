package pricing

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestMoneyString(t *testing.T) {
	tests := []struct {
		name string
		m    Money
		want string
	}{
		{"zero", 0, "0.00"},
		{"whole dollars", USD(3), "3.00"},
		{"twelve fifty", USD(12) + 500*Micro(1000), "12.50"},
		{"one decimal pads to two", 1_100_000_000, "1.10"},
		{"one nano", 1, "0.000000001"},
		{"150 nano", 150, "0.00000015"},
		{"one micro", Micro(1), "0.000001"},
		{"cent", 10 * Micro(1000), "0.01"},
		{"all nine decimals", 123_456_789, "0.123456789"},
		{"payg receipt", 13_671_840, "0.01367184"},
		{"negative nano", -1, "-0.000000001"},
		{"negative twelve fifty", -12_500_000_000, "-12.50"},
		{"negative whole", USD(-7), "-7.00"},
		{"negative under a dollar", -150, "-0.00000015"},
		{"million dollars", USD(1_000_000), "1000000.00"},
		{"max", math.MaxInt64, "9223372036.854775807"},
		{"min", math.MinInt64, "-9223372036.854775808"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.String(); got != tt.want {
				t.Errorf("Money(%d).String() = %q, want %q", int64(tt.m), got, tt.want)
			}
		})
	}
}

func TestParseUSDValid(t *testing.T) {
	tests := []struct {
		in   string
		want Money
	}{
		{"12.50", 12_500_000_000},
		{"12.5", 12_500_000_000},
		{"0.000000001", 1},
		{"0.00000015", 150},
		{"3", USD(3)},
		{"3.", USD(3)},
		{".5", 500_000_000},
		{"-1.25", -1_250_000_000},
		{"+2", USD(2)},
		{"-.5", -500_000_000},
		{"0", 0},
		{"-0", 0},
		{"0.00", 0},
		{"007.10", 7_100_000_000},
		{"123456789.123456789", 123_456_789_123_456_789},
		{" 12.50\n", 12_500_000_000}, // surrounding white space is ignored
		// The whole range of Money, which String can print, reads back.
		{"9223372036", 9_223_372_036_000_000_000},
		{"9223372036.854775807", math.MaxInt64},
		{"-9223372036.854775807", -math.MaxInt64},
		{"-9223372036.854775808", math.MinInt64},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUSD(tt.in)
			if err != nil {
				t.Fatalf("ParseUSD(%q) error %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseUSD(%q) = %d, want %d", tt.in, int64(got), int64(tt.want))
			}
		})
	}
}

func TestParseUSDInvalid(t *testing.T) {
	for _, in := range []string{
		"",
		".",
		"-",
		"+",
		"-.",
		" ",
		"1e3",
		"1E3",
		"1.0000000001", // 10 decimals
		"0.0000000001",
		"abc",
		"1,5",
		"1_000",
		"--1",
		"+-1",
		"-+1",
		"1.2.3",
		"1 2",
		"0x10",
		"Inf",
		"NaN",
		"١٢", // Arabic-Indic digits
		"$1",
		"99999999999999999999",
		"18446744073709551616",
		"9223372037",
		"9223372036.854775808",  // MaxInt64 + 1 nano
		"-9223372036.854775809", // MinInt64 - 1 nano
		"-9223372037",
	} {
		t.Run(in, func(t *testing.T) {
			got, err := ParseUSD(in)
			if !errors.Is(err, ErrBadAmount) {
				t.Errorf("ParseUSD(%q) = %d, %v; want ErrBadAmount", in, int64(got), err)
			}
		})
	}
}

func TestStringParsesBack(t *testing.T) {
	for _, m := range []Money{0, 1, -1, 150, 999_999_999, 1_000_000_001, USD(12) + 500_000_000,
		-USD(12), math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1} {
		got, err := ParseUSD(m.String())
		if err != nil || got != m {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", m.String(), int64(got), err, int64(m))
		}
	}
}

func TestMoneyJSON(t *testing.T) {
	type body struct {
		Cost    Money  `json:"cost_usd"`
		Balance *Money `json:"balance_usd"`
	}

	t.Run("marshal as string", func(t *testing.T) {
		b, err := json.Marshal(body{Cost: 12_500_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"cost_usd":"12.50","balance_usd":null}`; string(b) != want {
			t.Errorf("got %s, want %s", b, want)
		}
		for m, want := range map[Money]string{0: `"0.00"`, 150: `"0.00000015"`, -1: `"-0.000000001"`} {
			b, err := json.Marshal(m)
			if err != nil || string(b) != want {
				t.Errorf("json.Marshal(%d) = %s, %v; want %s", int64(m), b, err, want)
			}
		}
	})

	unmarshal := []struct {
		in   string
		want Money
	}{
		{`"12.50"`, 12_500_000_000},
		{`12.5`, 12_500_000_000},
		{`12`, USD(12)},
		{`"0.000000001"`, 1},
		{`0.000000001`, 1},
		{`-1.25`, -1_250_000_000},
		{`"-1.25"`, -1_250_000_000},
		{`"\u0031.5"`, 1_500_000_000}, // JSON escapes are read
		{`"9223372036.854775807"`, math.MaxInt64},
	}
	for _, tt := range unmarshal {
		t.Run("unmarshal "+tt.in, func(t *testing.T) {
			var m Money
			if err := json.Unmarshal([]byte(tt.in), &m); err != nil {
				t.Fatalf("json.Unmarshal(%s) error %v", tt.in, err)
			}
			if m != tt.want {
				t.Errorf("json.Unmarshal(%s) = %d, want %d", tt.in, int64(m), int64(tt.want))
			}
		})
	}

	for _, in := range []string{`1e3`, `"1e3"`, `"abc"`, `""`, `true`, `"1.0000000001"`, `99999999999999999999`, `[1]`, `{}`} {
		t.Run("refuse "+in, func(t *testing.T) {
			var m Money
			if err := json.Unmarshal([]byte(in), &m); err == nil {
				t.Errorf("json.Unmarshal(%s) = %d, want an error", in, int64(m))
			}
		})
	}

	t.Run("null leaves value", func(t *testing.T) {
		m := Money(42)
		if err := json.Unmarshal([]byte(`null`), &m); err != nil || m != 42 {
			t.Errorf("json.Unmarshal(null) = %d, %v; want 42, nil", int64(m), err)
		}
		var b body
		if err := json.Unmarshal([]byte(`{"cost_usd":null,"balance_usd":null}`), &b); err != nil {
			t.Fatal(err)
		}
		if b.Cost != 0 || b.Balance != nil {
			t.Errorf("got %+v", b)
		}
		if err := json.Unmarshal([]byte(`{"balance_usd":"5"}`), &b); err != nil || b.Balance == nil || *b.Balance != USD(5) {
			t.Errorf("balance_usd \"5\": %v, %v", b.Balance, err)
		}
	})

	t.Run("round trip", func(t *testing.T) {
		for _, m := range []Money{0, 1, -1, 150, 12_207_000, math.MaxInt64, math.MinInt64} {
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var got Money
			if err := json.Unmarshal(b, &got); err != nil || got != m {
				t.Errorf("round trip of %d via %s = %d, %v", int64(m), b, int64(got), err)
			}
		}
	})
}

func TestMicrocents(t *testing.T) {
	tests := []struct {
		m    Money
		want int64
	}{
		{0, 0},
		{1, 0},
		{499, 0},
		{500, 1}, // half rounds away from zero
		{999, 1},
		{1000, 1},
		{1499, 1},
		{1500, 2},
		{2500, 3},
		{-1, 0},
		{-499, 0},
		{-500, -1},
		{-1500, -2},
		{-1501, -2},
		{USD(1), 1_000_000},
		{Micro(26), 26},
		{Micro(10_000), 10_000},
		{12_207_000, 12_207},
		{13_671_840, 13_672},
		{math.MaxInt64, 9_223_372_036_854_776},
		{math.MinInt64, -9_223_372_036_854_776},
	}
	for _, tt := range tests {
		if got := tt.m.Microcents(); got != tt.want {
			t.Errorf("Money(%d).Microcents() = %d, want %d", int64(tt.m), got, tt.want)
		}
	}
}

func TestConstructors(t *testing.T) {
	if USD(1) != 1_000_000_000 || Micro(1) != 1_000 || NanoPerUSD != 1_000_000_000 || NanoPerMicro != 1_000 {
		t.Fatal("unit constants are off")
	}
	if USD(-2) != -2_000_000_000 || Micro(26) != 26_000 {
		t.Fatal("constructors are off")
	}
}
