package caddymodule

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-gw/caddy-gw/routes"
)

// TestCaddyfileAdapt adapts every testdata/caddyfile_adapt/*.caddyfiletest
// (a Caddyfile, a line of ten dashes, the expected JSON) and compares.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no adapt tests found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			caddyfileText, want, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatalf("%s: no ---------- separator", f)
			}
			if !caddytest.CompareAdapt(t, f, strings.TrimSpace(caddyfileText)+"\n", "caddyfile", strings.TrimSpace(want)) {
				t.Fail()
			}
		})
	}
}

// TestCaddyfileErrors checks that every malformed option is refused with
// a message naming it.
func TestCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"arg on gw", `gw extra`, "wrong argument count"},
		{"unknown option", "gw {\n colour blue\n}", `unknown gw option "colour"`},
		{"unknown store", "gw {\n store mysql\n}", `store backend "mysql"`},
		{"store no backend", "gw {\n store\n}", "wrong argument count"},
		{"bootstrap two args", "gw {\n bootstrap_key a b\n}", "wrong argument count"},
		{"provider no name", "gw {\n provider {\n format openai\n }\n}", "wrong argument count"},
		{"provider bad option", "gw {\n provider p {\n colour x\n }\n}", `unknown provider option "colour"`},
		{"provider bad auth", "gw {\n provider p {\n auth basic\n }\n}", `auth: want one of bearer, api-key, none, got "basic"`},
		{"provider auth two args", "gw {\n provider p {\n auth api-key none\n }\n}", "wrong argument count"},
		{"provider bad timeout", "gw {\n provider p {\n dial_timeout soon\n }\n}", "dial_timeout"},
		{"model bad window", "gw {\n model m {\n context_window -3\n }\n}", "context_window"},
		{"model price one arg", "gw {\n model m {\n price 1\n }\n}", "price: want"},
		{"model price bad", "gw {\n model m {\n price 1 x\n }\n}", `price: "x"`},
		{"model bad option", "gw {\n model m {\n colour x\n }\n}", `unknown model option "colour"`},
		{"embedding no id", "gw {\n embedding {\n provider p\n }\n}", "wrong argument count"},
		{"embedding price two args", "gw {\n embedding e {\n price 0.02 0.01\n }\n}", "price: want <input USD/M>"},
		{"embedding price bad", "gw {\n embedding e {\n price cheap\n }\n}", `price: "cheap"`},
		{"embedding negative price", "gw {\n embedding e {\n price -0.02\n }\n}", `price: "-0.02"`},
		{"embedding bad option", "gw {\n embedding e {\n lane fast\n }\n}", `unknown embedding option "lane"`},
		{"twice: in embedding", "gw {\n embedding e {\n provider a\n provider b\n }\n}", "provider already specified"},
		{"twice: embed model", "gw {\n embed_model a\n embed_model b\n}", "embed_model already specified"},
		{"ability bad price", "gw {\n ability gw-image {\n price cheap\n }\n}", `price: want US dollars in whole millionths (such as 0.0025), got "cheap"`},
		{"ability price below a millionth", "gw {\n ability gw-image {\n price 0.0000015\n }\n}", `price: want US dollars in whole millionths`},
		{"ability negative price", "gw {\n ability gw-image {\n price -0.01\n }\n}", `price: want US dollars in whole millionths`},
		{"fetch price below a millionth", "gw {\n fetch_price 0.0020001\n}", `fetch_price: want US dollars in whole millionths`},
		{"search price two args", "gw {\n search {\n price_per_search 0.02 0.03\n }\n}", "wrong argument count"},
		{"ability bad option", "gw {\n ability gw-image {\n colour x\n }\n}", `unknown ability option "colour"`},
		{"money bad credit", "gw {\n money {\n free_monthly_credit lots\n }\n}", "free_monthly_credit"},
		{"mcp_server bad auth", "gw {\n mcp_server s {\n auth basic x\n }\n}", "auth: want none, bearer <token> or oauth_client_credentials <token_url> <client_id> <client_secret> [<scope>]"},
		{"mcp_server bearer no token", "gw {\n mcp_server s {\n auth bearer\n }\n}", "auth: want none"},
		{"mcp_server bad price", "gw {\n mcp_server s {\n price cheap\n }\n}", `price: "cheap"`},
		{"mcp_server negative price", "gw {\n mcp_server s {\n price -1\n }\n}", `price: "-1"`},
		{"mcp_server bad tool_price", "gw {\n mcp_server s {\n tool_price t\n }\n}", "wrong argument count"},
		{"mcp_server tool_price bad amount", "gw {\n mcp_server s {\n tool_price t x\n }\n}", `tool_price t: "x"`},
		{"mcp_server bad timeout", "gw {\n mcp_server s {\n timeout soon\n }\n}", "timeout"},
		{"mcp_server no name", "gw {\n mcp_server {\n url http://x\n }\n}", "wrong argument count"},
		{"mcp_price bad", "gw {\n mcp_price free\n}", `mcp_price: "free"`},
		{"money bad ceiling", "gw {\n money {\n ceiling 1 2 x\n }\n}", "spend percent"},
		{"money ceiling off extra", "gw {\n money {\n ceiling off 3\n }\n}", "wrong argument count"},
		{"money bad option", "gw {\n money {\n colour x\n }\n}", `unknown money option "colour"`},
		{"limits bad number", "gw {\n limits {\n chat_requests_per_minute -1\n }\n}", "chat_requests_per_minute"},
		{"limits bad option", "gw {\n limits {\n colour x\n }\n}", `unknown limits option "colour"`},
		{"limits bad body rate", "gw {\n limits {\n min_body_rate fast\n }\n}", "min_body_rate: want a whole number"},
		{"limits bad body grace", "gw {\n limits {\n body_grace 0s\n }\n}", "body_grace: want a duration"},
		{"bad cache ttl", "gw {\n cache_ttl soon\n}", "cache_ttl"},
		{"bad second opinion concurrency", "gw {\n second_opinion_concurrency 0\n}", "second_opinion_concurrency"},
		{"zero app links", "gw {\n app_links_per_account 0\n}", "app_links_per_account: want a positive whole number"},
		{"app links twice", "gw {\n app_links_per_account 5\n app_links_per_account 6\n}", "app_links_per_account already specified"},
		{"alias one arg", "gw {\n alias a\n}", "wrong argument count"},
		{"beta no mark", "gw {\n beta b-1\n}", "wrong argument count"},
		{"beta bad mark", "gw {\n beta b-1 cheap\n}", "beta b-1: want neutral, refused or priced"},
		{"beta neutral extra", "gw {\n beta b-1 neutral 100\n}", "beta b-1: want neutral"},
		{"beta priced no percent", "gw {\n beta b-1 priced\n}", "beta b-1: want neutral"},
		{"beta priced zero", "gw {\n beta b-1 priced 0\n}", `beta b-1 priced: "0"`},
		{"beta priced fraction", "gw {\n beta b-1 priced 150 1.5\n}", `beta b-1 priced: "1.5"`},
		{"beta priced too much", "gw {\n beta b-1 priced 100001\n}", `beta b-1 priced: "100001"`},
		{"beta twice", "gw {\n beta b-1 neutral\n beta b-1 refused\n}", "beta b-1: already specified"},
		{"audio bad duration", "gw {\n audio {\n gap_timeout soon\n }\n}", "gap_timeout"},
		{"audio zero duration", "gw {\n audio {\n accurate_up_to 0s\n }\n}", "accurate_up_to"},
		{"audio bad option", "gw {\n audio {\n colour x\n }\n}", `unknown audio option "colour"`},
		{"audio model two args", "gw {\n audio {\n verbose_model a b\n }\n}", "wrong argument count"},
		{"voice without id", "gw {\n ability gw-voice-speak {\n voice\n }\n}", "voice: want <id>"},
		{"voices without ids", "gw {\n ability gw-voice-speak-hd {\n voices\n }\n}", "wrong argument count"},
		{"image price no sizes", "gw {\n ability gw-image {\n image_price low\n }\n}", "image_price: want <quality> <size>=<USD>"},
		{"image price no equals", "gw {\n ability gw-image {\n image_price low 1024x1024\n }\n}", `image_price low: "1024x1024": want <size>=<USD>`},
		{"image price bad amount", "gw {\n ability gw-image {\n image_price low 1024x1024=cheap\n }\n}", "positive amount"},
		{"image price zero", "gw {\n ability gw-image {\n image_price low 1024x1024=0\n }\n}", "positive amount"},
		{"token price two args", "gw {\n ability gw-image {\n token_price 5 10\n }\n}", "token_price: want"},
		{"token price bad", "gw {\n ability gw-image {\n token_price 5 10 x\n }\n}", `token_price: "x"`},
		{"preview tokens bad", "gw {\n ability gw-image {\n preview_tokens many\n }\n}", "preview_tokens"},
		{"zero cache ttl", "gw {\n cache_ttl 0s\n}", "cache_ttl: want a duration greater than zero"},
		{"zero dial timeout", "gw {\n provider p {\n dial_timeout 0\n }\n}", "dial_timeout: want a duration greater than zero"},
		{"fetch allow empty", "gw {\n fetch_allow\n}", "wrong argument count"},
		{"apps empty", "gw {\n apps\n}", "wrong argument count"},
		{"block with argument", "gw {\n limits x {\n max_in_flight 2\n }\n}", "wrong argument count"},
		{"twice: text", "gw {\n bootstrap_key a\n bootstrap_key b\n}", "bootstrap_key already specified"},
		{"twice: store", "gw {\n store sqlite a\n store sqlite b\n}", "store already specified"},
		{"twice: duration", "gw {\n cache_ttl 1m\n cache_ttl 2m\n}", "cache_ttl already specified"},
		{"twice: list", "gw {\n fetch_allow a\n fetch_allow b\n}", "fetch_allow already specified"},
		{"twice: hosts", "gw {\n mcp_allowed_hosts a\n mcp_allowed_hosts b\n}", "mcp_allowed_hosts already specified"},
		{"twice: block", "gw {\n money {\n }\n money {\n }\n}", "money already specified"},
		{"twice: in money", "gw {\n money {\n ceiling off\n ceiling 1\n }\n}", "ceiling already specified"},
		{"twice: in limits", "gw {\n limits {\n max_in_flight 1\n max_in_flight 2\n }\n}", "max_in_flight already specified"},
		{"twice: count bytes", "gw {\n limits {\n count_tokens_bytes_per_minute 1MiB\n count_tokens_bytes_per_minute 2MiB\n }\n}", "count_tokens_bytes_per_minute already specified"},
		{"count bytes zero", "gw {\n limits {\n count_tokens_bytes_per_minute 0\n }\n}", `count_tokens_bytes_per_minute: want a size greater than zero, such as 64MiB or 67108864, got "0"`},
		{"count bytes no size", "gw {\n limits {\n count_tokens_bytes_per_minute lots\n }\n}", `count_tokens_bytes_per_minute: want a size greater than zero, such as 64MiB or 67108864, got "lots"`},
		{"count bytes negative", "gw {\n limits {\n count_tokens_bytes_per_minute -1MiB\n }\n}", `got "-1MiB"`},
		{"count bytes beyond int64", "gw {\n limits {\n count_tokens_bytes_per_minute 9EiB\n }\n}", `got "9EiB"`},
		{"count bytes two args", "gw {\n limits {\n count_tokens_bytes_per_minute 64 MiB\n }\n}", "wrong argument count"},
		{"twice: in provider", "gw {\n provider p {\n format openai\n format anthropic\n }\n}", "format already specified"},
		{"twice: in model", "gw {\n model m {\n price 1 2\n price 3 4\n }\n}", "price already specified"},
		{"twice: in ability", "gw {\n ability gw-image {\n price 0.01\n price 0.02\n }\n}", "price already specified"},
		{"twice: in audio", "gw {\n audio {\n gap_timeout 1s\n gap_timeout 2s\n }\n}", "gap_timeout already specified"},
		{"twice: in images", "gw {\n images {\n edit_timeout 1s\n edit_timeout 2s\n }\n}", "edit_timeout already specified"},
		{"twice: in search", "gw {\n search {\n provider a\n provider b\n }\n}", "provider already specified"},
		{"deployment no url", "gw {\n provider p {\n deployment {\n weight 2\n }\n }\n}", "wrong argument count"},
		{"deployment two urls", "gw {\n provider p {\n deployment http://a/v1 http://b/v1\n }\n}", "wrong argument count"},
		{"deployment zero weight", "gw {\n provider p {\n deployment http://a/v1 {\n weight 0\n }\n }\n}", `weight: want a whole number from 1 to 1000, got "0"`},
		{"deployment heavy weight", "gw {\n provider p {\n deployment http://a/v1 {\n weight 1001\n }\n }\n}", `weight: want a whole number from 1 to 1000, got "1001"`},
		{"deployment zero rpm", "gw {\n provider p {\n deployment http://a/v1 {\n requests_per_minute 0\n }\n }\n}", "requests_per_minute: want a positive whole number"},
		{"deployment bad tpm", "gw {\n provider p {\n deployment http://a/v1 {\n tokens_per_minute lots\n }\n }\n}", "tokens_per_minute: want a positive whole number"},
		{"deployment bad option", "gw {\n provider p {\n deployment http://a/v1 {\n region eu\n }\n }\n}", `unknown deployment option "region"`},
		{"twice: in deployment", "gw {\n provider p {\n deployment http://a/v1 {\n api_key a\n api_key b\n }\n }\n}", "api_key already specified"},
		{"zero cooldown", "gw {\n provider p {\n cooldown 0s\n }\n}", "cooldown: want a duration greater than zero"},
		{"runtime with argument", "gw {\n runtime on {\n min_procs 2\n }\n}", "wrong argument count"},
		{"runtime bad option", "gw {\n runtime {\n gogc 400\n }\n}", `unknown runtime option "gogc"`},
		{"runtime gc floor zero", "gw {\n runtime {\n gc_floor 0\n }\n}", `gc_floor: want a size greater than zero, such as 64MiB or 67108864, got "0"`},
		{"runtime gc floor no size", "gw {\n runtime {\n gc_floor big\n }\n}", `gc_floor: want a size greater than zero, such as 64MiB or 67108864, got "big"`},
		{"runtime min procs zero", "gw {\n runtime {\n min_procs 0\n }\n}", `min_procs: want a positive whole number, got "0"`},
		{"runtime min procs two args", "gw {\n runtime {\n min_procs 2 4\n }\n}", "wrong argument count"},
		{"twice: runtime", "gw {\n runtime {\n }\n runtime {\n }\n}", "runtime already specified"},
		{"durability no mode", "gw {\n durability\n}", `durability: want sync or interval <duration>, got ""`},
		{"durability unknown mode", "gw {\n durability fast\n}", `durability: want sync or interval <duration>, got "fast"`},
		{"durability interval without duration", "gw {\n durability interval\n}", `durability: want sync or interval <duration>, got "interval"`},
		{"durability sync with duration", "gw {\n durability sync 5ms\n}", `durability: want sync or interval <duration>, got "sync 5ms"`},
		{"durability interval bad duration", "gw {\n durability interval soon\n}", `durability interval: want a duration greater than 0 and at most 1s, got "soon"`},
		{"durability interval zero", "gw {\n durability interval 0s\n}", "durability interval: want a duration greater than 0 and at most 1s, got 0s"},
		{"durability interval negative", "gw {\n durability interval -5ms\n}", "durability interval: want a duration greater than 0 and at most 1s, got -5ms"},
		{"durability interval too long", "gw {\n durability interval 1001ms\n}", "durability interval: want a duration greater than 0 and at most 1s, got 1.001s"},
		{"twice: durability", "gw {\n durability sync\n durability interval 5ms\n}", "durability already specified"},
		{"twice: in runtime", "gw {\n runtime {\n gc_floor 64MiB\n gc_floor 128MiB\n }\n}", "gc_floor already specified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var app App
			err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestHandlerDirectives adapts each handler directive (gw and one per
// family) alone in a site, with a matcher, and with what it refuses.
func TestHandlerDirectives(t *testing.T) {
	names := []string{"gw"}
	for _, f := range routes.Families {
		names = append(names, familyDirective(f))
	}
	adapt := func(site string) (string, error) {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(":8080 {\n"+site+"\n}\n"), nil)
		return string(out), err
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			out, err := adapt(name)
			if want := `"handle":[{"handler":"` + name + `"}]`; err != nil || !strings.Contains(out, want) {
				t.Errorf("%s: %v\n%s\nwant %s", name, err, out, want)
			}
			out, err = adapt(name + " /v1/*")
			if want := `"match":[{"path":["/v1/*"]}]`; err != nil || !strings.Contains(out, want) || !strings.Contains(out, `"handler":"`+name+`"`) {
				t.Errorf("%s with a matcher: %v\n%s\nwant %s", name, err, out, want)
			}
			for in, want := range map[string]string{
				name + " /v1/* extra": "wrong argument count",
				name + " {\n x\n}":    name + " takes no options here; configure the gateway in the global gw option",
			} {
				if _, err := adapt(in); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%q: got error %v, want one containing %q", in, err, want)
				}
			}
		})
	}
}

