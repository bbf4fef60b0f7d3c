package caddymodule

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("gw", parseGlobal)
}

// parseGlobal reads the global `gw` option into the gw app. A config has
// one gw app, so a second `gw` block is refused. Every amount is in US
// dollars (USD/M: per million tokens); a plan price (a flat price of one
// call, page, search or action) must be a whole number of millionths of a
// dollar, the unit its JSON field holds. Each option once unless marked
// repeatable:
//
//	gw {
//		store sqlite [<dir>]
//		durability sync|interval <duration>   # interval: more than 0, at most 1s
//		database_url <postgres URL>
//		redis_url <redis URL>
//		redis_cache_url <redis URL>
//		bootstrap_key <secret>
//		alt_prefix <path>
//		decide_model <model id>
//		billing_url <url>
//		cache_ttl <duration>
//		second_opinion_concurrency <n>
//		fetch_allow <host[:port]>...          # an argument may hold several, comma-separated
//		fetch_timeout <duration>
//		fetch_price <USD>
//		fetch_render_price <USD>
//		apps <name>=<url>...                  # an argument may hold several, comma-separated
//		app_action_price <USD>
//		app_links_per_account <n>
//		mcp_allowed_hosts <host[:port]>...
//		mcp_server <name> {                   # repeatable: an upstream server of the MCP gateway
//			url <url>
//			auth none | bearer <token> | oauth_client_credentials <token_url> <client_id> <client_secret> [<scope>]
//			allow <glob>...                   # tools offered (default: all)
//			deny <glob>...                    # tools never offered; wins over allow
//			price <USD>                       # per successful call (default 0)
//			tool_price <tool> <USD>           # repeatable
//			timeout <duration>                # per call (default 60s)
//		}
//		mcp_servers <name>=<url>...           # auth none, price mcp_price; an argument may hold several, comma-separated
//		mcp_price <USD>                       # default 0.001
//		provider <name> {                     # repeatable
//			format openai|anthropic
//			base_url <url>[,<url>...]
//			api_key <key> [<fallback key>...]
//			auth bearer|api-key|none
//			responses
//			project <id>                      # vertex
//			location <location>               # vertex (us-east5)
//			credentials_file <path>           # vertex: a service-account key file
//			region <region>                   # bedrock (us-east-1)
//			access_key_id <id>                # bedrock
//			secret_access_key <secret>        # bedrock
//			session_token <token>             # bedrock, optional
//			dial_timeout <duration>
//			header_timeout <duration>
//			idle_timeout <duration>
//			cooldown <duration>
//			deployment <url> {                # repeatable; in place of base_url
//				api_key <key>
//				weight <n>
//				requests_per_minute <n>
//				tokens_per_minute <n>
//			}
//		}
//		model <id> {                          # repeatable
//			provider <name>
//			lane fast|standard|reasoning
//			capabilities <vision|tools|json>...
//			context_window <tokens>
//			price <input USD/M> <output USD/M> [<cached input USD/M> [<cache write USD/M>]]
//		}
//		embedding <id> {                      # repeatable
//			provider <name>
//			price <input USD/M>
//		}
//		embed_model <embedding id>
//		ability <gw-alias> {                  # repeatable
//			provider <name>
//			model <provider model id>
//			display_name <text>
//			price <USD>
//			voice <id> [<name> [<gender> [<description> [<languages>...]]]]   # repeatable
//			voices <id>...
//			category <class>...
//			previews
//			image_price <quality> <size>=<USD>...   # repeatable
//			token_price <text in USD/M> <image in USD/M> <image out USD/M>
//			preview_tokens <n>
//		}
//		alias <name> <target>                 # repeatable
//		beta <name> neutral|refused|priced <input percent> [<output percent>]   # repeatable, each name once
//		search {
//			provider <name>
//			model <provider model id>
//			price_per_search <USD>
//			token_price <input USD/M> <output USD/M>
//		}
//		audio {
//			accurate_up_to <duration>
//			verbose_model <provider model id>
//			transcription_timeout <duration>
//			first_audio_timeout <duration>
//			gap_timeout <duration>
//		}
//		images {
//			generate_timeout <duration>
//			edit_timeout <duration>
//		}
//		money {
//			free_monthly_credit <USD>
//			ceiling <base USD> [<per month USD> [<spend percent> [<max USD>]]] | off
//		}
//		limits {
//			chat_requests_per_minute <n>
//			decide_requests_per_minute <n>
//			count_tokens_per_minute <n>
//			count_tokens_bytes_per_minute <size>
//			max_in_flight <n>
//			mcp_requests_per_minute <n>
//			mcp_max_in_flight <n>
//			min_body_rate <bytes per second>
//			body_grace <duration>
//		}
//		webhooks {                            # how alert deliveries are sent
//			poll <duration>
//			timeout <duration>
//			retry_min <duration>
//			retry_max <duration>
//		}
//		runtime {                             # tunes the whole process; off unless given
//			gc_floor <size>
//			min_procs <n>
//		}
//	}
func parseGlobal(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		d.Next()
		return nil, d.Err("gw already specified: a config has one global gw block")
	}
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
	return parseBlock(d, "gw", globalOptions(a))
}

