package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/sjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// embedPrices mirrors the embedding blocks of Caddyfile.example: USD per
// million input tokens. TestEmbeddingPricesMatchExample keeps the two in
// step.
var embedPrices = map[string]string{
	"text-embedding-3-small": "0.02",
	"text-embedding-3-large": "0.13",
	"text-embedding-ada-002": "0.10",
}

// embedDefault is the model gw-embed serves on Caddyfile.example.
const embedDefault = "text-embedding-3-small"

// TestEmbeddingPricesMatchExample: embedPrices is Caddyfile.example's
// embedding catalogue.
func TestEmbeddingPricesMatchExample(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`(?s)\bembedding (\S+) \{[^}]*?\bprice (\S+)\s`)
	got := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(exampleCaddyfile(t), -1) {
		got[m[1]] = m[2]
	}
	if !reflect.DeepEqual(got, embedPrices) {
		t.Errorf("Caddyfile.example embedding prices %v, the tests assume %v", got, embedPrices)
	}
}

// embedCost is what tokens of input on model cost, computed apart from
// the pricing package: the exact rational price, times 1.12 for payg,
// rounded once (half away from zero) to nano-dollars.
func embedCost(t testing.TB, model string, tokens int64, payg bool) pricing.Money {
	t.Helper()
	price, ok := new(big.Rat).SetString(embedPrices[model])
	if !ok {
		t.Fatalf("no list price for %s", model)
	}
	return nanoDollars(new(big.Rat).Mul(big.NewRat(tokens, 1_000_000), price), payg)
}

// embedClient is openai-go on the gateway with key; the answer's HTTP
// response lands in *resp, the request body the SDK sent in *sent.
func embedClient(g *gateway, key string, resp **http.Response, sent *[]byte) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithResponseInto(resp), option.WithMiddleware(captureBody(sent)))
}

// embedInput is one input form: the SDK's union and the inputs the fake
// sees (a string or a []int each).
type embedInput struct {
	name   string
	union  openai.EmbeddingNewParamsInputUnion
	inputs []any
}

var embedInputs = []embedInput{
	{"a string", openai.EmbeddingNewParamsInputUnion{OfString: openai.String("The quick brown fox jumps over the lazy dog.")},
		[]any{"The quick brown fox jumps over the lazy dog."}},
	{"a list of strings", openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first text", "a second, somewhat longer text to embed", "третий текст"}},
		[]any{"first text", "a second, somewhat longer text to embed", "третий текст"}},
	{"a token list", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: []int64{9906, 1917, 11, 4294967295}},
		[]any{[]int{9906, 1917, 11, 4294967295}}},
	{"a list of token lists", openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{9906, 1917}, {11}, {1, 2, 3, 4, 5}}},
		[]any{[]int{9906, 1917}, []int{11}, []int{1, 2, 3, 4, 5}}},
}

