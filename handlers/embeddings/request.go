package embeddings

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// Limits of a request's input.
const (
	// MaxInputs bounds the texts or token lists one request embeds.
	MaxInputs = 2048
	// MaxTokenID bounds a token id: no tokenizer of a provider has more
	// than 2^32 tokens, so a larger number is no token.
	MaxTokenID = math.MaxUint32
)

// Encodings of the embeddings in an answer.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// fields are the members a request may have; any other is refused, as the
// provider refuses it.
var fields = map[string]bool{"model": true, "input": true, "encoding_format": true, "dimensions": true, "user": true}

// request is what the gateway reads of an embeddings request. The body
// goes upstream as the client wrote it, with only model set.
type request struct {
	// model is the id asked for ("" when absent).
	model string
	// texts are the input's strings; tokens counts the ids of its token
	// lists. A request holds one kind or the other.
	texts  []string
	tokens int64
	// inputs is how many texts or token lists the input holds.
	inputs int
}

// invalid is a 400 about the request member param.
func invalid(param, format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithParam(param)
}

// parse reads and checks an embeddings request body: a JSON object with
// input as a string, a list of strings, a token list or a list of token
// lists, and the optional encoding_format, dimensions and user.
func parse(body []byte) (*request, error) {
	root, why := jsonbody.Object(body)
	if why != "" {
		return nil, invalid("body", "%s", why)
	}
	var unknown string
	root.ForEach(func(k, _ gjson.Result) bool {
		if !fields[k.Str] {
			unknown = k.Str
			return false
		}
		return true
	})
	if unknown != "" {
		return nil, invalid(shorten(unknown), "unrecognized request argument %q", shorten(unknown))
	}
	var model, input, encoding, dimensions, user gjson.Result
	jsonbody.Members(root, jsonbody.Member{Key: "model", To: &model}, jsonbody.Member{Key: "input", To: &input},
		jsonbody.Member{Key: "encoding_format", To: &encoding}, jsonbody.Member{Key: "dimensions", To: &dimensions},
		jsonbody.Member{Key: "user", To: &user})
	req := &request{}
	if model.Exists() && model.Type != gjson.Null {
		if model.Type != gjson.String {
			return nil, invalid("model", "model must be a string")
		}
		req.model = model.Str
	}
	if err := req.readInput(input); err != nil {
		return nil, err
	}
	if encoding.Exists() && encoding.Type != gjson.Null &&
		(encoding.Type != gjson.String || encoding.Str != EncodingFloat && encoding.Str != EncodingBase64) {
		return nil, invalid("encoding_format", "encoding_format must be %q or %q", EncodingFloat, EncodingBase64)
	}
	if dimensions.Exists() && dimensions.Type != gjson.Null {
		if n, ok := wholeNumber(dimensions); !ok || n < 1 {
			return nil, invalid("dimensions", "dimensions must be a whole number greater than zero")
		}
	}
	if user.Exists() && user.Type != gjson.Null && user.Type != gjson.String {
		return nil, invalid("user", "user must be a string")
	}
	return req, nil
}

// readInput reads input: a string, a list of strings, a token list or a
// list of token lists, none of them empty, at most MaxInputs of them.
func (req *request) readInput(input gjson.Result) error {
	switch {
	case !input.Exists() || input.Type == gjson.Null:
		return invalid("input", "input is required: a string, a list of strings, a token list or a list of token lists")
	case input.Type == gjson.String:
		if input.Str == "" {
			return invalid("input", "input must not be empty")
		}
		req.texts, req.inputs = []string{input.Str}, 1
		return nil
	case !input.IsArray():
		return invalid("input", "input must be a string, a list of strings, a token list or a list of token lists")
	}
	items := input.Array()
	switch {
	case len(items) == 0:
		return invalid("input", "input must not be empty")
	case items[0].Type == gjson.Number:
		// One token list.
		n, err := tokenList(input, "input")
		req.tokens, req.inputs = n, 1
		return err
	case len(items) > MaxInputs:
		return invalid("input", "input holds %d items; at most %d may be embedded at once", len(items), MaxInputs)
	}
	req.inputs = len(items)
	first := items[0].Type
	for i, it := range items {
		param := "input[" + strconv.Itoa(i) + "]"
		switch {
		case first == gjson.String && it.Type == gjson.String:
			if it.Str == "" {
				return invalid(param, "%s must not be empty", param)
			}
			req.texts = append(req.texts, it.Str)
		case first != gjson.String && it.IsArray():
			n, err := tokenList(it, param)
			if err != nil {
				return err
			}
			req.tokens += n
		default:
			return invalid(param, "input must be all strings or all token lists; %s is neither like the first item", param)
		}
	}
	return nil
}

// tokenList checks that list is a non-empty list of token ids (whole
// numbers from 0 to MaxTokenID) and returns its length.
func tokenList(list gjson.Result, param string) (int64, error) {
	var n int64
	var bad bool
	list.ForEach(func(_, v gjson.Result) bool {
		id, ok := wholeNumber(v)
		if !ok || id < 0 || id > MaxTokenID {
			bad = true
			return false
		}
		n++
		return true
	})
	switch {
	case bad:
		return 0, invalid(param, "%s must be a list of token ids (whole numbers from 0 to %d)", param, int64(MaxTokenID))
	case n == 0:
		return 0, invalid(param, "%s must not be empty", param)
	}
	return n, nil
}

// wholeNumber reads v as a whole number written without a fraction or an
// exponent (1, not 1.0 or 1e0), as the provider takes it, of at most
// maxDigits characters, so that it fits an int64.
func wholeNumber(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	for _, c := range []byte(v.Raw) {
		if c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if len(v.Raw) > maxDigits {
		return 0, false
	}
	return v.Int(), true
}

// maxDigits bounds the characters of a whole number wholeNumber reads.
const maxDigits = 18

// maxShown bounds how much of a client's member name a message repeats.
const maxShown = 64

// shorten is s cut to maxShown bytes for an error message.
func shorten(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "…"
	}
	return s
}