// option reads one option of a block, the dispenser on its name.
type option struct {
	read func(d *caddyfile.Dispenser) error
	// repeat says the option may be given more than once (each line adds
	// one named thing).
	repeat bool
}

// options is a block's table: its option names and their readers.
type options map[string]option

// parseBlock reads the block at the dispenser's nesting with table,
// refusing an unknown option and an option given twice that is not
// repeatable.
func parseBlock(d *caddyfile.Dispenser, block string, table options) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		opt, ok := table[name]
		if !ok {
			return d.Errf("unknown %s option %q", block, name)
		}
		if seen[name] && !opt.repeat {
			return d.Errf("%s already specified", name)
		}
		seen[name] = true
		if err := opt.read(d); err != nil {
			return err
		}
	}
	return nil
}

// blockOption reads a nested block of table into place, then runs done.
func blockOption(block string, table options, done func(d *caddyfile.Dispenser) error) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		if d.NextArg() {
			return d.ArgErr()
		}
		if err := parseBlock(d, block, table); err != nil {
			return err
		}
		if done != nil {
			return done(d)
		}
		return nil
	}}
}

// textOption reads the option's one argument into dst.
func textOption(dst *string) option {
	return option{read: func(d *caddyfile.Dispenser) error { return oneArg(d, dst) }}
}

// flagOption takes no argument and sets dst.
func flagOption(dst *bool) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		if d.NextArg() {
			return d.ArgErr()
		}
		*dst = true
		return nil
	}}
}

// listOption reads one or more arguments into dst.
func listOption(dst *[]string) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		*dst = d.RemainingArgs()
		if len(*dst) == 0 {
			return d.ArgErr()
		}
		return nil
	}}
}

// commaListOption reads one or more arguments into dst, each split at its
// commas. A placeholder stays one element and is split once expanded (see
// expandList).
func commaListOption(dst *[]string) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		*dst = splitCommas(args)
		return nil
	}}
}

// splitCommas splits each item at its commas, dropping blanks.
func splitCommas(items []string) []string {
	var out []string
	for _, item := range items {
		for _, s := range strings.Split(item, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// expandList expands the placeholders of a list field at load and splits
// each value at its commas, so one element such as {env.GW_APPS} can
// hold several.
func expandList(items []string) []string {
	r := caddy.NewReplacer()
	expanded := make([]string, len(items))
	for i, item := range items {
		expanded[i] = r.ReplaceAll(item, "")
	}
	return splitCommas(expanded)
}

// valueOption reads the option's one argument with parse into dst; want
// says what a good argument is when parse refuses it.
func valueOption[T any](dst *T, want string, parse func(string) (T, bool)) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		opt := d.Val()
		var v string
		if err := oneArg(d, &v); err != nil {
			return err
		}
		x, ok := parse(v)
		if !ok {
			return d.Errf("%s: want %s, got %q", opt, want, v)
		}
		*dst = x
		return nil
	}}
}

// durationOption reads the option's one argument as a duration greater
// than zero: the one way the Caddyfile reads a duration.
func durationOption(dst *caddy.Duration) option {
	return valueOption(dst, "a duration greater than zero, such as 30s", func(s string) (caddy.Duration, bool) {
		dur, err := caddy.ParseDuration(s)
		return caddy.Duration(dur), err == nil && dur > 0
	})
}

