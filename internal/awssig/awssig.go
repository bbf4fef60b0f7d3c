// Package awssig signs the gateway's requests to AWS services (Bedrock
// Runtime) with AWS Signature Version 4, by AWS's own signer: the
// gateway never computes a signature itself.
package awssig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// ServiceBedrock is the signing name of Bedrock Runtime (its endpoints are
// bedrock-runtime.{region}.amazonaws.com, its signing name "bedrock").
const ServiceBedrock = "bedrock"

// Key is an AWS access key: its id and secret and, for temporary
// credentials, the session token that goes with them.
type Key struct {
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken is sent (and signed) as X-Amz-Security-Token when set.
	SessionToken string
}

// Signer signs requests with one key for one service in one region. Its
// zero Service is ServiceBedrock. It is safe for concurrent use.
type Signer struct {
	Key     Key
	Region  string
	Service string
}

// errIncomplete refuses a signer that lacks what a signature needs.
var errIncomplete = errors.New("awssig: an access key id, its secret and a region are required")

// signer is AWS's signer: it keeps derived signing keys (one a day per
// key, region and service) and is safe for concurrent use.
var signer = v4.NewSigner()

// Sign signs req, whose body is body (nil for none), as of at: it sets
// X-Amz-Date (at, in UTC), X-Amz-Security-Token when the key has a session
// token, and Authorization (AWS4-HMAC-SHA256 with the credential scope
// {date}/{region}/{service}/aws4_request). Every header req has by then is
// signed except those AWS leaves out (Authorization, User-Agent,
// X-Amzn-Trace-Id, Expect, ...), with the host and the content length: set
// the others first, and change none after. The payload hash is body's
// SHA-256. Signing again (a retry) replaces the earlier signature.
func (s Signer) Sign(ctx context.Context, req *http.Request, body []byte, at time.Time) error {
	if s.Key.AccessKeyID == "" || s.Key.SecretAccessKey == "" || s.Region == "" {
		return errIncomplete
	}
	service := s.Service
	if service == "" {
		service = ServiceBedrock
	}
	creds := aws.Credentials{AccessKeyID: s.Key.AccessKeyID, SecretAccessKey: s.Key.SecretAccessKey, SessionToken: s.Key.SessionToken}
	return signer.SignHTTP(ctx, creds, req, PayloadHash(body), service, s.Region, at)
}

// PayloadHash is the hex SHA-256 of a request body, as a signature covers
// it (the empty body's hash for none).
func PayloadHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}
