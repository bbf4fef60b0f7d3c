package fake

import (
	"cmp"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// VertexEmail is the service account of the key files a Vertex fake
// writes.
const VertexEmail = "gateway@fake-project.iam.gserviceaccount.com"

// vertexVersion is the anthropic_version a Claude model on Vertex AI
// reads from the body.
const vertexVersion = "vertex-2023-10-16"

// vertexCountFields are the members of Vertex AI's CountTokensRequest (its
// REST body): countTokens refuses any other, toolConfig and
// safetySettings among them.
var vertexCountFields = []string{"endpoint", "model", "instances", "contents", "systemInstruction", "tools", "generationConfig"}

// vertexModelPath matches Vertex AI's model paths, under its v1 or
// v1beta1 version: project, location, publisher, model and verb.
var vertexModelPath = regexp.MustCompile(`^/v1(?:beta1)?/projects/([^/]+)/locations/([^/]+)/publishers/([^/]+)/models/([^/:]+):([A-Za-z]+)$`)

// NewVertex starts a Vertex AI fake on 127.0.0.1: POST /token answers
// the JWT bearer grant of a key file it wrote (KeyFile) with an access
// token; given a token it issued, Claude models are served at
// /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict
// and :streamRawPredict as the Anthropic fake serves messages (the same
// scripts), with the body Vertex AI takes (the version in it, no model),
// (and their prompts counted at .../publishers/anthropic/models/
// count-tokens:rawPredict, the model in the body), and Gemini models at
// .../publishers/google/models/{m}:generateContent, :streamGenerateContent
// and :countTokens as the Gemini fake serves them; /v1beta1 serves what
// /v1 does, as on Vertex AI. Anything else is a 404 in Google's error
// shape.
func NewVertex() *Upstream {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	u := newUpstream(formatAnthropic, serveVertex)
	u.vertexKey = key
	return u
}

// KeyFile writes a service-account key file in dir whose token_uri is
// the fake's, and returns its path.
func (u *Upstream) KeyFile(dir string) string {
	der, err := x509.MarshalPKCS8PrivateKey(u.vertexKey)
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "fake-project", "private_key_id": "fake-key-1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": VertexEmail, "client_id": "1", "token_uri": u.URL + "/token",
	})
	path := filepath.Join(dir, "vertex-key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		panic(err)
	}
	return path
}

// Tokens is how many access tokens the fake issued.
func (u *Upstream) Tokens() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.tokens)
}

func serveVertex(u *Upstream, w http.ResponseWriter, r *http.Request, body []byte) {
	if r.URL.Path == "/token" {
		u.vertexToken(w, body)
		return
	}
	m := vertexModelPath.FindStringSubmatch(r.URL.Path)
	if m == nil || r.Method != http.MethodPost {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.", "")
		return
	}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	u.mu.Lock()
	issued := u.tokens[auth]
	u.mu.Unlock()
	if !ok || !issued {
		geminiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "")
		return
	}
	publisher, model, verb := m[3], m[4], m[5]
	if publisher == "google" && (verb == "generateContent" || verb == "streamGenerateContent" || verb == "countTokens") {
		// As the Gemini fake serves it, with its key; Vertex AI's
		// countTokens takes some of a generateContent body's members as
		// they are, and refuses any other.
		if verb == "countTokens" {
			var bad string
			gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
				if !slices.Contains(vertexCountFields, k.Str) {
					bad = k.Str
				}
				return bad == ""
			})
			if bad != "" {
				geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `Invalid JSON payload received. Unknown name "`+bad+`": Cannot find field.`, "")
				return
			}
			inner, _ := sjson.SetBytes(body, "model", "models/"+model)
			body, _ = sjson.SetRawBytes([]byte(`{}`), "generateContentRequest", inner)
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/v1beta/models/" + model + ":" + verb
		r2.Header.Set("x-goog-api-key", cmp.Or(u.APIKey, "vertex"))
		serveGemini(u, w, r2, body)
		return
	}
	if publisher == "anthropic" && model == "count-tokens" && verb == "rawPredict" {
		// The count of a Claude prompt: the body as count_tokens takes it,
		// the model named in it.
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/v1/messages/count_tokens"
		r2.Header.Set("x-api-key", cmp.Or(u.APIKey, "vertex"))
		r2.Header.Set("anthropic-version", "2023-06-01")
		serveAnthropic(u, w, r2, body)
		return
	}
	if publisher != "anthropic" || (verb != "rawPredict" && verb != "streamRawPredict") {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Publisher model %s/%s does not serve %s.", publisher, model, verb), "")
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.", "")
		return
	}
	if req["anthropic_version"] != vertexVersion {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version: must be "+vertexVersion, "")
		return
	}
	if _, named := req["model"]; named {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model: Extra inputs are not permitted", "")
		return
	}
	if stream, _ := req["stream"].(bool); stream != (verb == "streamRawPredict") {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "stream: must be true for streamRawPredict and absent for rawPredict", "")
		return
	}
	// As the Anthropic fake serves it: the model in the body, the version
	// and key in the headers.
	body, _ = sjson.DeleteBytes(body, "anthropic_version")
	body, _ = sjson.SetBytes(body, "model", model)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/v1/messages"
	r2.Header.Set("x-api-key", cmp.Or(u.APIKey, "vertex"))
	r2.Header.Set("anthropic-version", "2023-06-01")
	serveAnthropic(u, w, r2, body)
}

// vertexToken answers a JWT bearer grant signed with the key of the
// files the fake wrote.
func (u *Upstream) vertexToken(w http.ResponseWriter, body []byte) {
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	parts := strings.Split(form.Get("assertion"), ".")
	if len(parts) != 3 {
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
		return
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct{ Iss, Aud string }
	if rsa.VerifyPKCS1v15(&u.vertexKey.PublicKey, crypto.SHA256, sum[:], sig) != nil || json.Unmarshal(claims, &c) != nil ||
		c.Iss != VertexEmail || c.Aud != u.URL+"/token" {
		http.Error(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`, http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	if u.tokens == nil {
		u.tokens = map[string]bool{}
	}
	tok := fmt.Sprintf("ya29.fake-%d", len(u.tokens)+1)
	u.tokens[tok] = true
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"expires_in":3599,"token_type":"Bearer"}`, tok)
}
