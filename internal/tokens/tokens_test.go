package tokens

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

func TestChunkEnd(t *testing.T) {
	long := strings.Repeat("x", ChunkBytes+10)
	for _, tc := range []struct {
		name string
		s    string
		want int
	}{
		{"empty", "", 0},
		{"short", "a b", 3},
		{"exactly a chunk", long[:ChunkBytes], ChunkBytes},
		{"before the last space", long[:100] + " " + long[:ChunkBytes], 100},
		{"one word", long, ChunkBytes},
		{"a space first only", " " + long, ChunkBytes},
		// 3-byte characters: 512 is not a boundary, 510 is.
		{"at a character boundary", strings.Repeat("猫", ChunkBytes), 510},
		{"no boundary at all", strings.Repeat("\x80", ChunkBytes+1), ChunkBytes},
	} {
		if got := chunkEnd(tc.s); got != tc.want {
			t.Errorf("%s: chunkEnd = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// chunks cuts s as count does.
func chunks(s string) []string {
	var out []string
	for len(s) > 0 {
		cut := chunkEnd(s)
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// The chunks of a text are never empty nor longer than ChunkBytes, add up
// to the text, and cut a valid text only between characters.
func FuzzChunks(f *testing.F) {
	for _, s := range []string{"", "a b", strings.Repeat("x", 3*ChunkBytes), strings.Repeat("猫 ", 400), strings.Repeat("\x80", 600), " " + strings.Repeat("é", 700)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var joined strings.Builder
		for _, c := range chunks(s) {
			if len(c) == 0 || len(c) > ChunkBytes {
				t.Fatalf("chunk of %d bytes", len(c))
			}
			if utf8.ValidString(s) && !utf8.ValidString(c) {
				t.Fatalf("chunk %q cuts a character", c)
			}
			joined.WriteString(c)
		}
		if joined.String() != s {
			t.Fatal("the chunks do not add up to the text")
		}
	})
}

func codec(t *testing.T, e tokenizer.Encoding) tokenizer.Codec {
	t.Helper()
	c, err := tokenizer.Get(e)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Prose cut before its spaces counts as it does whole: the tokenizer
// starts a word at a space anyway.
func TestCountProseAsWhole(t *testing.T) {
	if err := Load(); err != nil {
		t.Fatal(err)
	}
	s := strings.Repeat("the cat sat on the mat. ", 200)
	want, _ := codec(t, tokenizer.O200kBase).Count(s)
	if got := Count(s); got != want || len(chunks(s)) < 2 {
		t.Fatalf("Count = %d in %d chunks, want %d", got, len(chunks(s)), want)
	}
}

// Larger is the larger of the o200k and cl100k counts.
func TestLarger(t *testing.T) {
	for _, s := range []string{"", "hello world", "猫がマットの上に座った。", strings.Repeat("数", 40)} {
		a, _ := codec(t, tokenizer.O200kBase).Count(s)
		b, _ := codec(t, tokenizer.Cl100kBase).Count(s)
		if got, ok := Larger(s); got != max(a, b) || !ok {
			t.Errorf("Larger(%q) = %d %v, want %d (o200k %d, cl100k %d)", s, got, ok, max(a, b), a, b)
		}
	}
}

func TestWithMargin(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{{0, 16}, {49, 65}, {100, 118}, {10_000, 10_216}} {
		if got := WithMargin(tc.n); got != tc.want {
			t.Errorf("WithMargin(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if got := WithMargin(int(tc.n)); got != int(tc.want) {
			t.Errorf("WithMargin(int %d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}
