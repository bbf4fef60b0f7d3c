package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("gw", parseGlobal)
}

// parseGlobal reads the global `gw` option into the gw app:
//
//	gw {
//		store sqlite [<dir>]
//		database_url <postgres URL>
//		redis_url <redis URL>
//		redis_cache_url <redis URL>
//		bootstrap_key <secret>
//		alt_prefix <path>
//		decide_model <model id>
//		billing_url <url>               # upgrade_url of the tools' premium_locked and payment_required errors
//		provider <name> {
//			format openai|anthropic
//			base_url <url>
//			api_key <key>
//			responses
//			dial_timeout <duration>
//			header_timeout <duration>
//			idle_timeout <duration>
//		}
//		model <id> {
//			provider <name>
//			lane fast|standard|reasoning
//			capabilities <vision|tools|json>...
//			context_window <tokens>
//			price <input USD/M> <output USD/M> [<cached input USD/M>]
//		}
//		ability <gw-alias> {
//			provider <name>
//			model <provider model id>
//			display_name <text>
//			price_microcents <integer>
//			voice <id> [<name> [<gender> [<description> [<languages>...]]]]   # speech aliases
//			voices <id>...                  # gw-voice-speak-hd: the gw-voice-speak voices it takes
//			category <class>...             # image aliases: Standard, Plus, Pro, Ultra
//			previews                        # image aliases: the model streams partial images
//			image_price <quality> <size>=<USD>...   # image aliases: USD per image
//			token_price <text in USD/M> <image in USD/M> <image out USD/M>   # image aliases
//			preview_tokens <n>              # image aliases: output tokens per preview (default 100)
//		}
//		audio {
//			accurate_up_to <duration>
//			verbose_model <provider model id>
//			transcription_timeout <duration>
//			first_audio_timeout <duration>
//			gap_timeout <duration>
//		}
//		alias <name> <target>
//		beta <name> neutral|refused|priced <input percent> [<output percent>]
//		cache_ttl <duration>
//		second_opinion_concurrency <n>
//		money {
//			free_monthly_credit <USD>
//			ceiling <base USD> [<per month USD> [<spend percent> [<max USD>]]] | off
//		}
//		limits {
//			chat_requests_per_minute <n>
//			decide_requests_per_minute <n>
//			count_tokens_per_minute <n>
//			max_in_flight <n>
//			mcp_requests_per_minute <n>
//			mcp_max_in_flight <n>
//			min_body_rate <bytes per second>
//			body_grace <duration>
//		}
//		mcp_allowed_hosts <host[:port]>...
//	}
func parseGlobal(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "gw", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads the global gw option (see parseGlobal).
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "store":
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.Store.Backend = d.Val()
			if a.Store.Backend != DefaultStoreBackend {
				return d.Errf("store backend %q: unknown (want sqlite)", a.Store.Backend)
			}
			if d.NextArg() {
				a.Store.Dir = d.Val()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		case "database_url":
			if err := oneArg(d, &a.Store.DatabaseURL); err != nil {
				return err
			}
		case "redis_url":
			if err := oneArg(d, &a.RedisURL); err != nil {
				return err
			}
		case "redis_cache_url":
			if err := oneArg(d, &a.RedisCacheURL); err != nil {
				return err
			}
		case "bootstrap_key", "alt_prefix", "decide_model":
			opt := d.Val()
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			switch opt {
			case "bootstrap_key":
				a.BootstrapKey = v
			case "alt_prefix":
				a.AltPrefix = v
			case "decide_model":
				a.DecideModel = v
			}
		case "provider":
			p, err := parseProvider(d)
			if err != nil {
				return err
			}
			a.Providers = append(a.Providers, p)
		case "model":
			m, err := parseModel(d)
			if err != nil {
				return err
			}
			a.Models = append(a.Models, m)
		case "ability":
			ab, err := parseAbility(d)
			if err != nil {
				return err
			}
			a.Abilities = append(a.Abilities, ab)
		case "second_opinion_concurrency":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("second_opinion_concurrency: want a positive whole number, got %q", v)
			}
			a.SecondOpinionConcurrency = n
		case "cache_ttl":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 {
				return d.Errf("cache_ttl: want a duration, got %q", v)
			}
			a.CacheTTL = caddy.Duration(dur)
		case "money":
			if err := parseMoney(d, &a.Money); err != nil {
				return err
			}
		case "limits":
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "body_grace":
					var v string
					if err := oneArg(d, &v); err != nil {
						return err
					}
					dur, err := caddy.ParseDuration(v)
					if err != nil || dur <= 0 {
						return d.Errf("body_grace: want a duration, got %q", v)
					}
					a.Limits.BodyGrace = caddy.Duration(dur)
				case "chat_requests_per_minute", "decide_requests_per_minute", "count_tokens_per_minute", "max_in_flight",
					"mcp_requests_per_minute", "mcp_max_in_flight", "min_body_rate":
					opt := d.Val()
					n, err := wholeNumber(d)
					if err != nil {
						return err
					}
					switch opt {
					case "chat_requests_per_minute":
						a.Limits.ChatRequestsPerMinute = n
					case "decide_requests_per_minute":
						a.Limits.DecideRequestsPerMinute = n
					case "count_tokens_per_minute":
						a.Limits.CountTokensPerMinute = n
					case "mcp_requests_per_minute":
						a.Limits.MCPRequestsPerMinute = n
					case "mcp_max_in_flight":
						a.Limits.MCPMaxInFlight = int(n)
					case "min_body_rate":
						a.Limits.MinBodyRate = n
					default:
						a.Limits.MaxInFlight = int(n)
					}
				default:
					return d.Errf("unknown limits option %q", d.Val())
				}
			}
		case "search":
			sc := &SearchConfig{}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch opt := d.Val(); opt {
				case "provider", "model":
					var v string
					if err := oneArg(d, &v); err != nil {
						return err
					}
					if opt == "provider" {
						sc.Provider = v
					} else {
						sc.Model = v
					}
				case "price_per_search_microcents":
					n, err := wholeNumber(d)
					if err != nil {
						return err
					}
					sc.PricePerSearchMicrocents = n
				case "token_price":
					args := d.RemainingArgs()
					if len(args) != 2 {
						return d.Err("token_price: want <input USD/M> <output USD/M>")
					}
					in, err1 := pricing.ParseUSD(args[0])
					out, err2 := pricing.ParseUSD(args[1])
					if err1 != nil || err2 != nil || in < 0 || out < 0 {
						return d.Errf("token_price: %v", pricing.ErrBadAmount)
					}
					sc.InputPrice, sc.OutputPrice = &in, &out
				default:
					return d.Errf("unknown search option %q", opt)
				}
			}
			if sc.Provider == "" {
				return d.Err("search: provider is required")
			}
			a.Search = sc
		case "audio":
			ac, err := parseAudio(d)
			if err != nil {
				return err
			}
			a.Audio = ac
		case "images":
			ic := &ImagesConfig{}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				opt := d.Val()
				target := map[string]*caddy.Duration{"generate_timeout": &ic.GenerateTimeout, "edit_timeout": &ic.EditTimeout}[opt]
				if target == nil {
					return d.Errf("unknown images option %q", opt)
				}
				var v string
				if err := oneArg(d, &v); err != nil {
					return err
				}
				dur, err := caddy.ParseDuration(v)
				if err != nil || dur <= 0 {
					return d.Errf("%s: want a duration, got %q", opt, v)
				}
				*target = caddy.Duration(dur)
			}
			a.Images = ic
		case "fetch_timeout":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("fetch_timeout: want a duration, got %q", v)
			}
			a.FetchTimeout = caddy.Duration(dur)
		case "fetch_allow":
			if err := oneArg(d, &a.FetchAllow); err != nil {
				return err
			}
		case "fetch_price_microcents", "fetch_render_price_microcents":
			opt := d.Val()
			n, err := wholeNumber(d)
			if err != nil {
				return err
			}
			if opt == "fetch_price_microcents" {
				a.FetchPriceMicrocents = n
			} else {
				a.FetchRenderPriceMicrocents = n
			}
		case "billing_url":
			if err := oneArg(d, &a.BillingURL); err != nil {
				return err
			}
		case "apps":
			if err := oneArg(d, &a.Apps); err != nil {
				return err
			}
		case "app_action_price_microcents":
			n, err := wholeNumber(d)
			if err != nil {
				return err
			}
			a.AppActionPriceMicrocents = n
		case "mcp_allowed_hosts":
			a.MCPAllowedHosts = append(a.MCPAllowedHosts, d.RemainingArgs()...)
			if len(a.MCPAllowedHosts) == 0 {
				return d.ArgErr()
			}
		case "beta":
			if err := parseBeta(d, &a.Betas); err != nil {
				return err
			}
		case "alias":
			var al catalog.Alias
			if !d.Args(&al.Name, &al.Target) || d.NextArg() {
				return d.ArgErr()
			}
			a.Aliases = append(a.Aliases, al)
		default:
			return d.Errf("unknown gw option %q", d.Val())
		}
	}
	return nil
}

