package decide

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

var (
	pngBytes  = mustRead("../../internal/imagetype/testdata/red.png")
	jpegBytes = mustRead("../../internal/imagetype/testdata/blue.jpg")
	webpBytes = mustRead("../../internal/imagetype/testdata/green.webp")
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// body builds a request from a base with fields replaced.
func body(fields map[string]any) string {
	req := map[string]any{
		"model": "gw-decide",
		"state": "The ticket says the printer is on fire.",
		"questions": map[string]any{
			"urgent": map[string]any{"type": "noul", "instructions": "Is this urgent?"},
		},
	}
	for k, v := range fields {
		if v == nil {
			delete(req, k)
		} else {
			req[k] = v
		}
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func options(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m["opt"+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "meaning"
	}
	return m
}

func levels(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "level"
	}
	return out
}

func questions(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m["q"+strings.Repeat("x", i)] = map[string]any{"type": "noul", "instructions": "?"}
	}
	return m
}

// The validation table: every rule of decision mode at and past its bound,
// in the order parse checks them, with its status, code and param.
func TestParse(t *testing.T) {
	count := func(s string) int { return len(strings.Fields(s)) }
	for _, tc := range []struct {
		name, body  string
		kind        gwerr.Kind
		code, param string
	}{
		{"minimal", body(nil), 0, "", ""},
		{"not JSON", `{"model":`, gwerr.Invalid, "invalid_request", "body"},
		{"not an object", `[1]`, gwerr.Invalid, "invalid_request", "body"},
		{"duplicate key", `{"model":"gw-decide","model":"x"}`, gwerr.Invalid, "invalid_request", "body"},
		{"no model", body(map[string]any{"model": nil}), gwerr.Unprocessable, "model_not_supported", "model"},
		{"other model", body(map[string]any{"model": "gw-auto"}), gwerr.Unprocessable, "model_not_supported", "model"},
		{"model checked before state", body(map[string]any{"model": 1, "state": nil}), gwerr.Unprocessable, "model_not_supported", "model"},
		{"no state", body(map[string]any{"state": nil}), gwerr.Invalid, "invalid_request", "state"},
		{"empty state", body(map[string]any{"state": "  "}), gwerr.Invalid, "invalid_request", "state"},
		{"empty object state", body(map[string]any{"state": map[string]any{}}), gwerr.Invalid, "invalid_request", "state"},
		{"number state", body(map[string]any{"state": 3}), gwerr.Invalid, "invalid_request", "state"},
		{"object state", body(map[string]any{"state": map[string]any{"b": 1, "a": []any{2}}}), 0, "", ""},
		{"state of 2048 tokens", body(map[string]any{"state": strings.Repeat("w ", MaxStateTokens)}), 0, "", ""},
		{"state of 2049 tokens", body(map[string]any{"state": strings.Repeat("w ", MaxStateTokens+1)}), gwerr.Unprocessable, "state_too_long", "state"},
		{"no questions", body(map[string]any{"questions": nil}), gwerr.Invalid, "invalid_request", "questions"},
		{"empty questions", body(map[string]any{"questions": map[string]any{}}), gwerr.Invalid, "invalid_request", "questions"},
		{"64 questions", body(map[string]any{"questions": questions(64)}), 0, "", ""},
		{"65 questions", body(map[string]any{"questions": questions(65)}), gwerr.Invalid, "invalid_request", "questions"},
		{"id of 100", body(map[string]any{"questions": map[string]any{strings.Repeat("a", 100): map[string]any{"type": "noul", "instructions": "?"}}}), 0, "", ""},
		{"id of 101", body(map[string]any{"questions": map[string]any{strings.Repeat("a", 101): map[string]any{"type": "noul", "instructions": "?"}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"id with a space", body(map[string]any{"questions": map[string]any{"a b": map[string]any{"type": "noul", "instructions": "?"}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"unknown type", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "rank", "instructions": "?"}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"no instructions", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "noul"}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"choice of 2", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": options(2)}}}), 0, "", ""},
		{"choice of 1", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": options(1)}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"choice of 255", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": options(255)}}}), 0, "", ""},
		{"choice of 256", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": options(256)}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"choice criteria a list", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": []any{"a", "b"}}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"score of 2", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "score", "instructions": "?", "criteria": levels(2)}}}), 0, "", ""},
		{"score of 1", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "score", "instructions": "?", "criteria": levels(1)}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"score of 10", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "score", "instructions": "?", "criteria": levels(10)}}}), 0, "", ""},
		{"score of 11", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "score", "instructions": "?", "criteria": levels(11)}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"noul criteria", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "noul", "instructions": "?", "criteria": map[string]any{"true": "y", "false": "n"}}}}), 0, "", ""},
		{"noul criteria missing false", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "noul", "instructions": "?", "criteria": map[string]any{"true": "y"}}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"noul criteria extra key", body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "noul", "instructions": "?", "criteria": map[string]any{"true": "y", "false": "n", "maybe": "m"}}}}), gwerr.Invalid, "invalid_request", "questions"},
		{"images: png data URL", body(map[string]any{"images": []any{"data:image/png;base64," + b64(pngBytes)}}), 0, "", ""},
		{"images: objects", body(map[string]any{"images": []any{map[string]any{"content_type": "image/jpeg", "base64": b64(jpegBytes)}, map[string]any{"content_type": "image/webp", "base64": b64(webpBytes)}}}), 0, "", ""},
		{"images: empty", body(map[string]any{"images": []any{}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: five", body(map[string]any{"images": []any{"data:image/png;base64," + b64(pngBytes), "data:image/png;base64," + b64(pngBytes), "data:image/png;base64," + b64(pngBytes), "data:image/png;base64," + b64(pngBytes), "data:image/png;base64," + b64(pngBytes)}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: remote link", body(map[string]any{"images": []any{"https://example.com/cat.png"}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: type lies", body(map[string]any{"images": []any{"data:image/png;base64," + b64(jpegBytes)}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: not an image", body(map[string]any{"images": []any{"data:image/png;base64," + b64([]byte("GIF89a not allowed"))}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: 4 MiB", body(map[string]any{"images": []any{"data:image/png;base64," + b64(append(pngBytes, make([]byte, MaxImageBytes-len(pngBytes))...))}}), 0, "", ""},
		{"images: over 4 MiB", body(map[string]any{"images": []any{"data:image/png;base64," + b64(append(pngBytes, make([]byte, MaxImageBytes-len(pngBytes)+1)...))}}), gwerr.Invalid, "invalid_request", "images"},
		{"images: over 8 MiB in all", body(map[string]any{"images": []any{
			"data:image/png;base64," + b64(append(pngBytes, make([]byte, MaxImageBytes-len(pngBytes))...)),
			"data:image/png;base64," + b64(append(pngBytes, make([]byte, MaxImageBytes-len(pngBytes))...)),
			"data:image/png;base64," + b64(pngBytes)}}), gwerr.Invalid, "invalid_request", "images"},
		{"other fields ignored", body(map[string]any{"temperature": 2, "stream": true}), 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse([]byte(tc.body), count)
			if tc.kind == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *gwerr.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Code != tc.code || e.Param != tc.param {
				t.Fatalf("err %+v, want kind %v code %s param %s", err, tc.kind, tc.code, tc.param)
			}
			if strings.Contains(e.Message, "printer") {
				t.Fatalf("the message repeats request content: %s", e.Message)
			}
		})
	}
}

// Object and array states are read as compact JSON with sorted keys.
func TestStateCanonical(t *testing.T) {
	r, err := parse([]byte(body(map[string]any{"state": json.RawMessage(`{ "z": 1, "a": {"y": [2, 3], "b": null} }`)})), func(string) int { return 1 })
	if err != nil || r.State != `{"a":{"b":null,"y":[2,3]},"z":1}` {
		t.Fatalf("state %q, %v", r.State, err)
	}
}

func sum4(p []float64) float64 {
	var s float64
	for _, x := range p {
		s += math.Round(x * scale)
	}
	return s / scale
}

func TestProbabilities(t *testing.T) {
	opts := []option{{Key: "a", Label: "1"}, {Key: "b", Label: "2"}, {Key: "c", Label: "3"}}
	// Renormalised over the options; tokens off the options ignored;
	// spellings of one label add up.
	p, found := optionProbabilities(opts, []logprob{
		{Token: "1", Logprob: math.Log(0.5)}, {Token: " 1", Logprob: math.Log(0.1)}, {Token: "2", Logprob: math.Log(0.2)},
		{Token: "Sure", Logprob: math.Log(0.15)}, {Token: "3", Logprob: math.Log(0.05)},
	})
	if !found || math.Abs(p[0]-0.6/0.85) > 1e-9 || math.Abs(p[1]-0.2/0.85) > 1e-9 || math.Abs(p[2]-0.05/0.85) > 1e-9 {
		t.Fatalf("p %v", p)
	}
	// An option the model gave nothing gets the floor, never zero.
	p, _ = optionProbabilities(opts, []logprob{{Token: "1", Logprob: 0}})
	if p[1] <= 0 || p[1] > 2*FloorProbability || p[0] < 0.99 {
		t.Fatalf("floored p %v", p)
	}
	// A model answering off the options.
	if _, found := optionProbabilities(opts, []logprob{{Token: "Maybe", Logprob: 0}}); found {
		t.Fatal("found options in an answer off them")
	}
	// Four decimals that sum to exactly 1, however the thirds fall.
	for _, in := range [][]float64{{1.0 / 3, 1.0 / 3, 1.0 / 3}, {0.66666, 0.33334}, {0.99995, 0.00005}, {0.12345, 0.12345, 0.7531}} {
		r := round4(in)
		if sum4(r) != 1 {
			t.Errorf("round4(%v) = %v sums to %v", in, r, sum4(r))
		}
		for i := range r {
			if math.Abs(r[i]-in[i]) > 1.0/scale {
				t.Errorf("round4(%v)[%d] = %v, too far", in, i, r[i])
			}
		}
	}
	if r := round4([]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}); r[0] != 0.3334 || r[1] != 0.3333 {
		t.Errorf("thirds %v: the remainder goes to the first", r)
	}
}

func TestAnswers(t *testing.T) {
	score := question{Type: TypeScore, Levels: []string{"low", "mid", "high"},
		Options: []option{{Key: "0", Label: "0"}, {Key: "1", Label: "1"}, {Key: "2", Label: "2"}}}
	a := answer(score, []float64{0.2, 0.3, 0.5})
	if a["score"] != 1.3 || a["legend"].(map[string]string)["2"] != "high" || a["probabilities"].(map[string]float64)["1"] != 0.3 {
		t.Fatalf("score answer %v", a)
	}
	choice := question{Type: TypeChoice, Options: []option{{Key: "cat"}, {Key: "dog"}}}
	if a := answer(choice, []float64{0.4, 0.6}); a["choice"] != "dog" || a["probabilities"].(map[string]float64)["cat"] != 0.4 {
		t.Fatalf("choice answer %v", a)
	}
	noul := question{Type: TypeNoul, Options: []option{{Key: "true"}, {Key: "false"}}}
	if a := answer(noul, []float64{0.87654, 0.12346}); a["noul"] != 0.8765 {
		t.Fatalf("noul answer %v", a)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(body(nil)))
	f.Add([]byte(body(map[string]any{"questions": map[string]any{"q": map[string]any{"type": "choice", "instructions": "?", "criteria": options(3)}}})))
	f.Add([]byte(body(map[string]any{"images": []any{"data:image/png;base64," + b64(pngBytes)}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parse(b, func(s string) int { return len(s) / 4 })
		if err != nil {
			if gwerr.As(err).Kind == gwerr.Internal {
				t.Fatalf("internal error %v", err)
			}
			return
		}
		if len(r.Questions) < 1 || len(r.Questions) > MaxQuestions || strings.TrimSpace(r.State) == "" || len(r.Images) > MaxImages {
			t.Fatalf("accepted %+v", r)
		}
		for _, q := range r.Questions {
			if len(q.Options) < 2 || len(q.Options) > MaxOptions {
				t.Fatalf("question with %d options", len(q.Options))
			}
		}
	})
}

// No backing model configured: 503 capability_unavailable, before any
// money is reserved.
func TestServeWithoutModel(t *testing.T) {
	cat, _ := catalog.New(nil, nil, nil, nil, "")
	r := httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(body(nil)))
	c := &pipeline.Call{W: httptest.NewRecorder(), R: r, Gateway: &pipeline.Gateway{Catalog: cat}}
	err := (&Handler{}).Serve(c)
	if e := gwerr.As(err); e.Kind != gwerr.Unavailable || gwerr.Decide.Code(e) != "capability_unavailable" || gwerr.Decide.Status(e) != http.StatusServiceUnavailable {
		t.Fatalf("err %v", err)
	}
}

// mustRead reads a fixture (a real image made with ffmpeg).
func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}
