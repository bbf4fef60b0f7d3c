package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// How images are billed: the price table of Caddyfile.example's image
// aliases (gpt-image-1's published prices by quality and size), the
// provider's usage at its token prices, previews, max_price against the
// price of what is asked, and a stream billed at its first preview.

// gptImage1 is Caddyfile.example's price table of gpt-image-1 (US dollars
// an image) and its token prices (US dollars a million tokens).
var gptImage1 = map[string]string{
	"low 1024x1024": "0.011", "low 1024x1536": "0.016", "low 1536x1024": "0.016",
	"medium 1024x1024": "0.042", "medium 1024x1536": "0.063", "medium 1536x1024": "0.063",
	"high 1024x1024": "0.167", "high 1024x1536": "0.25", "high 1536x1024": "0.25",
}

const (
	gptImage1TextIn   = "5.00"
	gptImage1ImageIn  = "10.00"
	gptImage1ImageOut = "40.00"
)

// tableCost is n images of quality and size at the table price plus
// previews at 100 output tokens each, marked up once for payg.
func tableCost(t testing.TB, quality, size string, n, previews int64, payg bool) pricing.Money {
	t.Helper()
	price, ok := gptImage1[quality+" "+size]
	if !ok {
		t.Fatalf("no table price for %s %s", quality, size)
	}
	return pricing.Cost(payg, pricing.Line{Units: n, Rate: pricing.PerUnit(mustUSD(t, price))},
		pricing.Line{Units: previews * fake.ImagePreviewTokens, Rate: pricing.PerMillion(mustUSD(t, gptImage1ImageOut))})
}

// usageCost is what the fake's usage for a call costs: the prompt's text
// tokens, refs reference images, n images of the quality and size asked
// (as the fake makes them) and previews.
func usageCost(t testing.TB, prompt string, refs, n int, quality, size string, previews int, payg bool) pricing.Money {
	t.Helper()
	q, s := fake.ImageMade(quality, size)
	out := n*fake.ImageOutputTokens(q, s) + previews*fake.ImagePreviewTokens
	if fake.ImageOutputTokens(q, s) == 0 {
		t.Fatalf("the fake makes no %s %s", q, s)
	}
	return pricing.Cost(payg,
		pricing.Line{Units: int64(fake.ImagePromptTokens(prompt)), Rate: pricing.PerMillion(mustUSD(t, gptImage1TextIn))},
		pricing.Line{Units: int64(refs * fake.ImageReferenceTokens), Rate: pricing.PerMillion(mustUSD(t, gptImage1ImageIn))},
		pricing.Line{Units: int64(out), Rate: pricing.PerMillion(mustUSD(t, gptImage1ImageOut))})
}

// waitLedgerEntry polls the account's ledger until an entry under id
// appears, or fails at the deadline.
func waitLedgerEntry(t testing.TB, g *gateway, account, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range g.ledger(t, account) {
			if e.RequestID == id {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ledger entry under %s within 10 s", id)
		}
		time.Sleep(20 * time.Millisecond) // polling the ledger, an observable state
	}
}