// wholeNumber reads the option's one argument as a whole number (0 or
// more), naming the option in its error.
func wholeNumber(d *caddyfile.Dispenser) (int64, error) {
	opt := d.Val()
	var v string
	if err := oneArg(d, &v); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, d.Errf("%s: want a whole number, got %q", opt, v)
	}
	return n, nil
}

func oneArg(d *caddyfile.Dispenser, v *string) error {
	if !d.Args(v) || d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func parseProvider(d *caddyfile.Dispenser) (catalog.Provider, error) {
	var p catalog.Provider
	if err := oneArgOpenBlock(d, &p.Name); err != nil {
		return p, err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "api_key":
			keys := d.RemainingArgs()
			if len(keys) == 0 {
				return p, d.ArgErr()
			}
			p.APIKey, p.APIKeyFallbacks = keys[0], keys[1:]
		case "format", "base_url":
			var v string
			if err := oneArg(d, &v); err != nil {
				return p, err
			}
			switch opt {
			case "format":
				p.Format = v
			case "base_url":
				p.BaseURL = v
			}
		case "responses":
			if d.NextArg() {
				return p, d.ArgErr()
			}
			p.Responses = true
		case "dial_timeout", "header_timeout", "idle_timeout":
			var v string
			if err := oneArg(d, &v); err != nil {
				return p, err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil {
				return p, d.Errf("%s: %v", opt, err)
			}
			switch opt {
			case "dial_timeout":
				p.DialTimeout = caddy.Duration(dur)
			case "header_timeout":
				p.HeaderTimeout = caddy.Duration(dur)
			case "idle_timeout":
				p.IdleTimeout = caddy.Duration(dur)
			}
		default:
			return p, d.Errf("unknown provider option %q", opt)
		}
	}
	return p, nil
}

func parseModel(d *caddyfile.Dispenser) (catalog.Model, error) {
	var m catalog.Model
	if err := oneArgOpenBlock(d, &m.ID); err != nil {
		return m, err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "provider":
			if err := oneArg(d, &m.Provider); err != nil {
				return m, err
			}
		case "lane":
			if err := oneArg(d, &m.Lane); err != nil {
				return m, err
			}
		case "capabilities":
			m.Capabilities = d.RemainingArgs()
			if len(m.Capabilities) == 0 {
				return m, d.ArgErr()
			}
		case "context_window":
			var v string
			if err := oneArg(d, &v); err != nil {
				return m, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return m, d.Errf("context_window: want a positive number of tokens, got %q", v)
			}
			m.ContextWindow = n
		case "price":
			args := d.RemainingArgs()
			if len(args) < 2 || len(args) > 4 {
				return m, d.Err("price: want <input USD/M> <output USD/M> [<cached input USD/M> [<cache write USD/M>]]")
			}
			dst := []*pricing.Money{&m.InputPrice, &m.OutputPrice, &m.CachedPrice, &m.CacheWritePrice}
			for i, s := range args {
				v, err := pricing.ParseUSD(s)
				if err != nil || v < 0 {
					return m, d.Errf("price: %q: %v", s, pricing.ErrBadAmount)
				}
				*dst[i] = v
			}
		default:
			return m, d.Errf("unknown model option %q", opt)
		}
	}
	return m, nil
}

