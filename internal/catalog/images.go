package catalog

import (
	"fmt"
	"slices"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Image qualities and sizes the price lookups treat specially.
const (
	// ImageAuto, as quality or size, lets the provider choose; it is
	// priced as the dearest choice the price table allows.
	ImageAuto = "auto"
	// DefaultImageSize is the size of a request that names none.
	DefaultImageSize = "1024x1024"
	// DefaultPreviewTokens is the output tokens one streamed preview
	// costs when the config names no preview_tokens.
	DefaultPreviewTokens = 100
)

// ImagePrice is the plan price of one image of a quality and size.
type ImagePrice struct {
	// Quality is the provider's quality value (low, medium, high, hd ...).
	Quality string `json:"quality"`
	// Size is the provider's size value (1024x1024 ...).
	Size string `json:"size"`
	// Price is US dollars per image.
	Price pricing.Money `json:"price_usd"`
}

// ImageTokenPrices are an image model's plan prices per million tokens of
// the usage the provider reports.
type ImageTokenPrices struct {
	// TextInput prices the prompt's text tokens.
	TextInput pricing.Money `json:"text_input_usd_per_m"`
	// ImageInput prices the reference images' tokens of an edit.
	ImageInput pricing.Money `json:"image_input_usd_per_m"`
	// ImageOutput prices the tokens of the images and previews made.
	ImageOutput pricing.Money `json:"image_output_usd_per_m"`
}

// ImageUsage is the token usage an image answer reports.
type ImageUsage struct {
	TextInput, ImageInput, Output int64
}

// checkImage validates the image pricing of an ability and sets its row
// price: an image alias with a price table publishes the table's lowest
// price ("from" that much an image) and must not name another.
func (a *Ability) checkImage() error {
	isImage := AbilityCapability(a.Alias) == CapImage
	if !isImage {
		if len(a.ImagePrices) > 0 || a.TokenPrices != nil || a.PreviewTokens != 0 {
			return fmt.Errorf("ability %s: only image aliases have image prices", a.Alias)
		}
		return nil
	}
	if a.PreviewTokens < 0 {
		return fmt.Errorf("ability %s: preview_tokens must not be negative", a.Alias)
	}
	if len(a.ImagePrices) == 0 {
		return nil
	}
	if a.PriceMicrocents != nil {
		return fmt.Errorf("ability %s: price_microcents and an image price table are exclusive; the row shows the table's lowest price", a.Alias)
	}
	seen := map[[2]string]bool{}
	lowest := a.ImagePrices[0].Price
	for _, p := range a.ImagePrices {
		if p.Quality == "" || p.Size == "" || p.Quality == ImageAuto || p.Size == ImageAuto {
			return fmt.Errorf("ability %s: an image price needs a quality and a size other than auto", a.Alias)
		}
		if p.Price <= 0 {
			return fmt.Errorf("ability %s: image price %s %s must be above zero", a.Alias, p.Quality, p.Size)
		}
		k := [2]string{p.Quality, p.Size}
		if seen[k] {
			return fmt.Errorf("ability %s: image price %s %s given twice", a.Alias, p.Quality, p.Size)
		}
		seen[k] = true
		lowest = min(lowest, p.Price)
	}
	from := lowest.Microcents()
	a.PriceMicrocents = &from
	return nil
}

// ImagePriced reports whether the alias prices images by quality and size.
func (a *Ability) ImagePriced() bool { return len(a.ImagePrices) > 0 }

// HasQuality reports whether quality ("" or auto: the provider's choice)
// has a price.
func (a *Ability) HasQuality(quality string) bool {
	if !a.ImagePriced() || quality == "" || quality == ImageAuto {
		return true
	}
	for _, p := range a.ImagePrices {
		if p.Quality == quality {
			return true
		}
	}
	return false
}

// ImageUnitPrice is the plan price of one image of quality and size: the
// table's price, the dearest the table allows where either is "" or auto,
// or the alias's one price per image when it has no table. ok is false
// when nothing prices it.
func (a *Ability) ImageUnitPrice(quality, size string) (price pricing.Money, ok bool) {
	if !a.ImagePriced() {
		if a.PriceMicrocents == nil {
			return 0, false
		}
		return pricing.Micro(*a.PriceMicrocents), true
	}
	anyQ := quality == "" || quality == ImageAuto
	anyS := size == "" || size == ImageAuto
	for _, p := range a.ImagePrices {
		if (anyQ || p.Quality == quality) && (anyS || p.Size == size) && (!ok || p.Price > price) {
			price, ok = p.Price, true
		}
	}
	return price, ok
}

// ImageChoices are the qualities and the sizes the price table names, in
// its order, each once.
func (a *Ability) ImageChoices() (qualities, sizes []string) {
	for _, p := range a.ImagePrices {
		if !slices.Contains(qualities, p.Quality) {
			qualities = append(qualities, p.Quality)
		}
		if !slices.Contains(sizes, p.Size) {
			sizes = append(sizes, p.Size)
		}
	}
	return qualities, sizes
}

// PreviewTokenCount is the output tokens one streamed preview costs.
func (a *Ability) PreviewTokenCount() int64 {
	if a.PreviewTokens > 0 {
		return a.PreviewTokens
	}
	return DefaultPreviewTokens
}

// ImageLines prices images at unit each and previews streamed previews
// (at the image output token price; free when the alias has no token
// prices, its price per image covering them).
func (a *Ability) ImageLines(images int64, unit pricing.Money, previews int64) []pricing.Line {
	lines := []pricing.Line{{Units: images, Rate: pricing.PerUnit(unit)}}
	if a.TokenPrices != nil && previews > 0 {
		lines = append(lines, pricing.Line{Units: previews * a.PreviewTokenCount(), Rate: pricing.PerMillion(a.TokenPrices.ImageOutput)})
	}
	return lines
}

// UsageLines prices a reported usage at the alias's token prices; ok is
// false when the alias has none.
func (a *Ability) UsageLines(u ImageUsage) ([]pricing.Line, bool) {
	tp := a.TokenPrices
	if tp == nil {
		return nil, false
	}
	return []pricing.Line{
		{Units: u.TextInput, Rate: pricing.PerMillion(tp.TextInput)},
		{Units: u.ImageInput, Rate: pricing.PerMillion(tp.ImageInput)},
		{Units: u.Output, Rate: pricing.PerMillion(tp.ImageOutput)},
	}, true
}