// TestCaddyfileRepeatable checks that the options naming one thing a line
// may be given more than once, each line adding its thing.
func TestCaddyfileRepeatable(t *testing.T) {
	in := "gw {\n provider a {\n deployment http://x/v1\n deployment http://y/v1 {\n weight 2\n }\n }\n provider b {\n }\n model m {\n }\n model n {\n }\n alias x m\n alias y n\n" +
		" beta b-1 neutral\n beta b-2 refused\n ability gw-voice-speak {\n voice alloy\n voice echo\n" +
		" image_price low 1024x1024=0.01\n image_price high 1024x1024=0.04\n }\n ability gw-image {\n }\n" +
		" embedding e {\n }\n embedding f {\n }\n}"
	var app App
	if err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	ab := app.Abilities[0]
	if len(app.Providers) != 2 || len(app.Providers[0].Deployments) != 2 || len(app.Models) != 2 || len(app.Aliases) != 2 || len(app.Betas) != 2 ||
		len(app.Abilities) != 2 || len(ab.Voices) != 2 || len(ab.ImagePrices) != 2 || len(app.Embeddings) != 2 {
		t.Fatalf("repeated lines lost: %+v", app)
	}
}

// TestSecondGWBlock checks that a config with two global gw blocks is
// refused rather than the second replacing the first.
func TestSecondGWBlock(t *testing.T) {
	in := "{\n\tgw {\n\t\tdecide_model a\n\t}\n\tgw {\n\t\tdecide_model b\n\t}\n}\n:8080 {\n\tgw\n}\n"
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), nil)
	if err == nil || !strings.Contains(err.Error(), "gw already specified") {
		t.Fatalf("got error %v, want one containing %q", err, "gw already specified")
	}
}

