package images

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// passOn are the request fields sent on to the provider as they are
// (strings, or for output_compression a number); every other field the
// gateway reads itself or ignores.
var passOn = []string{"size", "quality", "response_format", "background", "output_format", "output_compression", "moderation", "user"}

// request is a checked generation or edit.
type request struct {
	alias    string
	n        int64
	prompt   string
	stream   bool
	partial  int64 // previews asked (at most MaxPartialImages)
	maxPrice *pricing.Money
	pass     map[string]any
	unit     pricing.Money // the price of one image as asked, set by gate
	// references is how many reference images an edit sends.
	references int64
}

// What the hold of an image call adds for what its price table does not
// bound, when the call is settled from the provider's usage: a table price
// is the provider's rounded figure for an image's output tokens (gpt-image-1
// medium 1024x1024: 1,056 tokens at 40 USD a million is 0.04224 USD, the
// table says 0.042), so each image is held at its table price and
// ImageHoldMarginPercent more; an edit's reference image is held at
// ReferenceImageTokenCeiling input tokens (more than the providers bill
// for one image at the highest input fidelity).
const (
	ImageHoldMarginPercent     = 10
	ReferenceImageTokenCeiling = 6000
)

// pick resolves the alias: model when named, else category's alias, else
// gw-image.
func (h *Handler) pick(cat *catalog.Catalog, model, categoryName string) (string, error) {
	if model != "" {
		if !isImageAlias(cat, model) {
			return "", invalid("model", "model %s is not an image model; image models are those with capability image in /v1/models", model)
		}
		return model, nil
	}
	if categoryName != "" {
		c := category(categoryName)
		if c == "" {
			return "", invalid("category", "category must be one of %s", strings.Join(Categories, ", "))
		}
		alias, ok := h.byCategory[c]
		if !ok {
			return "", invalid("category", "no image model of category %s is offered on this gateway", c)
		}
		return alias, nil
	}
	return AliasImage, nil
}

// parseCommon reads what generations and edits share: model or category,
// max_price and the fields passed on. field returns a field's raw JSON
// value (a multipart field's text is quoted by the caller).
func (h *Handler) parseCommon(cat *catalog.Catalog, get func(string) gjson.Result) (*request, error) {
	r := &request{n: 1, pass: map[string]any{}}
	str := func(name string) (string, error) {
		v := get(name)
		if !v.Exists() || v.Type == gjson.Null {
			return "", nil
		}
		if v.Type != gjson.String {
			return "", invalid(name, "%s must be a string", name)
		}
		return v.Str, nil
	}
	model, err := str("model")
	if err != nil {
		return nil, err
	}
	cname, err := str("category")
	if err != nil {
		return nil, err
	}
	if r.alias, err = h.pick(cat, model, cname); err != nil {
		return nil, err
	}
	if v := get("max_price"); v.Exists() && v.Type != gjson.Null {
		m, err := pricing.ParseUSD(strings.TrimSpace(v.Raw))
		if v.Type == gjson.String {
			m, err = pricing.ParseUSD(v.Str)
		}
		if err != nil || m < 0 {
			return nil, invalid("max_price", "max_price must be an amount of US dollars, such as 0.05")
		}
		r.maxPrice = &m
	}
	if v := get("n"); v.Exists() && v.Type != gjson.Null {
		n, ok := whole(v)
		if !ok || n < 1 || n > MaxImages {
			return nil, invalid("n", "n must be a whole number from 1 to %d", MaxImages)
		}
		r.n = n
	}
	for _, f := range passOn {
		v := get(f)
		switch {
		case !v.Exists() || v.Type == gjson.Null:
		case v.Type == gjson.String:
			r.pass[f] = v.Str
		case v.Type == gjson.Number && f == "output_compression":
			if n, ok := whole(v); ok && n >= 0 && n <= 100 {
				r.pass[f] = n
				continue
			}
			return nil, invalid(f, "%s must be a whole number from 0 to 100", f)
		default:
			return nil, invalid(f, "%s must be a string", f)
		}
	}
	return r, nil
}

