// Package catalog holds the gateway's providers, backing models and aliases,
// and answers which ids a key may see and use.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Wire formats of providers.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	// FormatGemini is Google's Gemini API (generateContent), read with an
	// x-goog-api-key.
	FormatGemini = "gemini"
	// FormatVertex is Google Cloud's Vertex AI: Gemini models by
	// generateContent and Anthropic models by rawPredict, with an OAuth 2
	// access token made from a service-account key file.
	FormatVertex = "vertex"
	// FormatBedrock is Amazon Bedrock Runtime's Converse API, signed with
	// AWS Signature Version 4.
	FormatBedrock = "bedrock"
)

// Formats are the values Provider.Format may take.
var Formats = []string{FormatOpenAI, FormatAnthropic, FormatGemini, FormatVertex, FormatBedrock}

// Default endpoints and places of the cloud formats: a provider that
// names no base URL gets its format's, with its location or region in it.
const (
	DefaultGeminiBaseURL  = "https://generativelanguage.googleapis.com"
	DefaultVertexLocation = "us-east5"
	DefaultBedrockRegion  = "us-east-1"
	vertexBaseURL         = "https://%s-aiplatform.googleapis.com"
	bedrockBaseURL        = "https://bedrock-runtime.%s.amazonaws.com"
)

// Lanes of chat models.
const (
	LaneFast      = "fast"
	LaneStandard  = "standard"
	LaneReasoning = "reasoning"
)

// Lanes in order of strength.
var Lanes = []string{LaneFast, LaneStandard, LaneReasoning}

// Capabilities of the model rows of GET /v1/models.
const (
	CapChat   = "chat"
	CapImage  = "image"
	CapAudio  = "audio"
	CapSpeech = "speech"
	// CapEmbedding is the capability of the embedding model rows.
	CapEmbedding = "embedding"
)

// Entitlements of model and voice rows.
const (
	EntitlementPaidCleared   = "paid_cleared"
	EntitlementPremiumLocked = "premium_locked"
	EntitlementOpen          = "open"
)

// The chat aliases and prefixes a client may name as model.
const (
	AliasAuto      = "gw-auto"
	AliasFast      = "gw-fast"
	AliasStandard  = "gw-standard"
	AliasReasoning = "gw-reasoning"
	AliasDecide    = "gw-decide"
	PinnedPrefix   = "gw-pinned-"
)

// LaneAlias is the alias of lane ("fast" → "gw-fast").
func LaneAlias(lane string) string {
	for alias, l := range LaneAliases {
		if l == lane {
			return alias
		}
	}
	return ""
}

// LaneAliases maps the lane aliases to their lanes.
var LaneAliases = map[string]string{AliasFast: LaneFast, AliasStandard: LaneStandard, AliasReasoning: LaneReasoning}

// Ability aliases, in the order GET /v1/models lists them, with the
// capability of their rows.
var AbilityAliases = []struct{ ID, Capability string }{
	{"gw-image", CapImage}, {"gw-image-pro", CapImage},
	{"gw-voice", CapAudio}, {"gw-voice-accurate", CapAudio}, {"gw-voice-fast", CapAudio},
	{"gw-voice-speak", CapSpeech}, {"gw-voice-speak-hd", CapSpeech},
}

// Ways a provider reads the gateway's key (Provider.Auth).
const (
	// AuthBearer sends the key as "Authorization: Bearer <key>" (the
	// chat-completions style's own).
	AuthBearer = "bearer"
	// AuthAPIKey sends it in an api-key header (Azure OpenAI's v1 API).
	AuthAPIKey = "api-key"
	// AuthNone sends no key (self-hosted OpenAI-compatible servers).
	AuthNone = "none"
)

// Auths are the values Provider.Auth may take.
var Auths = []string{AuthBearer, AuthAPIKey, AuthNone}

// Default time-outs of a provider.
const (
	DefaultDialTimeout   = 10 * time.Second
	DefaultHeaderTimeout = 120 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
	// DefaultCooldown is how long a deployment that failed rests before
	// calls go to it again (a 429 or 529 names its own wait).
	DefaultCooldown = 30 * time.Second
)

// Bounds of a provider's deployments.
const (
	// MaxDeployments is the most deployments one provider may list.
	MaxDeployments = 64
	// MaxWeight is the largest weight of a deployment.
	MaxWeight = 1000
)

