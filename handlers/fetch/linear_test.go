package fetch

import (
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

// pageShapes build an HTML page of about size bytes in the shapes that
// cost a reader the most per byte: many short paragraphs, many links, one
// long table, nested lists and one long unbroken text.
var pageShapes = []struct {
	name  string
	build func(size int) string
}{
	{"paragraphs", func(size int) string {
		return htmlPage(strings.Repeat("<p>The cat sat on the mat, and then it slept.</p>\n", size/52))
	}},
	{"links", func(size int) string {
		return htmlPage(strings.Repeat(`<a href="/a/b?c=d">x</a> `, size/25))
	}},
	{"table", func(size int) string {
		return htmlPage("<table><tr><th>Name</th><th>Value</th></tr>" + strings.Repeat("<tr><td>alpha</td><td>1</td></tr>", size/34) + "</table>")
	}},
	{"nested lists", func(size int) string {
		unit := strings.Repeat("<ul><li>a", 20) + strings.Repeat("</li></ul>", 20)
		return htmlPage(strings.Repeat(unit, size/len(unit)))
	}},
	{"one word", func(size int) string {
		return htmlPage("<p>" + strings.Repeat("x", size) + "</p>")
	}},
}

func htmlPage(body string) string {
	return "<!doctype html><html><head><title>T</title></head><body><article>" + body + "</article></body></html>"
}

// BenchmarkMarkdownScale converts pages of growing size up to MaxPage in
// every shape: the time per page grows with its size, not its square (the
// 4 MiB figure near 16 times the 256 KiB one). cpu-ns/op is the process's
// CPU time per page, which other work on a shared machine does not
// inflate as it does the wall time.
func BenchmarkMarkdownScale(b *testing.B) {
	base, _ := url.Parse("https://example.com/")
	for _, s := range pageShapes {
		for _, kib := range []int{256, 4096} {
			html := s.build(kib << 10)
			b.Run(fmt.Sprintf("%s/%dKiB", s.name, kib), func(b *testing.B) {
				b.SetBytes(int64(len(html)))
				start := cpuTime(b)
				for b.Loop() {
					if _, err := Markdown(html, base); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(tb testing.TB) int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