// whole reads a whole number (a JSON number without a fraction, or its
// text).
func whole(v gjson.Result) (int64, bool) {
	switch v.Type {
	case gjson.Number:
		n, err := strconv.ParseInt(strings.TrimSpace(v.Raw), 10, 64)
		return n, err == nil
	case gjson.String:
		r := gjson.Parse(v.Str)
		if r.Type != gjson.Number || r.Raw != strings.TrimSpace(v.Str) {
			return 0, false
		}
		return whole(r)
	}
	return 0, false
}

// parseGenerate checks a generation body: the image fields, or the
// chat-shaped body whose prompt is the last user message.
func (h *Handler) parseGenerate(cat *catalog.Catalog, b []byte) (*request, error) {
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return nil, invalid("body", "the body must be a JSON object")
	}
	r, err := h.parseCommon(cat, root.Get)
	if err != nil {
		return nil, err
	}
	switch p := root.Get("prompt"); {
	case p.Exists() && p.Type != gjson.Null:
		if p.Type != gjson.String || strings.TrimSpace(p.Str) == "" {
			return nil, invalid("prompt", "prompt is required and must be text")
		}
		r.prompt = p.Str
	case root.Get("messages").Exists():
		if r.prompt, err = chatPrompt(root); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("prompt", "prompt is required")
	}
	if s := root.Get("stream"); s.Exists() && s.Type != gjson.Null {
		if !s.IsBool() {
			return nil, invalid("stream", "stream must be true or false")
		}
		r.stream = s.Bool()
	}
	if p := root.Get("partial_images"); p.Exists() && p.Type != gjson.Null {
		n, ok := whole(p)
		if !ok || n < 0 {
			return nil, invalid("partial_images", "partial_images must be a whole number from 0 to %d", MaxPartialImages)
		}
		r.partial = min(n, MaxPartialImages) // larger values are lowered, not refused
	}
	return r, nil
}

// chatPrompt takes the prompt of the chat-shaped body: messages plus a
// tools entry of type image_generation; the last user message's text.
func chatPrompt(root gjson.Result) (string, error) {
	hasTool := false
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		hasTool = hasTool || t.Get("type").String() == "image_generation"
		return !hasTool
	})
	if !hasTool {
		return "", invalid("tools", "a chat-shaped body needs a tools entry of type image_generation (or send prompt)")
	}
	msgs := root.Get("messages")
	if !msgs.IsArray() {
		return "", invalid("messages", "messages must be an array")
	}
	list := msgs.Array()
	for i := len(list) - 1; i >= 0; i-- {
		m := list[i]
		if m.Get("role").String() != "user" {
			continue
		}
		var text []string
		c := m.Get("content")
		if c.Type == gjson.String {
			text = append(text, c.Str)
		} else {
			c.ForEach(func(_, part gjson.Result) bool {
				if t := part.Get("type").String(); t == "text" || t == "input_text" {
					text = append(text, part.Get("text").String())
				}
				return true
			})
		}
		prompt := strings.TrimSpace(strings.Join(text, "\n"))
		if prompt == "" {
			break
		}
		return prompt, nil
	}
	return "", invalid("messages", "the last user message has no text to draw")
}