func parseAbility(d *caddyfile.Dispenser) (catalog.Ability, error) {
	var a catalog.Ability
	if err := oneArgOpenBlock(d, &a.Alias); err != nil {
		return a, err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "provider":
			if err := oneArg(d, &a.Provider); err != nil {
				return a, err
			}
		case "model":
			if err := oneArg(d, &a.Model); err != nil {
				return a, err
			}
		case "display_name":
			if err := oneArg(d, &a.DisplayName); err != nil {
				return a, err
			}
		case "price_microcents":
			n, err := wholeNumber(d)
			if err != nil {
				return a, err
			}
			a.PriceMicrocents = &n
		case "voice":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return a, d.Err("voice: want <id> [<name> [<gender> [<description> [<languages>...]]]]")
			}
			v := catalog.Voice{ID: args[0]}
			for i, f := range []*string{&v.Name, &v.Gender, &v.Description} {
				if len(args) > i+1 {
					*f = args[i+1]
				}
			}
			if len(args) > 4 {
				v.Languages = args[4:]
			}
			a.Voices = append(a.Voices, v)
		case "voices":
			ids := d.RemainingArgs()
			if len(ids) == 0 {
				return a, d.ArgErr()
			}
			a.VoiceSubset = append(a.VoiceSubset, ids...)
		case "category":
			cats := d.RemainingArgs()
			if len(cats) == 0 {
				return a, d.ArgErr()
			}
			a.Categories = append(a.Categories, cats...)
		case "previews":
			if d.NextArg() {
				return a, d.ArgErr()
			}
			a.Previews = true
		case "image_price":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return a, d.Err("image_price: want <quality> <size>=<USD>...")
			}
			for _, pair := range args[1:] {
				size, price, err := parseSizePrice(pair)
				if err != nil {
					return a, d.Errf("image_price %s: %v", args[0], err)
				}
				a.ImagePrices = append(a.ImagePrices, catalog.ImagePrice{Quality: args[0], Size: size, Price: price})
			}
		case "token_price":
			args := d.RemainingArgs()
			if len(args) != 3 {
				return a, d.Err("token_price: want <text input USD/M> <image input USD/M> <image output USD/M>")
			}
			tp := &catalog.ImageTokenPrices{}
			for i, dst := range []*pricing.Money{&tp.TextInput, &tp.ImageInput, &tp.ImageOutput} {
				v, err := pricing.ParseUSD(args[i])
				if err != nil || v < 0 {
					return a, d.Errf("token_price: %q: %v", args[i], pricing.ErrBadAmount)
				}
				*dst = v
			}
			a.TokenPrices = tp
		case "preview_tokens":
			n, err := wholeNumber(d)
			if err != nil {
				return a, err
			}
			a.PreviewTokens = n
		default:
			return a, d.Errf("unknown ability option %q", opt)
		}
	}
	return a, nil
}