func TestImagesPricedByQualityAndSize(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "priced", "plan": "paid", "cleared": true})
	gen := func(body string) response {
		return e.do(t, http.MethodPost, "/v1/images/generations", body, bearer(key)...)
	}

	// Billed from the provider's usage: low 1024x1024 costs its 272
	// output tokens, high 1536x1024 its 6,208, n=2 twice the tokens.
	for _, tc := range []struct {
		quality, size string
		n             int
	}{
		{"low", "1024x1024", 1},
		{"high", "1536x1024", 1},
		{"medium", "1024x1536", 2},
	} {
		body := `{"prompt":"a red fox","quality":"` + tc.quality + `","size":"` + tc.size + `","n":` + itoa(tc.n) + `}`
		r := gen(body)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", body, r.Status, r.Body)
		}
		imageReceipt(t, e.gateway, "priced", r.Header, "gpt-image-1", int64(tc.n), usageCost(t, "a red fox", 0, tc.n, tc.quality, tc.size, 0, false))
		sent := e.OA.Requests()[len(e.OA.Requests())-1].JSON()
		if sent["quality"] != tc.quality || sent["size"] != tc.size || sent["n"] != float64(tc.n) {
			t.Fatalf("upstream %v", sent)
		}
	}
	if low, high := usageCost(t, "a red fox", 0, 1, "low", "1024x1024", 0, false), usageCost(t, "a red fox", 0, 1, "high", "1536x1024", 0, false); high < 20*low {
		t.Fatalf("high 1536x1024 costs %s, low 1024x1024 %s", high, low)
	}

	// No size: the default 1024x1024 is asked for and priced; no quality:
	// the provider chooses (the fake: medium) and its usage is billed.
	r := gen(`{"prompt":"a quiet lake"}`)
	if sent := e.OA.Requests()[len(e.OA.Requests())-1].JSON(); r.Status != 200 || sent["size"] != "1024x1024" || sent["quality"] != nil {
		t.Fatalf("defaults: %d %s, upstream %v", r.Status, r.Body, sent)
	}
	imageReceipt(t, e.gateway, "priced", r.Header, "gpt-image-1", 1, usageCost(t, "a quiet lake", 0, 1, "", "", 0, false))

	// An answer without usage is billed at the table price of what was
	// made: the quality asked, or the one the answer names for auto.
	e.OA.Push(fake.Script{Usage: fake.Usage{Input: -1}})
	r = gen(`{"prompt":"p","quality":"high","size":"1024x1536"}`)
	imageReceipt(t, e.gateway, "priced", r.Header, "gpt-image-1", 1, tableCost(t, "high", "1024x1536", 1, 0, false))
	e.OA.Push(fake.Script{Usage: fake.Usage{Input: -1}})
	r = gen(`{"prompt":"p","quality":"auto","n":2}`)
	imageReceipt(t, e.gateway, "priced", r.Header, "gpt-image-1", 2, tableCost(t, fake.ImageAutoQuality, "1024x1024", 2, 0, false))

	// Pay as you go: the usage cost with the markup once.
	payg := e.newAccountKey(t, map[string]any{"id": "priced-payg", "plan": "paid", "cleared": true, "payg": true})
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"a red fox","quality":"high"}`, bearer(payg)...)
	imageReceipt(t, e.gateway, "priced-payg", r.Header, "gpt-image-1", 1, usageCost(t, "a red fox", 0, 1, "high", "1024x1024", 0, true))

	// A prepaid balance holds the price asked: enough for a low image,
	// not for a high one (nor for one whose quality the provider picks).
	prepaid := e.newAccountKey(t, map[string]any{"id": "priced-prepaid", "plan": "paid", "cleared": true, "balance_usd": "0.05"})
	for _, body := range []string{`{"prompt":"p","quality":"high"}`, `{"prompt":"p"}`} {
		r := e.do(t, http.MethodPost, "/v1/images/generations", body, bearer(prepaid)...)
		if r.Status != http.StatusPaymentRequired {
			t.Fatalf("%s on 0.05 USD: %d %s", body, r.Status, r.Body)
		}
		matchJSON(t, r.Body, `{"detail":{"error":{"code":"credit_exhausted","message":"<string>"}}}`)
	}
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p","quality":"low"}`, bearer(prepaid)...)
	imageReceipt(t, e.gateway, "priced-prepaid", r.Header, "gpt-image-1", 1, usageCost(t, "p", 0, 1, "low", "", 0, false))

	// max_price against the price of what is asked: low 1024x1024 at
	// 0.011 fits 0.011; high 1536x1024 at 0.25 does not fit 0.2; nor
	// does a quality left to the provider (its dearest, high, 0.167)
	// fit 0.1. A call never costs more than its max_price.
	r = gen(`{"prompt":"p","quality":"low","max_price":0.011}`)
	if r.Status != 200 || usdOf(t, r.Header.Get("X-Gw-Cost-Usd")) > usdOf(t, "0.011") {
		t.Fatalf("low at max_price 0.011: %d %s %s", r.Status, r.Body, r.Header.Get("X-Gw-Cost-Usd"))
	}
	before, entries := len(e.OA.Requests()), len(e.ledger(t, "priced"))
	for _, body := range []string{
		`{"prompt":"p","quality":"high","size":"1536x1024","max_price":0.2}`,
		`{"prompt":"p","max_price":0.1}`,
		`{"prompt":"p","quality":"low","n":2,"max_price":0.021}`,
	} {
		expectError(t, gen(body), 402, `{"error":{"message":"<string>","type":"<string>","code":"price_exceeds_max_price"}}`, "req-")
	}

	// A quality or size with no price: 400 naming the field, no code.
	for _, tc := range []struct{ body, param string }{
		{`{"prompt":"p","size":"512x512"}`, "size"},
		{`{"prompt":"p","quality":"low","size":"1792x1024"}`, "size"},
		{`{"prompt":"p","quality":"hd"}`, "quality"},
		{`{"prompt":"p","quality":"ultra","size":"1024x1024"}`, "quality"},
	} {
		r := gen(tc.body)
		expectError(t, r, 400, `{"error":{"message":"<string>","type":"<string>","param":"`+tc.param+`"}}`, "req-")
	}
	if len(e.OA.Requests()) != before || len(e.ledger(t, "priced")) != entries {
		t.Fatal("a refused call reached the provider or was charged")
	}
}

