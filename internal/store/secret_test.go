package store

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

func TestNewSecret(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 100; i++ {
		s, err := NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, "sk-gw-") {
			t.Fatalf("secret %q lacks prefix", s)
		}
		body := strings.TrimPrefix(s, "sk-gw-")
		if len(body) != 43 {
			t.Fatalf("secret body %q is %d chars, want 43", body, len(body))
		}
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil {
			t.Fatalf("secret body %q is not unpadded base64url: %v", body, err)
		}
		if len(raw) != 32 {
			t.Fatalf("secret decodes to %d bytes, want 32", len(raw))
		}
		if seen[s] {
			t.Fatalf("duplicate secret %q", s)
		}
		seen[s] = true
	}
}

func TestHashSecret(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		if got := HashSecret(tt.in); got != tt.want {
			t.Errorf("HashSecret(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if h1, h2 := HashSecret(s), HashSecret(s); h1 != h2 {
		t.Error("HashSecret is not deterministic")
	}
	if HashSecret(s) == HashSecret(s+"x") {
		t.Error("different secrets hash alike")
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(HashSecret(s)) {
		t.Errorf("HashSecret(%q) = %q, want 64 lowercase hex chars", s, HashSecret(s))
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^key_[0-9a-f]{24}$`)
	seen := make(map[string]bool)
	for i := 0; i < 100; i++ {
		id := NewID("key")
		if !re.MatchString(id) {
			t.Fatalf("NewID(\"key\") = %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	if id := NewID("acct"); !regexp.MustCompile(`^acct_[0-9a-f]{24}$`).MatchString(id) {
		t.Errorf("NewID(\"acct\") = %q", id)
	}
}
