package images

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

func price(n int64) *int64 { return &n }

func testCatalog(t *testing.T, abs ...catalog.Ability) *catalog.Catalog {
	t.Helper()
	for i := range abs {
		abs[i].Provider, abs[i].Model, abs[i].PriceMicrocents = "p", "m-"+abs[i].Alias, price(10000)
	}
	cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, BaseURL: "http://127.0.0.1:1/v1"}}, nil, abs, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Categories: the defaults, a config's own, and the mistakes refused.
func TestCategories(t *testing.T) {
	h, err := New(nil, testCatalog(t, catalog.Ability{Alias: AliasImage}, catalog.Ability{Alias: AliasImagePro}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Standard": AliasImage, "Plus": AliasImage, "Pro": AliasImagePro, "Ultra": AliasImagePro}
	for c, a := range want {
		if h.byCategory[c] != a {
			t.Errorf("%s served by %q, want %s", c, h.byCategory[c], a)
		}
	}
	h, err = New(nil, testCatalog(t, catalog.Ability{Alias: AliasImage, Categories: []string{"standard", "PLUS", "Pro", "Ultra"}}), Config{})
	if err != nil || h.byCategory["Ultra"] != AliasImage {
		t.Fatalf("one alias for all: %v %v", h.byCategory, err)
	}
	for _, abs := range [][]catalog.Ability{
		{{Alias: AliasImage, Categories: []string{"Deluxe"}}},
		{{Alias: AliasImage, Categories: []string{"Pro"}}, {Alias: AliasImagePro, Categories: []string{"Pro"}}},
		{{Alias: "gw-voice", Categories: []string{"Pro"}}},
	} {
		if _, err := New(nil, testCatalog(t, abs...), Config{}); err == nil {
			t.Errorf("%+v: accepted", abs)
		}
	}
}

// The generation body's checks: each refusal a 400 naming its field; the
// chat-shaped body's prompt; partial_images lowered, not refused.
func TestParseGenerate(t *testing.T) {
	h, _ := New(nil, testCatalog(t, catalog.Ability{Alias: AliasImage}, catalog.Ability{Alias: AliasImagePro}), Config{})
	cat := testCatalog(t, catalog.Ability{Alias: AliasImage}, catalog.Ability{Alias: AliasImagePro})
	r, err := h.parseGenerate(cat, []byte(`{"prompt":"p","n":3,"category":"pro","stream":true,"partial_images":9,"max_price":"0.5","size":"1024x1536","output_compression":80,"extra":{"ignored":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.alias != AliasImagePro || r.n != 3 || !r.stream || r.partial != MaxPartialImages || r.maxPrice == nil || r.maxPrice.String() != "0.50" ||
		r.pass["size"] != "1024x1536" || r.pass["output_compression"] != int64(80) || len(r.pass) != 2 {
		t.Fatalf("parsed %+v", r)
	}
	r, err = h.parseGenerate(cat, []byte(`{"messages":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}],"tools":[{"type":"function"},{"type":"image_generation"}]}`))
	if err != nil || r.prompt != "a\nb" || r.alias != AliasImage {
		t.Fatalf("chat-shaped %+v %v", r, err)
	}
	for body, param := range map[string]string{
		`{}`: "prompt", `{"prompt":1}`: "prompt", `{"prompt":"p","n":2.5}`: "n", `{"prompt":"p","n":11}`: "n",
		`{"prompt":"p","model":"gw-voice"}`: "model", `{"prompt":"p","category":5}`: "category", `{"prompt":"p","max_price":-1}`: "max_price",
		`{"prompt":"p","stream":"yes"}`: "stream", `{"prompt":"p","size":3}`: "size", `{"prompt":"p","output_compression":101}`: "output_compression",
		`{"messages":[{"role":"user","content":"x"}],"tools":[]}`: "tools", `{"messages":[{"role":"user","content":""}],"tools":[{"type":"image_generation"}]}`: "messages",
		`"p"`: "body",
	} {
		_, err := h.parseGenerate(cat, []byte(body))
		if e := gwerr.As(err); err == nil || e.Kind != gwerr.Invalid || e.Param != param {
			t.Errorf("%s: %v, want 400 param %s", body, err, param)
		}
	}
}

// whole takes whole numbers only.
func TestWhole(t *testing.T) {
	for raw, want := range map[string]bool{`1`: true, `"2"`: true, `1.0`: false, `1e2`: false, `"1.5"`: false, `true`: false, `" 3"`: true} {
		if _, ok := whole(gjson.Parse(raw)); ok != want {
			t.Errorf("%s: %v", raw, ok)
		}
	}
}

// The generation parser takes any body without panicking, and refuses
// with a 400.
func FuzzParseGenerate(f *testing.F) {
	h := &Handler{byCategory: map[string]string{"Standard": AliasImage}}
	cat := &catalog.Catalog{Abilities: map[string]*catalog.Ability{AliasImage: {Alias: AliasImage}}}
	for _, s := range []string{`{"prompt":"p","n":2}`, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"image_generation"}]}`,
		`{"prompt":"p","max_price":0.1,"partial_images":4,"stream":true}`, `[]`, `{"n":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := h.parseGenerate(cat, b)
		if err != nil && gwerr.As(err).Kind != gwerr.Invalid {
			t.Fatalf("%s: %v", b, err)
		}
	})
}

// parseUsage reads the usage of gpt-image-1's answers and takes nothing
// else as usage.
func TestParseUsage(t *testing.T) {
	for raw, want := range map[string]*catalog.ImageUsage{
		`{"input_tokens":50,"output_tokens":4160,"total_tokens":4210,"input_tokens_details":{"text_tokens":10,"image_tokens":40}}`: {TextInput: 10, ImageInput: 40, Output: 4160},
		`{"input_tokens":7,"output_tokens":272}`:                                           {TextInput: 7, Output: 272},
		`{"input_tokens":7,"output_tokens":272,"input_tokens_details":{"image_tokens":9}}`: {ImageInput: 7, Output: 272},
		`{"input_tokens":0,"output_tokens":0}`:                                             nil,
		`{"input_tokens":"7","output_tokens":272}`:                                         nil,
		`{"input_tokens":7,"output_tokens":2.5}`:                                           nil,
		`{"input_tokens":-1,"output_tokens":272}`:                                          nil,
		`{"input_tokens":1,"output_tokens":99999999999999}`:                                nil,
		`[1]`: nil,
		``:    nil,
	} {
		got, ok := parseUsage(gjson.Parse(raw))
		if ok != (want != nil) || (ok && got != *want) {
			t.Errorf("%s: %+v %v, want %+v", raw, got, ok, want)
		}
	}
}

// FuzzParseUsage holds parseUsage to its contract on any answer: usage
// read is whole, bounded token counts whose input parts add up.
func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{`{"input_tokens":50,"output_tokens":4160,"input_tokens_details":{"text_tokens":10,"image_tokens":40}}`,
		`{"input_tokens":7,"output_tokens":272,"input_tokens_details":{"image_tokens":9}}`, `{"output_tokens":1}`, `null`, `{"input_tokens":1e3,"output_tokens":5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, ok := parseUsage(gjson.Parse(raw))
		if !ok {
			return
		}
		in := gjson.Get(raw, "input_tokens").Int()
		if u.TextInput < 0 || u.ImageInput < 0 || u.Output <= 0 || u.Output > MaxUsageTokens || u.TextInput+u.ImageInput != in {
			t.Fatalf("%s: %+v", raw, u)
		}
	})
}
