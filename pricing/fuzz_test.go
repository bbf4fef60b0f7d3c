package pricing

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseUSD checks that ParseUSD never panics and that every amount it
// reads prints (String) and marshals (JSON) to a form that reads back to the
// same amount.
func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{
		"12.50", "0.000000001", "0.00000015", "3", "3.", ".5", "-1.25", "+2", "-0",
		"", ".", "-", "1e3", "1.0000000001", "abc", "1,5", " ", "--1", " 7 ",
		"99999999999999999999", "9223372036.854775807", "9223372036.854775808",
		"-9223372036.854775808", "-9223372036.854775809", "١٢", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseUSD(s)
		if err != nil {
			if m != 0 {
				t.Fatalf("ParseUSD(%q) = %d with error %v", s, int64(m), err)
			}
			return
		}
		str := m.String()
		back, err := ParseUSD(str)
		if err != nil || back != m {
			t.Fatalf("ParseUSD(%q) = %d; String %q reads back as %d, %v", s, int64(m), str, int64(back), err)
		}
		whole, frac, ok := strings.Cut(strings.TrimPrefix(str, "-"), ".")
		if !ok || whole == "" || len(frac) < 2 || len(frac) > Decimals || (len(frac) > 2 && strings.HasSuffix(frac, "0")) {
			t.Fatalf("String of %d = %q is not in cost-header form", int64(m), str)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("json.Marshal(%d): %v", int64(m), err)
		}
		var j Money
		if err := json.Unmarshal(b, &j); err != nil || j != m {
			t.Fatalf("JSON round trip of %d via %s = %d, %v", int64(m), b, int64(j), err)
		}
	})
}
