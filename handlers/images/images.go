// Package images serves image generation (POST /v1/images/generations:
// a JSON body, or the chat-shaped one; streamed previews on request) and
// edits (POST /v1/images/edits: a bounded multipart upload of 1 to 4
// reference images told from their bytes). Both call the
// chat-completions-style provider's own endpoints. An image is priced by
// the quality and size asked (the alias's price table) and billed from
// the usage the provider reports.
package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// Aliases of the image models; gw-image is the default.
const (
	AliasImage    = "gw-image"
	AliasImagePro = "gw-image-pro"
)

// EditAliases are the only aliases that edit (others: 400 edit_unsupported).
var EditAliases = []string{AliasImage, AliasImagePro}

// Limits of the image routes (docs/abilities.md, Images).
const (
	// GenerateTimeout and EditTimeout bound the provider's work.
	GenerateTimeout = 60 * time.Second
	EditTimeout     = 90 * time.Second
	// MaxPartialImages: more previews asked are lowered to it.
	MaxPartialImages = 3
	// MaxImages bounds n (the provider's own bound).
	MaxImages = 10
	// MaxReferenceImages, MaxReferenceBytes and MaxReferenceTotal bound
	// an edit's reference images.
	MaxReferenceImages = 4
	MaxReferenceBytes  = 10 << 20
	MaxReferenceTotal  = 20 << 20
	// MaxBody bounds a generation's JSON body.
	MaxBody = 1 << 20
	// MaxAnswer bounds the provider's answer (base64 images).
	MaxAnswer = 128 << 20
	// MaxUsageTokens bounds each token count of a reported usage; a larger
	// one is no usable usage.
	MaxUsageTokens = 1 << 40
)

// Provider endpoints (after the provider's /v1 base).
const (
	PathGenerations = "/images/generations"
	PathEdits       = "/images/edits"
)

// Error codes of the image routes (docs/abilities.md, Images).
const (
	CodeEditUnsupported       = "edit_unsupported"
	CodeInvalidReference      = "invalid_reference_image"
	CodeModerationBlocked     = "moderation_blocked"
	CodePriceExceedsMaxPrice  = "price_exceeds_max_price"
	CodeOrganizationUnverifed = "organization_must_be_verified"
	// TypeUserError is moderation_blocked's error type.
	TypeUserError = "image_generation_user_error"
)

// Categories are the price classes a request may name in its category
// field (any case), cheapest first.
var Categories = []string{"Standard", "Plus", "Pro", "Ultra"}

// DefaultCategories are the classes each alias serves when the config
// names none.
var DefaultCategories = map[string][]string{
	AliasImage:    {"Standard", "Plus"},
	AliasImagePro: {"Pro", "Ultra"},
}

// Config is the configurable part of the image routes.
type Config struct {
	// GenerateTimeout and EditTimeout replace the default 60 and 90
	// seconds when positive (tests use short ones).
	GenerateTimeout, EditTimeout time.Duration
}

// Handler serves the image routes.
type Handler struct {
	Upstream *upstream.Client
	cfg      Config
	// byCategory maps each category to the alias that serves it.
	byCategory map[string]string
}

// New builds the image handler over the catalogue's image aliases: each
// serves the categories its config names (DefaultCategories when none),
// and no category is served twice.
func New(up *upstream.Client, cat *catalog.Catalog, cfg Config) (*Handler, error) {
	h := &Handler{Upstream: up, cfg: cfg, byCategory: map[string]string{}}
	for _, alias := range []string{AliasImage, AliasImagePro} {
		a := cat.Abilities[alias]
		if a == nil {
			continue
		}
		cats := a.Categories
		if len(cats) == 0 {
			cats = DefaultCategories[alias]
		}
		for _, c := range cats {
			name := category(c)
			if name == "" {
				return nil, fmt.Errorf("ability %s: category %q is not one of %v", alias, c, Categories)
			}
			if other, taken := h.byCategory[name]; taken {
				return nil, fmt.Errorf("ability %s: category %s is served by %s already", alias, name, other)
			}
			h.byCategory[name] = alias
		}
	}
	for _, aa := range catalog.AbilityAliases {
		if a := cat.Abilities[aa.ID]; a != nil && aa.Capability != catalog.CapImage && len(a.Categories) > 0 {
			return nil, fmt.Errorf("ability %s: only image aliases have categories", a.Alias)
		}
	}
	return h, nil
}

// category returns the canonical name of a category (any case), or "".
func category(s string) string {
	for _, c := range Categories {
		if strings.EqualFold(c, s) {
			return c
		}
	}
	return ""
}

func (h *Handler) timeout(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func invalid(param, format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}

// unavailable is 502 capability_unavailable: the image could not be made
// or priced, and nothing is charged.
func unavailable(format string, args ...any) error {
	return gwerr.New(gwerr.Upstream, format, args...).WithCode(gwerr.CodeCapabilityUnavailable)
}

// failure maps a provider's refusal: moderation and an unverified
// organisation keep their codes (400 and 403); the client leaving
// stays as it is; the provider refusing the gateway's own account is 503
// capability_unavailable; anything else is 502 capability_unavailable.
func failure(ctx context.Context, err error) error {
	var ue *upstream.Error
	if errors.As(err, &ue) {
		switch {
		case ue.Account:
			return gwerr.New(gwerr.Unavailable, "images are unavailable; retry later").WithCode(gwerr.CodeCapabilityUnavailable)
		case ue.ProviderCode == CodeModerationBlocked:
			return &gwerr.Error{Kind: gwerr.Invalid, Code: CodeModerationBlocked, Type: TypeUserError,
				Message: "the prompt was refused by the image model's safety system; the same prompt fails again"}
		case ue.ProviderCode == CodeOrganizationUnverifed || (ue.Status == 403 && strings.Contains(ue.Err.Message, "verified")):
			return gwerr.New(gwerr.Forbidden, "the chosen image model is unavailable for this request").WithCode(CodeOrganizationUnverifed)
		}
	}
	if e := gwerr.As(err); e.Kind == gwerr.Unavailable && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return e // the client left
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || gwerr.As(err).Kind == gwerr.Timeout {
		return unavailable("the image was not made in time")
	}
	return unavailable("the image could not be made")
}

// isImageAlias reports whether id is an image alias the catalogue serves.
func isImageAlias(cat *catalog.Catalog, id string) bool {
	if cat.Abilities[id] == nil {
		return false
	}
	for _, aa := range catalog.AbilityAliases {
		if aa.ID == id {
			return aa.Capability == catalog.CapImage
		}
	}
	return false
}
