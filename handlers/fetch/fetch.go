// Package fetch serves page reading: POST /v1/fetch. The gateway fetches
// the page itself through the address guard (internal/netguard), decodes
// it from its charset, extracts the main content (readability) and
// converts it to Markdown. Reads are cached per account for six hours (a
// hit is not billed); blocked URLs and failed reads are not billed.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"golang.org/x/net/html/charset"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of page reading (docs/abilities.md, Page reading).
const (
	// Timeout: a read longer than 25 seconds fails.
	Timeout = 25 * time.Second
	// CacheTTL: a read of the same URL (and mode) by the same account
	// within six hours is served from the cache, not billed.
	CacheTTL = 6 * time.Hour
	// MaxCached bounds the cache's entries.
	MaxCached = 10_000
	// MaxPage bounds a page's bytes.
	MaxPage = 5 << 20
	// MaxBody bounds the request body.
	MaxBody = 16 << 10
	// UnitPage is the ledger unit.
	UnitPage = "page"
	// Model is the model of page reading's receipts and ledger entries.
	Model = "fetch"
	// userAgent names the gateway to sites.
	userAgent = "caddy-gw page reader (+https://github.com/caddy-gw/caddy-gw)"
)

// SocialHosts are the major social networks whose pages are refused
// (social_blocked): mass-scraping them is not supported. A host matches
// itself and its subdomains.
var SocialHosts = []string{
	"facebook.com", "fb.com", "instagram.com", "threads.net", "x.com", "twitter.com", "tiktok.com",
	"linkedin.com", "snapchat.com", "pinterest.com", "reddit.com", "tumblr.com", "vk.com", "weibo.com",
}

// Handler serves page reading.
type Handler struct {
	// Guard makes the guarded client.
	Guard *netguard.Guard
	// Price and RenderPrice are the plan prices of a plain and a rendered
	// read.
	Price, RenderPrice pricing.Money
	// Timeout bounds a read (Timeout, 25 s, when 0).
	Timeout time.Duration
	// Shared, when set, keeps the cache in Redis, so every node serves
	// a read any node made.
	Shared redis.UniversalClient

	once   sync.Once
	client *http.Client
	cache  *cache
}

func (h *Handler) init() {
	h.once.Do(func() {
		if h.Timeout <= 0 {
			h.Timeout = Timeout
		}
		h.client = h.Guard.Client(h.Timeout)
		h.cache = &cache{m: map[string]cached{}, shared: h.Shared}
	})
}

// flat is a page-reading refusal: error is a string code.
func flat(kind gwerr.Kind, code, msg string) error {
	return &gwerr.Error{Kind: kind, Code: code, Message: msg}
}

// Serve serves POST /v1/fetch.
func (h *Handler) Serve(c *pipeline.Call) error {
	h.init()
	b, err := jsonbody.Read(io.LimitReader(c.R.Body, MaxBody+1), MaxBody)
	if err != nil || !gjson.ParseBytes(b).IsObject() {
		return flat(gwerr.Invalid, "body must be JSON", "")
	}
	root := gjson.ParseBytes(b)
	raw := root.Get("url")
	if raw.Type != gjson.String || strings.TrimSpace(raw.Str) == "" {
		return flat(gwerr.Invalid, "url required", "")
	}
	render := root.Get("render").Type == gjson.True
	u, err := url.Parse(strings.TrimSpace(raw.Str))
	if err != nil {
		return flat(gwerr.Invalid, "blocked target: the URL cannot be read", "")
	}
	if err := netguard.CheckURL(u); err != nil {
		return flat(gwerr.Invalid, err.Error(), "")
	}
	if social(u.Hostname()) {
		return flat(gwerr.Invalid, "social_blocked", "pages of major social networks are not read: mass-scraping them is unsupported")
	}
	mode, price, read := "plain", h.Price, h.read
	if render {
		if browserPath() == "" {
			return flat(gwerr.Unavailable, "capability_unavailable", "rendering is unavailable; retry later or drop render")
		}
		log := zap.NewNop()
		if c.Gateway != nil && c.Gateway.Logger != nil {
			log = c.Gateway.Logger
		}
		mode, price = "render", h.RenderPrice
		read = func(ctx context.Context, u *url.URL) (page, error) { return h.readRendered(ctx, u, log) }
	}
	key := cacheKey(c.Account.ID, mode, u.String())
	if hit, ok := h.cache.get(key); ok {
		c.CacheHit()
		c.WriteReceipt(pipeline.Bill{Receipt: pipeline.AbilityReceipt, Model: Model})
		return write(c, hit)
	}
	cost := pricing.Cost(c.Account.PAYG, pricing.Line{Units: 1, Rate: pricing.PerUnit(price)})
	if err := c.Reserve(cost); err != nil {
		return err
	}
	page, err := read(c.R.Context(), u)
	if err != nil {
		return err
	}
	if _, err := c.Charge(pipeline.Bill{Units: 1, Unit: UnitPage, Model: Model, Cost: cost, Receipt: pipeline.AbilityReceipt}); err != nil {
		return err
	}
	h.cache.put(key, page)
	return write(c, page)
}

