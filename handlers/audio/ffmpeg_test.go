package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
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

// makeAudio has ffmpeg write seconds of a tone with the output options
// args to a file of dir, and returns its bytes and ffprobe's length.
func makeAudio(t *testing.T, dir, name string, seconds float64, args ...string) ([]byte, float64) {
	t.Helper()
	ffmpeg, ffprobe := needTool(t, "ffmpeg"), needTool(t, "ffprobe")
	out := filepath.Join(dir, name)
	cmd := exec.Command(ffmpeg, append(append([]string{"-v", "error", "-f", "lavfi", "-i",
		fmt.Sprintf("sine=frequency=440:sample_rate=48000:duration=%g", seconds)}, args...), "-y", out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "Unknown encoder") {
			t.Skipf("this ffmpeg lacks the encoder: %s", b)
		}
		t.Fatalf("ffmpeg: %v %s", err, b)
	}
	return readAudio(t, out), probeSeconds(t, ffprobe, out)
}

func readAudio(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// probeSeconds is ffprobe's length of the file at path.
func probeSeconds(t *testing.T, ffprobe, path string) float64 {
	t.Helper()
	b, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	d, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("ffprobe duration %q", b)
	}
	return d
}

// probeForged writes a forged file next to the real one and returns what
// ffprobe makes of it (the forgery fools a reader that trusts headers).
func probeForged(t *testing.T, dir, name string, b []byte) float64 {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return probeSeconds(t, needTool(t, "ffprobe"), path)
}

// expectLength checks that Probe reads want seconds (±tol) from b.
func expectLength(t *testing.T, b []byte, want, tol float64) {
	t.Helper()
	info, err := Probe(b)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if math.Abs(info.Duration-want) > tol {
		t.Fatalf("Probe = %.4f s, want %.4f s (±%g)", info.Duration, want, tol)
	}
}

// expectRefused checks that Probe refuses b as unreadable (400, param file).
func expectRefused(t *testing.T, b []byte) {
	t.Helper()
	info, err := Probe(b)
	var ue *UnreadableError
	if !errors.As(err, &ue) {
		t.Fatalf("Probe = %+v %v, want an *UnreadableError", info, err)
	}
	t.Logf("refused: %v", err)
}