// parseSizePrice reads one <size>=<USD> of an image_price line.
func parseSizePrice(pair string) (string, pricing.Money, error) {
	size, amount, ok := strings.Cut(pair, "=")
	if !ok || size == "" {
		return "", 0, fmt.Errorf("%q: want <size>=<USD>, such as 1024x1024=0.011", pair)
	}
	price, err := pricing.ParseUSD(amount)
	if err != nil || price <= 0 {
		return "", 0, fmt.Errorf("%q: the price must be a positive amount of US dollars", pair)
	}
	return size, price, nil
}

func parseMoney(d *caddyfile.Dispenser, m *MoneyConfig) error {
	usd := func(opt, s string) (pricing.Money, error) {
		v, err := pricing.ParseUSD(s)
		if err != nil || v < 0 {
			return 0, d.Errf("%s: %q: %v", opt, s, pricing.ErrBadAmount)
		}
		return v, nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "free_monthly_credit":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			amt, err := usd(opt, v)
			if err != nil {
				return err
			}
			m.FreeMonthlyCredit = amt
		case "ceiling":
			args := d.RemainingArgs()
			if len(args) == 0 || len(args) > 4 {
				return d.Err("ceiling: want <base USD> [<per month USD> [<spend percent> [<max USD>]]] or off")
			}
			c := &CeilingConfig{}
			if args[0] != "off" {
				for i, s := range args {
					var err error
					switch i {
					case 0:
						c.Base, err = usd(opt, s)
					case 1:
						c.PerMonth, err = usd(opt, s)
					case 2:
						c.SpendPercent, err = strconv.ParseInt(s, 10, 64)
						if err != nil || c.SpendPercent < 0 {
							err = d.Errf("ceiling: spend percent %q: want a whole number", s)
						}
					case 3:
						c.Max, err = usd(opt, s)
					}
					if err != nil {
						return err
					}
				}
			} else if len(args) > 1 {
				return d.ArgErr()
			}
			m.Ceiling = c
		default:
			return d.Errf("unknown money option %q", opt)
		}
	}
	return nil
}

// parseAudio reads the audio block:
//
//	audio {
//		accurate_up_to <duration>
//		verbose_model <provider model id>
//		transcription_timeout <duration>
//		first_audio_timeout <duration>
//		gap_timeout <duration>
//	}
func parseAudio(d *caddyfile.Dispenser) (*AudioConfig, error) {
	ac := &AudioConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "verbose_model":
			if err := oneArg(d, &ac.VerboseModel); err != nil {
				return nil, err
			}
		case "accurate_up_to", "transcription_timeout", "first_audio_timeout", "gap_timeout":
			var v string
			if err := oneArg(d, &v); err != nil {
				return nil, err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return nil, d.Errf("%s: want a duration, got %q", opt, v)
			}
			*map[string]*caddy.Duration{"accurate_up_to": &ac.AccurateUpTo, "transcription_timeout": &ac.TranscriptionTimeout,
				"first_audio_timeout": &ac.FirstAudioTimeout, "gap_timeout": &ac.GapTimeout}[opt] = caddy.Duration(dur)
		default:
			return nil, d.Errf("unknown audio option %q", opt)
		}
	}
	return ac, nil
}

// oneArgOpenBlock reads the single argument before a block.
func oneArgOpenBlock(d *caddyfile.Dispenser, v *string) error {
	if !d.Args(v) {
		return d.ArgErr()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*App)(nil)
