package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/imagetype"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upload"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// Edit form fields.
const (
	fieldImage  = "image"
	fieldImages = "image[]"
	fieldPrompt = "prompt"
	fieldStream = "stream"
)

func badReference(format string, args ...any) error {
	return gwerr.New(gwerr.Invalid, format, args...).WithCode(CodeInvalidReference).WithParam(fieldImage)
}

// Edit serves POST /v1/images/edits: exactly one image back, never a
// stream.
func (h *Handler) Edit(c *pipeline.Call) error {
	form, err := upload.Read(c.R, upload.Limits{MaxFileBytes: MaxReferenceBytes, MaxTotalBytes: MaxReferenceTotal, MaxFiles: MaxReferenceImages})
	if err != nil {
		return formError(err)
	}
	files := form.FilesOf(fieldImages, fieldImage)
	if len(files) == 0 {
		return badReference("send 1 to %d reference images in image[] (or image)", MaxReferenceImages)
	}
	out := make([]upload.OutFile, len(files))
	for i, f := range files {
		ct := imagetype.Sniff(f.Data)
		if ct == "" {
			return badReference("reference image %d is not a PNG, JPEG or WebP image", i+1)
		}
		out[i] = upload.OutFile{Field: fieldImages, Filename: fmt.Sprintf("image-%d.%s", i+1, strings.TrimPrefix(ct, "image/")), ContentType: ct, Data: f.Data}
	}
	cat := c.Gateway.Catalog
	get := func(name string) gjson.Result {
		if !form.Has(name) {
			return gjson.Result{}
		}
		v := form.Value(name)
		if name == "max_price" || name == "n" || name == "output_compression" {
			if r := gjson.Parse(v); r.Type == gjson.Number && r.Raw == strings.TrimSpace(v) {
				return r
			}
		}
		b, _ := json.Marshal(v)
		return gjson.ParseBytes(b)
	}
	if form.Has("model") {
		if m := form.Value("model"); m != "" && !slices.Contains(EditAliases, m) {
			return gwerr.New(gwerr.Invalid, "model %s cannot edit images; %s can", m, strings.Join(EditAliases, " and ")).
				WithCode(CodeEditUnsupported).WithParam("model")
		}
	}
	r, err := h.parseCommon(cat, get)
	if err != nil {
		return err
	}
	if !slices.Contains(EditAliases, r.alias) {
		return gwerr.New(gwerr.Invalid, "model %s cannot edit images", r.alias).WithCode(CodeEditUnsupported).WithParam("model")
	}
	if r.n != 1 {
		return invalid("n", "an edit makes exactly one image")
	}
	if v := form.Value(fieldStream); v == "true" || v == "1" {
		return invalid(fieldStream, "edits are never streamed; leave stream out")
	}
	r.prompt = form.Value(fieldPrompt)
	if strings.TrimSpace(r.prompt) == "" {
		return invalid(fieldPrompt, "prompt is required")
	}
	r.references = int64(len(out))
	ab, p, err := gate(c, r)
	if err != nil {
		return err
	}
	fields := [][2]string{{"model", ab.Model}, {fieldPrompt, r.prompt}, {"n", "1"}}
	for _, k := range passOn {
		if v, ok := r.pass[k]; ok {
			fields = append(fields, [2]string{k, fmt.Sprint(v)})
		}
	}
	parts, ctype := upload.Body(fields, out)
	ctx, cancel := context.WithTimeout(c.R.Context(), h.timeout(h.cfg.EditTimeout, EditTimeout))
	defer cancel()
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: p, Path: PathEdits, ContentType: ctype, Parts: parts})
	if err != nil {
		return failure(ctx, err)
	}
	defer resp.Body.Close()
	got, cost, err := charge(c, ctx, resp.Body, r, ab)
	if err != nil {
		return err
	}
	usage := map[string]any{}
	if got.usage != nil {
		_ = json.Unmarshal(got.usage, &usage)
	}
	usage["cost"] = cost.String()
	answer, _ := json.Marshal(map[string]any{"created": got.created, "data": got.data, "model": r.alias, "usage": usage})
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", answer)
	return nil
}

// formError maps a refused upload: a file too large, too many or the
// total too large is invalid_reference_image; a text field names itself.
func formError(err error) error {
	var tl *upload.TooLargeError
	var tm *upload.TooManyFilesError
	var fe *upload.FieldError
	switch {
	case errors.As(err, &tl):
		if tl.Total {
			return badReference("the reference images are over %d MB together", MaxReferenceTotal>>20)
		}
		return badReference("a reference image is over %d MB", MaxReferenceBytes>>20)
	case errors.As(err, &tm):
		return badReference("send at most %d reference images", MaxReferenceImages)
	case errors.As(err, &fe):
		return invalid(fe.Field, "%s", fe.Error())
	}
	return invalid(fieldImage, "the body must be multipart/form-data with the reference images in image[]")
}
