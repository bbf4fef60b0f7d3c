package caddymodule

import (
	"strings"
	"testing"
)

// A cache Redis without the money Redis is refused; a URL that cannot be
// parsed is refused without being repeated (it may hold a password).
func TestSharedRedisConfig(t *testing.T) {
	for _, tc := range []struct{ url, cache, want string }{
		{"", "redis://127.0.0.1:1", "redis_cache_url needs redis_url"},
		{"redis://:secret@127.0.0.1:1", "mysql://:secret@db", "could not be parsed"},
		{"mysql://:secret@db", "", "could not be parsed"},
	} {
		a := &App{RedisURL: tc.url, RedisCacheURL: tc.cache}
		sh, err := a.openShared()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q, %q: %v %v", tc.url, tc.cache, sh, err)
		}
	}
}
