package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

// sdkRequests are the official SDKs' request types of each format: every
// member a client can send through them.
var sdkRequests = []struct {
	f    Format
	name string
	typ  reflect.Type
}{
	{ChatCompletions, "openai.ChatCompletionNewParams", reflect.TypeFor[openai.ChatCompletionNewParams]()},
	{Responses, "responses.ResponseNewParams", reflect.TypeFor[responses.ResponseNewParams]()},
	{Messages, "anthropic.MessageNewParams", reflect.TypeFor[anthropic.MessageNewParams]()},
	{Messages, "anthropic.BetaMessageNewParams", reflect.TypeFor[anthropic.BetaMessageNewParams]()},
}

// beyondSDKs are the members a format's table lists that its SDK request
// types do not have: the stream flag (the SDKs stream by another method)
// and the gateway's own member.
var beyondSDKs = []string{"stream", "second_opinion"}

// jsonMembers are the top-level JSON member names of a request type, read
// from its fields' json tags (headers, tagged "-", and inline unions are
// none).
func jsonMembers(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// TestEveryMemberBilledOrExplained walks every member of the official
// SDKs' request types: each is in its format's table, counted (as prompt,
// or as prompt and output) or with the reason why the provider bills no
// tokens for it. A member an SDK gains fails here until the table says how
// it is billed. And every member of a table is one a client can send.
func TestEveryMemberBilledOrExplained(t *testing.T) {
	known := map[Format][]string{}
	for _, r := range sdkRequests {
		members := jsonMembers(r.typ)
		if len(members) < 10 {
			t.Fatalf("%s: only %d members read: %v", r.name, len(members), members)
		}
		table := r.f.spec().billing
		for _, m := range members {
			rule, listed := table[m]
			switch {
			case !listed:
				t.Errorf("%s.%s is neither counted nor listed with a reason in the format's table", r.name, m)
			case rule.billed == unbilled && rule.why == "":
				t.Errorf("%s.%s is not billed, and the table does not say why", r.name, m)
			case rule.billed != unbilled && rule.why != "":
				t.Errorf("%s.%s is counted, yet the table gives a reason not to: %q", r.name, m, rule.why)
			}
		}
		known[r.f] = append(known[r.f], members...)
	}
	for f, spec := range formats {
		for m := range spec.billing {
			if !slices.Contains(known[Format(f)], m) && !slices.Contains(beyondSDKs, m) {
				t.Errorf("format %d: the table lists %q, which no request type of the format has", f, m)
			}
		}
		for _, m := range spec.unpricedFields {
			if spec.billing[m].billed != unbilled {
				t.Errorf("format %d: %s is refused, yet the table counts it", f, m)
			}
		}
	}
}

// TestCountEndpointMembers: what the tightened count sends to a provider's
// count endpoint is what that endpoint takes (its SDK's count request
// type), and every member the format bills as prompt that the endpoint
// takes is sent, so its count leaves out nothing billed (what it does not
// take is counted locally).
func TestCountEndpointMembers(t *testing.T) {
	takes := jsonMembers(reflect.TypeFor[anthropic.BetaMessageCountTokensParams]())
	for f, spec := range formats {
		if !spec.counts {
			for m, r := range spec.billing {
				if r.countable {
					t.Errorf("format %d has no count endpoint, yet %s is sent to one", f, m)
				}
			}
			continue
		}
		for m, r := range spec.billing {
			if r.countable && !slices.Contains(takes, m) {
				t.Errorf("format %d: %s is sent to the count endpoint, which does not take it", f, m)
			}
			if r.billed != unbilled && slices.Contains(takes, m) && !r.countable {
				t.Errorf("format %d: %s is billed as prompt and the count endpoint takes it, but it is not sent", f, m)
			}
		}
	}
}

// TestRecordedClientsBilledOrExplained: every member the recorded
// messages-style clients (integration/testdata/clients) sent is in the
// messages table, not only counted because the table does not know it.
func TestRecordedClientsBilledOrExplained(t *testing.T) {
	files, err := filepath.Glob("../../integration/testdata/clients/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Calls []struct {
				Requests []struct {
					Path string
					Body map[string]json.RawMessage
				}
			}
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seen := 0
		for _, c := range rec.Calls {
			for _, r := range c.Requests {
				for m := range r.Body {
					seen++
					if _, listed := messagesMembers[m]; !listed {
						t.Errorf("%s: %s sent %q, which the messages table does not list", file, r.Path, m)
					}
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s: no request members read", file)
		}
	}
}

// TestWorstCaseReadsTheTable: the worst case counts the bytes of every
// member billed as prompt (legacy functions, output schemas), leaves out
// those billed no tokens, and reserves a prediction as output too.
func TestWorstCaseReadsTheTable(t *testing.T) {
	big := strings.Repeat("word ", 2000)
	for _, tc := range []struct {
		f           Format
		body        string
		atLeast     int
		atMost      int
		extraOutput int
	}{
		{ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f","description":"` + big + `"}]}`, len(big), len(big) + 100, 0},
		{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":{"description":"` + big + `"}}}`, len(big), len(big) + 120, 0},
		{Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":{"description":"` + big + `"}}}}`, len(big), len(big) + 140, 0},
		{Responses, `{"model":"m","input":"hi","instructions":"` + big + `"}`, len(big), len(big) + 40, 0},
		{ChatCompletions, `{"model":"` + big + `","messages":[{"role":"user","content":"hi"}],"metadata":{"a":"` + big + `"},"user":"` + big + `"}`, 10, 60, 0},
		{ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"` + big + `"}}`, len(big), len(big) + 100, len(big) + len(`{"type":"content","content":""}`)},
	} {
		req, err := parse([]byte(tc.body), tc.f)
		if err != nil {
			t.Fatalf("%.80s: %v", tc.body, err)
		}
		if b := req.needs.PromptBound; b < tc.atLeast || b > tc.atMost || req.needs.ExtraOutput != tc.extraOutput {
			t.Errorf("%.80s: bound %d (want %d to %d), extra output %d (want %d)", tc.body, b, tc.atLeast, tc.atMost, req.needs.ExtraOutput, tc.extraOutput)
		}
	}
}

// TestPricedValues: a messages-style inference_geo other than global
// costs more than list price and is a 400 naming it; global or null pass.
func TestPricedValues(t *testing.T) {
	for geo, ok := range map[string]bool{`"global"`: true, `null`: true, `"us"`: false, `1`: false} {
		_, err := parse([]byte(`{"model":"m","max_tokens":5,"inference_geo":`+geo+`,"messages":[{"role":"user","content":"hi"}]}`), Messages)
		var e *gwerr.Error
		if ok && err != nil || !ok && (!errors.As(err, &e) || e.Param != "inference_geo") {
			t.Errorf("inference_geo %s: %v", geo, err)
		}
	}
}

// refusedElsewhere are members a format's table marks refused that a check
// of their own refuses (not the unpriced fields' list), with where.
var refusedElsewhere = map[string]string{
	"background": "refused when true by the background check of the request's reading",
	"compaction": "needs a beta the beta table refuses",
	"fallbacks":  "needs a beta the beta table refuses",
}

// TestRefusedMembersAgree: the table's refused members and the list that
// refuses them say the same, so one cannot change without the other.
func TestRefusedMembersAgree(t *testing.T) {
	for f, spec := range formats {
		for _, k := range spec.unpricedFields {
			if r := spec.billing.rule(k); r.billed != unbilled || !strings.Contains(r.why, "refused") {
				t.Errorf("format %d: %s is refused as unpriced, but its table row says %+v", f, k, r)
			}
		}
		for k, r := range spec.billing {
			if r.why != whyRefused && r.why != whyBetaRefused {
				continue
			}
			if !slices.Contains(spec.unpricedFields, k) && refusedElsewhere[k] == "" {
				t.Errorf("format %d: the table says %s is refused, and nothing refuses it", f, k)
			}
		}
	}
}
