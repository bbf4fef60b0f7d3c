package fetch

import (
	"bytes"
	"slices"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MaxColspan bounds how many columns one cell's colspan fills, so a page
// cannot make a row of millions of empty cells.
const MaxColspan = 100

// tables renders HTML tables as GFM tables: the first row is the header
// (a table without header cells uses its first row too), then the
// delimiter row, then one line per row. A cell's line breaks become
// spaces and a "|" in it is escaped, so a cell never breaks its row.
type tables struct{}

func (tables) Name() string { return "gfm-tables" }

func (tables) Init(conv *converter.Converter) error {
	conv.Register.Renderer(renderTable, converter.PriorityStandard)
	return nil
}

func renderTable(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
	if n.Type != html.ElementNode || n.DataAtom != atom.Table || attr(n, "role") == "presentation" {
		return converter.RenderTryNext
	}
	var caption string
	var rows [][]string
	width := 0
	for _, tr := range tableRows(n, &caption, ctx) {
		var row []string
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || (c.DataAtom != atom.Td && c.DataAtom != atom.Th) {
				continue
			}
			cell := renderCell(ctx, c)
			row = append(row, cell)
			for span := min(atoiOr(attr(c, "colspan"), 1), MaxColspan); span > 1; span-- {
				row = append(row, "")
			}
		}
		if len(row) > 0 {
			rows = append(rows, row)
			width = max(width, len(row))
		}
	}
	if len(rows) == 0 {
		return converter.RenderTryNext
	}
	_, _ = w.WriteString("\n\n")
	if caption != "" {
		_, _ = w.WriteString(caption + "\n\n")
	}
	for i, row := range rows {
		writeRow(w, row, width)
		if i == 0 {
			writeRow(w, slices.Repeat([]string{"---"}, width), width)
		}
	}
	_, _ = w.WriteString("\n")
	return converter.RenderSuccess
}

// tableRows returns t's own rows in order (those of nested tables are
// their cells' business) and renders its caption into caption.
func tableRows(t *html.Node, caption *string, ctx converter.Context) []*html.Node {
	var rows []*html.Node
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		switch c.DataAtom {
		case atom.Tr:
			rows = append(rows, c)
		case atom.Thead, atom.Tbody, atom.Tfoot:
			for r := c.FirstChild; r != nil; r = r.NextSibling {
				if r.Type == html.ElementNode && r.DataAtom == atom.Tr {
					rows = append(rows, r)
				}
			}
		case atom.Caption:
			*caption = renderCell(ctx, c)
		}
	}
	return rows
}

// renderCell is a cell's Markdown on one line: line breaks collapsed to
// spaces, every "|" escaped.
func renderCell(ctx converter.Context, n *html.Node) string {
	var buf bytes.Buffer
	ctx.RenderChildNodes(ctx, &buf, n)
	s := string(ctx.UnEscapeContent(buf.Bytes()))
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\u00a0", " ")), " ")
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			out.WriteString(s[i : i+2]) // already escaped: kept as it is
			i++
		case s[i] == '|':
			out.WriteString(`\|`)
		default:
			out.WriteByte(s[i])
		}
	}
	return out.String()
}

func writeRow(w converter.Writer, row []string, width int) {
	_, _ = w.WriteString("|")
	for i := range width {
		cell := ""
		if i < len(row) {
			cell = row[i]
		}
		_, _ = w.WriteString(" " + cell + " |")
	}
	_, _ = w.WriteString("\n")
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// atoiOr reads a small positive number (a colspan), or def.
func atoiOr(s string, def int) int {
	s = strings.TrimSpace(s)
	v := 0
	for _, r := range s {
		if r < '0' || r > '9' || v > MaxColspan {
			break
		}
		v = v*10 + int(r-'0')
	}
	if v < 1 {
		return def
	}
	return v
}