// gate checks the key's list, prices what the request asks and holds
// its cost. A quality or size the catalogue has no price for is 400
// naming the field, and a price over max_price is 402
// price_exceeds_max_price, both before anything is made.
func gate(c *pipeline.Call, r *request) (*catalog.Ability, *catalog.Provider, error) {
	if err := c.AllowModel(r.alias); err != nil {
		return nil, nil, err
	}
	cat := c.Gateway.Catalog
	ab := cat.Abilities[r.alias]
	p := cat.Providers[ab.Provider]
	if p == nil {
		return nil, nil, unavailable("images are not configured on this gateway")
	}
	quality, _ := r.pass["quality"].(string)
	size, _ := r.pass["size"].(string)
	if ab.ImagePriced() && size == "" {
		size = catalog.DefaultImageSize // sent, so that the image made is the one priced
		r.pass["size"] = size
	}
	qualities, sizes := ab.ImageChoices()
	if !ab.HasQuality(quality) {
		return nil, nil, invalid("quality", "this quality has no price on %s; it prices %s (or auto)", r.alias, strings.Join(qualities, ", "))
	}
	unit, ok := ab.ImageUnitPrice(quality, size)
	switch {
	case !ok && ab.ImagePriced():
		return nil, nil, invalid("size", "this size has no price on %s at this quality; it prices %s (or auto)", r.alias, strings.Join(sizes, ", "))
	case !ok:
		return nil, nil, unavailable("%s has no published price; it is not served", r.alias)
	}
	r.unit = unit
	lines := ab.ImageLines(r.n, unit, r.previews(ab))
	price := pricing.Cost(c.Account.PAYG, lines...)
	if r.maxPrice != nil && price > *r.maxPrice {
		return nil, nil, &gwerr.Error{Kind: gwerr.Payment, Code: CodePriceExceedsMaxPrice,
			Message: "the price, " + price.String() + " USD, is above max_price; nothing was made or charged"}
	}
	// Settled from usage, the hold also covers the prompt's text (at most
	// a token a byte), the reference images and the tables' rounding.
	if tp := ab.TokenPrices; tp != nil {
		lines = append(lines, pricing.Line{Units: int64(len(r.prompt)), Rate: pricing.PerMillion(tp.TextInput)},
			pricing.Line{Units: r.references * ReferenceImageTokenCeiling, Rate: pricing.PerMillion(tp.ImageInput)},
			pricing.Line{Units: r.n * ImageHoldMarginPercent, Rate: pricing.Rate{Amount: unit, Per: 100}})
	}
	if err := c.Reserve(pricing.Cost(c.Account.PAYG, lines...)); err != nil {
		return nil, nil, err
	}
	return ab, p, nil
}

// previews is how many previews the provider is asked for.
func (r *request) previews(ab *catalog.Ability) int64 {
	if r.stream && ab.Previews {
		return r.partial
	}
	return 0
}

// bill is what images cost: the provider's usage at the alias's token
// prices when the answer reports one, else images at the table price of
// the quality and size made (those asked, the provider's answer naming
// what it chose for auto) plus previews. A call never costs more than
// its max_price.
func (r *request) bill(c *pipeline.Call, ab *catalog.Ability, images, previews int64, usage gjson.Result, quality, size string) pricing.Money {
	lines, ok := []pricing.Line(nil), false
	if u, valid := parseUsage(usage); valid {
		lines, ok = ab.UsageLines(u)
	}
	if !ok {
		lines = ab.ImageLines(images, r.madeUnit(ab, quality, size), previews)
	}
	cost := pricing.Cost(c.Account.PAYG, lines...)
	if r.maxPrice != nil && cost > *r.maxPrice {
		cost = *r.maxPrice
	}
	return cost
}

// madeUnit is the price of one image as made: where the request left the
// choice to the provider (auto or nothing), the quality and size its
// answer names when the table prices them; otherwise the price asked.
func (r *request) madeUnit(ab *catalog.Ability, quality, size string) pricing.Money {
	askedQ, _ := r.pass["quality"].(string)
	askedS, _ := r.pass["size"].(string)
	if askedQ != "" && askedQ != catalog.ImageAuto {
		quality = askedQ
	}
	if askedS != "" && askedS != catalog.ImageAuto {
		size = askedS
	}
	if quality == "" || quality == catalog.ImageAuto || size == "" || size == catalog.ImageAuto {
		return r.unit
	}
	if unit, ok := ab.ImageUnitPrice(quality, size); ok {
		return unit
	}
	return r.unit
}

// parseUsage reads the token usage of an image answer: input_tokens
// (split by input_tokens_details into text and image tokens; tokens it
// does not place count as text) and output_tokens, which include the
// previews. Anything else is no usable usage.
func parseUsage(u gjson.Result) (catalog.ImageUsage, bool) {
	if !u.IsObject() {
		return catalog.ImageUsage{}, false
	}
	in, okIn := count(u.Get("input_tokens"))
	out, okOut := count(u.Get("output_tokens"))
	if !okIn || !okOut || out == 0 {
		return catalog.ImageUsage{}, false
	}
	img, _ := count(u.Get("input_tokens_details.image_tokens"))
	img = min(img, in)
	return catalog.ImageUsage{TextInput: in - img, ImageInput: img, Output: out}, true
}

