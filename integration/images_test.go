package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Images through the built gateway (Caddyfile.example with short
// time-outs) against the fake provider's /images/generations and
// /images/edits, driven with openai-go: every row of the image error
// tables, the stream, and receipts equal to the ledger.

type imageEnv struct {
	*gateway
	OA *fake.Upstream
}

func newImageEnv(t *testing.T, gwLines string) *imageEnv {
	t.Helper()
	g, oa := startWithFakes(t, withGW(t, "\t\timages {\n\t\t\tgenerate_timeout 1s\n\t\t\tedit_timeout 1s\n\t\t}\n"+gwLines))
	return &imageEnv{gateway: g, OA: oa}
}

func (e *imageEnv) client(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// imageFixture reads a real image made with ffmpeg.
func imageFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "imagetype", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// imageReceipt checks the receipt headers of an image answer against the
// ledger: one entry under its request id, units images at cost.
func imageReceipt(t testing.TB, g *gateway, account string, h http.Header, model string, units int64, cost pricing.Money) {
	t.Helper()
	if got := h.Get("X-Gw-Routed-Model"); got != model {
		t.Errorf("X-Gw-Routed-Model %q, want %q", got, model)
	}
	if got := h.Get("X-Gw-Cost-Usd"); got != cost.String() {
		t.Errorf("X-Gw-Cost-Usd %q, want %s", got, cost)
	}
	g.expectLedger(t, account, ledgerEntry{RequestID: h.Get("X-Gw-Request-Id"), Endpoint: "images", Model: model, Units: units, Unit: "image", Cost: cost.String()})
}

func TestImagesGenerate(t *testing.T) {
	t.Parallel()
	// gw-image-pro on a model of its own, so that the alias a category
	// picks shows in X-Gw-Routed-Model.
	const pro = "model gpt-image-1\n\t\t\tdisplay_name \"Image Pro\""
	cfg := withGW(t, "\t\timages {\n\t\t\tgenerate_timeout 1s\n\t\t\tedit_timeout 1s\n\t\t}\n")
	if !strings.Contains(cfg, pro) {
		t.Fatal("Caddyfile.example's gw-image-pro no longer names model gpt-image-1 before its display name")
	}
	g, oa := startWithFakes(t, strings.Replace(cfg, pro, "model gpt-image-1.5\n\t\t\tdisplay_name \"Image Pro\"", 1))
	e := &imageEnv{gateway: g, OA: oa}
	key := e.newAccountKey(t, map[string]any{"id": "painter", "plan": "paid", "cleared": true})
	c := e.client(key)
	ctx := context.Background()

	// n images, each billed; no cost in the body, the receipt in headers.
	var resp *http.Response
	img, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "a red fox", N: openai.Int(2), Size: openai.ImageGenerateParamsSize1024x1024,
		Quality: openai.ImageGenerateParamsQualityHigh}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Data) != 2 || img.Data[0].B64JSON != fake.ImageData(0) || img.Data[1].B64JSON != fake.ImageData(1) || img.Created == 0 {
		t.Fatalf("answer %+v", img)
	}
	if strings.Contains(img.RawJSON(), "cost") || strings.Contains(img.RawJSON(), "usage") {
		t.Errorf("a generation carries no cost: %s", img.RawJSON())
	}
	imageReceipt(t, e.gateway, "painter", resp.Header, "gpt-image-1", 2, usageCost(t, "a red fox", 0, 2, "high", "1024x1024", 0, false))
	sent := e.OA.Requests()[0]
	if sent.Path != "/v1/images/generations" || sent.JSON()["model"] != "gpt-image-1" || sent.JSON()["prompt"] != "a red fox" ||
		sent.JSON()["n"] != float64(2) || sent.JSON()["size"] != "1024x1024" || sent.JSON()["quality"] != "high" {
		t.Fatalf("upstream %s %s", sent.Path, sent.Body)
	}

	// The provider made fewer: only those are billed (its usage counts them).
	e.OA.Push(fake.Script{Images: 1})
	img, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Prompt: "two foxes", N: openai.Int(2)}, option.WithResponseInto(&resp))
	if err != nil || len(img.Data) != 1 {
		t.Fatalf("fewer: %v %+v", err, img)
	}
	imageReceipt(t, e.gateway, "painter", resp.Header, "gpt-image-1", 1, usageCost(t, "two foxes", 0, 1, "", "", 0, false))

	// category picks the alias of that price class; a named model wins.
	for _, tc := range []struct{ body, model string }{
		{`{"prompt":"p","category":"Pro"}`, "gpt-image-1.5"},
		{`{"prompt":"p","category":"ultra"}`, "gpt-image-1.5"},
		{`{"prompt":"p","category":"Plus"}`, "gpt-image-1"},
		{`{"prompt":"p","category":"Standard"}`, "gpt-image-1"},
		{`{"prompt":"p","model":"gw-image-pro"}`, "gpt-image-1.5"},
		{`{"prompt":"p","model":"gw-image","category":"Ultra"}`, "gpt-image-1"},
	} {
		r := e.do(t, http.MethodPost, "/v1/images/generations", tc.body, bearer(key)...)
		if r.Status != http.StatusOK || r.Header.Get("X-Gw-Routed-Model") != tc.model || r.Header.Get("X-Gw-Cost-Usd") != usageCost(t, "p", 0, 1, "", "", 0, false).String() {
			t.Errorf("%s: %d %s model %s cost %s", tc.body, r.Status, r.Body, r.Header.Get("X-Gw-Routed-Model"), r.Header.Get("X-Gw-Cost-Usd"))
		}
	}

	// The chat-shaped body: the prompt is the last user message's text.
	r := e.do(t, http.MethodPost, "/v1/images/generations", `{"model":"gw-image","messages":[{"role":"user","content":"old"},{"role":"assistant","content":"ok"},`+
		`{"role":"user","content":[{"type":"text","text":"a blue heron"}]}],"tools":[{"type":"image_generation"}]}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("chat-shaped: %d %s", r.Status, r.Body)
	}
	if got := e.OA.Requests()[len(e.OA.Requests())-1].JSON()["prompt"]; got != "a blue heron" {
		t.Fatalf("chat-shaped prompt %v", got)
	}

	// max_price is checked against the price of what is asked before
	// anything is made: two low images are 0.022.
	before := len(e.OA.Requests())
	entries := len(e.ledger(t, "painter"))
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p","quality":"low","n":2,"max_price":0.0219}`, bearer(key)...)
	expectError(t, r, 402, `{"error":{"message":"<string>","type":"<string>","code":"price_exceeds_max_price"}}`, "req-")
	if len(e.OA.Requests()) != before || len(e.ledger(t, "painter")) != entries {
		t.Fatal("over max_price: something was made or charged")
	}
	if r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p","quality":"low","n":2,"max_price":0.022}`, bearer(key)...); r.Status != 200 {
		t.Fatalf("at max_price: %d %s", r.Status, r.Body)
	}

	t.Run("refusals", func(t *testing.T) {
		before := len(e.OA.Requests())
		entries := len(e.ledger(t, "painter"))
		for _, tc := range []struct {
			body, param, code string
		}{
			{`{"n":1}`, "prompt", ""},
			{`{"prompt":"  "}`, "prompt", ""},
			{`{"prompt":"p","n":1.5}`, "n", ""},
			{`{"prompt":"p","n":"two"}`, "n", ""},
			{`{"prompt":"p","n":0}`, "n", ""},
			{`{"prompt":"p","model":"gpt-4.1-mini"}`, "model", ""},
			{`{"prompt":"p","category":"Deluxe"}`, "category", ""},
			{`{"prompt":"p","max_price":"lots"}`, "max_price", ""},
			{`{"prompt":"p","partial_images":-1,"stream":true}`, "partial_images", ""},
			{`{"messages":[{"role":"user","content":"x"}]}`, "tools", ""},
			{`[1]`, "body", ""},
			{`{"prompt":"p","prompt":"q"}`, "", ""},
		} {
			r := e.do(t, http.MethodPost, "/v1/images/generations", tc.body, bearer(key)...)
			var got struct {
				Error struct {
					Code  *string `json:"code"`
					Param *string `json:"param"`
				} `json:"error"`
			}
			_ = json.Unmarshal(r.Body, &got)
			if r.Status != 400 || got.Error.Code != nil || (tc.param != "" && (got.Error.Param == nil || *got.Error.Param != tc.param)) {
				t.Errorf("%s: %d %s, want 400 param %q and no code", tc.body, r.Status, r.Body, tc.param)
			}
		}
		if len(e.OA.Requests()) != before || len(e.ledger(t, "painter")) != entries {
			t.Fatal("a refusal reached the provider or was charged")
		}
	})

	t.Run("provider refusals", func(t *testing.T) {
		entries := len(e.ledger(t, "painter"))
		for _, tc := range []struct {
			script fake.Script
			status int
			want   string
		}{
			{fake.Script{Status: 400, ErrorType: "moderation_blocked", ErrorMessage: "Your request was rejected by the safety system."}, 400,
				`{"error":{"message":"<string>","type":"image_generation_user_error","code":"moderation_blocked"}}`},
			{fake.Script{Status: 403, ErrorType: "organization_must_be_verified", ErrorMessage: "Your organization must be verified to use the model."}, 403,
				`{"error":{"message":"<string>","type":"permission_error","code":"organization_must_be_verified"}}`},
			{fake.Script{Status: 500}, 502, `{"error":{"message":"<string>","type":"<string>","code":"capability_unavailable"}}`},
			{fake.Script{Images: -1}, 502, `{"error":{"message":"<string>","type":"<string>","code":"capability_unavailable"}}`},
		} {
			e.OA.Push(tc.script)
			r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p"}`, bearer(key)...)
			expectError(t, r, tc.status, tc.want, "req-")
			if strings.Contains(string(r.Body), "Your request was rejected") || strings.Contains(string(r.Body), "organization must") {
				t.Errorf("the provider's words leaked: %s", r.Body)
			}
		}
		// 60 s of work (1 s here): 502, not billed.
		gate := make(chan struct{})
		e.OA.Push(fake.Script{Gate: gate})
		r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"slow"}`, bearer(key)...)
		close(gate)
		expectError(t, r, 502, `{"error":{"message":"<string>","type":"<string>","code":"capability_unavailable"}}`, "req-")
		if n := len(e.ledger(t, "painter")); n != entries {
			t.Fatalf("failures were charged: %d entries, want %d", n, entries)
		}
	})
}

func TestImagesStream(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "streamer", "plan": "paid", "cleared": true})
	c := e.client(key)
	ctx := context.Background()

	// partial_images above 3 is lowered to 3, not refused; previews, then
	// one completed event shaped like the normal response, then [DONE].
	var resp *http.Response
	stream := c.Images.GenerateStreaming(ctx, openai.ImageGenerateParams{Prompt: "a kite", PartialImages: openai.Int(5)}, option.WithResponseInto(&resp))
	var types []string
	var completed string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "image_generation.completed" {
			completed = ev.RawJSON()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "image_generation.partial_image,image_generation.partial_image,image_generation.partial_image,image_generation.completed"
	if strings.Join(types, ",") != want {
		t.Fatalf("events %v", types)
	}
	var done map[string]any
	_ = json.Unmarshal([]byte(completed), &done)
	if data, _ := done["data"].([]any); len(data) != 1 || data[0].(map[string]any)["b64_json"] != fake.ImageData(0) || done["b64_json"] != fake.ImageData(0) || done["created"] == nil {
		t.Fatalf("completed %s", completed)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Gw-Routed-Model") != "gpt-image-1" {
		t.Fatalf("headers %v", resp.Header)
	}
	if got := e.OA.Requests()[0].JSON(); got["stream"] != true || got["partial_images"] != float64(3) {
		t.Fatalf("upstream %v", got)
	}
	// Billed at its first preview: the image at the quality the provider
	// chose and the three previews.
	e.expectLedger(t, "streamer", ledgerEntry{RequestID: resp.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: tableCost(t, fake.ImageAutoQuality, "1024x1024", 1, 3, false).String()})

	// The raw stream: data lines with a type, [DONE] last.
	r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"raw","stream":true,"partial_images":1}`, bearer(key)...)
	body := string(r.Body)
	if r.Status != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, `"type":"image_generation.partial_image"`) != 1 ||
		!strings.Contains(body, `"partial_image_index":0`) || strings.Count(body, `"type":"image_generation.completed"`) != 1 {
		t.Fatalf("raw stream %d %s", r.Status, body)
	}

	// A failure after the stream began: an error event, [DONE]; the
	// preview delivered before it is billed.
	entries := len(e.ledger(t, "streamer"))
	e.OA.Push(fake.Script{MidStreamError: true})
	r = e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"breaks","stream":true,"partial_images":2}`, bearer(key)...)
	body = string(r.Body)
	if r.Status != 200 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"code":"capability_unavailable"`) ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, "image_generation.completed") {
		t.Fatalf("broken stream %s", body)
	}
	if n := len(e.ledger(t, "streamer")); n != entries+1 {
		t.Fatalf("a stream that delivered a preview: %d entries, want %d", n, entries+1)
	}
	e.expectLedger(t, "streamer", ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "images", Model: "gpt-image-1", Units: 1, Unit: "image",
		Cost: tableCost(t, fake.ImageAutoQuality, "1024x1024", 1, 2, false).String()})
}

