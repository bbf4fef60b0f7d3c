package console

import (
	"fmt"
	"html/template"
	"reflect"
	"text/template/parse"

	"github.com/caddy-gw/caddy-gw/internal/printable"
)

// textHelper names the helper every printed value goes through.
const textHelper = "text"

// text is a value as the page shows it: as html/template would print it,
// with the characters that are not printable (escapes, line breaks,
// direction overrides) written visibly as escapes such as \u001b. Names,
// models and reasons that came from outside reach the page as text, and
// html/template then escapes that text for its place in the page.
func text(v any) string {
	if v == nil {
		return ""
	}
	return printable.Escape(fmt.Sprint(indirect(reflect.ValueOf(v))))
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)

// indirect follows pointers to the value they point at, as html/template
// does before it prints: a pointer that has a String or Error method, or
// is nil, is printed as it is.
func indirect(v reflect.Value) any {
	for v.Kind() == reflect.Pointer && !v.IsNil() && !v.Type().Implements(stringerType) && !v.Type().Implements(errorType) {
		v = v.Elem()
	}
	return v.Interface()
}

// textOnly makes every action of t that prints a value print it through
// text, so no template of the console can put a control character on a
// page. It must run before t first executes (when html/template adds its
// own escaping after text).
func textOnly(t *template.Template) *template.Template {
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			throughText(tt.Tree.Root)
		}
	}
	return t
}

// throughText appends text to the pipeline of every action under n that
// prints (one that declares or assigns a variable prints nothing).
func throughText(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			throughText(c)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) == 0 {
			id := parse.NewIdentifier(textHelper).SetPos(n.Pos)
			n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{id}})
		}
	case *parse.IfNode:
		throughText(n.List)
		throughText(n.ElseList)
	case *parse.RangeNode:
		throughText(n.List)
		throughText(n.ElseList)
	case *parse.WithNode:
		throughText(n.List)
		throughText(n.ElseList)
	}
}
