package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gw/caddy-gw/handlers/audio"
	"github.com/caddy-gw/caddy-gw/handlers/fetch"
	"github.com/caddy-gw/caddy-gw/handlers/images"
	"github.com/caddy-gw/caddy-gw/handlers/search"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// imagesHandler builds image generation and edits.
func (a *App) imagesHandler(cat *catalog.Catalog) (*images.Handler, error) {
	var cfg images.Config
	if c := a.Images; c != nil {
		cfg = images.Config{GenerateTimeout: time.Duration(c.GenerateTimeout), EditTimeout: time.Duration(c.EditTimeout)}
	}
	return images.New(upstreams, cat, cfg)
}

// audioHandler builds transcription, speech and the voice list.
func (a *App) audioHandler(cat *catalog.Catalog) (*audio.Handler, error) {
	var cfg audio.Config
	if c := a.Audio; c != nil {
		cfg = audio.Config{AccurateUpTo: time.Duration(c.AccurateUpTo), VerboseModel: c.VerboseModel,
			TranscriptionTimeout: time.Duration(c.TranscriptionTimeout), FirstAudioTimeout: time.Duration(c.FirstAudioTimeout),
			GapTimeout: time.Duration(c.GapTimeout)}
	}
	return audio.New(upstreams, cat, cfg)
}

// declareServices names in the catalogue the billed services outside its
// model rows, so that the metrics label them: page reading, the search
// model and the model of verbose transcriptions.
func (a *App) declareServices(cat *catalog.Catalog, searchH *search.Handler) {
	verbose := audio.DefaultVerboseModel
	if a.Audio != nil && a.Audio.VerboseModel != "" {
		verbose = a.Audio.VerboseModel
	}
	cat.Declare(fetch.Model, verbose)
	if searchH.Provider != nil {
		cat.Declare(searchH.Model)
	}
}

// Search defaults.
const (
	DefaultSearchModel                    = "gpt-4.1-mini"
	DefaultSearchPricePerSearchMicrocents = 25_000
)

// searchHandler builds web search from its config (nil: not configured).
func (a *App) searchHandler(cat *catalog.Catalog) (*search.Handler, error) {
	if a.Search == nil {
		return &search.Handler{Upstream: upstreams}, nil
	}
	p := cat.Providers[a.Search.Provider]
	if p == nil {
		return nil, fmt.Errorf("search: provider %q is not defined", a.Search.Provider)
	}
	h := &search.Handler{Upstream: upstreams, Provider: p, Model: a.Search.Model,
		PerSearch: pricing.Micro(a.Search.PricePerSearchMicrocents), InputPrice: pricing.Micro(400_000), OutputPrice: pricing.Micro(1_600_000)}
	if h.Model == "" {
		h.Model = DefaultSearchModel
	}
	if a.Search.PricePerSearchMicrocents <= 0 {
		h.PerSearch = pricing.Micro(DefaultSearchPricePerSearchMicrocents)
	}
	if a.Search.InputPrice != nil {
		h.InputPrice = *a.Search.InputPrice
	}
	if a.Search.OutputPrice != nil {
		h.OutputPrice = *a.Search.OutputPrice
	}
	return h, nil
}

// Page reading defaults.
const (
	DefaultFetchPriceMicrocents       = 2_000
	DefaultFetchRenderPriceMicrocents = 5_000
)

// fetchHandler builds page reading: its guard's allow list and prices.
func (a *App) fetchHandler() *fetch.Handler {
	allow := expandList(a.FetchAllow)
	price, render := a.FetchPriceMicrocents, a.FetchRenderPriceMicrocents
	if price <= 0 {
		price = DefaultFetchPriceMicrocents
	}
	if render <= 0 {
		render = DefaultFetchRenderPriceMicrocents
	}
	return &fetch.Handler{Guard: netguard.New(allow), Price: pricing.Micro(price), RenderPrice: pricing.Micro(render),
		Timeout: time.Duration(a.FetchTimeout)}
}

// AudioFetchTimeout bounds downloading transcribe's audio_url.
const AudioFetchTimeout = 30 * time.Second

// fetchAudio downloads transcribe's audio_url through the address guard of
// page reading, at most limit bytes.
func fetchAudio(g *netguard.Guard) func(ctx context.Context, url string, limit int64) ([]byte, error) {
	client := g.Client(AudioFetchTimeout)
	return func(ctx context.Context, raw string, limit int64) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
		if err != nil {
			return nil, gwerr.New(gwerr.Invalid, "audio_url cannot be read").WithParam("audio_url")
		}
		if err := netguard.CheckURL(req.URL); err != nil {
			return nil, gwerr.New(gwerr.Invalid, "%s", err.Error()).WithParam("audio_url")
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, netguard.ErrBlocked) {
				return nil, gwerr.New(gwerr.Invalid, "audio_url: a private or non-public address is refused").WithParam("audio_url")
			}
			return nil, gwerr.New(gwerr.Upstream, "the audio could not be downloaded")
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, gwerr.New(gwerr.Upstream, "the audio could not be downloaded (%d)", resp.StatusCode)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, gwerr.New(gwerr.Upstream, "the audio download broke off")
		}
		if int64(len(b)) > limit {
			return nil, gwerr.New(gwerr.TooLarge, "audio is larger than 8 MB").WithParam("audio_url")
		}
		return b, nil
	}
}

// DefaultAppActionPriceMicrocents is an app action's price when the config
// names none.
const DefaultAppActionPriceMicrocents = 1000

// toolSet builds the tools server's tools: advisory prices from the
// catalogue and the page reading and search prices, the connected apps of
// a.Apps.
func (a *App) toolSet(cat *catalog.Catalog) (*tools.Server, error) {
	fetchH := a.fetchHandler()
	guard := fetchH.Guard
	// Page reading and search are priced outside the catalogue's aliases.
	other := map[string]int64{"fetch": fetchH.Price.Microcents()}
	if searchH, err := a.searchHandler(cat); err == nil && searchH.Provider != nil {
		other["search"] = searchH.PerSearch.Microcents()
	}
	upgrade := strings.TrimSpace(caddy.NewReplacer().ReplaceAll(a.BillingURL, ""))
	if upgrade != "" {
		if err := httpURL(upgrade); err != nil {
			return nil, fmt.Errorf("billing_url: %w", err)
		}
	}
	s := &tools.Server{States: paidToolStates, UpgradeURL: upgrade, Fetch: fetchAudio(guard),
		Prices: func(alias string) (int64, bool) {
			if ab := cat.Abilities[alias]; ab != nil && ab.PriceMicrocents != nil {
				return *ab.PriceMicrocents, true
			}
			p, ok := other[alias]
			return p, ok
		}}
	appsList := expandList(a.Apps)
	if len(appsList) == 0 {
		return s, nil
	}
	price := a.AppActionPriceMicrocents
	if price <= 0 {
		price = DefaultAppActionPriceMicrocents
	}
	var list []tools.App
	for _, item := range appsList {
		name, url, ok := strings.Cut(item, "=")
		if !ok || name == "" || !strings.HasPrefix(url, "http") {
			return nil, fmt.Errorf("apps: %q is not name=url", item)
		}
		list = append(list, tools.App{Name: name, URL: url, PriceMicrocents: price})
	}
	s.Apps = &tools.Apps{List: list, Links: appLinks, MaxLinks: a.AppLinksPerAccount}
	return s, nil
}
