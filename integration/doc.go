// Package integration holds the end-to-end tests of the gateway: they start
// the built binary (bin/caddy, made by `go run ./cmd/gwbuild`) as a process
// on loopback ports with a throw-away data folder and drive it over HTTP,
// with the official OpenAI and Anthropic Go SDKs where a client's view of
// the wire matters.
//
// Run them from the repository root:
//
//	go test ./integration
//
// Unless GW_CADDY_BIN names the binary to test, the tests first build
// bin/caddy from the working tree with `go run ./cmd/gwbuild` (quick when
// nothing changed, through the Go build cache), so a fresh clone needs no
// step of its own. scripts/test.sh runs every check and test of the
// repository.
package integration
