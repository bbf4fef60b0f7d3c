// Package pdftest makes small, valid PDF files of a given number of pages
// for tests: a classic file (objects and a cross-reference table) or a
// PDF 1.5 one whose page tree and pages are packed in a compressed object
// stream found through a cross-reference stream.
package pdftest

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"strings"
)

// Options shape a made file.
type Options struct {
	// ObjectStreams packs the catalogue, the page tree and the pages in
	// one compressed object stream, with a cross-reference stream in place
	// of the table.
	ObjectStreams bool
	// Fanout, above 1, makes the page tree that many levels of nodes of at
	// most Fanout kids each (0 or 1: every page a kid of the root).
	Fanout int
	// Text is shown on every page ("" : a page number).
	Text string
}

// object numbers of the fixed objects; pages and tree nodes follow.
const (
	catalogObj  = 1
	fontObj     = 2
	contentsObj = 3
	firstFree   = 4
)

// Make is a PDF of pages pages (at least 1) shaped by o.
func Make(pages int, o Options) []byte {
	text := o.Text
	if text == "" {
		text = fmt.Sprintf("A page of %d.", pages)
	}
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", escape(text))
	objs := map[int]string{
		fontObj: "<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>",
	}
	next := firstFree
	pageNums := make([]int, pages)
	for i := range pageNums {
		pageNums[i] = next
		next++
	}
	root := tree(objs, pageNums, o.Fanout, &next)
	objs[catalogObj] = fmt.Sprintf("<</Type/Catalog/Pages %d 0 R>>", root)
	stream := fmt.Sprintf("<</Length %d>>\nstream\n%s\nendstream", len(content), content)
	if o.ObjectStreams {
		return packed(objs, stream, next)
	}
	objs[contentsObj] = stream
	return classic(objs, next)
}

// tree adds the page tree over pages (their object numbers) to objs: one
// node of all of them, or with fanout above 1 levels of nodes of at most
// fanout kids each; it returns the root's object number. The root holds
// the attributes every page inherits (media box, font).
func tree(objs map[int]string, pages []int, fanout int, next *int) int {
	type node struct {
		num, count int
		kids       []int
	}
	level := make([]node, len(pages))
	for i, p := range pages {
		level[i] = node{num: p, count: 1}
	}
	parents := map[int]int{}
	var nodes []node
	for len(nodes) == 0 || len(level) > 1 {
		size := len(level)
		if fanout > 1 {
			size = fanout
		}
		var up []node
		for i := 0; i < len(level); i += size {
			n := node{num: *next}
			*next++
			for _, k := range level[i:min(i+size, len(level))] {
				n.kids = append(n.kids, k.num)
				n.count += k.count
				parents[k.num] = n.num
			}
			up = append(up, n)
		}
		nodes = append(nodes, up...)
		level = up
	}
	root := level[0].num
	for _, n := range nodes {
		kids := make([]string, len(n.kids))
		for j, k := range n.kids {
			kids[j] = fmt.Sprintf("%d 0 R", k)
		}
		extra := fmt.Sprintf("/Parent %d 0 R", parents[n.num])
		if n.num == root {
			extra = fmt.Sprintf("/MediaBox[0 0 612 792]/Resources<</Font<</F1 %d 0 R>>>>", fontObj)
		}
		objs[n.num] = fmt.Sprintf("<</Type/Pages/Kids[%s]/Count %d%s>>", strings.Join(kids, " "), n.count, extra)
	}
	for _, p := range pages {
		objs[p] = fmt.Sprintf("<</Type/Page/Parent %d 0 R/Contents %d 0 R>>", parents[p], contentsObj)
	}
	return root
}

// classic writes objs (numbers 1 to size-1) with a cross-reference table.
func classic(objs map[int]string, size int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, size)
	for num := 1; num < size; num++ {
		offsets[num] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", num, objs[num])
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", size)
	for num := 1; num < size; num++ {
		fmt.Fprintf(&b, "%010d 00000 n \n", offsets[num])
	}
	fmt.Fprintf(&b, "trailer\n<</Size %d/Root %d 0 R>>\nstartxref\n%d\n%%%%EOF\n", size, catalogObj, xref)
	return b.Bytes()
}

// packed writes the objects of objs (none of them a stream) in one
// compressed object stream, the page contents apart, and a
// cross-reference stream.
func packed(objs map[int]string, contents string, size int) []byte {
	objStm, xrefObj := size, size+1
	var header, body strings.Builder
	index := map[int]int{}
	n := 0
	for num := 1; num < size; num++ {
		if num == contentsObj {
			continue
		}
		fmt.Fprintf(&header, "%d %d ", num, body.Len())
		body.WriteString(objs[num])
		body.WriteByte('\n')
		index[num] = n
		n++
	}
	data := deflate([]byte(header.String() + body.String()))
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
	offsets := map[int]int{}
	offsets[contentsObj] = b.Len()
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", contentsObj, contents)
	offsets[objStm] = b.Len()
	fmt.Fprintf(&b, "%d 0 obj\n<</Type/ObjStm/N %d/First %d/Filter/FlateDecode/Length %d>>\nstream\n", objStm, n, header.Len(), len(data))
	b.Write(data)
	b.WriteString("\nendstream\nendobj\n")
	offsets[xrefObj] = b.Len()
	// Entries of 1 + 4 + 2 bytes: type, offset or object stream, index.
	var rows []byte
	for num := range xrefObj + 1 {
		row := make([]byte, 7)
		switch {
		case num == 0:
			row[0] = 0
			binary.BigEndian.PutUint16(row[5:], 0xffff)
		case num != contentsObj && num < size:
			row[0] = 2
			binary.BigEndian.PutUint32(row[1:], uint32(objStm))
			binary.BigEndian.PutUint16(row[5:], uint16(index[num]))
		default:
			row[0] = 1
			binary.BigEndian.PutUint32(row[1:], uint32(offsets[num]))
		}
		rows = append(rows, row...)
	}
	xref := deflate(rows)
	fmt.Fprintf(&b, "%d 0 obj\n<</Type/XRef/Size %d/W[1 4 2]/Root %d 0 R/Filter/FlateDecode/Length %d>>\nstream\n", xrefObj, xrefObj+1, catalogObj, len(xref))
	b.Write(xref)
	fmt.Fprintf(&b, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", offsets[xrefObj])
	return b.Bytes()
}

// deflate is b compressed with zlib.
func deflate(b []byte) []byte {
	var out bytes.Buffer
	w := zlib.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// escape makes s a literal string's content.
func escape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	return r.Replace(s)
}