// Deployment is one endpoint of a provider: a base URL with its own key,
// its share of the traffic and its own per-minute limits.
type Deployment struct {
	// BaseURL of the deployment, in the provider's form (see
	// Provider.BaseURL).
	BaseURL string `json:"base_url"`
	// APIKey sent to this deployment. Empty: the provider's key.
	APIKey string `json:"api_key,omitempty"`
	// Weight is the deployment's share of the calls relative to the
	// provider's other deployments. Default: 1.
	Weight int `json:"weight,omitempty"`
	// RequestsPerMinute caps the calls sent to the deployment per minute,
	// counted by every node together. 0: no cap.
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	// TokensPerMinute caps the prompt tokens (the gateway's estimate)
	// sent to the deployment per minute, counted by every node together.
	// 0: no cap.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty"`
}

// Provider is an upstream API.
type Provider struct {
	// Name by which models refer to the provider.
	Name string `json:"name"`
	// Format is the wire format the provider speaks: "openai"
	// (chat-completions style), "anthropic" (messages style), "gemini",
	// "vertex" or "bedrock" (Formats).
	Format string `json:"format"`
	// BaseURL of the API: ends in /v1 for openai ("https://api.openai.com/v1"),
	// without /v1 for anthropic ("https://api.anthropic.com"). Several
	// base URLs separated by commas are that many deployments sharing
	// APIKey. Once the catalogue is built it is the first deployment's.
	BaseURL string `json:"base_url,omitempty"`
	// APIKey sent upstream. Placeholders such as {env.OPENAI_API_KEY} are
	// expanded when the config is loaded.
	APIKey string `json:"api_key,omitempty"`
	// APIKeyFallbacks are tried in order when APIKey expands to nothing
	// (the search provider falls back to {env.OPENAI_API_KEY}).
	APIKeyFallbacks []string `json:"api_key_fallbacks,omitempty"`
	// Auth is how the provider reads the key: "bearer", "api-key" or
	// "none" (Auths). Default: the format's own, a bearer token for
	// "openai" and the x-api-key header for "anthropic".
	Auth string `json:"auth,omitempty"`
	// Responses is true when the provider serves a /responses endpoint;
	// otherwise /v1/responses is translated to chat completions.
	Responses bool `json:"responses,omitempty"`
	// DialTimeout bounds connecting to the provider. Default: 10s. In
	// JSON it is the gw app's provider config that carries the time-outs.
	DialTimeout time.Duration `json:"-"`
	// HeaderTimeout bounds the wait for the response headers (the first
	// byte of an answer). Default: 120s.
	HeaderTimeout time.Duration `json:"-"`
	// IdleTimeout bounds the gap between two chunks of a streamed answer.
	// Default: 60s.
	IdleTimeout time.Duration `json:"-"`
	// Deployments are the provider's endpoints, among which calls are
	// spread by weight and load. Empty: BaseURL and APIKey are the
	// deployments. Once the catalogue is built it always lists them.
	Deployments []Deployment `json:"deployments,omitempty"`
	// Cooldown is how long a deployment that failed rests before calls go
	// to it again. Default: 30s. In JSON it is the gw app's provider
	// config that carries it.
	Cooldown time.Duration `json:"-"`

	// Project and Location place a vertex provider's models
	// (projects/{project}/locations/{location}); Location defaults to
	// us-east5, and the base URL to that location's endpoint.
	Project  string `json:"project,omitempty"`
	Location string `json:"location,omitempty"`
	// CredentialsFile is a vertex provider's service-account key file
	// (JSON, as Google Cloud issues it): read once at load, never logged;
	// its token_uri is where access tokens are asked for.
	CredentialsFile string `json:"credentials_file,omitempty"`
	// Region is a bedrock provider's AWS region (default us-east-1; the
	// base URL defaults to that region's Bedrock Runtime endpoint), and
	// AccessKeyID, SecretAccessKey and SessionToken (optional) the
	// credentials its calls are signed with. Placeholders expand at load.
	Region          string `json:"region,omitempty"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	SessionToken    string `json:"session_token,omitempty"`
}

// cloudFormat is what a cloud's format of provider needs at load: whether
// it holds its credentials, and the default endpoint (with the default
// place in it) when it names none.
type cloudFormat struct {
	credentials func(p *Provider) bool
	// place is the provider's field of its location or region (nil:
	// none) and placeDefault its default; baseURL is the default base
	// URL, with the place where %s is.
	place        func(p *Provider) *string
	placeDefault string
	baseURL      string
}

// cloudFormats are the rows of cloudFormat by catalogue format.
var cloudFormats = map[string]cloudFormat{
	FormatGemini: {credentials: func(p *Provider) bool { return p.APIKey != "" }, baseURL: DefaultGeminiBaseURL},
	FormatVertex: {credentials: func(p *Provider) bool { return p.CredentialsFile != "" && p.Project != "" },
		place: func(p *Provider) *string { return &p.Location }, placeDefault: DefaultVertexLocation, baseURL: vertexBaseURL},
	FormatBedrock: {credentials: func(p *Provider) bool { return p.AccessKeyID != "" && p.SecretAccessKey != "" },
		place: func(p *Provider) *string { return &p.Region }, placeDefault: DefaultBedrockRegion, baseURL: bedrockBaseURL},
}

// HasCredentials reports whether the provider holds what its format
// authenticates with: a key for gemini, a key file and project for
// vertex, an access key and secret for bedrock. The other formats always
// do (a key may be optional to them).
func (p *Provider) HasCredentials() bool {
	f, ok := cloudFormats[p.Format]
	return !ok || f.credentials(p)
}

// setCloudDefaults gives a cloud provider its format's location or
// region, and base URL, when it names none.
func (p *Provider) setCloudDefaults() {
	f, ok := cloudFormats[p.Format]
	if !ok {
		return
	}
	base := f.baseURL
	if f.place != nil {
		place := f.place(p)
		if *place == "" {
			*place = f.placeDefault
		}
		base = fmt.Sprintf(base, *place)
	}
	if strings.TrimSpace(p.BaseURL) == "" && len(p.Deployments) == 0 {
		p.BaseURL = base
	}
}

// setDeployments makes Deployments the provider's full list: BaseURL
// split at its commas (each sharing APIKey) when none is listed, each
// with its key (the provider's when it names none) and weight set, and
// BaseURL and APIKey the first one's. A provider lists base_url or
// deployments, not both.
func (p *Provider) setDeployments() error {
	if len(p.Deployments) > 0 && strings.TrimSpace(p.BaseURL) != "" {
		return fmt.Errorf("base_url and deployments: give one or the other")
	}
	var deps []Deployment
	if len(p.Deployments) == 0 {
		for u := range strings.SplitSeq(p.BaseURL, ",") {
			deps = append(deps, Deployment{BaseURL: u})
		}
	} else {
		deps = slices.Clone(p.Deployments)
	}
	if len(deps) > MaxDeployments {
		return fmt.Errorf("%d deployments: at most %d", len(deps), MaxDeployments)
	}
	for i := range deps {
		d := &deps[i]
		d.BaseURL = strings.TrimRight(strings.TrimSpace(d.BaseURL), "/")
		switch {
		case d.BaseURL != "":
		case len(deps) == 1:
			return fmt.Errorf("base_url is required")
		default:
			return fmt.Errorf("deployment %d: base_url is required", i+1)
		}
		if strings.Contains(d.BaseURL, ",") {
			return fmt.Errorf("deployment %d: base_url %q holds a comma: one URL per deployment", i+1, d.BaseURL)
		}
		if err := checkBaseURL(d.BaseURL); err != nil {
			if len(deps) == 1 {
				return fmt.Errorf("base_url: %w", err)
			}
			return fmt.Errorf("deployment %d: base_url: %w", i+1, err)
		}
		if d.APIKey == "" {
			d.APIKey = p.APIKey
		}
		if d.Weight == 0 {
			d.Weight = 1
		}
		if d.Weight < 0 || d.Weight > MaxWeight {
			return fmt.Errorf("deployment %d: weight %d: want 1 to %d", i+1, d.Weight, MaxWeight)
		}
		if d.RequestsPerMinute < 0 || d.TokensPerMinute < 0 {
			return fmt.Errorf("deployment %d: a per-minute limit below zero", i+1)
		}
	}
	p.Deployments = deps
	p.BaseURL, p.APIKey = deps[0].BaseURL, deps[0].APIKey
	return nil
}

// checkBaseURL reports why base cannot be a deployment's base URL: it
// must parse, name http or https and a host, and hold neither a user nor
// a fragment. The error never quotes the URL (it may hold a password).
func checkBaseURL(base string) error {
	u, err := url.Parse(base)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL it quotes
	}
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("the scheme must be http or https")
	case u.Hostname() == "":
		return fmt.Errorf("no host")
	case u.User != nil:
		return fmt.Errorf("a user or password in the URL: give the key as api_key")
	case strings.Contains(base, "#"):
		return fmt.Errorf("a fragment (#): not sent to the provider")
	case strings.Contains(base, "?"):
		// The endpoint's path goes after the base URL, so a query in it
		// would swallow the path.
		return fmt.Errorf("a query (?): the endpoint's path goes after the base URL")
	}
	return nil
}

// Model is a backing chat model.
type Model struct {
	// ID is the provider's model id; the gateway exposes it as
	// gw-pinned-<id> and accepts the bare id too.
	ID string `json:"id"`
	// Provider names the Provider serving the model.
	Provider string `json:"provider"`
	// Lane is fast, standard or reasoning.
	Lane string `json:"lane"`
	// Capabilities the model has: "vision", "tools", "json".
	Capabilities []string `json:"capabilities,omitempty"`
	// ContextWindow is the largest prompt plus output in tokens.
	ContextWindow int `json:"context_window,omitempty"`
	// InputPrice, OutputPrice and CachedPrice are list prices in US dollars
	// per million input, output and cached input tokens.
	InputPrice  pricing.Money `json:"input_price_usd_per_m"`
	OutputPrice pricing.Money `json:"output_price_usd_per_m"`
	CachedPrice pricing.Money `json:"cached_price_usd_per_m,omitempty"`
	// CacheWritePrice is the list price of input tokens written to the
	// provider's prompt cache (messages-style cache_creation_input_tokens),
	// in US dollars per million. Default: the input price.
	CacheWritePrice pricing.Money `json:"cache_write_price_usd_per_m,omitempty"`
	// Unpriced: the operator gave the model no price (a self-hosted model
	// has no list price). It is served to no account and listed nowhere
	// until it has one; 0 is a price, so a free model says so. In JSON a
	// model without both an input and an output price is unpriced too.
	Unpriced bool `json:"unpriced,omitempty"`
}

// UnmarshalJSON reads a model; one without both prices is Unpriced (an
// output price left out is not a free output).
func (m *Model) UnmarshalJSON(b []byte) error {
	type plain Model
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	if !gjson.GetBytes(b, "input_price_usd_per_m").Exists() || !gjson.GetBytes(b, "output_price_usd_per_m").Exists() {
		m.Unpriced = true
	}
	return nil
}

// CachedRate is the price of cached input: CachedPrice, or the input
// price when the catalogue names none.
func (m *Model) CachedRate() pricing.Money {
	if m.CachedPrice == 0 {
		return m.InputPrice
	}
	return m.CachedPrice
}

// CacheWriteRate is the price of input written to the cache:
// CacheWritePrice, or the input price when the catalogue names none.
func (m *Model) CacheWriteRate() pricing.Money {
	if m.CacheWritePrice == 0 {
		return m.InputPrice
	}
	return m.CacheWritePrice
}

// Has reports whether the model has capability c.
func (m *Model) Has(c string) bool { return slices.Contains(m.Capabilities, c) }

// Ability maps an ability alias (gw-image, gw-voice, ...) to a provider's model.
type Ability struct {
	// Alias is one of the ability aliases (AbilityAliases).
	Alias string `json:"alias"`
	// Provider names the Provider whose endpoint serves the ability.
	Provider string `json:"provider"`
	// Model is the provider's model id sent upstream.
	Model string `json:"model"`
	// DisplayName is the row's readable name.
	DisplayName string `json:"display_name,omitempty"`
	// PriceMicrocents is the plan price of one unit in millionths of a US
	// dollar; absent means unpublished (null on the row). An image alias
	// with a price table must leave it out: it is set to the table's lowest
	// price, the "from" price its row shows.
	PriceMicrocents *int64 `json:"price_microcents,omitempty"`
	// Voices are the voices of a speech alias (gw-voice-speak): the rows
	// of GET /v1/audio/voices under this alias.
	Voices []Voice `json:"voices,omitempty"`
	// VoiceSubset, on gw-voice-speak-hd, lists the gw-voice-speak voices it
	// takes (it has no rows of its own; default: the hd voices declared).
	VoiceSubset []string `json:"voice_subset,omitempty"`
	// Categories, on an image alias, are the price classes (Standard,
	// Plus, Pro, Ultra) a generation naming no model is sent to it for.
	Categories []string `json:"categories,omitempty"`
	// Previews, on an image alias, says its model streams partial images.
	Previews bool `json:"previews,omitempty"`
	// ImagePrices, on an image alias, price one image by quality and size
	// (the provider's published prices); a quality or size the table lacks
	// is refused. Without a table every image costs PriceMicrocents.
	ImagePrices []ImagePrice `json:"image_prices,omitempty"`
	// TokenPrices, on an image alias, price the usage the provider reports;
	// a call whose answer reports usage is billed from it.
	TokenPrices *ImageTokenPrices `json:"token_prices,omitempty"`
	// PreviewTokens, on an image alias, is the output tokens one streamed
	// preview costs. Default: DefaultPreviewTokens.
	PreviewTokens int64 `json:"preview_tokens,omitempty"`
}

// Voice is one voice of a speech alias, a row of GET /v1/audio/voices.
type Voice struct {
	// ID is sent as voice in a speech request.
	ID string `json:"id"`
	// Name is the display name (the id when empty).
	Name string `json:"name,omitempty"`
	// Gender, for example female, male or neutral.
	Gender string `json:"gender,omitempty"`
	// Description is a short description.
	Description string `json:"description,omitempty"`
	// Languages are language codes such as en, or multilingual.
	Languages []string `json:"languages,omitempty"`
}

// Alias is an extra chat alias naming a lane alias, a pinned id or a
// model id.
type Alias struct {
	// Name is the id clients send as model.
	Name string `json:"name"`
	// Target is what the alias stands for.
	Target string `json:"target"`
}

// Catalog is the validated set of providers, models and aliases.
type Catalog struct {
	Providers map[string]*Provider
	Models    []*Model // in config order
	byID      map[string]*Model
	// Unpriced are the ids of the models left out for want of a price.
	Unpriced  []string
	Abilities map[string]*Ability
	Aliases   []Alias
	// DecideModel is the backing model of gw-decide ("" when unset).
	DecideModel string
	// Embeddings are the backing embedding models (in config order) and
	// EmbedModel the id gw-embed serves ("" when there are none).
	Embeddings []*EmbeddingModel
	EmbedModel string
	embedByID  map[string]*EmbeddingModel
	// declared are the service names given to Declare.
	declared map[string]struct{}
}

// New validates the parts and builds a catalog.
func New(providers []Provider, models []Model, abilities []Ability, aliases []Alias, decideModel string) (*Catalog, error) {
	c := &Catalog{Providers: map[string]*Provider{}, byID: map[string]*Model{}, Abilities: map[string]*Ability{}, DecideModel: decideModel}
	for i := range providers {
		p := providers[i]
		if p.Name == "" {
			return nil, fmt.Errorf("provider %d: name is required", i)
		}
		if !slices.Contains(Formats, p.Format) {
			return nil, fmt.Errorf("provider %s: format must be one of %v", p.Name, Formats)
		}
		// The deployments first: a provider listing only deployments gets
		// its base URL from them.
		p.setCloudDefaults()
		if err := p.setDeployments(); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		if p.Auth != "" && !slices.Contains(Auths, p.Auth) {
			return nil, fmt.Errorf("provider %s: auth must be one of %v", p.Name, Auths)
		}
		if _, dup := c.Providers[p.Name]; dup {
			return nil, fmt.Errorf("provider %s: defined twice", p.Name)
		}
		for _, t := range []struct {
			v   *time.Duration
			def time.Duration
		}{{&p.DialTimeout, DefaultDialTimeout}, {&p.HeaderTimeout, DefaultHeaderTimeout}, {&p.IdleTimeout, DefaultIdleTimeout},
			{&p.Cooldown, DefaultCooldown}} {
			if *t.v <= 0 {
				*t.v = t.def
			}
		}
		c.Providers[p.Name] = &p
	}
	for i := range models {
		m := models[i]
		if m.ID == "" {
			return nil, fmt.Errorf("model %d: id is required", i)
		}
		if _, ok := c.Providers[m.Provider]; !ok {
			return nil, fmt.Errorf("model %s: unknown provider %q", m.ID, m.Provider)
		}
		if !slices.Contains(Lanes, m.Lane) {
			return nil, fmt.Errorf("model %s: lane must be one of %v", m.ID, Lanes)
		}
		if _, dup := c.byID[m.ID]; dup || slices.Contains(c.Unpriced, m.ID) {
			return nil, fmt.Errorf("model %s: defined twice", m.ID)
		}
		if m.Unpriced {
			c.Unpriced = append(c.Unpriced, m.ID)
			continue
		}
		c.byID[m.ID] = &m
		c.Models = append(c.Models, &m)
	}
	for i := range abilities {
		a := abilities[i]
		if AbilityCapability(a.Alias) == "" {
			return nil, fmt.Errorf("ability %q: not an ability alias (%s)", a.Alias, abilityAliasList())
		}
		if _, ok := c.Providers[a.Provider]; !ok {
			return nil, fmt.Errorf("ability %s: unknown provider %q", a.Alias, a.Provider)
		}
		if a.Model == "" {
			return nil, fmt.Errorf("ability %s: model is required", a.Alias)
		}
		if a.DisplayName == "" {
			a.DisplayName = a.Alias
		}
		if _, dup := c.Abilities[a.Alias]; dup {
			return nil, fmt.Errorf("ability %s: defined twice", a.Alias)
		}
		if err := a.checkImage(); err != nil {
			return nil, err
		}
		c.Abilities[a.Alias] = &a
	}
	for _, a := range aliases {
		if a.Name == "" || a.Target == "" {
			return nil, fmt.Errorf("alias needs a name and a target")
		}
		if c.isReserved(a.Name) {
			return nil, fmt.Errorf("alias %s: the name is reserved", a.Name)
		}
		if !c.isChatID(a.Target) {
			return nil, fmt.Errorf("alias %s: target %q is not a chat alias or model", a.Name, a.Target)
		}
		if slices.ContainsFunc(c.Aliases, func(o Alias) bool { return o.Name == a.Name }) {
			return nil, fmt.Errorf("alias %s: defined twice", a.Name)
		}
		c.Aliases = append(c.Aliases, a)
	}
	return c, nil
}

// DecideTarget returns the backing model of gw-decide and its provider.
// Decision mode asks for log-probabilities, which only a
// chat-completions-style provider gives, so any other decide model is an
// error (as is none).
func (c *Catalog) DecideTarget() (*Model, *Provider, error) {
	m, ok := c.byID[c.DecideModel]
	if !ok {
		return nil, nil, fmt.Errorf("decide_model %q: no such model in the catalogue", c.DecideModel)
	}
	p := c.Providers[m.Provider]
	if p.Format != FormatOpenAI {
		return nil, nil, fmt.Errorf("decide_model %q: its provider %q is not chat-completions-style (format %q)", m.ID, p.Name, FormatOpenAI)
	}
	return m, p, nil
}

// Model returns the backing model with that provider id.
func (c *Catalog) Model(id string) (*Model, bool) {
	m, ok := c.byID[id]
	return m, ok
}

// abilityAliasList names the ability aliases, comma-separated.
func abilityAliasList() string {
	ids := make([]string, len(AbilityAliases))
	for i, a := range AbilityAliases {
		ids[i] = a.ID
	}
	return strings.Join(ids, ", ")
}

// AbilityCapability returns the row capability of an ability alias, or "".
func AbilityCapability(alias string) string {
	for _, a := range AbilityAliases {
		if a.ID == alias {
			return a.Capability
		}
	}
	return ""
}

func (c *Catalog) isReserved(name string) bool {
	if name == AliasAuto || name == AliasDecide || name == AliasEmbed || LaneAliases[name] != "" || AbilityCapability(name) != "" {
		return true
	}
	_, isModel := c.byID[name]
	return isModel || strings.HasPrefix(name, PinnedPrefix)
}

func (c *Catalog) isChatID(id string) bool {
	if id == AliasAuto || LaneAliases[id] != "" {
		return true
	}
	_, ok := c.byID[strings.TrimPrefix(id, PinnedPrefix)]
	return ok
}

// LanePrice is the price a lane-billed gw-auto call pays in lane: that of
// the lane's cheapest model (by input plus output price), or nil when the
// lane has no model.
func (c *Catalog) LanePrice(lane string) *Model {
	var best *Model
	for _, m := range c.Models {
		if m.Lane == lane && (best == nil || m.InputPrice+m.OutputPrice < best.InputPrice+best.OutputPrice) {
			best = m
		}
	}
	return best
}
