package decide

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/imagetype"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
)

// Limits of decision mode (docs/abilities.md, Decision mode).
const (
	// MaxBody is the largest request body: 13 MB.
	MaxBody = 13_000_000
	// MaxQuestions per call.
	MaxQuestions = 64
	// MinOptions and MaxOptions bound a choice question's criteria.
	MinOptions, MaxOptions = 2, 255
	// MinLevels and MaxLevels bound a score question's criteria.
	MinLevels, MaxLevels = 2, 10
	// MaxStateTokens bounds the state (images excluded).
	MaxStateTokens = 2048
	// MaxQuestionID is the longest question id.
	MaxQuestionID = 100
	// MaxImages per call, MaxImageBytes each, MaxImagesBytes in all
	// (decoded).
	MaxImages      = 4
	MaxImageBytes  = 4 << 20
	MaxImagesBytes = 8 << 20
	// Model is the only model id decision mode takes.
	Model = "gw-decide"
)

// Question types.
const (
	TypeChoice = "choice"
	TypeScore  = "score"
	TypeNoul   = "noul"
)

var questionID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// option is one answer a question allows: its key (a choice option, a
// level position, "true"/"false"), what it means, and its one-token label.
type option struct {
	Key, Meaning, Label string
}

// question is one parsed question.
type question struct {
	ID           string
	Type         string
	Instructions string
	Options      []option
	// Levels are a score question's level names, by position.
	Levels []string
}

// image is one checked image.
type image struct {
	ContentType string
	Data        []byte
}

// request is a parsed decision request.
type request struct {
	State     string
	Questions []question
	Images    []image
}

// refuse is a validation refusal with a fixed message that never repeats
// request content.
func refuse(kind gwerr.Kind, code, param, msg string) error {
	return (&gwerr.Error{Kind: kind, Code: code, Param: param, Message: msg})
}

func invalid(param, msg string) error { return refuse(gwerr.Invalid, "invalid_request", param, msg) }

