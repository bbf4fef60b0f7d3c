package imagetype

import (
	"os"
	"path/filepath"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Real files of each format (made with ffmpeg) are told by their bytes;
// files that only look like images are not.
func TestSniff(t *testing.T) {
	png, jpg, webp, lossless := fixture(t, "red.png"), fixture(t, "blue.jpg"), fixture(t, "green.webp"), fixture(t, "lossless.webp")
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"png", png, PNG},
		{"jpeg", jpg, JPEG},
		{"lossy webp", webp, WebP},
		{"lossless webp", lossless, WebP},
		{"text", []byte("hello, I am a picture"), ""},
		{"empty", nil, ""},
		{"png magic then junk", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...), ""},
		{"png cut after the magic", png[:12], ""},
		{"jpeg magic alone", []byte{0xFF, 0xD8, 0xFF, 0xE0}, ""},
		{"webp header without a chunk", []byte("RIFF\x04\x00\x00\x00WEBP"), ""},
		{"webp with a wrong VP8 start code", append(append([]byte{}, webp[:23]...), append([]byte{0, 0, 0}, webp[26:]...)...), ""},
		{"gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00"), ""},
		{"wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00"), ""},
	} {
		if got := Sniff(tc.b); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Sniff never panics and only names the three formats.
func FuzzSniff(f *testing.F) {
	for _, n := range []string{"red.png", "blue.jpg", "green.webp", "lossless.webp"} {
		f.Add(fixture(f, n))
	}
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8X"))
	f.Fuzz(func(t *testing.T, b []byte) {
		switch Sniff(b) {
		case "", PNG, JPEG, WebP:
		default:
			t.Fatal("unknown type")
		}
	})
}
