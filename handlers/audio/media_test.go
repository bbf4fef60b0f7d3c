package audio

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestProbeFixtures reads every real file of testdata (made once with
// ffmpeg, see testdata/README) and compares its format and length with
// what ffprobe reported for it.
func TestProbeFixtures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		format Format
		// seconds is ffprobe's duration (0: the reader must refuse).
		seconds float64
		tol     float64
	}{
		{"tone.wav", FormatWAV, 1.5, 0.001},
		{"tone.mp3", FormatMP3, 12.672, 0.001},
		{"cbr-noxing.mp3", FormatMP3, 2.16, 0.001},
		{"tone.m4a", FormatMP4, 2.0, 0.001},
		{"frag.m4a", FormatMP4, 2.128, 0.001},
		{"tone.ogg", FormatOgg, 2.0, 0.001},
		{"tone.opus", FormatOgg, 3.0, 0.001},
		{"tone.webm", FormatWebM, 2.008, 0.001},
		// Written to a pipe: no stored duration; read from the blocks.
		{"stream.webm", FormatWebM, 2.008, 0.03},
		{"tone.flac", FormatFLAC, 0.5, 0.001},
		// Several sound tracks, the first short: the longest is measured.
		{"two-tracks.mp4", FormatMP4, 3.0, 0.001},
		{"two-tracks.webm", FormatWebM, 3.032, 0.001},
		{"two-streams.ogg", FormatOgg, 3.0, 0.001},
		// A chain of two Ogg links (1 s, then 2 s): ffprobe reads the last.
		{"chained.opus", FormatOgg, 3.0, 0.001},
		{"frag-opus.mp4", FormatMP4, 2.0, 0.001},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			info, err := Probe(b)
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if info.Format != tc.format || math.Abs(info.Duration-tc.seconds) > tc.tol {
				t.Fatalf("Probe = %s %.4f s, want %s %.4f s", info.Format, info.Duration, tc.format, tc.seconds)
			}
		})
	}
}

// TestProbeNotAudio: files that only look like audio (by name or by a
// container that holds no sound) are ErrNotAudio.
func TestProbeNotAudio(t *testing.T) {
	for _, f := range []string{"notes.mp3", "red.png", "silent.mp4"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Probe(b); !errors.Is(err, ErrNotAudio) {
			t.Errorf("%s: %v, want ErrNotAudio", f, err)
		}
	}
}
