package translate

import (
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// dataURL splits a data: URL into its media type and base64 payload. A
// payload that is not base64 is percent-decoded and encoded. ok is false for
// anything that is not a data: URL.
func dataURL(u string) (mediaType, b64 string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	head, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	params := strings.Split(head, ";")
	mediaType = strings.TrimSpace(params[0])
	isB64 := false
	for _, p := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			isB64 = true
		}
	}
	if isB64 {
		return mediaType, payload, true
	}
	dec, err := url.PathUnescape(payload)
	if err != nil {
		dec = payload
	}
	return mediaType, base64.StdEncoding.EncodeToString([]byte(dec)), true
}

// imageBlock makes a messages image block from a chat or responses image URL.
func imageBlock(u string) []byte {
	if u == "" {
		return nil
	}
	b := set(obj(), "type", "image")
	if mt, data, ok := dataURL(u); ok {
		if mt == "" {
			mt = "image/png"
		}
		b = set(b, "source.type", "base64")
		b = set(b, "source.media_type", mt)
		return set(b, "source.data", data)
	}
	b = set(b, "source.type", "url")
	return set(b, "source.url", u)
}

// documentBlock makes a messages document block from a PDF data: URL.
func documentBlock(fileData, filename string) []byte {
	mt, data, ok := dataURL(fileData)
	if !ok || mt != "application/pdf" {
		return nil
	}
	b := set(obj(), "type", "document")
	b = set(b, "source.type", "base64")
	b = set(b, "source.media_type", mt)
	b = set(b, "source.data", data)
	if filename != "" {
		b = set(b, "title", filename)
	}
	return b
}

// sourceURL makes a chat image URL from a messages image source.
func sourceURL(src gjson.Result) string {
	switch src.Get("type").String() {
	case "base64":
		mt := src.Get("media_type").String()
		if mt == "" {
			mt = "image/png"
		}
		return "data:" + mt + ";base64," + src.Get("data").String()
	case "url":
		return src.Get("url").String()
	}
	return ""
}

// chatImagePart makes a chat image_url part.
func chatImagePart(u, detail string) []byte {
	b := set(obj(), "type", "image_url")
	b = set(b, "image_url.url", u)
	if detail != "" {
		b = set(b, "image_url.detail", detail)
	}
	return b
}

// chatTextPart makes a chat text part.
func chatTextPart(text string) []byte {
	return set(set(obj(), "type", "text"), "text", text)
}

// textBlock makes a messages text block, keeping a cache_control hint.
func textBlock(text string, cacheControl gjson.Result) []byte {
	b := newObject().val("type", "text").val("text", text)
	if cacheControl.IsObject() {
		b = b.rawS("cache_control", cacheControl.Raw)
	}
	return b.done()
}

// chatPartsToBlocks converts the parts of a chat content array (user, tool or
// system) into messages blocks: text, image_url and PDF file parts; other
// parts and empty texts are dropped.
func chatPartsToBlocks(content gjson.Result) [][]byte {
	var blocks [][]byte
	if content.Type == gjson.String {
		if s := content.String(); s != "" {
			blocks = append(blocks, textBlock(s, gjson.Result{}))
		}
		return blocks
	}
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "text", "input_text", "output_text":
			if s := p.Get("text").String(); s != "" {
				blocks = append(blocks, textBlock(s, p.Get("cache_control")))
			}
		case "refusal":
			if s := p.Get("refusal").String(); s != "" {
				blocks = append(blocks, textBlock(s, gjson.Result{}))
			}
		case "image_url":
			iu := p.Get("image_url")
			u := iu.String()
			if iu.IsObject() {
				u = iu.Get("url").String()
			}
			if b := imageBlock(u); b != nil {
				if cc := p.Get("cache_control"); cc.IsObject() {
					b = setRaw(b, "cache_control", cc.Raw)
				}
				blocks = append(blocks, b)
			}
		case "file":
			f := p.Get("file")
			if b := documentBlock(f.Get("file_data").String(), f.Get("filename").String()); b != nil {
				blocks = append(blocks, b)
			}
		}
		return true
	})
	return blocks
}