func write(c *pipeline.Call, p page) error {
	b, _ := json.Marshal(map[string]any{"markdown": p.Markdown, "format": "markdown", "url": p.URL})
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", b)
	return nil
}

// social reports a host of SocialHosts (or a subdomain of one).
func social(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, s := range SocialHosts {
		if host == s || strings.HasSuffix(host, "."+s) {
			return true
		}
	}
	return false
}

// page is a read page.
type page struct {
	Markdown string
	URL      string
}

func providerFailed(format string, args ...any) error {
	return flat(gwerr.Upstream, "provider failed: "+fmt.Sprintf(format, args...), "")
}

// read fetches u through the guard and turns it into Markdown.
func (h *Handler) read(ctx context.Context, u *url.URL) (page, error) {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1")
	resp, err := h.client.Do(req)
	if err != nil {
		var be *netguard.BlockedError
		if errors.As(err, &be) {
			return page{}, flat(gwerr.Invalid, be.Error(), "")
		}
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return page{}, providerFailed("the site took longer than %s", h.Timeout)
		}
		return page{}, providerFailed("the site could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return page{}, providerFailed("the site answered %d", resp.StatusCode)
	}
	final := resp.Request.URL.String()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPage+1))
	if err != nil {
		return page{}, providerFailed("the page broke off")
	}
	if len(body) > MaxPage {
		return page{}, providerFailed("the page is larger than %d bytes", MaxPage)
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt == "" {
		mt = http.DetectContentType(body)
		mt, _, _ = mime.ParseMediaType(mt)
	}
	decoded, err := decode(body, ct)
	if err != nil {
		return page{}, providerFailed("the page's charset cannot be decoded")
	}
	switch {
	case !readable(mt):
		return page{}, providerFailed("%s is not a page that can be read", mt)
	case mt == "text/plain" || mt == "text/markdown":
		return page{Markdown: decoded, URL: final}, nil
	}
	md, err := Markdown(decoded, resp.Request.URL)
	if err != nil {
		return page{}, providerFailed("the page could not be read")
	}
	return page{Markdown: md, URL: final}, nil
}

// readable reports a media type page reading reads: HTML, XHTML, plain
// text and Markdown.
func readable(mediaType string) bool {
	switch mediaType {
	case "text/html", "application/xhtml+xml", "text/plain", "text/markdown":
		return true
	}
	return false
}

// decode turns a page's bytes into UTF-8 text, from the charset its
// Content-Type or its markup names (UTF-8 when none).
func decode(body []byte, contentType string) (string, error) {
	r, err := charset.NewReader(strings.NewReader(string(body)), contentType)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(r)
	return string(b), err
}

// Markdown extracts an HTML page's main content and converts it to
// Markdown (the whole body when readability finds no article).
func Markdown(html string, base *url.URL) (string, error) {
	article, err := readability.FromReader(strings.NewReader(html), base)
	content := html
	if err == nil && article.Node != nil {
		var sb strings.Builder
		if err := article.RenderHTML(&sb); err == nil && strings.TrimSpace(sb.String()) != "" {
			content = sb.String()
			if t := strings.TrimSpace(article.Title()); t != "" {
				content = "<h1>" + escape(t) + "</h1>" + content
			}
		}
	}
	md, err := markdownConverter.ConvertString(content)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(md), nil
}

// markdownConverter is CommonMark with GFM tables.
var markdownConverter = converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(), tables{}))

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// cache keeps reads for CacheTTL, at most MaxCached (the oldest out first).
type cache struct {
	mu     sync.Mutex
	m      map[string]cached
	shared redis.UniversalClient
}

// cacheKey is the cache's key of a read: per account (so no account learns
// from a read's cost which pages another read), per mode, per URL.
func cacheKey(account, mode, url string) string {
	return fmt.Sprintf("%d:%s %s %s", len(account), account, mode, url)
}

// sharedTimeout bounds a shared cache's read or write (a miss, if slower).
const sharedTimeout = 500 * time.Millisecond

func sharedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "gw:fetch:" + hex.EncodeToString(sum[:])
}

type cached struct {
	page page
	at   time.Time
}

func (c *cache) get(key string) (page, bool) {
	if c.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		b, err := c.shared.Get(ctx, sharedKey(key)).Bytes()
		var p page
		if err != nil || json.Unmarshal(b, &p) != nil {
			return page{}, false
		}
		return p, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || time.Since(e.at) > CacheTTL {
		delete(c.m, key)
		return page{}, false
	}
	return e.page, true
}

func (c *cache) put(key string, p page) {
	if c.shared != nil {
		b, _ := json.Marshal(p)
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		_ = c.shared.Set(ctx, sharedKey(key), b, CacheTTL).Err()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= MaxCached {
		oldest := ""
		for k, e := range c.m {
			if oldest == "" || e.at.Before(c.m[oldest].at) {
				oldest = k
			}
		}
		delete(c.m, oldest)
	}
	c.m[key] = cached{page: p, at: time.Now()}
}