func TestImagesEditPricedByQualityAndSize(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "priced-editor", "plan": "paid", "cleared": true})
	png := imageFixture(t, "red.png")
	edit := func(fields ...string) response {
		body, ct := multipartImages(t, "image[]", [][]byte{png, png}, append([]string{"prompt", "add a red hat"}, fields...)...)
		return e.do(t, http.MethodPost, "/v1/images/edits", body, append(bearer(key), "Content-Type", ct)...)
	}
	// Two references' image tokens, the prompt and a high 1024x1536
	// image, all from the usage; the answer's usage.cost is the charge.
	r := edit("quality", "high", "size", "1024x1536")
	cost := usageCost(t, "add a red hat", 2, 1, "high", "1024x1536", 0, false)
	if r.Status != 200 {
		t.Fatalf("edit: %d %s", r.Status, r.Body)
	}
	q, s := fake.ImageMade("high", "1024x1536")
	refs, text, out := 2*fake.ImageReferenceTokens, fake.ImagePromptTokens("add a red hat"), fake.ImageOutputTokens(q, s)
	matchJSON(t, r.Body, `{"created":"<number>","data":[{"b64_json":"`+fake.ImageData(0)+`"}],"model":"gw-image","usage":{"cost":"`+cost.String()+
		`","input_tokens":`+itoa(refs+text)+`,"input_tokens_details":{"image_tokens":`+itoa(refs)+`,"text_tokens":`+itoa(text)+
		`},"output_tokens":`+itoa(out)+`,"total_tokens":`+itoa(refs+text+out)+`}}`)
	imageReceipt(t, e.gateway, "priced-editor", r.Header, "gpt-image-1", 1, cost)
	if f := e.OA.Requests()[0].Form(); f.Value["quality"][0] != "high" || f.Value["size"][0] != "1024x1536" {
		t.Fatalf("upstream form %v", f.Value)
	}
	// Low is cheaper; no usage: the table price.
	e.OA.Push(fake.Script{Usage: fake.Usage{Input: -1}})
	r = edit("quality", "low")
	imageReceipt(t, e.gateway, "priced-editor", r.Header, "gpt-image-1", 1, tableCost(t, "low", "1024x1024", 1, 0, false))
	// Unpriced size and quality: 400 naming them, nothing sent or charged.
	before, entries := len(e.OA.Requests()), len(e.ledger(t, "priced-editor"))
	expectError(t, edit("size", "256x256"), 400, `{"error":{"message":"<string>","type":"<string>","param":"size"}}`, "req-")
	expectError(t, edit("quality", "standard"), 400, `{"error":{"message":"<string>","type":"<string>","param":"quality"}}`, "req-")
	if len(e.OA.Requests()) != before || len(e.ledger(t, "priced-editor")) != entries {
		t.Fatal("a refused edit reached the provider or was charged")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A stream with previews is billed once its first preview is delivered:
// a client that takes it and hangs up pays for the image and previews
// asked; a stream that fails before any preview costs nothing; a stream
// without previews is billed from the completed image's usage.
func TestImagesStreamPreviewsBilled(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "previewer", "plan": "paid", "cleared": true})
	c := e.client(key)

	gate := make(chan struct{})
	defer close(gate)
	e.OA.Push(fake.Script{Gate: gate}) // the provider holds back everything after the first preview
	var resp *http.Response
	ctx, cancel := context.WithCancel(context.Background())
	stream := c.Images.GenerateStreaming(ctx, openai.ImageGenerateParams{Prompt: "a kite", Quality: openai.ImageGenerateParamsQualityLow,
		PartialImages: openai.Int(2)}, option.WithResponseInto(&resp))
	if !stream.Next() || stream.Current().Type != "image_generation.partial_image" {
		t.Fatalf("no first preview: %v", stream.Err())
	}
	cancel() // the client hangs up after the first preview
	stream.Close()
	id := resp.Header.Get("X-Gw-Request-Id")
	waitLedgerEntry(t, e.gateway, "previewer", id)
	e.expectLedger(t, "previewer", ledgerEntry{RequestID: id, Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: tableCost(t, "low", "1024x1024", 1, 2, false).String()})

	// Fails before its first event: an error event, [DONE], no charge.
	entries := len(e.ledger(t, "previewer"))
	e.OA.Push(fake.Script{Images: -1})
	r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"breaks early","stream":true,"partial_images":2}`, bearer(key)...)
	if body := string(r.Body); r.Status != 200 || !strings.Contains(body, `"code":"capability_unavailable"`) || strings.Contains(body, "image_generation.") ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("early failure: %d %s", r.Status, body)
	}
	if n := len(e.ledger(t, "previewer")); n != entries {
		t.Fatalf("a stream that delivered nothing was charged (%d entries, want %d)", n, entries)
	}

	// Fails after its first preview: billed, as the provider bills it.
	e.OA.Push(fake.Script{MidStreamError: true})
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"breaks late","stream":true,"partial_images":3,"quality":"high","size":"1536x1024"}`, bearer(key)...)
	if body := string(r.Body); r.Status != 200 || strings.Count(body, "image_generation.partial_image") != 1 || !strings.Contains(body, `"code":"capability_unavailable"`) {
		t.Fatalf("late failure: %d %s", r.Status, body)
	}
	e.expectLedger(t, "previewer", ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: tableCost(t, "high", "1536x1024", 1, 3, false).String()})

	// No previews asked: billed at the completed image, from its usage.
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"a whole kite","stream":true,"quality":"high"}`, bearer(key)...)
	if r.Status != 200 || strings.Count(string(r.Body), "image_generation.completed") != 1 {
		t.Fatalf("no previews: %d %s", r.Status, r.Body)
	}
	e.expectLedger(t, "previewer", ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: usageCost(t, "a whole kite", 0, 1, "high", "1024x1024", 0, false).String()})
}

// A stream without previews whose client leaves after its first image is
// billed for the images the provider made, not for those delivered: the
// gateway reads the provider's stream to its end after the client left.
// When the rest cannot be read (the provider is still making images at
// the time-out), the n images asked are billed at the table price.
func TestImagesStreamClientLeavesBilledForWhatWasMade(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "leaver", "plan": "paid", "cleared": true})
	c := e.client(key)
	// leave asks for 3 low images as a stream, takes the first image and
	// hangs up; it returns the request id.
	leave := func() string {
		t.Helper()
		var resp *http.Response
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stream := c.Images.GenerateStreaming(ctx, openai.ImageGenerateParams{Prompt: "three kites", Quality: openai.ImageGenerateParamsQualityLow,
			N: openai.Int(3)}, option.WithResponseInto(&resp))
		if !stream.Next() || stream.Current().Type != "image_generation.completed" || stream.Current().B64JSON != fake.ImageData(0) {
			t.Fatalf("no first image: %v", stream.Err())
		}
		cancel() // the client hangs up after the first image
		stream.Close()
		return resp.Header.Get("X-Gw-Request-Id")
	}

	// The provider goes on and makes two images in all (each taking a
	// while): both are billed, at the table price of the quality and size.
	e.OA.Push(fake.Script{Images: 2, ImageGap: 150 * time.Millisecond})
	id := leave()
	waitLedgerEntry(t, e.gateway, "leaver", id)
	e.expectLedger(t, "leaver", ledgerEntry{RequestID: id, Endpoint: "images", Model: "gpt-image-1", Units: 2, Unit: "image",
		Cost: tableCost(t, "low", "1024x1024", 2, 0, false).String()})

	// The provider is still making the rest at the time-out (1 s here):
	// the 3 images asked, at the table price the call held.
	gate := make(chan struct{})
	defer close(gate)
	e.OA.Push(fake.Script{Gate: gate})
	id = leave()
	waitLedgerEntry(t, e.gateway, "leaver", id)
	e.expectLedger(t, "leaver", ledgerEntry{RequestID: id, Endpoint: "images", Model: "gpt-image-1", Units: 3, Unit: "image",
		Cost: tableCost(t, "low", "1024x1024", 3, 0, false).String()})
}
