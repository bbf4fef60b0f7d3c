package chat

import (
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"reflect"
	"testing"
)

// optionalSpecFuncs are the functions of a format's spec that a format may
// leave out.
var optionalSpecFuncs = map[string]bool{"servedBy": true}

// Every format has a complete spec: a function it left out would fail only
// when a call of that format reached it.
func TestFormatSpecsComplete(t *testing.T) {
	for f, spec := range formats {
		if spec == nil {
			t.Fatalf("format %d has no spec", f)
		}
		v := reflect.ValueOf(spec).Elem()
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if field.Type.Kind() == reflect.Func && v.Field(i).IsNil() && !optionalSpecFuncs[field.Name] {
				t.Errorf("format %d: %s is missing", f, field.Name)
			}
		}
		if spec.path == "" || len(spec.outputLimit) == 0 || spec.answerList == "" || len(spec.pricedTools) == 0 || len(spec.serviceTiers) == 0 {
			t.Errorf("format %d: a table field is empty: %+v", f, spec)
		}
	}
	for p, tr := range translators {
		if int(p.client) >= len(formats) || int(p.upstream) >= len(formats) || p.client == p.upstream {
			t.Errorf("translator %+v: not a pair of two formats", p)
		}
		if tr.request == nil || tr.response == nil || tr.stream == nil {
			t.Errorf("translator %+v: a translation is missing", p)
		}
	}
}

// Every catalogue format is reached, and the format each model of its
// providers is spoken to in can serve a client of every format: each
// client format is its own or has a translator to it.
func TestEveryClientReachesEveryProvider(t *testing.T) {
	for _, provider := range catalog.Formats {
		reach, ok := reaches[provider]
		if !ok {
			t.Errorf("no reach of %s providers", provider)
			continue
		}
		for _, model := range []string{"gemini-2.5-flash", "claude-sonnet-4-5", "gpt-4.1-mini"} {
			up := reach(model).format
			for client := range formats {
				if Format(client) == up {
					continue
				}
				if _, err := translatorFor(Format(client), up); err != nil {
					t.Errorf("a client of format %d cannot reach %s of a %s provider: %v", client, model, provider, err)
				}
			}
		}
	}
}