// wholeOption reads the option's one argument as a whole number of at
// least least (0 or 1).
func wholeOption[T int | int64](dst *T, least int64) option {
	want := "a whole number"
	if least > 0 {
		want = "a positive whole number"
	}
	return valueOption(dst, want, func(s string) (T, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return T(n), err == nil && n >= least && int64(T(n)) == n
	})
}

// sizeOption reads the option's one argument as a size greater than zero,
// in bytes or with a unit (64MiB, 512KB), into dst in bytes.
func sizeOption(dst *int64) option {
	return valueOption(dst, "a size greater than zero, such as 64MiB or 67108864", parseSize)
}

// parseSize reads a size in bytes or with a unit (humanize.ParseBytes: KB
// is 1000 bytes, KiB 1024); ok is false for none, zero, or one beyond int64.
func parseSize(s string) (int64, bool) {
	n, err := humanize.ParseBytes(s)
	return int64(n), err == nil && n > 0 && n <= math.MaxInt64
}

// planPriceOption reads the option's one argument, an amount of US
// dollars that is a whole number of millionths of a dollar, into dst in
// millionths of a dollar.
func planPriceOption(dst *int64) option {
	return valueOption(dst, "US dollars in whole millionths (such as 0.0025)", func(s string) (int64, bool) {
		m, err := pricing.ParseUSD(s)
		return m.Microcents(), err == nil && m >= 0 && m%pricing.NanoPerMicro == 0
	})
}

// usdOption reads the option's arguments as amounts of US dollars (0 or
// more), from the first of dst on; it wants at least least of them.
func usdOption(least int, usage string, dst ...*pricing.Money) option {
	return option{read: func(d *caddyfile.Dispenser) error {
		opt, args := d.Val(), d.RemainingArgs()
		if len(args) < least || len(args) > len(dst) {
			return d.Errf("%s: want %s", opt, usage)
		}
		for i, s := range args {
			v, err := pricing.ParseUSD(s)
			if err != nil || v < 0 {
				return d.Errf("%s: %q: %v", opt, s, pricing.ErrBadAmount)
			}
			*dst[i] = v
		}
		return nil
	}}
}

