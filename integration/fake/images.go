package fake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ImageData is the base64 of the fake's i-th image (0-based).
func ImageData(i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "fake-image-%d", i))
}

// PartialData is the base64 of the fake's i-th preview.
func PartialData(i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "fake-preview-%d", i))
}

// ImageAutoQuality and ImageAutoSize are what the fake makes when the
// request leaves quality or size to it (auto or nothing).
const (
	ImageAutoQuality = "medium"
	ImageAutoSize    = "1024x1024"
)

// ImagePreviewTokens is the output tokens each streamed preview adds to
// the usage, as gpt-image-1 counts them.
const ImagePreviewTokens = 100

// ImageReferenceTokens is the input image tokens each reference image of
// an edit adds to the usage.
const ImageReferenceTokens = 323

// imageOutputTokens are gpt-image-1's output tokens per image by quality
// and size.
var imageOutputTokens = map[[2]string]int{
	{"low", "1024x1024"}: 272, {"low", "1024x1536"}: 408, {"low", "1536x1024"}: 400,
	{"medium", "1024x1024"}: 1056, {"medium", "1024x1536"}: 1584, {"medium", "1536x1024"}: 1568,
	{"high", "1024x1024"}: 4160, {"high", "1024x1536"}: 6240, {"high", "1536x1024"}: 6208,
}

// ImageMade is the quality and size the fake makes for those asked (auto
// or nothing: ImageAutoQuality, ImageAutoSize).
func ImageMade(quality, size string) (string, string) {
	if quality == "" || quality == "auto" {
		quality = ImageAutoQuality
	}
	if size == "" || size == "auto" {
		size = ImageAutoSize
	}
	return quality, size
}

// ImageOutputTokens is the output tokens of one image of quality and size
// as made (ImageMade); 0 for a pair gpt-image-1 does not make.
func ImageOutputTokens(quality, size string) int {
	return imageOutputTokens[[2]string{quality, size}]
}

// ImagePromptTokens is the text input tokens the fake counts for a
// prompt: one a word.
func ImagePromptTokens(prompt string) int { return len(strings.Fields(prompt)) }

// images answers POST /v1/images/generations (JSON; stream with
// image_generation.* events) and /v1/images/edits (multipart with image or
// image[] files; one image).
func (u *Upstream) images(w http.ResponseWriter, r *http.Request, body []byte, edit bool) {
	var req map[string]any
	references := 0
	if edit {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil, "Expected multipart/form-data")
			return
		}
		form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(64 << 20)
		if err != nil {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil, "Could not parse the multipart form")
			return
		}
		if len(form.File["image[]"])+len(form.File["image"]) == 0 {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str("image"), str("missing_required_parameter"), "Missing required parameter: 'image'.")
			return
		}
		references = len(form.File["image[]"]) + len(form.File["image"])
		req = map[string]any{}
		for k, v := range form.Value {
			req[k] = v[0]
		}
	} else if err := json.Unmarshal(body, &req); err != nil || req == nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", nil, nil, "We could not parse the JSON body of your request.")
		return
	}
	for _, k := range []string{"model", "prompt"} {
		if v, ok := req[k].(string); !ok || v == "" {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", str(k), str("missing_required_parameter"),
				fmt.Sprintf("Missing required parameter: '%s'.", k))
			return
		}
	}
	model, _ := req["model"].(string)
	n := 1
	switch v := req["n"].(type) {
	case float64:
		n = int(v)
	case string:
		n, _ = strconv.Atoi(v)
	}
	s := u.next(r)
	stream, _ := req["stream"].(bool)
	u.prelude(w, r, s, stream)
	if s.Status != 0 {
		writeJSON(w, s.Status, openAIErrorBody{Error: openAIScriptError(s, s.Status, model)})
		return
	}
	if s.Images != 0 {
		n = max(s.Images, 0) // below zero: an answer with no image
	}
	created := time.Now().Unix()
	asked := func(k string) string { v, _ := req[k].(string); return v }
	quality, size := ImageMade(asked("quality"), asked("size"))
	partials := 0
	if p, ok := req["partial_images"].(float64); ok && stream {
		partials = int(p)
	}
	// The usage of the call, as gpt-image-1 reports it: the prompt's
	// text and the references' image tokens in, every image and preview
	// made out. Script.Usage.Input below zero: an answer without usage.
	prompt, _ := req["prompt"].(string)
	text, refs := ImagePromptTokens(prompt), ImageReferenceTokens*references
	out := n*ImageOutputTokens(quality, size) + partials*ImagePreviewTokens
	var usage map[string]any
	if s.Usage.Input >= 0 {
		usage = map[string]any{"input_tokens": text + refs, "output_tokens": out, "total_tokens": text + refs + out,
			"input_tokens_details": map[string]any{"text_tokens": text, "image_tokens": refs}}
	}
	if !stream {
		data := make([]map[string]any, n)
		for i := range data {
			data[i] = map[string]any{"b64_json": ImageData(i)}
		}
		answer := map[string]any{"created": created, "data": data,
			"background": "opaque", "output_format": "png", "quality": quality, "size": size}
		if usage != nil {
			answer["usage"] = usage
		}
		writeJSON(w, http.StatusOK, answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if s.Images < 0 { // the stream breaks before its first event
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]any{"type": "error",
			"error": map[string]any{"type": "server_error", "code": "server_error", "message": "The server had an error while processing your request."}}))
		_ = rc.Flush()
		return
	}
	sent := 0
	send := func(typ string, v map[string]any) bool {
		v["type"] = typ
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, mustJSON(v)); err != nil || rc.Flush() != nil {
			return false
		}
		sent++
		if sent == 1 {
			if s.MidStreamError {
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]any{"type": "error",
					"error": map[string]any{"type": "server_error", "code": "server_error", "message": "The server had an error while processing your request."}}))
				_ = rc.Flush()
				return false
			}
			if s.Gate != nil && !u.wait(r, s.Gate, 0) {
				panic(http.ErrAbortHandler)
			}
		}
		return true
	}
	for i := range partials {
		if !send("image_generation.partial_image", map[string]any{"b64_json": PartialData(i), "created_at": created,
			"partial_image_index": i, "size": size, "quality": quality, "background": "opaque", "output_format": "png"}) {
			return
		}
	}
	for i := range n {
		if i > 0 && s.ImageGap > 0 && !u.wait(r, nil, s.ImageGap) {
			panic(http.ErrAbortHandler)
		}
		ev := map[string]any{"b64_json": ImageData(i), "created_at": created,
			"size": size, "quality": quality, "background": "opaque", "output_format": "png"}
		if usage != nil {
			ev["usage"] = usage
		}
		if !send("image_generation.completed", ev) {
			return
		}
	}
}
