package audio

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// needTool returns the path of a tool, or skips (fails under CI, whose
// .ci/run installs ffmpeg).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; .ci/run must install it", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// TestProbeAgainstFFmpeg makes real audio of every listed format with
// ffmpeg, at lengths that are not whole seconds (and one past a minute),
// and compares what Probe reads from the bytes with what ffprobe reports;
// files written to a pipe (no stored length: WebM from a live recorder,
// fragmented MP4) are compared with the length asked of ffmpeg.
func TestProbeAgainstFFmpeg(t *testing.T) {
	ffmpeg, ffprobe := needTool(t, "ffmpeg"), needTool(t, "ffprobe")
	dir := t.TempDir()
	type maker struct {
		name   string
		format Format
		ext    string
		args   []string // output options
		pipe   bool     // written to stdout: ffprobe has no length to give
		// asked compares with the length asked of ffmpeg: ffprobe counts
		// Ogg Opus's pre-skip (6.5 ms of priming) into the length.
		asked bool
		tol   float64
	}
	makers := []maker{
		{"wav s16", FormatWAV, "wav", []string{"-ar", "16000", "-c:a", "pcm_s16le"}, false, false, 0.001},
		{"wav u8 stereo", FormatWAV, "wav", []string{"-ar", "8000", "-ac", "2", "-c:a", "pcm_u8"}, false, false, 0.001},
		{"mp3 vbr (Xing)", FormatMP3, "mp3", []string{"-ar", "22050", "-c:a", "libmp3lame", "-q:a", "6"}, false, false, 0.001},
		{"mp3 cbr without Xing", FormatMP3, "mp3", []string{"-ar", "16000", "-c:a", "libmp3lame", "-b:a", "32k", "-write_xing", "0"}, false, false, 0.001},
		{"mp3 with ID3v2", FormatMP3, "mp3", []string{"-ar", "16000", "-c:a", "libmp3lame", "-b:a", "24k", "-metadata", "title=tone", "-id3v2_version", "3"}, false, false, 0.001},
		{"flac", FormatFLAC, "flac", []string{"-ar", "16000", "-c:a", "flac"}, false, false, 0.001},
		{"ogg vorbis", FormatOgg, "ogg", []string{"-ar", "16000", "-c:a", "libvorbis"}, false, false, 0.001},
		{"ogg opus", FormatOgg, "opus", []string{"-c:a", "libopus", "-b:a", "16k"}, false, true, 0.001},
		{"webm opus", FormatWebM, "webm", []string{"-c:a", "libopus", "-b:a", "16k"}, false, false, 0.001},
		{"webm vorbis", FormatWebM, "webm", []string{"-ar", "16000", "-c:a", "libvorbis"}, false, false, 0.001},
		{"webm streamed", FormatWebM, "webm", []string{"-c:a", "libopus", "-b:a", "16k", "-f", "webm"}, true, false, 0.03},
		{"m4a aac", FormatMP4, "m4a", []string{"-ar", "16000", "-c:a", "aac", "-b:a", "24k"}, false, false, 0.001},
		{"mp4 fragmented", FormatMP4, "m4a", []string{"-ar", "16000", "-c:a", "aac", "-b:a", "24k", "-movflags", "frag_keyframe+empty_moov", "-f", "mp4"}, true, false, 0.07},
	}
	for _, m := range makers {
		for _, seconds := range []float64{0.73, 7.31, 65.5} {
			t.Run(fmt.Sprintf("%s %gs", m.name, seconds), func(t *testing.T) {
				out := filepath.Join(dir, fmt.Sprintf("%s-%g.%s", strings.ReplaceAll(m.name, " ", "_"), seconds, m.ext))
				args := []string{"-v", "error", "-f", "lavfi", "-i", fmt.Sprintf("sine=frequency=440:sample_rate=48000:duration=%g", seconds)}
				args = append(args, m.args...)
				cmd := exec.Command(ffmpeg, args...)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if m.pipe {
					cmd.Args = append(cmd.Args, "pipe:1")
					f, err := os.Create(out)
					if err != nil {
						t.Fatal(err)
					}
					cmd.Stdout = f
					defer f.Close()
				} else {
					cmd.Args = append(cmd.Args, "-y", out)
				}
				if err := cmd.Run(); err != nil {
					if strings.Contains(stderr.String(), "Unknown encoder") {
						t.Skipf("this ffmpeg lacks the encoder: %s", stderr.String())
					}
					t.Fatalf("ffmpeg: %v %s", err, stderr.String())
				}
				want := seconds
				if !m.pipe && !m.asked {
					b, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", out).Output()
					if err != nil {
						t.Fatalf("ffprobe: %v", err)
					}
					if want, err = strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err != nil {
						t.Fatalf("ffprobe duration %q", b)
					}
				}
				data, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				info, err := Probe(data)
				if err != nil {
					t.Fatalf("Probe (%d bytes): %v", len(data), err)
				}
				t.Logf("%d bytes: Probe %.4f s, want %.4f s", len(data), info.Duration, want)
				if info.Format != m.format || math.Abs(info.Duration-want) > m.tol {
					t.Fatalf("Probe = %s %.4f s, want %s %.4f s (±%g)", info.Format, info.Duration, m.format, want, m.tol)
				}
			})
		}
	}
}
