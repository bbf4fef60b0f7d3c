package fake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS key and region the Bedrock fake accepts: a request must be
// signed (Signature Version 4) with this key (Upstream.APIKey, when set,
// replaces the access key id) for this region and the service "bedrock".
// Any session token is accepted, when it is signed.
const (
	BedrockAccessKeyID     = "AKIAFAKEBEDROCK00001"
	BedrockSecretAccessKey = "fakeBedrockSecretKey/forTestsOnly+0000001"
	BedrockRegion          = "us-east-1"
	bedrockService         = "bedrock"
)

// bedrockClockSkew is how far a request's X-Amz-Date may be from the
// fake's clock, as AWS allows.
const bedrockClockSkew = 5 * time.Minute

// Bedrock's authentication failures: the error type and its message, as
// AWS answers them (403).
var (
	errMissingToken = [2]string{"MissingAuthenticationTokenException", "Missing Authentication Token"}
	errIncomplete   = [2]string{"IncompleteSignatureException", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters."}
	errUnknownKey   = [2]string{"UnrecognizedClientException", "The security token included in the request is invalid."}
	errBadSignature = [2]string{"InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}
)

// bedrockSignature checks r's Signature Version 4 over body: the
// Authorization header's form, its access key and credential scope
// ({date}/BedrockRegion/bedrock/aws4_request), X-Amz-Date (the scope's
// day, within bedrockClockSkew), and the signature itself, recomputed by
// AWS's signer from the headers r says it signed. ok is false with the
// failure's type and message.
func (u *Upstream) bedrockSignature(r *http.Request, body []byte) (failure [2]string, ok bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errMissingToken, false
	}
	cred, signed, sig, ok := parseAuthorization(auth)
	if !ok {
		return errIncomplete, false
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 {
		return errIncomplete, false
	}
	key := BedrockAccessKeyID
	if u.APIKey != "" {
		key = u.APIKey
	}
	if scope[0] != key {
		return errUnknownKey, false
	}
	switch {
	case scope[2] != BedrockRegion:
		return [2]string{errBadSignature[0], "Credential should be scoped to a valid region."}, false
	case scope[3] != bedrockService:
		return [2]string{errBadSignature[0], "Credential should be scoped to correct service: 'bedrock'."}, false
	case scope[4] != "aws4_request":
		return [2]string{errBadSignature[0], "Credential should be scoped with a valid terminator: 'aws4_request'."}, false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != scope[1] {
		return [2]string{errIncomplete[0], "Date must be in ISO-8601 'basic format' and match the credential scope."}, false
	}
	if d := time.Since(at); d > bedrockClockSkew || d < -bedrockClockSkew {
		return [2]string{errBadSignature[0], "Signature expired: " + r.Header.Get("X-Amz-Date") + " is now earlier or later than the allowed clock skew."}, false
	}
	want, err := resign(r, body, key, signed, at)
	if err != nil || want != sig {
		return errBadSignature, false
	}
	return [2]string{}, true
}

// parseAuthorization reads an AWS4-HMAC-SHA256 Authorization header.
func parseAuthorization(auth string) (credential string, signedHeaders []string, signature string, ok bool) {
	rest, found := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !found {
		return "", nil, "", false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signedHeaders = strings.Split(v, ";")
		case "Signature":
			signature = v
		}
	}
	return credential, signedHeaders, signature, credential != "" && len(signedHeaders) > 0 && signature != ""
}

// resign signs a copy of r holding only the headers it says it signed,
// with key and the fake's secret, and returns that copy's signature.
func resign(r *http.Request, body []byte, key string, signedHeaders []string, at time.Time) (string, error) {
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.ContentLength = 0
	for _, h := range signedHeaders {
		switch h {
		case "host", "x-amz-date", "x-amz-security-token":
		case "content-length":
			req.ContentLength = r.ContentLength
		default:
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: BedrockSecretAccessKey}
	if slices.Contains(signedHeaders, "x-amz-security-token") {
		creds.SessionToken = r.Header.Get("X-Amz-Security-Token")
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), bedrockService, BedrockRegion, at); err != nil {
		return "", err
	}
	_, _, sig, _ := parseAuthorization(req.Header.Get("Authorization"))
	return sig, nil
}