// TestEmbeddings: every input form through openai-go's Embeddings.New, as
// float and base64, on gw-embed and on a pinned model with dimensions and
// user, reaches the provider as sent (model set) and comes back as the
// provider made it, with the chat receipts and a ledger entry of exactly
// the provider's input tokens at the model's list price. Bearer and
// x-api-key both work; the pay-as-you-go markup applies once; an answer
// without usage is billed from the gateway's own count; a failed call
// costs nothing; an identical request is answered from the account's
// cache for nothing; the metrics and the access log carry the calls.
func TestEmbeddings(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, cacheCaddyfile(t))
	const account = "embed"
	key := e.account(t, account, map[string]any{"balance_usd": "10.00"})
	ctx := context.Background()
	var resp *http.Response
	var sent []byte
	client := embedClient(e.gateway, key, &resp, &sent)
	var ids []string

	// call sends params, checks the vectors, the usage the provider
	// reported, the receipts, what the provider received and the ledger
	// entry of tokens billed, and returns the answer.
	call := func(t *testing.T, params openai.EmbeddingNewParams, in embedInput, backing string, dims int, reported, tokens int64) *openai.CreateEmbeddingResponse {
		t.Helper()
		before := len(e.OA.Requests())
		res, err := client.Embeddings.New(ctx, params)
		if err != nil {
			t.Fatalf("Embeddings.New: %v", err)
		}
		if res.Model != backing || res.Object != "list" || len(res.Data) != len(in.inputs) {
			t.Fatalf("answer model %q object %q with %d vectors, want %s, list, %d", res.Model, res.Object, len(res.Data), backing, len(in.inputs))
		}
		for i, d := range res.Data {
			want := fake.Embedding(backing, in.inputs[i], dims)
			if d.Index != int64(i) || len(d.Embedding) != dims {
				t.Fatalf("vector %d: index %d, %d dimensions, want %d", i, d.Index, len(d.Embedding), dims)
			}
			for j, f := range d.Embedding {
				if float32(f) != want[j] {
					t.Fatalf("vector %d value %d = %v, want %v", i, j, f, want[j])
				}
			}
		}
		if res.Usage.PromptTokens != reported {
			t.Errorf("usage.prompt_tokens %d, want the provider's %d", res.Usage.PromptTokens, reported)
		}
		cost := embedCost(t, backing, tokens, false)
		routed := "false"
		if params.Model == "gw-embed" {
			routed = "true"
		}
		expectGwHeaders(t, resp.Header, map[string]string{"X-Gw-Model": backing, "X-Gw-Original-Model": params.Model, "X-Gw-Routed": routed,
			"X-Gw-Cost-Usd": cost.String(), "X-Gw-Routed-Model": backing, "X-Gw-Request-Id": anyValue})
		reqs := e.OA.Requests()
		if len(reqs) != before+1 {
			t.Fatalf("the provider received %d requests, want 1", len(reqs)-before)
		}
		up := reqs[len(reqs)-1]
		want, _ := sjson.SetBytes(sent, "model", backing)
		if up.Path != "/v1/embeddings" || !sameJSON(string(up.Body), string(want)) {
			t.Errorf("the provider received %s %s\nwant %s", up.Path, up.Body, want)
		}
		if got := up.Header.Get("Authorization"); got != "Bearer "+upstreamOpenAIKey {
			t.Errorf("upstream Authorization %q", got)
		}
		id := resp.Header.Get("X-Gw-Request-Id")
		ids = append(ids, id)
		e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: "embeddings", Model: backing, Units: tokens, Unit: "token", Cost: cost.String()})
		return res
	}

	for _, in := range embedInputs {
		t.Run(in.name+"/float/gw-embed", func(t *testing.T) {
			p := openai.EmbeddingNewParams{Model: "gw-embed", Input: in.union, EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat}
			n := int64(fake.EmbeddingTokens(in.inputs))
			call(t, p, in, embedDefault, fake.EmbeddingDimensions[embedDefault], n, n)
			if got := string(sent); !strings.Contains(got, `"encoding_format":"float"`) {
				t.Errorf("the SDK sent %s", got)
			}
		})
		t.Run(in.name+"/base64/pinned with dimensions", func(t *testing.T) {
			p := openai.EmbeddingNewParams{Model: "gw-pinned-text-embedding-3-large", Input: in.union, Dimensions: openai.Int(64),
				User: openai.String("user-42"), EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64}
			n := int64(fake.EmbeddingTokens(in.inputs))
			res := call(t, p, in, "text-embedding-3-large", 64, n, n)
			if raw := res.Data[0].JSON.Embedding.Raw(); raw != `"`+fake.EncodeBase64(fake.Embedding("text-embedding-3-large", in.inputs[0], 64))+`"` {
				t.Errorf("base64 vector %.80s… is not the provider's", raw)
			}
		})
	}

	t.Run("the provider's usage settles the call, not the gateway's count", func(t *testing.T) {
		e.OA.Push(fake.Script{EmbeddingTokens: 3})
		in := embedInputs[0]
		call(t, openai.EmbeddingNewParams{Model: "text-embedding-ada-002", Input: in.union}, in, "text-embedding-ada-002", 1536, 3, 3)
	})

	t.Run("a usage above what the input can hold is billed what it can hold", func(t *testing.T) {
		e.OA.Push(fake.Script{EmbeddingTokens: 5000})
		const text = "Report more tokens than I can hold."
		in := embedInput{"over", openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}, []any{text}}
		// Each token is at least one byte of the text, and each input
		// may gain 4 special tokens.
		bound := int64(len(text) + 4)
		call(t, openai.EmbeddingNewParams{Model: "text-embedding-ada-002", Input: in.union}, in, "text-embedding-ada-002", 1536, 5000, bound)
	})

	t.Run("an answer without usage is billed from the gateway's own count", func(t *testing.T) {
		o200k, err := tokenizer.Get(tokenizer.O200kBase)
		if err != nil {
			t.Fatal(err)
		}
		cl100k, err := tokenizer.Get(tokenizer.Cl100kBase)
		if err != nil {
			t.Fatal(err)
		}
		// The larger of the two tokenizers' counts of each text.
		texts := []string{"Count me with the gateway's own tokenizer, please.", "И меня: 12345 токенов? Нет, меньше."}
		var n int64
		for _, s := range texts {
			a, _ := o200k.Count(s)
			b, _ := cl100k.Count(s)
			n += int64(max(a, b))
		}
		e.OA.Push(fake.Script{NoUsage: true})
		in := embedInput{"texts", openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}, []any{texts[0], texts[1]}}
		call(t, openai.EmbeddingNewParams{Model: "gw-embed", Input: in.union}, in, embedDefault, 1536, 0, n)
	})

	t.Run("x-api-key", func(t *testing.T) {
		r := e.do(t, http.MethodPost, "/v1/embeddings", `{"model":"gw-embed","input":"by x-api-key"}`, apiKey(key)...)
		if r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		tokens := int64(fake.EmbeddingTokens([]any{"by x-api-key"}))
		ids = append(ids, r.Header.Get("X-Gw-Request-Id"))
		e.expectLedger(t, account, ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "embeddings", Model: embedDefault,
			Units: tokens, Unit: "token", Cost: embedCost(t, embedDefault, tokens, false).String()})
	})

	t.Run("pay as you go", func(t *testing.T) {
		const payg = "embed-payg"
		paygKey := e.account(t, payg, map[string]any{"payg": true})
		c := embedClient(e.gateway, paygKey, &resp, &sent)
		in := embedInputs[1]
		res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "gw-pinned-text-embedding-3-large", Input: in.union})
		if err != nil {
			t.Fatal(err)
		}
		tokens := int64(fake.EmbeddingTokens(in.inputs))
		cost := embedCost(t, "text-embedding-3-large", tokens, true)
		if res.Usage.PromptTokens != tokens || resp.Header.Get("X-Gw-Cost-Usd") != cost.String() {
			t.Errorf("usage %d, cost %s; want %d and %s", res.Usage.PromptTokens, resp.Header.Get("X-Gw-Cost-Usd"), tokens, cost)
		}
		ids = append(ids, resp.Header.Get("X-Gw-Request-Id"))
		e.expectLedger(t, payg, ledgerEntry{RequestID: resp.Header.Get("X-Gw-Request-Id"), Endpoint: "embeddings", Model: "text-embedding-3-large",
			Units: tokens, Unit: "token", Cost: cost.String()})
	})

	t.Run("a failed call costs nothing", func(t *testing.T) {
		before := len(e.ledger(t, account))
		e.OA.Push(fake.Script{Status: http.StatusInternalServerError})
		r := e.do(t, http.MethodPost, "/v1/embeddings", `{"model":"gw-embed","input":"the provider fails"}`, bearer(key)...)
		expectError(t, r, http.StatusBadGateway, `{"error":{"message":"<string>","type":"api_error","param":null,"code":"upstream_error"}}`, "req-")
		if n := len(e.ledger(t, account)); n != before {
			t.Errorf("ledger grew by %d entries", n-before)
		}
	})

	t.Run("the provider's refusal is the chat family's 400 and costs nothing", func(t *testing.T) {
		before, requests := len(e.ledger(t, account)), len(e.OA.Requests())
		r := e.do(t, http.MethodPost, "/v1/embeddings", `{"model":"text-embedding-ada-002","input":"a","dimensions":8}`, bearer(key)...)
		expectError(t, r, http.StatusBadRequest, `{"error":{"message":"<string>","type":"invalid_request_error","param":"dimensions","code":null}}`, "req-")
		if n := len(e.OA.Requests()); n != requests+1 {
			t.Errorf("the provider received %d requests, want 1", n-requests)
		}
		if n := len(e.ledger(t, account)); n != before {
			t.Errorf("ledger grew by %d entries", n-before)
		}
	})

	t.Run("the cache answers an identical request for nothing", func(t *testing.T) {
		body := `{"model":"gw-embed","input":["cache me","and me"],"encoding_format":"base64"}`
		otherKey := e.account(t, "embed-other", nil)
		first := e.do(t, http.MethodPost, "/v1/embeddings", body, bearer(key)...)
		if first.Status != http.StatusOK {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		ids = append(ids, first.Header.Get("X-Gw-Request-Id"))
		requests, entries := len(e.OA.Requests()), len(e.ledger(t, account))
		second := e.do(t, http.MethodPost, "/v1/embeddings", body, bearer(key)...)
		if second.Status != http.StatusOK {
			t.Fatalf("second: %d %s", second.Status, second.Body)
		}
		expectGwHeaders(t, second.Header, map[string]string{"X-Gw-Model": embedDefault, "X-Gw-Original-Model": "gw-embed", "X-Gw-Routed": "true",
			"X-Gw-Request-Id": anyValue, "X-Gw-Cost-Usd": "0.00", "X-Gw-Cache": "hit"})
		if !bytes.Equal(first.Body, second.Body) {
			t.Errorf("cached body differs from the first")
		}
		if n := len(e.OA.Requests()); n != requests {
			t.Errorf("a cache hit reached the provider")
		}
		if n := len(e.ledger(t, account)); n != entries {
			t.Errorf("a cache hit was charged")
		}
		if r := e.do(t, http.MethodPost, "/v1/embeddings", body, bearer(otherKey)...); r.Status != http.StatusOK || r.Header.Get("X-Gw-Cache") != "" {
			t.Errorf("another account: %d, X-Gw-Cache %q; want a miss", r.Status, r.Header.Get("X-Gw-Cache"))
		} else {
			ids = append(ids, r.Header.Get("X-Gw-Request-Id"))
		}
	})

	t.Run("an answer over 4 MiB is not cached", func(t *testing.T) {
		// 150 vectors of 3,072 numbers: about 5 MiB.
		texts := make([]string, 150)
		for i := range texts {
			texts[i] = fmt.Sprintf("text %d", i)
		}
		b, _ := json.Marshal(map[string]any{"model": "gw-pinned-text-embedding-3-large", "input": texts})
		requests := len(e.OA.Requests())
		for i := range 2 {
			r := e.do(t, http.MethodPost, "/v1/embeddings", string(b), bearer(key)...)
			if r.Status != http.StatusOK || r.Header.Get("X-Gw-Cache") != "" || len(r.Body) <= 4<<20 {
				t.Fatalf("call %d: %d, X-Gw-Cache %q, %d bytes; want a miss of over 4 MiB", i, r.Status, r.Header.Get("X-Gw-Cache"), len(r.Body))
			}
			ids = append(ids, r.Header.Get("X-Gw-Request-Id"))
		}
		if n := len(e.OA.Requests()); n != requests+2 {
			t.Errorf("the provider received %d requests, want 2", n-requests)
		}
	})

	// The ledger adds up: the spend of each account, the metrics' money
	// and tokens per model, the access log's fields per call.
	var all []ledgerEntry
	for _, a := range []string{account, "embed-payg", "embed-other"} {
		l := e.ledger(t, a)
		var sum pricing.Money
		for _, x := range l {
			sum += mustUSD(t, x.Cost)
		}
		if spend, _ := e.accountMoney(t, a); spend != sum {
			t.Errorf("%s: spend %s, want the ledger's sum %s", a, spend, sum)
		}
		all = append(all, l...)
	}
	cost, units := map[string]pricing.Money{}, map[string]int64{}
	byID := map[string]ledgerEntry{}
	for _, x := range all {
		cost[x.Model] += mustUSD(t, x.Cost)
		units[x.Model] += x.Units
		byID[x.RequestID] = x
	}
	m := scrape(t, e.gateway)
	for mod, c := range cost {
		if got, want := m[`gw_cost_usd_total{family="embeddings",model="`+mod+`"}`], float64(c)/float64(pricing.NanoPerUSD); got != want {
			t.Errorf("gw_cost_usd_total of %s = %v, want the ledger's %v", mod, got, want)
		}
		if got := m[`gw_tokens_total{family="embeddings",kind="input",model="`+mod+`"}`]; got != float64(units[mod]) {
			t.Errorf("gw_tokens_total of %s = %v, want the ledger's %d", mod, got, units[mod])
		}
	}
	if got := m[`gw_cache_hits_total{family="embeddings"}`]; got != 1 {
		t.Errorf("gw_cache_hits_total of embeddings = %v, want 1", got)
	}
	if got := m[`gw_requests_total{code="502",family="embeddings"}`]; got != 1 {
		t.Errorf("gw_requests_total of embeddings 502 = %v, want 1", got)
	}
	logs := accessLog(t, e.gateway, ids)
	for _, id := range ids {
		l, le := byID[id], logs[id]
		if le.Model != l.Model || le.Cost != l.Cost || le.InputTokens == nil || *le.InputTokens != l.Units || le.OutputTokens == nil || *le.OutputTokens != 0 || le.Alias == "" {
			t.Errorf("access log of %s: %+v, want the ledger's %+v", id, le, l)
		}
	}
}

