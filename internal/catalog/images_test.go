package catalog

import (
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/pricing"
)

func usd(t *testing.T, s string) pricing.Money {
	t.Helper()
	m, err := pricing.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// imageTable is gpt-image-1's published price table, low and high only.
func imageTable(t *testing.T) []ImagePrice {
	return []ImagePrice{
		{"low", "1024x1024", usd(t, "0.011")}, {"low", "1536x1024", usd(t, "0.016")},
		{"high", "1024x1024", usd(t, "0.167")}, {"high", "1536x1024", usd(t, "0.25")},
	}
}

func TestImagePrices(t *testing.T) {
	abs := abilities()
	abs[1].PriceMicrocents = nil
	abs[1].ImagePrices = imageTable(t)
	c, err := New(providers(), models(), abs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Abilities["gw-image"]
	if a.PriceMicrocents == nil || *a.PriceMicrocents != 11000 {
		t.Fatalf("row price %v, want the table's lowest, 11000", a.PriceMicrocents)
	}
	for _, tc := range []struct {
		quality, size, want string
		ok                  bool
	}{
		{"low", "1024x1024", "0.011", true},
		{"high", "1536x1024", "0.25", true},
		{"", "1024x1024", "0.167", true},   // the provider chooses: the dearest
		{"auto", "auto", "0.25", true},     // the dearest of all
		{"low", "auto", "0.016", true},     // the dearest size at low
		{"low", "1024x1536", "", false},    // unpriced size
		{"medium", "1024x1024", "", false}, // unpriced quality
		{"high", "256x256", "", false},
	} {
		got, ok := a.ImageUnitPrice(tc.quality, tc.size)
		if ok != tc.ok || (ok && got.String() != usd(t, tc.want).String()) {
			t.Errorf("ImageUnitPrice(%q, %q) = %s %v, want %s %v", tc.quality, tc.size, got, ok, tc.want, tc.ok)
		}
	}
	for q, want := range map[string]bool{"": true, "auto": true, "low": true, "high": true, "medium": false, "hd": false} {
		if a.HasQuality(q) != want {
			t.Errorf("HasQuality(%q) = %v", q, !want)
		}
	}
	// Without a table every image costs the one price.
	flat := &Ability{Alias: "gw-image", PriceMicrocents: i64(40000)}
	if p, ok := flat.ImageUnitPrice("high", "1536x1024"); !ok || p != pricing.Micro(40000) || !flat.HasQuality("hd") {
		t.Fatalf("flat price %s %v", p, ok)
	}
	if _, ok := (&Ability{Alias: "gw-image"}).ImageUnitPrice("low", "1024x1024"); ok {
		t.Fatal("an unpublished alias priced an image")
	}
	// Previews at the image output price; usage at the three token prices.
	a.TokenPrices = &ImageTokenPrices{TextInput: usd(t, "5"), ImageInput: usd(t, "10"), ImageOutput: usd(t, "40")}
	if got := pricing.Cost(false, a.ImageLines(2, usd(t, "0.011"), 3)...); got.String() != "0.034" { // 0.022 + 300 × 40/M
		t.Errorf("two images and three previews: %s", got)
	}
	lines, ok := a.UsageLines(ImageUsage{TextInput: 20, ImageInput: 323, Output: 4160})
	if got := pricing.Cost(false, lines...); !ok || got.String() != "0.16973" { // 0.0001 + 0.00323 + 0.1664
		t.Errorf("usage cost %s %v", got, ok)
	}
}

func TestImagePriceValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(a []Ability)
		want string
	}{
		{"two prices", func(a []Ability) { a[1].ImagePrices = imageTable(t) }, "price_microcents and an image price table are exclusive"},
		{"twice", func(a []Ability) {
			a[1].PriceMicrocents, a[1].ImagePrices = nil, append(imageTable(t), ImagePrice{"low", "1024x1024", usd(t, "0.02")})
		}, "image price low 1024x1024 given twice"},
		{"zero", func(a []Ability) {
			a[1].PriceMicrocents, a[1].ImagePrices = nil, []ImagePrice{{"low", "1024x1024", 0}}
		}, "must be above zero"},
		{"auto", func(a []Ability) {
			a[1].PriceMicrocents, a[1].ImagePrices = nil, []ImagePrice{{"auto", "1024x1024", 1}}
		}, "other than auto"},
		{"not an image alias", func(a []Ability) { a[0].ImagePrices = imageTable(t) }, "only image aliases have image prices"},
		{"negative previews", func(a []Ability) { a[1].PreviewTokens = -1 }, "preview_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			abs := abilities()
			tc.edit(abs)
			_, err := New(providers(), models(), abs, nil, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestImageChoices(t *testing.T) {
	q, s := (&Ability{ImagePrices: imageTable(t)}).ImageChoices()
	if strings.Join(q, ",") != "low,high" || strings.Join(s, ",") != "1024x1024,1536x1024" {
		t.Fatalf("choices %v %v", q, s)
	}
}