// multipartImages builds an edit upload: files under field, then fields as
// name, value pairs.
func multipartImages(t testing.TB, field string, files [][]byte, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i, f := range files {
		fw, err := mw.CreateFormFile(field, fmt.Sprintf("ref-%d.png", i))
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(f)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

func TestImagesEdit(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	key := e.newAccountKey(t, map[string]any{"id": "editor", "plan": "paid", "cleared": true})
	c := e.client(key)
	ctx := context.Background()
	png, jpg, webp := imageFixture(t, "red.png"), imageFixture(t, "blue.jpg"), imageFixture(t, "green.webp")

	// Three references (named anything: the bytes decide), exactly one
	// image back with model and usage.cost.
	var resp *http.Response
	img, err := c.Images.Edit(ctx, openai.ImageEditParams{
		Image:  openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(png), "a.jpg", "text/plain"), openai.File(bytes.NewReader(jpg), "b.bin", "image/png"), openai.File(bytes.NewReader(webp), "c", "application/octet-stream")}},
		Prompt: "make it night", Model: "gw-image-pro",
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	cost := usageCost(t, "make it night", 3, 1, "", "", 0, false)
	if len(img.Data) != 1 || img.Data[0].B64JSON != fake.ImageData(0) {
		t.Fatalf("edit %s", img.RawJSON())
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(img.RawJSON()), &raw)
	if raw["model"] != "gw-image-pro" || raw["usage"].(map[string]any)["cost"] != cost.String() {
		t.Fatalf("edit model/usage %s", img.RawJSON())
	}
	imageReceipt(t, e.gateway, "editor", resp.Header, "gpt-image-1", 1, cost)
	f := e.OA.Requests()[0].Form()
	if f == nil || len(f.File["image[]"]) != 3 || f.File["image[]"][0].Filename != "image-1.png" || f.File["image[]"][1].Filename != "image-2.jpeg" ||
		f.File["image[]"][2].Filename != "image-3.webp" || f.Value["prompt"][0] != "make it night" || f.Value["model"][0] != "gpt-image-1" || f.Value["n"][0] != "1" {
		t.Fatalf("upstream form %+v", f)
	}
	if f.File["image[]"][0].Size != int64(len(png)) {
		t.Errorf("upstream file %d bytes, want %d", f.File["image[]"][0].Size, len(png))
	}

	// A single image under "image" works too (the default model).
	body, ct := multipartImages(t, "image", [][]byte{png}, "prompt", "add a hat")
	r := e.do(t, http.MethodPost, "/v1/images/edits", body, append(bearer(key), "Content-Type", ct)...)
	if r.Status != 200 || r.Header.Get("X-Gw-Cost-Usd") != usageCost(t, "add a hat", 1, 1, "", "", 0, false).String() {
		t.Fatalf("single image: %d %s", r.Status, r.Body)
	}

	t.Run("refusals", func(t *testing.T) {
		before := len(e.OA.Requests())
		entries := len(e.ledger(t, "editor"))
		big := append(append([]byte{}, png...), make([]byte, 10<<20)...) // a real PNG made 10 MB long
		eight := append(append([]byte{}, png...), make([]byte, 7<<20)...)
		for _, tc := range []struct {
			name        string
			files       [][]byte
			fields      []string
			code, param string
		}{
			{"text named png", [][]byte{[]byte("I am not an image")}, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"gif", [][]byte{[]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")}, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"five", [][]byte{png, png, png, png, png}, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"over 10 MB", [][]byte{big}, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"over 20 MB together", [][]byte{eight, eight, eight}, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"none", nil, []string{"prompt", "p"}, "invalid_reference_image", "image"},
			{"chat model", [][]byte{png}, []string{"prompt", "p", "model", "gpt-4.1-mini"}, "edit_unsupported", "model"},
			{"no prompt", [][]byte{png}, nil, "", "prompt"},
			{"two images asked", [][]byte{png}, []string{"prompt", "p", "n", "2"}, "", "n"},
			{"stream", [][]byte{png}, []string{"prompt", "p", "stream", "true"}, "", "stream"},
		} {
			body, ct := multipartImages(t, "image[]", tc.files, tc.fields...)
			r := e.do(t, http.MethodPost, "/v1/images/edits", body, append(bearer(key), "Content-Type", ct)...)
			var got struct {
				Error struct {
					Code, Param *string
				} `json:"error"`
			}
			_ = json.Unmarshal(r.Body, &got)
			code := ""
			if got.Error.Code != nil {
				code = *got.Error.Code
			}
			if r.Status != 400 || code != tc.code || got.Error.Param == nil || *got.Error.Param != tc.param {
				t.Errorf("%s: %d %s, want 400 code %q param %q", tc.name, r.Status, r.Body, tc.code, tc.param)
			}
		}
		r := e.do(t, http.MethodPost, "/v1/images/edits", `{"prompt":"json"}`, bearer(key)...)
		if r.Status != 400 {
			t.Errorf("JSON edit: %d %s", r.Status, r.Body)
		}
		if len(e.OA.Requests()) != before || len(e.ledger(t, "editor")) != entries {
			t.Fatal("a refusal reached the provider or was charged")
		}
	})

	// openai-go reads a refusal as *openai.Error.
	_, err = c.Images.Edit(ctx, openai.ImageEditParams{Image: openai.ImageEditParamsImageUnion{OfFile: openai.File(strings.NewReader("nope"), "x.png", "image/png")}, Prompt: "p"})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Code != "invalid_reference_image" || oe.Param != "image" {
		t.Fatalf("SDK error %v", err)
	}
}

// Money, plan, allowlist and the ability switch, in the image shapes: a
// credit refusal in the detail wrapper, the others in the ability shape.
func TestImagesGates(t *testing.T) {
	t.Parallel()
	e := newImageEnv(t, "")
	gen := func(key string) response {
		return e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p"}`, bearer(key)...)
	}
	free := e.newAccountKey(t, map[string]any{"id": "free-painter", "plan": "free"})
	expectError(t, gen(free), 402, `{"error":{"message":"<string>","type":"<string>","code":"premium_locked"}}`, "req-")
	broke := e.newAccountKey(t, map[string]any{"id": "broke-painter", "plan": "paid", "cleared": true, "balance_usd": "0.005"})
	r := gen(broke)
	if r.Status != 402 {
		t.Fatalf("broke: %d %s", r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"detail":{"error":{"code":"credit_exhausted","message":"<string>"}}}`)
	capped := e.newAccountKey(t, map[string]any{"id": "capped-painter", "plan": "paid", "cleared": true, "daily_cap_usd": "0.005"})
	matchJSON(t, gen(capped).Body, `{"detail":{"error":{"code":"daily_cap","message":"<string>"}}}`)
	off := e.newAccountKey(t, map[string]any{"id": "no-images", "plan": "paid", "cleared": true, "abilities": []string{"speech"}})
	if r := gen(off); r.Status != 404 {
		t.Fatalf("switched off: %d %s", r.Status, r.Body)
	}
	ok := e.newAccountKey(t, map[string]any{"id": "listed", "plan": "paid", "cleared": true})
	limited, _ := e.createKey(t, "listed", map[string]any{"name": "voice only", "models": []string{"gw-voice"}})
	expectError(t, gen(limited), 403, `{"error":{"message":"<string>","type":"permission_error","code":"permission_error"}}`, "req-")
	if r := e.do(t, http.MethodPost, "/v1/images/generations", `{"prompt":"p"}`, bearer("sk-never-issued-0123456789abcdefghij")...); r.Status != 401 ||
		!strings.Contains(string(r.Body), `"permission_error"`) {
		t.Fatalf("unknown key: %d %s", r.Status, r.Body)
	}
	// Image calls are outside the 60-a-minute budget of transcription,
	// speech and search: 61 in a row all answer.
	for i := range 61 {
		if r := gen(ok); r.Status != 200 {
			t.Fatalf("image call %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	if r := e.do(t, http.MethodPost, "/v1/search", `{"query":"q"}`, bearer(ok)...); r.Status == http.StatusTooManyRequests {
		t.Fatalf("image calls used the shared budget: %s", r.Body)
	}
	for _, id := range []string{"free-painter", "broke-painter", "capped-painter", "no-images"} {
		if n := len(e.ledger(t, id)); n != 0 {
			t.Errorf("%s charged %d times", id, n)
		}
	}
}
