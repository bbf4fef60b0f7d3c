package fake

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// EmbeddingDimensions are the vector lengths of OpenAI's embedding models
// when the request names no dimensions; another model has 1536.
var EmbeddingDimensions = map[string]int{
	"text-embedding-3-small": 1536,
	"text-embedding-3-large": 3072,
	"text-embedding-ada-002": 1536,
}

// defaultEmbeddingDimensions is the vector length of a model not in
// EmbeddingDimensions.
const defaultEmbeddingDimensions = 1536

// embeddings answers POST /v1/embeddings as OpenAI does: one
// {"object":"embedding","index":i,"embedding":...} per input, the vector a
// list of numbers or, with encoding_format base64, its little-endian
// float32 bytes in base64; dimensions shortens the vector (refused by
// text-embedding-ada-002 and beyond the model's length). Each vector is
// Embedding(model, input, dimensions), so equal inputs embed equally. usage
// reports Script.EmbeddingTokens as prompt_tokens, or else the fake's own
// count: EmbeddingTokens of the input.
func (u *Upstream) embeddings(w http.ResponseWriter, r *http.Request, req map[string]any, model string) {
	inputs, ok := embeddingInputs(req["input"])
	if !ok {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("input"), nil,
			"'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")
		return
	}
	encoding, _ := req["encoding_format"].(string)
	if v, set := req["encoding_format"]; set && v != nil && encoding != "float" && encoding != "base64" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", str("encoding_format"), nil,
			"Invalid value for 'encoding_format': must be 'float' or 'base64'.")
		return
	}
	full, known := EmbeddingDimensions[model]
	if !known {
		full = defaultEmbeddingDimensions
	}
	dims := full
	if v, set := req["dimensions"]; set && v != nil {
		n, isNumber := v.(float64)
		switch {
		case model == "text-embedding-ada-002":
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str("dimensions"), nil,
				"This model does not support specifying dimensions.")
			return
		case !isNumber || n != math.Trunc(n) || n < 1 || int(n) > full:
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str("dimensions"), nil,
				"Invalid value for 'dimensions' = "+strconv.FormatFloat(n, 'g', -1, 64)+". Must be between 1 and "+strconv.Itoa(full)+".")
			return
		}
		dims = int(n)
	}
	s := u.next(r)
	u.prelude(w, r, s, false)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}
	data := make([]jobj, len(inputs))
	for i, in := range inputs {
		vec := Embedding(model, in, dims)
		var v any = json.RawMessage(floatList(vec))
		if encoding == "base64" {
			v = EncodeBase64(vec)
		}
		data[i] = o("object", "embedding", "index", i, "embedding", v)
	}
	answer := o("object", "list", "data", data, "model", model)
	if !s.NoUsage {
		n := s.EmbeddingTokens
		if n == 0 {
			n = EmbeddingTokens(inputs)
		}
		answer = answer.with("usage", o("prompt_tokens", n, "total_tokens", n))
	}
	writeJSON(w, http.StatusOK, answer)
}

// embeddingInputs reads input as OpenAI takes it: a non-empty string, or a
// non-empty list of non-empty strings, a token list, or a list of token
// lists. Each input is a string or a []int.
func embeddingInputs(v any) ([]any, bool) {
	switch v := v.(type) {
	case string:
		return []any{v}, v != ""
	case []any:
		if len(v) == 0 || len(v) > 2048 && !isNumber(v[0]) {
			return nil, false
		}
		if isNumber(v[0]) {
			t, ok := tokenList(v)
			return []any{t}, ok
		}
		out := make([]any, len(v))
		for i, e := range v {
			switch e := e.(type) {
			case string:
				if e == "" {
					return nil, false
				}
				out[i] = e
			case []any:
				t, ok := tokenList(e)
				if !ok {
					return nil, false
				}
				out[i] = t
			default:
				return nil, false
			}
			if i > 0 && isString(out[i]) != isString(out[0]) {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

func isNumber(v any) bool { _, ok := v.(float64); return ok }
func isString(v any) bool { _, ok := v.(string); return ok }

func tokenList(v []any) ([]int, bool) {
	if len(v) == 0 {
		return nil, false
	}
	out := make([]int, len(v))
	for i, e := range v {
		n, ok := e.(float64)
		if !ok || n != math.Trunc(n) || n < 0 {
			return nil, false
		}
		out[i] = int(n)
	}
	return out, true
}

// EmbeddingTokens is the fake's count of an embeddings input: per text its
// runes divided by four, rounded up; per token list its length.
func EmbeddingTokens(inputs []any) int {
	n := 0
	for _, in := range inputs {
		switch in := in.(type) {
		case string:
			n += (utf8.RuneCountInString(in) + 3) / 4
		case []int:
			n += len(in)
		}
	}
	return n
}

// Embedding is the fake's vector of dims float32 values for input (a
// string or a []int) on model: a pseudo-random unit vector seeded by both,
// the same every time.
func Embedding(model string, input any, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(model))
	h.Write([]byte{0})
	switch in := input.(type) {
	case string:
		h.Write([]byte(in))
	case []int:
		for _, t := range in {
			h.Write(strconv.AppendInt(nil, int64(t), 10))
			h.Write([]byte{','})
		}
	}
	x := h.Sum64() | 1
	vec := make([]float32, dims)
	var sum float64
	for i := range vec {
		// xorshift64*: cheap, deterministic.
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		f := float64(int64(x*2685821657736338717)>>11) / (1 << 52)
		vec[i] = float32(f)
		sum += f * f
	}
	norm := math.Sqrt(sum)
	for i := range vec {
		vec[i] = float32(float64(vec[i]) / norm)
	}
	return vec
}

// EncodeBase64 is vec as OpenAI's base64 encoding writes it: the
// little-endian float32 bytes, base64-encoded.
func EncodeBase64(vec []float32) string {
	b := make([]byte, 4*len(vec))
	for i, f := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// floatList writes vec as a JSON list of numbers, each the shortest
// decimal that reads back as the same float32.
func floatList(vec []float32) []byte {
	b := make([]byte, 0, 12*len(vec)+2)
	b = append(b, '[')
	for i, f := range vec {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}
