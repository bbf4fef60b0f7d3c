package integration

import (
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// The image rows TestImagesEdit and TestImagesGates leave out: the edit
// time-out, monthly_cap on both routes, and a 100 MB upload refused by the
// bounded reader without the gateway holding it.
func TestImagesLimits(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	png := imageFixture(t, "red.png")

	// monthly_cap refuses generations and edits in the detail wrapper,
	// nothing made, nothing charged.
	capped := e.newAccountKey(t, map[string]any{"id": "monthly-painter", "plan": "paid", "cleared": true, "monthly_cap_usd": "0.005"})
	r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p"}`, bearer(capped)...)
	if r.Status != http.StatusPaymentRequired {
		t.Fatalf("monthly cap, generation: %d %s", r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"detail":{"error":{"code":"monthly_cap","message":"<string>"}}}`)
	body, ct := multipartImages(t, "image[]", [][]byte{png}, "prompt", "p")
	r = e.do(t, http.MethodPost, "/v1/images/edits", body, append(bearer(capped), "Content-Type", ct)...)
	if r.Status != http.StatusPaymentRequired {
		t.Fatalf("monthly cap, edit: %d %s", r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"detail":{"error":{"code":"monthly_cap","message":"<string>"}}}`)
	if n := len(e.OA.Requests()); n != 0 {
		t.Fatalf("a capped call reached the provider %d times", n)
	}
	if n := len(e.ledger(t, "monthly-painter")); n != 0 {
		t.Fatalf("a capped call was charged %d times", n)
	}

	key := e.newAccountKey(t, map[string]any{"id": "slow-editor", "plan": "paid", "cleared": true})

	// An edit the provider does not answer within the edit time-out (90 s;
	// 1 s here) is 502 capability_unavailable and not charged.
	gate := make(chan struct{})
	e.OA.Push(fake.Script{Gate: gate})
	r = e.do(t, http.MethodPost, "/v1/images/edits", body, append(bearer(key), "Content-Type", ct)...)
	close(gate)
	expectError(t, r, http.StatusBadGateway, `{"error":{"message":"<string>","type":"<string>","code":"capability_unavailable"}}`, "req-")
	if n := len(e.ledger(t, "slow-editor")); n != 0 {
		t.Fatalf("a timed-out edit was charged %d times", n)
	}

	// A 100 MB reference (a real PNG followed by zeros), streamed so the
	// test does not hold it either: 400 invalid_reference_image, the
	// provider never called, and the gateway's peak memory grows by far
	// less than the upload.
	pid := e.gateway.pid(t)
	before, measured := procMemKB(t, pid, "VmRSS", true)
	const huge = 100 << 20
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("image[]", "huge.png")
		if err == nil {
			_, err = fw.Write(png)
		}
		zeros := make([]byte, 1<<20)
		for sent := len(png); err == nil && sent < huge; sent += len(zeros) {
			_, err = fw.Write(zeros)
		}
		if err == nil {
			err = mw.WriteField("prompt", "p")
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/images/edits", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the gateway answered before reading it all
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("100 MB reference: %d %s", resp.StatusCode, got)
	}
	matchJSON(t, got, `{"error":{"message":"<string>","type":"<string>","param":"image","code":"invalid_reference_image"}}`)
	if n := len(e.OA.Requests()); n != 1 { // the timed-out edit only
		t.Fatalf("the provider saw %d requests, want 1", n)
	}
	if n := len(e.ledger(t, "slow-editor")); n != 0 {
		t.Fatalf("a refused edit was charged %d times", n)
	}
	if !measured {
		t.Log("no /proc: peak memory not measured")
		return
	}
	peak, _ := procMemKB(t, pid, "VmHWM", false)
	grew := peak - before // KiB
	t.Logf("gateway peak memory grew %.1f MiB during a 100 MB upload", float64(grew)/1024)
	if grew > 40<<10 { // a held upload would be 100 MiB
		t.Fatalf("gateway peak memory grew %.1f MiB during a 100 MB upload", float64(grew)/1024)
	}
}

// A stream is relayed as the provider sends it: the first preview reaches
// the SDK while the provider still holds the rest back, and the stream then
// completes. (A gateway that buffered would see nothing until its 60 s
// time-out cut the provider off, and end with an error event instead.)
func TestImagesStreamRelayed(t *testing.T) {
	t.Parallel()
	g, oa := startWithFakes(t, withGW(t, ""))
	e := &imageEnv{gateway: g, OA: oa}
	key := e.newAccountKey(t, map[string]any{"id": "watcher", "plan": "paid", "cleared": true})
	gate := make(chan struct{})
	e.OA.Push(fake.Script{Gate: gate})
	c := e.client(key)
	stream := c.Images.GenerateStreaming(context.Background(), openai.ImageGenerateParams{Prompt: "a slow kite", PartialImages: openai.Int(2)})
	defer stream.Close()
	if !stream.Next() {
		close(gate)
		t.Fatalf("no first event: %v", stream.Err())
	}
	first := stream.Current()
	close(gate) // only now does the provider send the rest
	if first.Type != "image_generation.partial_image" || first.B64JSON != fake.PartialData(0) {
		t.Fatalf("first event %s", first.RawJSON())
	}
	types := []string{first.Type}
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "image_generation.partial_image,image_generation.partial_image,image_generation.completed"; strings.Join(types, ",") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if n := len(e.ledger(t, "watcher")); n != 1 {
		t.Fatalf("ledger has %d entries, want 1", n)
	}
}

// partial_images asks for previews only of a model that has them: with
// previews switched off for gw-image-pro in the Caddyfile, the provider is
// not asked for any and the stream is the completed event alone.
func TestImagesStreamNoPreviews(t *testing.T) {
	t.Parallel()
	const pro = "\t\t\tcategory Pro Ultra\n\t\t\tpreviews\n"
	cfg := withGW(t, "")
	if !strings.Contains(cfg, pro) {
		t.Fatal("Caddyfile.example's gw-image-pro no longer ends with category Pro Ultra and previews")
	}
	g, oa := startWithFakes(t, strings.Replace(cfg, pro, "\t\t\tcategory Pro Ultra\n", 1))
	e := &imageEnv{gateway: g, OA: oa}
	key := e.newAccountKey(t, map[string]any{"id": "no-previews", "plan": "paid", "cleared": true})
	c := e.client(key)
	var resp *http.Response
	stream := c.Images.GenerateStreaming(context.Background(), openai.ImageGenerateParams{Prompt: "p", Model: "gw-image-pro", PartialImages: openai.Int(2)},
		option.WithResponseInto(&resp))
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(types, ",") != "image_generation.completed" {
		t.Fatalf("events %v, want the completed event alone", types)
	}
	if sent := e.OA.Requests()[0].JSON(); sent["stream"] != true || sent["partial_images"] != nil {
		t.Fatalf("upstream asked %v", sent)
	}
	e.expectLedger(t, "no-previews", ledgerEntry{RequestID: resp.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: usageCost(t, "p", 0, 1, "", "", 0, false).String()})

	// gw-image still has previews in the same gateway.
	types = nil
	stream = c.Images.GenerateStreaming(context.Background(), openai.ImageGenerateParams{Prompt: "p", PartialImages: openai.Int(1)})
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	if err := stream.Err(); err != nil || strings.Join(types, ",") != "image_generation.partial_image,image_generation.completed" {
		t.Fatalf("gw-image events %v (%v)", types, err)
	}
}

// Edits take category and max_price as generations do, and both routes
// take the key in x-api-key as well as a bearer token.
func TestImagesEditOptions(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "options-editor", "plan": "paid", "cleared": true})
	png := imageFixture(t, "red.png")
	edit := func(header []string, fields ...string) response {
		body, ct := multipartImages(t, "image[]", [][]byte{png}, append([]string{"prompt", "p"}, fields...)...)
		return e.do(t, http.MethodPost, "/v1/images/edits", body, append(header, "Content-Type", ct)...)
	}

	// category Pro picks gw-image-pro; the answer names it, with the
	// provider's usage and the cost as charged.
	r := edit(bearer(key), "category", "Pro")
	cost := usageCost(t, "p", 1, 1, "", "", 0, false)
	if r.Status != http.StatusOK {
		t.Fatalf("category Pro: %d %s", r.Status, r.Body)
	}
	out := fake.ImageOutputTokens(fake.ImageMade("", ""))
	matchJSON(t, r.Body, `{"created":"<number>","data":[{"b64_json":"`+fake.ImageData(0)+`"}],"model":"gw-image-pro",`+
		`"usage":{"cost":"`+cost.String()+`","input_tokens":`+itoa(1+fake.ImageReferenceTokens)+`,"input_tokens_details":{"image_tokens":`+itoa(fake.ImageReferenceTokens)+
		`,"text_tokens":1},"output_tokens":`+itoa(out)+`,"total_tokens":`+itoa(1+fake.ImageReferenceTokens+out)+`}}`)
	imageReceipt(t, e.gateway, "options-editor", r.Header, "gpt-image-1", 1, cost)

	// max_price under the price asked (a low image, 0.011): 402, the
	// provider not called, nothing charged. At it: made, and charged no
	// more than max_price though the reference's tokens cost more.
	before, entries := len(e.OA.Requests()), len(e.ledger(t, "options-editor"))
	r = edit(bearer(key), "model", "gw-image-pro", "quality", "low", "max_price", "0.0109")
	expectError(t, r, http.StatusPaymentRequired, `{"error":{"message":"<string>","type":"<string>","code":"price_exceeds_max_price"}}`, "req-")
	if len(e.OA.Requests()) != before || len(e.ledger(t, "options-editor")) != entries {
		t.Fatal("an edit over max_price reached the provider or was charged")
	}
	if usageCost(t, "p", 1, 1, "low", "", 0, false) <= usdOf(t, "0.011") {
		t.Fatal("the usage of a low edit no longer costs more than its table price")
	}
	r = edit(bearer(key), "model", "gw-image-pro", "quality", "low", "max_price", "0.011")
	if r.Status != http.StatusOK {
		t.Fatalf("edit at max_price: %d %s", r.Status, r.Body)
	}
	imageReceipt(t, e.gateway, "options-editor", r.Header, "gpt-image-1", 1, usdOf(t, "0.011"))

	// x-api-key works on both routes.
	if r := edit([]string{"X-Api-Key", key}); r.Status != http.StatusOK || r.Header.Get("X-Gw-Cost-Usd") != usageCost(t, "p", 1, 1, "", "", 0, false).String() {
		t.Fatalf("edit with x-api-key: %d %s", r.Status, r.Body)
	}
	if r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p"}`, "X-Api-Key", key); r.Status != http.StatusOK {
		t.Fatalf("generation with x-api-key: %d %s", r.Status, r.Body)
	}
}
