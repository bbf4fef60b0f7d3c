package embeddings

import (
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

func TestParseAccepts(t *testing.T) {
	many := `["` + strings.Repeat(`a","`, MaxInputs-1) + `a"]`
	for _, tc := range []struct {
		name, body string
		model      string
		texts      int
		tokens     int64
		inputs     int
	}{
		{"a string", `{"model":"gw-embed","input":"hello"}`, "gw-embed", 1, 0, 1},
		{"no model", `{"input":"hello"}`, "", 1, 0, 1},
		{"null model", `{"model":null,"input":"hello"}`, "", 1, 0, 1},
		{"strings", `{"input":["a","b","c"]}`, "", 3, 0, 3},
		{"the most strings", `{"input":` + many + `}`, "", MaxInputs, 0, MaxInputs},
		{"a token list", `{"input":[1,2,3,4294967295]}`, "", 0, 4, 1},
		{"token lists", `{"input":[[1,2],[3],[0,0,0]]}`, "", 0, 6, 3},
		{"every option", `{"model":"m","input":"x","encoding_format":"base64","dimensions":256,"user":"u-1"}`, "m", 1, 0, 1},
		{"float", `{"input":"x","encoding_format":"float"}`, "", 1, 0, 1},
		{"nulls", `{"input":"x","encoding_format":null,"dimensions":null,"user":null}`, "", 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if req.model != tc.model || len(req.texts) != tc.texts || req.tokens != tc.tokens || req.inputs != tc.inputs {
				t.Errorf("got model %q, %d texts, %d tokens, %d inputs", req.model, len(req.texts), req.tokens, req.inputs)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tooMany := `["` + strings.Repeat(`a","`, MaxInputs) + `a"]`
	for _, tc := range []struct{ name, body, param string }{
		{"not JSON", `{"input":`, "body"},
		{"not an object", `["hello"]`, "body"},
		{"duplicate key", `{"input":"a","input":"b"}`, "body"},
		{"unknown member", `{"input":"a","temperature":0}`, "temperature"},
		{"model not a string", `{"model":3,"input":"a"}`, "model"},
		{"no input", `{"model":"gw-embed"}`, "input"},
		{"null input", `{"input":null}`, "input"},
		{"empty string", `{"input":""}`, "input"},
		{"empty list", `{"input":[]}`, "input"},
		{"an object", `{"input":{"text":"a"}}`, "input"},
		{"a number", `{"input":3}`, "input"},
		{"too many", `{"input":` + tooMany + `}`, "input"},
		{"an empty string in the list", `{"input":["a",""]}`, "input[1]"},
		{"mixed strings and tokens", `{"input":["a",1]}`, "input[1]"},
		{"mixed strings and lists", `{"input":["a",[1]]}`, "input[1]"},
		{"mixed lists and strings", `{"input":[[1],"a"]}`, "input[1]"},
		{"a token list with a string", `{"input":[1,"a"]}`, "input"},
		{"a token list with a fraction", `{"input":[1,2.5]}`, "input"},
		{"a token written with a point", `{"input":[1,2.0]}`, "input"},
		{"a token with an exponent", `{"input":[1,1e3]}`, "input"},
		{"a negative token", `{"input":[1,-2]}`, "input"},
		{"a token too large", `{"input":[4294967296]}`, "input"},
		{"a list of lists with a fraction", `{"input":[[1],[2,0.5]]}`, "input[1]"},
		{"an empty token list", `{"input":[[1],[]]}`, "input[1]"},
		{"a nested list too deep", `{"input":[[[1]]]}`, "input[0]"},
		{"booleans", `{"input":[true]}`, "input[0]"},
		{"unknown encoding", `{"input":"a","encoding_format":"int8"}`, "encoding_format"},
		{"encoding not a string", `{"input":"a","encoding_format":1}`, "encoding_format"},
		{"zero dimensions", `{"input":"a","dimensions":0}`, "dimensions"},
		{"negative dimensions", `{"input":"a","dimensions":-3}`, "dimensions"},
		{"fractional dimensions", `{"input":"a","dimensions":1.5}`, "dimensions"},
		{"dimensions as text", `{"input":"a","dimensions":"256"}`, "dimensions"},
		{"user not a string", `{"input":"a","user":7}`, "user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse([]byte(tc.body))
			e := gwerr.As(err)
			if err == nil || e.Kind != gwerr.Invalid || e.Param != tc.param {
				t.Fatalf("error %v (param %q), want 400 on %q", err, e.Param, tc.param)
			}
			if status := gwerr.Chat.Status(e); status != 400 {
				t.Errorf("status %d, want 400", status)
			}
		})
	}
}

// FuzzParse: whatever the body, parse either refuses it with a 400 naming
// a parameter or reads an input of 1 to MaxInputs items, every text
// non-empty and every token list counted.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"input":"hello"}`, `{"input":["a","b"]}`, `{"input":[1,2,3]}`, `{"input":[[1],[2,3]]}`,
		`{"model":"gw-embed","input":"x","encoding_format":"base64","dimensions":8,"user":"u"}`,
		`{"input":[1,"a"]}`, `{"input":[[1],"a"]}`, `{"input":[1.5]}`, `{"input":""}`, `{"input":[]}`,
		`{"input":"a","dimensions":0}`, `{"input":"a","encoding_format":"int8"}`, `{"input":[[]]}`, `[]`, `{`, ``,
		`{"input":[-0]}`, `{"input":[1e2]}`, `{"input":["\u0000"]}`, `{"input":[[4294967295]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parse(body)
		if err != nil {
			e := gwerr.As(err)
			if e.Kind != gwerr.Invalid || e.Param == "" {
				t.Fatalf("refusal %v: kind %v param %q, want Invalid with a param", err, e.Kind, e.Param)
			}
			return
		}
		if req.inputs < 1 || req.inputs > MaxInputs && len(req.texts) > 0 {
			t.Fatalf("accepted %d inputs", req.inputs)
		}
		if (len(req.texts) > 0) == (req.tokens > 0) {
			t.Fatalf("accepted %d texts and %d tokens: exactly one kind", len(req.texts), req.tokens)
		}
		if len(req.texts) > 0 && len(req.texts) != req.inputs {
			t.Fatalf("%d texts of %d inputs", len(req.texts), req.inputs)
		}
		for i, s := range req.texts {
			if s == "" {
				t.Fatalf("text %s accepted empty", strconv.Itoa(i))
			}
		}
	})
}

// TestInputBound: the bound counts every byte of a text and every id of a
// token list, plus SpecialTokens an input; the count is never above it,
// and what is billed never goes above what was held.
func TestInputBound(t *testing.T) {
	for _, tc := range []struct {
		body  string
		bound int64
	}{
		{`{"input":"hello world"}`, 11 + SpecialTokens},
		{`{"input":["a","नमस्ते"]}`, 1 + 18 + 2*SpecialTokens},
		{`{"input":[1,2,3]}`, 3 + SpecialTokens},
		{`{"input":[[1,2],[3]]}`, 3 + 2*SpecialTokens},
	} {
		r, err := parse([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.bound(); got != tc.bound {
			t.Errorf("%s: bound %d, want %d", tc.body, got, tc.bound)
		}
		if n, ok := r.count(); !ok || n+int64(r.inputs)*SpecialTokens > r.bound() {
			t.Errorf("%s: count %d (ok %v) above the bound %d", tc.body, n, ok, r.bound())
		}
	}
	for _, tc := range []struct {
		reported  int64
		ok        bool
		own, held int64
		want      int64
	}{
		{7, true, 9, 20, 7},
		{5000, true, 9, 20, 20},
		{0, false, 9, 20, 9},
		{0, false, 30, 20, 20},
	} {
		if got := billed(tc.reported, tc.ok, tc.own, tc.held); got != tc.want {
			t.Errorf("billed(%d, %v, %d, %d) = %d, want %d", tc.reported, tc.ok, tc.own, tc.held, got, tc.want)
		}
	}
}
