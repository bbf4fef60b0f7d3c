package awssig

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The AWS Signature Version 4 test suite's key, scope and time.
var (
	suiteKey    = Key{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	suiteTime   = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	suiteToken  = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
	suiteScope  = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
	suiteSigner = Signer{Key: suiteKey, Region: "us-east-1", Service: "service"}
)

// TestSuiteVectors signs requests of the AWS test suite and gets its
// published Authorization headers.
func TestSuiteVectors(t *testing.T) {
	withToken := suiteSigner
	withToken.Key.SessionToken = suiteToken
	for _, tc := range []struct {
		name, method, url string
		signer            Signer
		want              string
	}{
		{"get-vanilla", "GET", "https://example.amazonaws.com/", suiteSigner,
			suiteScope + "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-query-order-key-case", "GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", suiteSigner,
			suiteScope + "SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{"post-vanilla", "POST", "https://example.amazonaws.com/", suiteSigner,
			suiteScope + "SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
		{"post-sts-header-before", "POST", "https://example.amazonaws.com/", withToken,
			suiteScope + "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.signer.Sign(context.Background(), req, nil, suiteTime); err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get("Authorization"); got != tc.want {
				t.Fatalf("Authorization\n got %s\nwant %s", got, tc.want)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
				t.Fatalf("X-Amz-Date = %q", got)
			}
			if got := req.Header.Get("X-Amz-Security-Token"); got != tc.signer.Key.SessionToken {
				t.Fatalf("X-Amz-Security-Token = %q", got)
			}
		})
	}
}

// bedrockRequest is a Converse call as the gateway makes it.
func bedrockRequest(t *testing.T, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost,
		"https://bedrock-runtime.eu-west-3.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "caddy-gw")
	return req
}

// TestSignBedrock signs a Converse call: Bedrock's scope, the body's hash,
// the session token; the user agent is not signed; signing again (a retry)
// gives the same headers, and another body another signature.
func TestSignBedrock(t *testing.T) {
	s := Signer{Key: Key{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "token"}, Region: "eu-west-3"}
	at := time.Date(2026, 3, 1, 23, 59, 59, 0, time.FixedZone("CET", 3600))
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	req := bedrockRequest(t, body)
	if err := s.Sign(context.Background(), req, body, at); err != nil {
		t.Fatal(err)
	}
	auth := req.Header.Get("Authorization")
	const head = "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20260301/eu-west-3/bedrock/aws4_request, " +
		"SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-security-token, Signature="
	sig, ok := strings.CutPrefix(auth, head)
	if !ok || len(sig) != 64 {
		t.Fatalf("Authorization = %s", auth)
	}
	if d, tok := req.Header.Get("X-Amz-Date"), req.Header.Get("X-Amz-Security-Token"); d != "20260301T225959Z" || tok != "token" {
		t.Fatalf("X-Amz-Date %q, X-Amz-Security-Token %q", d, tok)
	}
	if err := s.Sign(context.Background(), req, body, at); err != nil || req.Header.Get("Authorization") != auth || len(req.Header["X-Amz-Date"]) != 1 {
		t.Fatalf("signing again: %v, %s, %q", err, req.Header.Get("Authorization"), req.Header["X-Amz-Date"])
	}
	other := []byte(`{"messages":[{"role":"user","content":[{"text":"ho"}]}]}`)
	req2 := bedrockRequest(t, other)
	if err := s.Sign(context.Background(), req2, other, at); err != nil || req2.Header.Get("Authorization") == auth {
		t.Fatalf("another body signed the same: %v", err)
	}
}

func TestSignRefusesIncompleteKey(t *testing.T) {
	for _, s := range []Signer{
		{Key: Key{SecretAccessKey: "s"}, Region: "us-east-1"},
		{Key: Key{AccessKeyID: "a"}, Region: "us-east-1"},
		{Key: Key{AccessKeyID: "a", SecretAccessKey: "s"}},
	} {
		req := bedrockRequest(t, nil)
		if err := s.Sign(context.Background(), req, nil, suiteTime); err != errIncomplete || req.Header.Get("Authorization") != "" {
			t.Fatalf("%+v: %v, Authorization %q", s, err, req.Header.Get("Authorization"))
		}
	}
}

func TestPayloadHash(t *testing.T) {
	if got := PayloadHash(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty body hash %s", got)
	}
}
