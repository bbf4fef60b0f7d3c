package fake_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// The embeddings answer has OpenAI's exact wire shape, float and base64
// carry the same float32 vector, dimensions shortens it, and usage is the
// fake's count unless scripted.
func TestOpenAIEmbeddings(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	resp, err := http.Post(u.URL+"/embeddings", "application/json",
		strings.NewReader(`{"model":"text-embedding-3-small","input":["abcdefgh","xyz"],"dimensions":4}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", resp.StatusCode)
	}
	resp.Body.Close()

	client := openAIClient(u)
	params := openai.EmbeddingNewParams{Model: "text-embedding-3-small", Dimensions: openai.Int(4),
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"abcdefgh", "xyz"}}}
	res, err := client.Embeddings.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[%s]},` +
		`{"object":"embedding","index":1,"embedding":[%s]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":3,"total_tokens":3}}`
	list := func(v []float32) string {
		b, _ := json.Marshal(v)
		return strings.Trim(string(b), "[]")
	}
	a, b := fake.Embedding("text-embedding-3-small", "abcdefgh", 4), fake.Embedding("text-embedding-3-small", "xyz", 4)
	if got := res.RawJSON(); got != fmt.Sprintf(want, list(a), list(b)) {
		t.Errorf("answer %s", got)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := client.Embeddings.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := b64.Data[0].JSON.Embedding.Raw(); got != `"`+fake.EncodeBase64(a)+`"` {
		t.Errorf("base64 embedding %s", got)
	}
	for i, vec := range [][]float32{a, b} {
		for j, f := range vec {
			if float32(b64.Data[i].Embedding[j]) != f || float32(res.Data[i].Embedding[j]) != f {
				t.Fatalf("vector %d value %d: base64 %v, float %v, want %v", i, j, b64.Data[i].Embedding[j], res.Data[i].Embedding[j], f)
			}
		}
	}

	u.Push(fake.Script{EmbeddingTokens: 77})
	tok, err := client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "text-embedding-3-large",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}}}})
	if err != nil || len(tok.Data) != 2 || len(tok.Data[1].Embedding) != 3072 || tok.Usage.PromptTokens != 77 {
		t.Errorf("token lists on the large model: %+v, %v", tok, err)
	}

	var apiErr *openai.Error
	for _, p := range []openai.EmbeddingNewParams{
		{Model: "text-embedding-ada-002", Dimensions: openai.Int(8), Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a")}},
		{Model: "text-embedding-3-small", Dimensions: openai.Int(1537), Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("a")}},
		{Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", ""}}},
	} {
		if _, err := client.Embeddings.New(t.Context(), p); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Errorf("%+v: %v, want 400", p, err)
		}
	}
}