// count reads a token count: a whole JSON number from 0 to MaxUsageTokens.
func count(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	n, ok := whole(v)
	return n, ok && n >= 0 && n <= MaxUsageTokens
}

// Generate serves POST /v1/images/generations.
func (h *Handler) Generate(c *pipeline.Call) error {
	b, err := jsonbody.Read(io.LimitReader(c.R.Body, MaxBody+1), MaxBody)
	if err != nil {
		return invalid("body", "the body must be one JSON object of at most 1 MiB")
	}
	cat := c.Gateway.Catalog
	r, err := h.parseGenerate(cat, b)
	if err != nil {
		return err
	}
	ab, p, err := gate(c, r)
	if err != nil {
		return err
	}
	body := map[string]any{"model": ab.Model, "prompt": r.prompt, "n": r.n}
	for k, v := range r.pass {
		body[k] = v
	}
	if r.stream {
		body["stream"] = true
		if p := r.previews(ab); p > 0 {
			body["partial_images"] = p
		}
	}
	raw, _ := json.Marshal(body)
	if r.stream {
		return h.generateStream(c, raw, p, r, ab)
	}
	ctx, cancel := context.WithTimeout(c.R.Context(), h.timeout(h.cfg.GenerateTimeout, GenerateTimeout))
	defer cancel()
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: p, Path: PathGenerations, Body: raw})
	if err != nil {
		return failure(ctx, err)
	}
	defer resp.Body.Close()
	// A generation carries no cost; the receipt does.
	out, _, err := charge(c, ctx, resp.Body, r, ab)
	if err != nil {
		return err
	}
	answer, _ := json.Marshal(map[string]any{"created": out.created, "data": out.data})
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", answer)
	return nil
}

// generateStream asks for a streamed generation and relays it. The
// client leaving ends the call until the provider's stream begins; from
// then on the stream is read to its end (within the time-out) whether or
// not the client stays, since the provider makes and bills the images.
func (h *Handler) generateStream(c *pipeline.Call, raw []byte, p *catalog.Provider, r *request, ab *catalog.Ability) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.R.Context()), h.timeout(h.cfg.GenerateTimeout, GenerateTimeout))
	defer cancel()
	stop := context.AfterFunc(c.R.Context(), cancel)
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: p, Path: PathGenerations, Body: raw})
	begun := stop()
	if err != nil {
		return failure(ctx, err)
	}
	defer resp.Body.Close()
	return h.relay(c, ctx, resp.Body, r, ab, begun)
}

// charge reads the provider's answer (at most r.n images), charges the
// images made and sets the receipt.
func charge(c *pipeline.Call, ctx context.Context, body io.Reader, r *request, ab *catalog.Ability) (*made, pricing.Money, error) {
	out, n, err := read(ctx, body, r.n)
	if err != nil {
		upstream.Failed(ctx, body)
		return nil, 0, err
	}
	cost, err := c.Charge(pipeline.Bill{Units: n, Unit: pricing.UnitImage, Model: ab.Model, Alias: r.alias,
		Cost: r.bill(c, ab, n, 0, gjson.ParseBytes(out.usage), out.quality, out.size), Receipt: pipeline.AbilityReceipt})
	if err != nil {
		return nil, 0, err
	}
	return out, cost, nil
}

// made is what the provider answered: its images (at most n), usage,
// and the quality and size it made them at.
type made struct {
	created       int64
	data          []json.RawMessage
	usage         json.RawMessage
	quality, size string
}

