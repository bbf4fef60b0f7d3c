// Package imagetype tells PNG, JPEG and WebP images from their bytes (never
// from a name or a declared type): the magic number, then the header a
// decoder would read, so a file that only starts like an image is refused.
package imagetype

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/jpeg"
	"image/png"
)

// Content types of the formats taken.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	WebP = "image/webp"
)

// MaxPixels bounds the pixels a header may claim (a decompression bomb's
// defence: the gateway never decodes, but a provider would).
const MaxPixels = 100_000_000

// Sniff returns the content type of b (PNG, JPEG or WebP) or "" when b is
// none of them, or claims a size of zero or over MaxPixels.
func Sniff(b []byte) string {
	var (
		ct  string
		cfg image.Config
		err error
	)
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		ct = PNG
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		ct = JPEG
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		ct = WebP
		cfg, err = webpConfig(b)
	default:
		return ""
	}
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return ""
	}
	return ct
}

type errNotWebP struct{}

func (errNotWebP) Error() string { return "not a WebP image" }

// webpConfig reads a WebP file's size from its first chunk: VP8 (lossy),
// VP8L (lossless) or VP8X (extended).
func webpConfig(b []byte) (image.Config, error) {
	if len(b) < 30 || binary.LittleEndian.Uint32(b[4:8]) < 4 {
		return image.Config{}, errNotWebP{}
	}
	chunk, body := string(b[12:16]), b[20:]
	switch chunk {
	case "VP8 ":
		// Frame tag (3 bytes), start code 9d 01 2a, 14-bit width and height.
		if len(body) < 10 || body[3] != 0x9d || body[4] != 0x01 || body[5] != 0x2a {
			return image.Config{}, errNotWebP{}
		}
		w := int(binary.LittleEndian.Uint16(body[6:8]) & 0x3fff)
		h := int(binary.LittleEndian.Uint16(body[8:10]) & 0x3fff)
		return image.Config{Width: w, Height: h}, nil
	case "VP8L":
		// Signature 0x2f, then 14-bit width-1 and height-1.
		if len(body) < 5 || body[0] != 0x2f {
			return image.Config{}, errNotWebP{}
		}
		v := binary.LittleEndian.Uint32(body[1:5])
		return image.Config{Width: int(v&0x3fff) + 1, Height: int(v>>14&0x3fff) + 1}, nil
	case "VP8X":
		// Flags (4 bytes), then 24-bit canvas width-1 and height-1.
		if len(body) < 10 {
			return image.Config{}, errNotWebP{}
		}
		w := int(body[4]) | int(body[5])<<8 | int(body[6])<<16
		h := int(body[7]) | int(body[8])<<8 | int(body[9])<<16
		return image.Config{Width: w + 1, Height: h + 1}, nil
	}
	return image.Config{}, errNotWebP{}
}