// oneArg reads the option's one argument into v.
func oneArg(d *caddyfile.Dispenser, v *string) error {
	if !d.Args(v) || d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// globalOptions is the table of the gw block, reading into a.
func globalOptions(a *App) options {
	return options{
		"store": {read: func(d *caddyfile.Dispenser) error {
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
			return nil
		}},
		"durability":      {read: func(d *caddyfile.Dispenser) error { return parseDurability(d, &a.Durability) }},
		"database_url":    textOption(&a.Store.DatabaseURL),
		"redis_url":       textOption(&a.RedisURL),
		"redis_cache_url": textOption(&a.RedisCacheURL),
		"bootstrap_key":   textOption(&a.BootstrapKey),
		"alt_prefix":      textOption(&a.AltPrefix),
		"alias": {repeat: true, read: func(d *caddyfile.Dispenser) error {
			var al catalog.Alias
			if !d.Args(&al.Name, &al.Target) || d.NextArg() {
				return d.ArgErr()
			}
			a.Aliases = append(a.Aliases, al)
			return nil
		}},
		"decide_model":               textOption(&a.DecideModel),
		"billing_url":                textOption(&a.BillingURL),
		"cache_ttl":                  durationOption(&a.CacheTTL),
		"second_opinion_concurrency": wholeOption(&a.SecondOpinionConcurrency, 1),
		"search": func() option {
			sc := &SearchConfig{}
			return blockOption("search", searchOptions(sc), func(d *caddyfile.Dispenser) error {
				if sc.Provider == "" {
					return d.Err("search: provider is required")
				}
				a.Search = sc
				return nil
			})
		}(),
		"fetch_allow":        commaListOption(&a.FetchAllow),
		"fetch_timeout":      durationOption(&a.FetchTimeout),
		"fetch_price":        planPriceOption(&a.FetchPriceMicrocents),
		"fetch_render_price": planPriceOption(&a.FetchRenderPriceMicrocents),
		"audio": func() option {
			ac := &AudioConfig{}
			return blockOption("audio", audioOptions(ac), func(*caddyfile.Dispenser) error { a.Audio = ac; return nil })
		}(),
		"apps":                  commaListOption(&a.Apps),
		"app_action_price":      planPriceOption(&a.AppActionPriceMicrocents),
		"app_links_per_account": wholeOption(&a.AppLinksPerAccount, 1),
		"mcp_allowed_hosts":     listOption(&a.MCPAllowedHosts),
		"mcp_server":            namedOption(&a.MCPServers, "mcp_server", func(s *MCPServerConfig) *string { return &s.Name }, mcpServerOptions),
		"mcp_servers":           commaListOption(&a.MCPServerURLs),
		"mcp_price": {read: func(d *caddyfile.Dispenser) error {
			a.MCPPrice = new(pricing.Money)
			return usdOption(1, "one amount of US dollars", a.MCPPrice).read(d)
		}},
		"beta": {repeat: true, read: func(d *caddyfile.Dispenser) error { return parseBeta(d, &a.Betas) }},
		"images": func() option {
			ic := &ImagesConfig{}
			return blockOption("images", imagesOptions(ic), func(*caddyfile.Dispenser) error { a.Images = ic; return nil })
		}(),
		"provider":    namedOption(&a.Providers, "provider", func(p *ProviderConfig) *string { return &p.Name }, providerOptions),
		"model":       namedOption(&a.Models, "model", func(m *catalog.Model) *string { return &m.ID }, modelOptions),
		"embedding":   namedOption(&a.Embeddings, "embedding", func(m *catalog.EmbeddingModel) *string { return &m.ID }, embeddingOptions),
		"embed_model": textOption(&a.EmbedModel),
		"ability":     namedOption(&a.Abilities, "ability", func(ab *catalog.Ability) *string { return &ab.Alias }, abilityOptions),
		"money":       blockOption("money", moneyOptions(&a.Money), nil),
		"limits":      blockOption("limits", limitsOptions(&a.Limits), nil),
		"webhooks":    blockOption("webhooks", webhooksOptions(&a.Webhooks), nil),
		"runtime": func() option {
			rc := &RuntimeConfig{}
			return blockOption("runtime", runtimeOptions(rc), func(*caddyfile.Dispenser) error { a.Runtime = rc; return nil })
		}(),
	}
}

// parseDurability reads `durability sync` or `durability interval
// <duration>` into dst.
func parseDurability(d *caddyfile.Dispenser, dst *DurabilityConfig) error {
	args := d.RemainingArgs()
	c := DurabilityConfig{}
	switch {
	case len(args) == 1 && args[0] == DurabilitySync:
		c.Mode = DurabilitySync
	case len(args) == 2 && args[0] == DurabilityInterval:
		c.Mode = DurabilityInterval
		iv, err := caddy.ParseDuration(args[1])
		if err != nil {
			return d.Errf("durability interval: want a duration greater than 0 and at most %s, got %q", cached.MaxSyncInterval, args[1])
		}
		c.Interval = caddy.Duration(iv)
	default:
		return d.Errf("durability: want %s or %s <duration>, got %q", DurabilitySync, DurabilityInterval, strings.Join(args, " "))
	}
	if _, err := c.syncInterval(); err != nil {
		return d.Err(err.Error())
	}
	*dst = c
	return nil
}

// webhooksOptions is the webhooks block's table.
func webhooksOptions(w *WebhooksConfig) options {
	return options{
		"poll":      durationOption(&w.Poll),
		"timeout":   durationOption(&w.Timeout),
		"retry_min": durationOption(&w.RetryMin),
		"retry_max": durationOption(&w.RetryMax),
	}
}

// runtimeOptions is the runtime block's table.
func runtimeOptions(rc *RuntimeConfig) options {
	return options{
		"gc_floor":  sizeOption(&rc.GCFloor),
		"min_procs": wholeOption(&rc.MinProcs, 1),
	}
}

// namedOption reads a repeatable `<option> <name> { ... }`: one thing of
// list a line, its name at name, its block read with the table of table.
func namedOption[T any](list *[]T, block string, name func(*T) *string, table func(*T) options) option {
	return option{repeat: true, read: func(d *caddyfile.Dispenser) error {
		var v T
		if err := oneArg(d, name(&v)); err != nil {
			return err
		}
		if err := parseBlock(d, block, table(&v)); err != nil {
			return err
		}
		*list = append(*list, v)
		return nil
	}}
}

// providerOptions is the table of a provider block.
func providerOptions(p *ProviderConfig) options {
	return options{
		"format":   textOption(&p.Format),
		"base_url": textOption(&p.BaseURL),
		"auth": {read: func(d *caddyfile.Dispenser) error {
			if err := oneArg(d, &p.Auth); err != nil {
				return err
			}
			if !slices.Contains(catalog.Auths, p.Auth) {
				return d.Errf("auth: want one of %s, got %q", strings.Join(catalog.Auths, ", "), p.Auth)
			}
			return nil
		}},
		"api_key": {read: func(d *caddyfile.Dispenser) error {
			keys := d.RemainingArgs()
			if len(keys) == 0 {
				return d.ArgErr()
			}
			p.APIKey, p.APIKeyFallbacks = keys[0], keys[1:]
			return nil
		}},
		"responses":         flagOption(&p.Responses),
		"project":           textOption(&p.Project),
		"location":          textOption(&p.Location),
		"credentials_file":  textOption(&p.CredentialsFile),
		"region":            textOption(&p.Region),
		"access_key_id":     textOption(&p.AccessKeyID),
		"secret_access_key": textOption(&p.SecretAccessKey),
		"session_token":     textOption(&p.SessionToken),
		"dial_timeout":      durationOption(&p.DialTimeout),
		"header_timeout":    durationOption(&p.HeaderTimeout),
		"idle_timeout":      durationOption(&p.IdleTimeout),
		"cooldown":          durationOption(&p.Cooldown),
		"deployment": namedOption(&p.Deployments, "deployment", func(d *catalog.Deployment) *string { return &d.BaseURL },
			deploymentOptions),
	}
}

// modelOptions is the table of a model block. A model is unpriced until
// its price line.
func modelOptions(m *catalog.Model) options {
	m.Unpriced = true
	return options{
		"provider":       textOption(&m.Provider),
		"lane":           textOption(&m.Lane),
		"capabilities":   listOption(&m.Capabilities),
		"context_window": wholeOption(&m.ContextWindow, 1),
		"price": priced(&m.Unpriced, usdOption(2, "<input USD/M> <output USD/M> [<cached input USD/M> [<cache write USD/M>]]",
			&m.InputPrice, &m.OutputPrice, &m.CachedPrice, &m.CacheWritePrice)),
	}
}

// priced is o, which also clears *unpriced.
func priced(unpriced *bool, o option) option {
	read := o.read
	o.read = func(d *caddyfile.Dispenser) error {
		*unpriced = false
		return read(d)
	}
	return o
}

// embeddingOptions is the table of an embedding block.
func embeddingOptions(m *catalog.EmbeddingModel) options {
	return options{
		"provider": textOption(&m.Provider),
		"price": {read: func(d *caddyfile.Dispenser) error {
			m.InputPrice = new(pricing.Money)
			return usdOption(1, "<input USD/M>", m.InputPrice).read(d)
		}},
	}
}

// abilityOptions is the table of an ability block.
func abilityOptions(a *catalog.Ability) options {
	return options{
		"provider":     textOption(&a.Provider),
		"model":        textOption(&a.Model),
		"display_name": textOption(&a.DisplayName),
		"price": {read: func(d *caddyfile.Dispenser) error {
			a.PriceMicrocents = new(int64)
			return planPriceOption(a.PriceMicrocents).read(d)
		}},
		"voice": {repeat: true, read: func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Err("voice: want <id> [<name> [<gender> [<description> [<languages>...]]]]")
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
			return nil
		}},
		"voices":   listOption(&a.VoiceSubset),
		"category": listOption(&a.Categories),
		"previews": flagOption(&a.Previews),
		"image_price": {repeat: true, read: func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Err("image_price: want <quality> <size>=<USD>...")
			}
			for _, pair := range args[1:] {
				size, price, err := parseSizePrice(pair)
				if err != nil {
					return d.Errf("image_price %s: %v", args[0], err)
				}
				a.ImagePrices = append(a.ImagePrices, catalog.ImagePrice{Quality: args[0], Size: size, Price: price})
			}
			return nil
		}},
		"token_price": func() option {
			tp := &catalog.ImageTokenPrices{}
			read := usdOption(3, "<text input USD/M> <image input USD/M> <image output USD/M>", &tp.TextInput, &tp.ImageInput, &tp.ImageOutput).read
			return option{read: func(d *caddyfile.Dispenser) error {
				a.TokenPrices = tp
				return read(d)
			}}
		}(),
		"preview_tokens": wholeOption(&a.PreviewTokens, 0),
	}
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