// TestEmbeddingsRefusals: bad input is a 400 in the chat family's shape
// naming the parameter, an unknown model a 400 model_not_found, a model
// off the key's list the chat routes' refusal, an empty balance the
// chat's 402; none reaches the provider or costs anything.
func TestEmbeddingsRefusals(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "embed-refused"
	key := e.account(t, account, map[string]any{"balance_usd": "1.00"})
	limited, _ := e.createKey(t, account, map[string]any{"name": "large only", "models": []string{"gw-pinned-text-embedding-3-large"}})
	chatOnly, _ := e.createKey(t, account, map[string]any{"name": "chat only", "models": []string{"gw-auto"}})
	brokeKey := e.account(t, "embed-broke", map[string]any{"balance_usd": "0.00"})

	const (
		invalid    = `{"error":{"message":"<string>","type":"invalid_request_error","param":%q,"code":null}}`
		notFound   = `{"error":{"message":"<string>","type":"invalid_request_error","param":"model","code":"model_not_found"}}`
		notAllowed = `{"error":{"message":"<string>","type":"permission_error","param":null,"code":"model_not_allowed"}}`
	)
	tooMany := `["` + strings.Repeat(`a","`, 2048) + `a"]`
	for _, c := range []struct {
		name, body string
		key        string
		status     int
		want       string
	}{
		{"empty string", `{"model":"gw-embed","input":""}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"empty list", `{"model":"gw-embed","input":[]}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"no input", `{"model":"gw-embed"}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"2,049 items", `{"model":"gw-embed","input":` + tooMany + `}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"an empty string in the list", `{"model":"gw-embed","input":["a",""]}`, key, 400, fmt.Sprintf(invalid, "input[1]")},
		{"a token list with a string", `{"model":"gw-embed","input":[1,2,"three"]}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"a token list with a fraction", `{"model":"gw-embed","input":[1,2.5]}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"a negative token", `{"model":"gw-embed","input":[1,-2]}`, key, 400, fmt.Sprintf(invalid, "input")},
		{"strings and token lists mixed", `{"model":"gw-embed","input":["a",[1,2]]}`, key, 400, fmt.Sprintf(invalid, "input[1]")},
		{"token lists with a non-integer", `{"model":"gw-embed","input":[[1,2],[3,0.5]]}`, key, 400, fmt.Sprintf(invalid, "input[1]")},
		{"an empty token list", `{"model":"gw-embed","input":[[1],[]]}`, key, 400, fmt.Sprintf(invalid, "input[1]")},
		{"unknown encoding_format", `{"model":"gw-embed","input":"a","encoding_format":"int8"}`, key, 400, fmt.Sprintf(invalid, "encoding_format")},
		{"zero dimensions", `{"model":"gw-embed","input":"a","dimensions":0}`, key, 400, fmt.Sprintf(invalid, "dimensions")},
		{"negative dimensions", `{"model":"gw-embed","input":"a","dimensions":-8}`, key, 400, fmt.Sprintf(invalid, "dimensions")},
		{"user not a string", `{"model":"gw-embed","input":"a","user":1}`, key, 400, fmt.Sprintf(invalid, "user")},
		{"an unknown member", `{"model":"gw-embed","input":"a","temperature":0}`, key, 400, fmt.Sprintf(invalid, "temperature")},
		{"not JSON", `{"model":"gw-embed","input":`, key, 400, fmt.Sprintf(invalid, "body")},
		{"a body over 16 MiB", `{"model":"gw-embed","input":"` + strings.Repeat("a", 16<<20) + `"}`, key, 413,
			`{"error":{"message":"<string>","type":"invalid_request_error","param":null,"code":"request_too_large"}}`},
		{"unknown model", `{"model":"text-embedding-4","input":"a"}`, key, 400, notFound},
		{"a chat model", `{"model":"gw-pinned-gpt-4.1-mini","input":"a"}`, key, 400, notFound},
		{"a chat alias", `{"model":"gw-auto","input":"a"}`, key, 400, notFound},
		{"gw-embed off the key's list", `{"model":"gw-embed","input":"a"}`, limited, 401, notAllowed},
		{"a chat-only key", `{"input":"a"}`, chatOnly, 401, notAllowed},
		{"no key", `{"model":"gw-embed","input":"a"}`, "", 401, unauthChat},
		{"an empty balance", `{"model":"gw-embed","input":"a"}`, brokeKey, 402,
			`{"error":{"message":"<string>","type":"insufficient_quota","param":null,"code":"credit_exhausted","provider_specific_fields":{"error":"credit_exhausted"}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h []string
			if c.key != "" {
				h = bearer(c.key)
			}
			expectError(t, e.do(t, http.MethodPost, "/v1/embeddings", c.body, h...), c.status, c.want, "req-")
		})
	}

	t.Run("openai-go reads the refusal", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL(e.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		_, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gw-embed",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "input" || apiErr.Type != "invalid_request_error" {
			t.Errorf("Embeddings.New with no input: %v", err)
		}
	})
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
		t.Errorf("the providers received %d requests", n)
	}
	e.expectNoCharge(t, account, "1.00")

	t.Run("the key's own model works, and is all it lists", func(t *testing.T) {
		r := e.do(t, http.MethodPost, "/v1/embeddings", `{"model":"gw-pinned-text-embedding-3-large","input":"allowed"}`, bearer(limited)...)
		if r.Status != http.StatusOK || r.Header.Get("X-Gw-Model") != "text-embedding-3-large" {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		rows := rowsByID(t, e.do(t, http.MethodGet, "/v1/models", "", bearer(limited)...))
		want := map[string]map[string]any{"gw-pinned-text-embedding-3-large": {"id": "gw-pinned-text-embedding-3-large", "object": "model",
			"created": float64(1767225600), "owned_by": "openai", "capability": "embedding", "entitlement": "open"}}
		if !reflect.DeepEqual(rows, want) {
			t.Errorf("rows %v, want %v", rows, want)
		}
	})
}

// TestEmbeddingsLastCent: a balance too small for the most tokens an input
// can hold still pays for the input counted (the larger of the o200k and
// cl100k counts, with a margin), and a provider reporting more than was
// held is billed what was held: the balance is spent, never past zero.
func TestEmbeddingsLastCent(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account, model = "embed-last-cent", "text-embedding-3-large"
	key := e.account(t, account, map[string]any{"balance_usd": "0.00001"})
	// 81 bytes (a bound of 85 tokens, 0.00001105 USD, more than the
	// balance); 10 o200k and 33 cl100k tokens, held as 33+4 and the
	// margin: 53 tokens, 0.00000689 USD.
	const text = "नमस्ते दुनिया, आज मौसम अच्छा है"
	e.OA.Push(fake.Script{EmbeddingTokens: 5000})
	r := e.do(t, http.MethodPost, "/v1/embeddings", `{"model":"gw-pinned-`+model+`","input":"`+text+`"}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	cost := embedCost(t, model, 53, false)
	if got := r.Header.Get("X-Gw-Cost-Usd"); got != cost.String() {
		t.Errorf("cost %s, want %s (53 tokens held)", got, cost)
	}
	e.expectLedger(t, account, ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "embeddings", Model: model,
		Units: 53, Unit: "token", Cost: cost.String()})
	if _, balance := e.accountMoney(t, account); balance != (mustUSD(t, "0.00001") - cost).String() {
		t.Errorf("balance %s, want 0.00001 less %s", balance, cost)
	}
}

// TestEmbeddingsRateBudget: embeddings take the chat budget
// (chat_requests_per_minute), shared with the chat routes: past it a 429
// in the chat family's shape with Retry-After, before any upstream call.
func TestEmbeddingsRateBudget(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tchat_requests_per_minute 2\n\t\t}"))
	key := e.account(t, "embed-budget", nil)
	if r := e.do(t, http.MethodPost, "/v1/embeddings", `{"input":"one"}`, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	path, body := rawChat(chatClient, openaiBackend.model, false)
	if r := e.do(t, http.MethodPost, path, body, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("a chat call: %d %s", r.Status, r.Body)
	}
	requests := len(e.OA.Requests())
	r := e.do(t, http.MethodPost, "/v1/embeddings", `{"input":"three"}`, bearer(key)...)
	expectError(t, r, http.StatusTooManyRequests, `{"error":{"message":"<string>","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`, "req-")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("no Retry-After")
	}
	if n := len(e.OA.Requests()); n != requests {
		t.Errorf("a refused call reached the provider")
	}
}