// parse validates body in a fixed order: body, model, state, questions,
// images. countTokens counts the state's tokens.
func parse(body []byte, countTokens func(string) int) (*request, error) {
	if jsonbody.Check(body) != nil || !gjson.ParseBytes(body).IsObject() {
		return nil, invalid("body", "The body must be one JSON object.")
	}
	root := gjson.ParseBytes(body)
	if m := root.Get("model"); m.Type != gjson.String || m.Str != Model {
		return nil, refuse(gwerr.Unprocessable, "model_not_supported", "model", "model must be gw-decide.")
	}
	req := &request{}
	st := root.Get("state")
	switch {
	case st.Type == gjson.String:
		req.State = st.Str
	case st.IsObject() || st.IsArray():
		var v any
		if err := json.Unmarshal([]byte(st.Raw), &v); err != nil {
			return nil, invalid("state", "state must be text, an object or an array.")
		}
		// Compact JSON with sorted keys (encoding/json sorts map keys).
		b, _ := json.Marshal(v)
		req.State = string(b)
		if req.State == "{}" || req.State == "[]" {
			req.State = ""
		}
	default:
		return nil, invalid("state", "state is required: text, an object or an array.")
	}
	if strings.TrimSpace(req.State) == "" {
		return nil, invalid("state", "state must not be empty.")
	}
	if countTokens(req.State) > MaxStateTokens {
		return nil, refuse(gwerr.Unprocessable, "state_too_long", "state", "state is longer than 2048 tokens.")
	}
	qs := root.Get("questions")
	if !qs.IsObject() {
		return nil, invalid("questions", "questions must be an object of question id to question.")
	}
	var err error
	qs.ForEach(func(k, q gjson.Result) bool {
		if len(req.Questions) == MaxQuestions {
			err = invalid("questions", "at most 64 questions are allowed.")
			return false
		}
		var pq question
		if pq, err = parseQuestion(k.Str, q); err != nil {
			return false
		}
		req.Questions = append(req.Questions, pq)
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(req.Questions) == 0 {
		return nil, invalid("questions", "at least one question is required.")
	}
	if imgs := root.Get("images"); imgs.Exists() {
		if req.Images, err = parseImages(imgs); err != nil {
			return nil, err
		}
	}
	return req, nil
}

func parseQuestion(id string, q gjson.Result) (question, error) {
	bad := func(msg string) (question, error) { return question{}, invalid("questions", msg) }
	if !questionID.MatchString(id) {
		return bad("question ids are 1 to 100 letters, digits, '_', '.' or '-'.")
	}
	if !q.IsObject() {
		return bad("each question must be an object.")
	}
	pq := question{ID: id, Type: q.Get("type").String()}
	ins := q.Get("instructions")
	if ins.Type != gjson.String || strings.TrimSpace(ins.Str) == "" {
		return bad("each question needs non-empty instructions.")
	}
	pq.Instructions = ins.Str
	crit := q.Get("criteria")
	switch pq.Type {
	case TypeChoice:
		if !crit.IsObject() {
			return bad("a choice question needs criteria: an object of option key to meaning.")
		}
		ok := true
		crit.ForEach(func(k, v gjson.Result) bool {
			if v.Type != gjson.String || k.Str == "" {
				ok = false
				return false
			}
			pq.Options = append(pq.Options, option{Key: k.Str, Meaning: v.Str})
			return true
		})
		if !ok {
			return bad("choice criteria map each option key to a short text.")
		}
		if n := len(pq.Options); n < MinOptions || n > MaxOptions {
			return bad("a choice question has 2 to 255 options.")
		}
		for i := range pq.Options {
			pq.Options[i].Label = labelFor(i + 1)
		}
	case TypeScore:
		if !crit.IsArray() {
			return bad("a score question needs criteria: an array of level names.")
		}
		for i, v := range crit.Array() {
			if v.Type != gjson.String || strings.TrimSpace(v.Str) == "" {
				return bad("score criteria are level names (non-empty text).")
			}
			pq.Levels = append(pq.Levels, v.Str)
			pq.Options = append(pq.Options, option{Key: labelFor(i), Meaning: v.Str, Label: labelFor(i)})
		}
		if n := len(pq.Levels); n < MinLevels || n > MaxLevels {
			return bad("a score question has 2 to 10 levels.")
		}
	case TypeNoul:
		yes, no := "yes", "no"
		if crit.Exists() {
			keys := map[string]string{}
			ok := crit.IsObject()
			crit.ForEach(func(k, v gjson.Result) bool {
				if v.Type != gjson.String {
					ok = false
				}
				keys[k.Str] = v.Str
				return ok
			})
			if _, t := keys["true"]; !ok || !t || len(keys) != 2 {
				return bad("noul criteria, when given, are an object with exactly the keys true and false.")
			}
			if _, f := keys["false"]; !f {
				return bad("noul criteria, when given, are an object with exactly the keys true and false.")
			}
			yes, no = keys["true"], keys["false"]
		}
		pq.Options = []option{{Key: "true", Meaning: yes, Label: "yes"}, {Key: "false", Meaning: no, Label: "no"}}
	default:
		return bad("a question's type is choice, score or noul.")
	}
	return pq, nil
}

// labelFor is the one-token label of option n: its number. The o200k
// tokenizer (and the providers') writes numbers up to 999 as one token.
func labelFor(n int) string { return strconv.Itoa(n) }

func parseImages(imgs gjson.Result) ([]image, error) {
	bad := func(msg string) ([]image, error) { return nil, invalid("images", msg) }
	if !imgs.IsArray() {
		return bad("images must be an array.")
	}
	list := imgs.Array()
	if len(list) < 1 || len(list) > MaxImages {
		return bad("1 to 4 images are allowed.")
	}
	var out []image
	total := 0
	for _, im := range list {
		var declared, b64 string
		switch {
		case im.Type == gjson.String && strings.HasPrefix(im.Str, "data:"):
			meta, data, ok := strings.Cut(strings.TrimPrefix(im.Str, "data:"), ",")
			if !ok || !strings.HasSuffix(meta, ";base64") {
				return bad("an image data URL must be base64.")
			}
			declared, b64 = strings.TrimSuffix(meta, ";base64"), data
		case im.Type == gjson.String:
			return bad("images are data URLs or objects with content_type and base64; remote links are refused.")
		case im.IsObject():
			declared, b64 = im.Get("content_type").String(), im.Get("base64").String()
		default:
			return bad("images are data URLs or objects with content_type and base64.")
		}
		if base64.StdEncoding.DecodedLen(len(b64)) > MaxImageBytes+2 {
			return bad("each image is at most 4 MiB.")
		}
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			if data, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
				return bad("an image is not valid base64.")
			}
		}
		if len(data) > MaxImageBytes {
			return bad("each image is at most 4 MiB.")
		}
		if total += len(data); total > MaxImagesBytes {
			return bad("the images are at most 8 MiB in all.")
		}
		got := imagetype.Sniff(data)
		if got == "" || !strings.EqualFold(declared, got) {
			return bad("images must be PNG, JPEG or WebP, as their content type says.")
		}
		out = append(out, image{ContentType: got, Data: data})
	}
	return out, nil
}