// deploymentOptions is the table of a provider's deployment block.
func deploymentOptions(d *catalog.Deployment) options {
	return options{
		"api_key":             textOption(&d.APIKey),
		"weight":              valueOption(&d.Weight, fmt.Sprintf("a whole number from 1 to %d", catalog.MaxWeight), weight),
		"requests_per_minute": wholeOption(&d.RequestsPerMinute, 1),
		"tokens_per_minute":   wholeOption(&d.TokensPerMinute, 1),
	}
}

// weight reads a deployment's weight.
func weight(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= catalog.MaxWeight
}

// searchOptions is the table of the search block.
func searchOptions(sc *SearchConfig) options {
	in, out := new(pricing.Money), new(pricing.Money)
	tokens := usdOption(2, "<input USD/M> <output USD/M>", in, out).read
	return options{
		"provider":         textOption(&sc.Provider),
		"model":            textOption(&sc.Model),
		"price_per_search": planPriceOption(&sc.PricePerSearchMicrocents),
		"token_price": {read: func(d *caddyfile.Dispenser) error {
			sc.InputPrice, sc.OutputPrice = in, out
			return tokens(d)
		}},
	}
}

// audioOptions is the table of the audio block.
func audioOptions(ac *AudioConfig) options {
	return options{
		"accurate_up_to":        durationOption(&ac.AccurateUpTo),
		"verbose_model":         textOption(&ac.VerboseModel),
		"transcription_timeout": durationOption(&ac.TranscriptionTimeout),
		"first_audio_timeout":   durationOption(&ac.FirstAudioTimeout),
		"gap_timeout":           durationOption(&ac.GapTimeout),
	}
}

