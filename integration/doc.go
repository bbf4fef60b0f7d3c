// Package integration holds the end-to-end tests of the gateway: they start
// the built binary (bin/caddy, made by `go run ./cmd/gwbuild`) as a process
// on loopback ports with a throw-away data folder and drive it over HTTP,
// with the official OpenAI and Anthropic Go SDKs where a client's view of
// the wire matters.
//
// Run them from the repository root:
//
//	go run ./cmd/gwbuild && go test -count=1 ./integration
//
// GW_CADDY_BIN points the tests at another binary.
package integration