// TestProbeForgedHeaders: real files from ffmpeg whose headers are then
// forged. A header that shrinks the length is not believed (the length
// read equals ffprobe's of the true file), a header that claims more than
// the bytes can hold is refused, and where only a header gives the length
// the file's size sets its floor.
func TestProbeForgedHeaders(t *testing.T) {
	dir := t.TempDir()

	t.Run("wav byte rate", func(t *testing.T) {
		wav, real := makeAudio(t, dir, "s16.wav", 65.5, "-ar", "16000", "-c:a", "pcm_s16le")
		byteRate := binary.LittleEndian.Uint32(wav[28:32])
		if byteRate != 32000 {
			t.Fatalf("byte rate %d: the fmt chunk is not where the test looks", byteRate)
		}
		fast := bytes.Clone(wav)
		binary.LittleEndian.PutUint32(fast[28:32], byteRate*100)
		// A decoder ignores the byte rate: the provider hears it all.
		if got := probeForged(t, dir, "fast.wav", fast); math.Abs(got-real) > 0.001 {
			t.Fatalf("ffprobe reads %.3f s of the forged file, %.3f s of the true one", got, real)
		}
		expectLength(t, fast, real, 0.001)
		// A byte rate 100 times too small claims 6,550 s in 2 MB.
		slow := bytes.Clone(wav)
		binary.LittleEndian.PutUint32(slow[28:32], byteRate/100)
		expectRefused(t, slow)
		// A block align that disagrees with the channels and sample size.
		align := bytes.Clone(wav)
		binary.LittleEndian.PutUint16(align[32:34], 200)
		expectRefused(t, align)
	})

	t.Run("mp3 Xing frame count", func(t *testing.T) {
		mp3, real := makeAudio(t, dir, "vbr.mp3", 65.5, "-ar", "22050", "-c:a", "libmp3lame", "-q:a", "6")
		i := bytes.Index(mp3, []byte("Xing"))
		if i < 0 || binary.BigEndian.Uint32(mp3[i+4:i+8])&1 == 0 {
			t.Fatal("no Xing header with a frame count")
		}
		frames := binary.BigEndian.Uint32(mp3[i+8 : i+12])
		small := bytes.Clone(mp3)
		binary.BigEndian.PutUint32(small[i+8:i+12], frames/100)
		if got := probeForged(t, dir, "small.mp3", small); got > real/10 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		expectLength(t, small, real, 0.001)
		// A count 1,000 times too large claims more than the bytes can
		// hold at 8 kbit/s.
		large := bytes.Clone(mp3)
		binary.BigEndian.PutUint32(large[i+8:i+12], frames*1000)
		expectRefused(t, large)
		// A few garbage bytes in mid-stream: the walk resyncs.
		cut := append(append(bytes.Clone(mp3[:len(mp3)/2]), 0xFF, 0xFF, 0x00, 0x13), mp3[len(mp3)/2:]...)
		expectLength(t, cut, real, 0.03)
	})

	// forgeGranule sets the last page's granule position and makes its
	// checksum right again.
	forgeGranule := func(ogg []byte, granule uint64) []byte {
		i := bytes.LastIndex(ogg, []byte("OggS"))
		forged := bytes.Clone(ogg)
		binary.LittleEndian.PutUint64(forged[i+6:i+14], granule)
		binary.LittleEndian.PutUint32(forged[i+22:i+26], oggCRC(forged[i:]))
		return forged
	}
	lastGranule := func(ogg []byte) uint64 {
		i := bytes.LastIndex(ogg, []byte("OggS"))
		return binary.LittleEndian.Uint64(ogg[i+6 : i+14])
	}

	// One second claimed by the last granule: the packets are walked. An
	// Opus packet's length is read from its TOC byte (ffprobe counts the
	// 6.5 ms pre-skip in, the walk the last packet's padding); a Vorbis
	// packet decodes to a quarter of its block and of the one before it.
	// A granule 1,000 times too large is refused.
	for _, tc := range []struct {
		name, file string
		rate       uint64
		within     float64
		args       []string
	}{
		{"ogg opus last granule", "tone.opus", 48000, 0.02, []string{"-c:a", "libopus", "-b:a", "64k"}},
		{"ogg vorbis last granule", "tone.ogg", 16000, 0.03, []string{"-ar", "16000", "-c:a", "libvorbis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ogg, real := makeAudio(t, dir, tc.file, 65.5, tc.args...)
			forged := forgeGranule(ogg, tc.rate)
			if got := probeForged(t, dir, "forged-"+tc.file, forged); got > 2 {
				t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
			}
			expectLength(t, forged, real, tc.within)
			expectRefused(t, forgeGranule(ogg, lastGranule(ogg)*1000))
		})
	}

	t.Run("m4a durations", func(t *testing.T) {
		m4a, real := makeAudio(t, dir, "tone.m4a", 65.5, "-ar", "16000", "-c:a", "aac", "-b:a", "24k")
		// The track header's and the media header's durations (version
		// 0 boxes), scaled.
		scale := func(times float64) []byte {
			forged := bytes.Clone(m4a)
			for box, off := range map[string]int{"tkhd": 24, "mdhd": 20} {
				i := bytes.Index(forged, []byte(box))
				if i < 0 || forged[i+4] != 0 {
					t.Fatalf("no version 0 %s", box)
				}
				d := binary.BigEndian.Uint32(forged[i+off:])
				binary.BigEndian.PutUint32(forged[i+off:], uint32(float64(d)*times))
			}
			return forged
		}
		forged := scale(0.01)
		// A decoder goes by the sample tables: the provider hears it all.
		if got := probeForged(t, dir, "forged.m4a", forged); math.Abs(got-real) > 0.001 {
			t.Fatalf("ffprobe reads %.3f s of the forged file, %.3f s of the true one", got, real)
		}
		// The AAC frames counted: within their priming and padding.
		expectLength(t, forged, real, 0.3)
		expectRefused(t, scale(1000))
	})

	t.Run("webm duration", func(t *testing.T) {
		webm, real := makeAudio(t, dir, "tone.webm", 65.5, "-c:a", "libopus", "-b:a", "16k")
		// Info's Duration (id 0x4489) set to 1 s (1,000 ticks of 1 ms).
		forged := bytes.Clone(webm)
		i := bytes.Index(forged, []byte{0x44, 0x89})
		switch {
		case i >= 0 && forged[i+2] == 0x88:
			binary.BigEndian.PutUint64(forged[i+3:], math.Float64bits(1000))
		case i >= 0 && forged[i+2] == 0x84:
			binary.BigEndian.PutUint32(forged[i+3:], math.Float32bits(1000))
		default:
			t.Fatal("no Duration element")
		}
		if got := probeForged(t, dir, "forged.webm", forged); got > 2 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		// The Opus packets counted.
		expectLength(t, forged, real, 0.03)
	})

	t.Run("flac total samples", func(t *testing.T) {
		flac, real := makeAudio(t, dir, "tone.flac", 65.5, "-ar", "16000", "-c:a", "flac")
		forged := bytes.Clone(flac)
		// STREAMINFO's 36-bit sample count (bytes 21 to 25 of the file),
		// set to 16,000 (one second).
		forged[21] &= 0xF0
		binary.BigEndian.PutUint32(forged[22:26], 16000)
		if got := probeForged(t, dir, "forged.flac", forged); got > 2 {
			t.Fatalf("ffprobe reads %.3f s of the forged file: the forgery does not take", got)
		}
		// The frames walked.
		expectLength(t, forged, real, 0.001)
		// Zero samples claimed is a file that does not say.
		binary.BigEndian.PutUint32(forged[22:26], 0)
		expectRefused(t, forged)
		// The frames cut off after the first 64 KB: the floor, the audio
		// bytes at the PCM rate of 16 kHz mono 16-bit, against the claim of
		// one second.
		binary.BigEndian.PutUint32(forged[22:26], 16000)
		info, err := Probe(forged[:64<<10])
		if err != nil || info.Duration < float64(64<<10-9000)/(16000*2*FLACOverhead) {
			t.Fatalf("Probe = %+v %v", info, err)
		}
	})
}