// imagesOptions is the table of the images block.
func imagesOptions(ic *ImagesConfig) options {
	return options{
		"generate_timeout": durationOption(&ic.GenerateTimeout),
		"edit_timeout":     durationOption(&ic.EditTimeout),
	}
}

// moneyOptions is the table of the money block.
func moneyOptions(m *MoneyConfig) options {
	return options{
		"free_monthly_credit": usdOption(1, "<USD>", &m.FreeMonthlyCredit),
		"ceiling": {read: func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) == 0 || len(args) > 4 {
				return d.Err("ceiling: want <base USD> [<per month USD> [<spend percent> [<max USD>]]] or off")
			}
			c := &CeilingConfig{}
			m.Ceiling = c
			if args[0] == "off" {
				if len(args) > 1 {
					return d.ArgErr()
				}
				return nil
			}
			for i, s := range args {
				if i == 2 {
					n, err := strconv.ParseInt(s, 10, 64)
					if err != nil || n < 0 {
						return d.Errf("ceiling: spend percent %q: want a whole number", s)
					}
					c.SpendPercent = n
					continue
				}
				v, err := pricing.ParseUSD(s)
				if err != nil || v < 0 {
					return d.Errf("ceiling: %q: %v", s, pricing.ErrBadAmount)
				}
				*[]*pricing.Money{&c.Base, &c.PerMonth, nil, &c.Max}[i] = v
			}
			return nil
		}},
	}
}

// limitsOptions is the table of the limits block.
func limitsOptions(l *LimitsConfig) options {
	return options{
		"chat_requests_per_minute":      wholeOption(&l.ChatRequestsPerMinute, 0),
		"decide_requests_per_minute":    wholeOption(&l.DecideRequestsPerMinute, 0),
		"count_tokens_per_minute":       wholeOption(&l.CountTokensPerMinute, 0),
		"count_tokens_bytes_per_minute": sizeOption(&l.CountTokensBytesPerMinute),
		"max_in_flight":                 wholeOption(&l.MaxInFlight, 0),
		"mcp_requests_per_minute":       wholeOption(&l.MCPRequestsPerMinute, 0),
		"mcp_max_in_flight":             wholeOption(&l.MCPMaxInFlight, 0),
		"min_body_rate":                 wholeOption(&l.MinBodyRate, 0),
		"body_grace":                    durationOption(&l.BodyGrace),
	}
}

// Interface guard
var _ caddyfile.Unmarshaler = (*App)(nil)