// read takes the provider's answer: at most n images, each with b64_json
// or url. None is 502 capability_unavailable.
func read(ctx context.Context, body io.Reader, n int64) (*made, int64, error) {
	b, err := io.ReadAll(io.LimitReader(body, MaxAnswer))
	if err != nil {
		return nil, 0, failure(ctx, err)
	}
	if !jsonbody.Valid(b) {
		return nil, 0, unavailable("the image model gave an unreadable answer")
	}
	root := gjson.ParseBytes(b)
	out := &made{created: root.Get("created").Int(), data: []json.RawMessage{},
		quality: root.Get("quality").String(), size: root.Get("size").String()}
	if out.created == 0 {
		out.created = time.Now().Unix()
	}
	root.Get("data").ForEach(func(_, d gjson.Result) bool {
		if int64(len(out.data)) >= n {
			return false
		}
		img := map[string]any{}
		if v := d.Get("b64_json"); v.Type == gjson.String && v.Str != "" {
			img["b64_json"] = v.Str
		} else if v := d.Get("url"); v.Type == gjson.String && v.Str != "" {
			img["url"] = v.Str
		} else {
			return true
		}
		if v := d.Get("revised_prompt"); v.Type == gjson.String {
			img["revised_prompt"] = v.Str
		}
		raw, _ := json.Marshal(img)
		out.data = append(out.data, raw)
		return true
	})
	if u := root.Get("usage"); u.IsObject() {
		out.usage = json.RawMessage(u.Raw)
	}
	if len(out.data) == 0 {
		return nil, 0, unavailable("the image model made no image")
	}
	return out, int64(len(out.data)), nil
}

// Event types of an image stream (docs/abilities.md, Images).
const (
	EventPartial   = "image_generation.partial_image"
	EventCompleted = "image_generation.completed"
	EventError     = "error"
)

// relay turns the provider's image stream into the gateway's: previews
// (partial_image) as they come, one completed event per image with data
// shaped like the normal response, an error event when something fails
// after the stream began, and data: [DONE] last.
//
// The stream is read to its end even when the client leaves (within the
// call's time-out): once it began, the provider makes and bills the
// images whether or not anyone reads them, so the call is billed for the
// images the provider made (its completed events, at most n). A stream
// with previews is billed once its first preview has been delivered, for
// the images and previews asked. A stream without previews is billed
// before the last image asked for is relayed; one that ends with fewer is
// billed for those the provider made, and one that made none is not
// billed. A stream the client left whose rest could not be read (a
// time-out, a cut) is billed for the n images and previews asked at the
// table price: the gateway cannot tell how many the provider made.
// begun is false when the client left before the stream began: the call
// is then not waited for.
func (h *Handler) relay(c *pipeline.Call, ctx context.Context, body io.Reader, r *request, ab *catalog.Ability, begun bool) error {
	sse.StartStream(c.W)
	c.WriteReceipt(pipeline.Bill{Receipt: pipeline.AbilityStreamReceipt, Model: ab.Model, Alias: r.alias})
	c.W.WriteHeader(http.StatusOK)
	s := &imageStream{c: c, r: r, ab: ab, w: sse.NewWriter(c.W), asked: r.previews(ab), begun: begun, gone: !begun}
	rd := sse.NewReader(body)
	for {
		ev, err := rd.Next()
		if err != nil {
			return s.end(ctx, body, err)
		}
		if sse.IsDone(ev) {
			continue
		}
		if done, err := s.event(body, gjson.ParseBytes(ev.Data)); done {
			return err
		}
	}
}

// imageStream is one relayed image stream: what the provider made,
// whether the client still reads it, and the call's one charge.
type imageStream struct {
	c  *pipeline.Call
	r  *request
	ab *catalog.Ability
	w  *sse.Writer
	// asked is the previews asked; made and previews what the provider
	// sent (at most r.n and asked).
	asked, made, previews int64
	usage                 gjson.Result
	quality, size         string
	// begun: the stream began with the client there; gone: the client
	// left (nothing more is written); settled: the charge is made.
	begun, gone, settled bool
}

// send writes ev to the client unless it left; a write that fails means
// it did.
func (s *imageStream) send(ev []byte) bool {
	if !s.left() && s.w.Write(sse.Event{Data: ev}) != nil {
		s.gone = true
	}
	return !s.gone
}

