// Package tokens counts text in tokens on the gateway itself: with the
// o200k tokenizer of the chat models and the cl100k one of OpenAI's
// embedding models, loaded on first use and fed chunk by chunk, so that a
// count costs time linear in the text whatever the client wrote.
package tokens

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// encoding is one tokenizer, loaded on first use.
type encoding struct {
	name  tokenizer.Encoding
	once  sync.Once
	codec tokenizer.Codec
	err   error
}

// The tokenizers the gateway counts with: o200k (the chat models'), and
// cl100k (OpenAI's embedding models').
var (
	o200k  = &encoding{name: tokenizer.O200kBase}
	cl100k = &encoding{name: tokenizer.Cl100kBase}
)

// get returns the tokenizer, loading it on first use.
func (e *encoding) get() (tokenizer.Codec, error) {
	e.once.Do(func() { e.codec, e.err = tokenizer.Get(e.name) })
	return e.codec, e.err
}

// count counts s chunk by chunk (ChunkBytes); ok is false when the
// tokenizer is unavailable.
func (e *encoding) count(s string) (total int, ok bool) {
	codec, err := e.get()
	if err != nil {
		return 0, false
	}
	for len(s) > 0 {
		cut := chunkEnd(s)
		n, _ := codec.Count(s[:cut])
		total += n
		s = s[cut:]
	}
	return total, true
}

// ChunkBytes is the most bytes the tokenizer reads at once. Its merging
// of one unbroken run of letters costs more than linear time in the run's
// length, so a longer text is counted chunk by chunk, cut before a space
// (where the tokenizer starts a new word anyway) or, in a run with none,
// at a character boundary: a client's 32 MiB word costs what 32 MiB of
// prose does.
const ChunkBytes = 512

// Load loads the o200k tokenizer, or says why it cannot be had.
func Load() error {
	_, err := o200k.get()
	return err
}

// Count counts s with the o200k tokenizer (0 when it is unavailable).
func Count(s string) int {
	n, _ := o200k.count(s)
	return n
}

// Larger counts s with the o200k tokenizer and with the cl100k one and
// gives the larger count, for the endpoints that reserve by a text's
// tokens whatever the model counts with; ok is false when either
// tokenizer is unavailable.
func Larger(s string) (n int, ok bool) {
	a, okA := o200k.count(s)
	b, okB := cl100k.count(s)
	return max(a, b), okA && okB
}

// chunkEnd is where the first chunk of s ends: all of s when it fits in
// ChunkBytes, else before the last space within the chunk, else at the
// last character boundary within it.
func chunkEnd(s string) int {
	if len(s) <= ChunkBytes {
		return len(s)
	}
	if i := strings.LastIndexByte(s[:ChunkBytes], ' '); i > 0 {
		return i
	}
	i := ChunkBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return ChunkBytes
	}
	return i
}

// A reservation sized by the gateway's own count of a prompt takes it
// this much higher than counted (MarginPercent of it, plus MarginTokens):
// a provider counts its own way (and its count endpoint is an estimate),
// and a settlement above its hold would draw a balance past zero.
const (
	MarginPercent = 2
	MarginTokens  = 16
)

// WithMargin is n counted tokens with the margin a reservation takes over
// them.
func WithMargin[T ~int | ~int64](n T) T {
	return n + n*MarginPercent/100 + MarginTokens
}
