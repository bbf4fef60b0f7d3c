package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// SecretPrefix starts every API key secret.
const SecretPrefix = "sk-gw-"

// NewSecret returns a new API key secret: SecretPrefix followed by the
// unpadded base64url encoding (43 characters) of 32 random bytes.
func NewSecret() (string, error) {
	return RandomSecret(SecretPrefix), nil
}

// RandomSecret is prefix followed by the unpadded base64url encoding (43
// characters) of 32 random bytes: an API key's secret, a webhook's.
func RandomSecret(prefix string) string {
	var b [32]byte
	// crypto/rand.Read never returns an error (Go 1.24+).
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashSecret returns the lowercase hex SHA-256 of secret, the only form in
// which a key's secret is stored.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewID returns prefix, an underscore and 24 random lowercase hex characters
// (96 bits), e.g. NewID("key") = "key_3f9a...".
func NewID(prefix string) string {
	var b [12]byte
	// crypto/rand.Read never returns an error (Go 1.24+); it crashes the
	// program irrecoverably instead if the system's source fails.
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