// left reports whether the client left: a write failed, or its request
// ended.
func (s *imageStream) left() bool {
	if !s.gone && s.c.R.Context().Err() != nil {
		s.gone = true
	}
	return s.gone
}

// settle charges images and previews, once; nothing when no image was
// made. It reports whether the charge stands.
func (s *imageStream) settle(images, previews int64) bool {
	if s.settled || images == 0 {
		return true
	}
	s.settled = true
	u := gjson.Result{}
	if previews == 0 && images == 1 && s.r.n == 1 {
		u = s.usage // the one image's usage; several images are billed by the table
	}
	_, err := s.c.Charge(pipeline.Bill{Units: images, Unit: pricing.UnitImage, Model: s.ab.Model, Alias: s.r.alias,
		Cost: s.r.bill(s.c, s.ab, images, previews, u, s.quality, s.size)})
	return err == nil
}

// fail ends the stream for a client still there: an error event, then
// data: [DONE].
func (s *imageStream) fail(msg, code string) error {
	ev, _ := json.Marshal(map[string]any{"type": EventError, "error": map[string]any{"message": msg, "type": "api_error", "code": code}})
	if s.send(ev) {
		_ = s.w.WriteDone()
	}
	return nil
}

// event handles one event of the provider's stream; done ends the relay
// with err.
func (s *imageStream) event(body io.Reader, d gjson.Result) (done bool, err error) {
	created := d.Get("created_at").Int()
	if created == 0 {
		created = time.Now().Unix()
	}
	if q := d.Get("quality"); q.Type == gjson.String {
		s.quality = q.Str
	}
	if sz := d.Get("size"); sz.Type == gjson.String {
		s.size = sz.Str
	}
	switch d.Get("type").String() {
	case EventPartial:
		s.previews = min(s.previews+1, s.asked) // never more than asked, and held
		out, _ := json.Marshal(map[string]any{"type": EventPartial, "created": created,
			"partial_image_index": d.Get("partial_image_index").Int(), "b64_json": d.Get("b64_json").String()})
		// The first preview delivered: the charge of everything asked
		// lands now and stands even if the client leaves, so a break
		// after it is no unpaid attempt.
		if s.send(out) {
			if !s.settle(s.r.n, s.asked) {
				return true, s.fail("the images could not be billed; nothing more is sent", "settlement_unavailable")
			}
			upstream.Paid(body)
		}
	case EventCompleted:
		img := d.Get("b64_json").String()
		if img == "" || s.made >= s.r.n {
			return false, nil
		}
		s.made++
		s.usage = d.Get("usage")
		if s.made == s.r.n && !s.settle(s.made, s.previews) {
			return true, s.fail("the image could not be billed; it is not sent", "settlement_unavailable")
		}
		out, _ := json.Marshal(map[string]any{"type": EventCompleted, "created": created,
			"data": []any{map[string]any{"b64_json": img}}, "b64_json": img})
		s.send(out)
	case EventError:
		upstream.Broke(body)
		if !s.settle(s.made, s.previews) {
			return true, s.fail("the images could not be billed", "settlement_unavailable")
		}
		return true, s.fail("the image could not be made", gwerr.CodeCapabilityUnavailable)
	}
	return false, nil
}

// end settles a stream that ended (err io.EOF) or broke off, and ends the
// relay.
func (s *imageStream) end(ctx context.Context, body io.Reader, err error) error {
	whole := errors.Is(err, io.EOF) && s.made > 0
	if !whole {
		upstream.Failed(ctx, body)
	}
	images, previews := s.made, s.previews
	if !errors.Is(err, io.EOF) && s.left() && s.begun {
		images, previews = s.r.n, s.asked
	}
	if !s.settle(images, previews) {
		return s.fail("the images could not be billed; nothing more is sent", "settlement_unavailable")
	}
	if !whole {
		return s.fail("the image could not be made", gwerr.CodeCapabilityUnavailable)
	}
	if !s.gone {
		_ = s.w.WriteDone()
	}
	return nil
}