// TestExpandList checks that a list field's elements expand their
// placeholders at load and split at commas, so one element read from the
// environment can hold several values.
func TestExpandList(t *testing.T) {
	t.Setenv("GW_TEST_LIST", "wiki.internal, 10.0.0.5:8080,")
	t.Setenv("GW_TEST_EMPTY", "")
	got := expandList([]string{"a.example", "{env.GW_TEST_LIST}", "{env.GW_TEST_EMPTY}"})
	want := []string{"a.example", "wiki.internal", "10.0.0.5:8080"}
	if !slices.Equal(got, want) {
		t.Fatalf("expandList = %q, want %q", got, want)
	}
	if got := expandList([]string{"{env.GW_TEST_EMPTY}"}); len(got) != 0 {
		t.Fatalf("an empty variable gave %q, want no element", got)
	}
}

// FuzzSizePrice holds parseSizePrice to its contract on any text: a size
// and a positive price, or an error.
func FuzzSizePrice(f *testing.F) {
	for _, s := range []string{"1024x1024=0.011", "1536x1024=0.25", "=1", "1024x1024=", "a=b=c", "x=-1", "x=0", "x=1e3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pair string) {
		size, price, err := parseSizePrice(pair)
		if err != nil {
			return
		}
		if size == "" || price <= 0 || !strings.HasPrefix(pair, size+"=") {
			t.Fatalf("parseSizePrice(%q) = %q, %s", pair, size, price)
		}
	})
}

