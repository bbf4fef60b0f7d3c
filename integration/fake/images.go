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

// images answers POST /v1/images/generations (JSON; stream with
// image_generation.* events) and /v1/images/edits (multipart with image or
// image[] files; one image).
func (u *Upstream) images(w http.ResponseWriter, r *http.Request, body []byte, edit bool) {
	var req map[string]any
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
	s := u.next()
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
	usage := map[string]any{"input_tokens": s.Usage.Input, "output_tokens": s.Usage.Output, "total_tokens": s.Usage.Input + s.Usage.Output,
		"input_tokens_details": map[string]any{"text_tokens": s.Usage.Input, "image_tokens": 0}}
	if !stream {
		data := make([]map[string]any, n)
		for i := range data {
			data[i] = map[string]any{"b64_json": ImageData(i)}
		}
		writeJSON(w, http.StatusOK, map[string]any{"created": created, "data": data, "usage": usage,
			"background": "opaque", "output_format": "png", "quality": "high", "size": "1024x1024"})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
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
	partials := 0
	if p, ok := req["partial_images"].(float64); ok {
		partials = int(p)
	}
	for i := range partials {
		if !send("image_generation.partial_image", map[string]any{"b64_json": PartialData(i), "created_at": created,
			"partial_image_index": i, "size": "1024x1024", "quality": "high", "background": "opaque", "output_format": "png"}) {
			return
		}
	}
	for i := range n {
		if !send("image_generation.completed", map[string]any{"b64_json": ImageData(i), "created_at": created,
			"size": "1024x1024", "quality": "high", "background": "opaque", "output_format": "png", "usage": usage}) {
			return
		}
	}
}