// FuzzGlobalOption holds the gw option's parser to its contract on any
// text: an error, or an app whose JSON reads back to the same JSON.
func FuzzGlobalOption(f *testing.F) {
	for _, s := range []string{
		"gw {\n store sqlite /tmp/x\n cache_ttl 1m\n fetch_allow a.example,b.example:8080 {env.X}\n apps t=https://t.example/mcp\n}",
		"gw {\n provider p {\n format openai\n base_url http://x/v1\n api_key k1 k2\n dial_timeout 2s\n }\n model m {\n provider p\n price 1 2 0.5\n }\n}",
		"gw {\n ability gw-image {\n price 0.01\n image_price low 1024x1024=0.011\n token_price 5 10 40\n voice alloy Alloy female\n }\n}",
		"gw {\n money {\n ceiling 200 25 40 5000\n free_monthly_credit 5\n }\n limits {\n max_in_flight 2\n body_grace 5s\n }\n}",
		"gw {\n search {\n provider s\n price_per_search 0.025\n token_price 0.4 1.6\n }\n beta b-1 priced 200 150\n alias a m\n}",
		"gw {\n bootstrap_key a\n bootstrap_key b\n}",
		"gw {\n audio {\n gap_timeout 0s\n }\n}",
		"gw {\n provider p {\n cooldown 5s\n deployment http://a/v1 {\n api_key k\n weight 3\n requests_per_minute 60\n tokens_per_minute 9000\n }\n deployment http://b/v1\n }\n}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tokens, err := caddyfile.Tokenize([]byte(in), "Caddyfile")
		if err != nil {
			return
		}
		var app App
		if err := app.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
			return
		}
		first, err := json.Marshal(&app)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var again App
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("the JSON of %q does not read back: %v\n%s", in, err, first)
		}
		second, _ := json.Marshal(&again)
		if string(first) != string(second) {
			t.Fatalf("the JSON of %q changes on reading back:\n%s\n%s", in, first, second)
		}
	})
}

// TestParseSize reads sizes in bytes and with decimal and binary units.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"67108864": 64 << 20, "64MiB": 64 << 20, "64mib": 64 << 20, "64 MiB": 64 << 20, "64MB": 64_000_000, "512KiB": 512 << 10,
		"1.5MiB": 3 << 19, "1": 1, "7EiB": 7 << 60, "9223372036854775807": 1<<63 - 1,
	} {
		if got, ok := parseSize(in); !ok || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0", "0MiB", "-1", "lots", "8EiB", "9223372036854775808"} {
		if got, ok := parseSize(in); ok {
			t.Errorf("parseSize(%q) = %d; want refused", in, got)
		}
	}
}

// FuzzParseSize holds parseSize to its contract on any text: a size
// greater than zero, or a refusal.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64MiB", "67108864", "1.5KB", "0", "-1", "9EiB", "1e3", "NaN", " 1", "1 KiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := parseSize(s); ok && n <= 0 {
			t.Fatalf("parseSize(%q) = %d, accepted", s, n)
		}
	})
}
