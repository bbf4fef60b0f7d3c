#!/usr/bin/env bash
# Builds bin/caddy from xcaddy.json, then checks formatting, vets,
# statically checks and tests every package.
# Extra arguments go to `go test` (for example: scripts/test.sh -run TestX -v).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

go run ./cmd/gwbuild
# gofmt changes nothing.
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.cache/*'))
if [[ -n $unformatted ]]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...
# staticcheck at a pinned version, through the module proxy.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
go test -count=1 ./... "$@"
# The reload tests once more against a gateway built with -race: reloads
# under concurrent traffic must report no data race.
GOFLAGS=-race go run ./cmd/gwbuild -o bin/caddy-race
GW_CADDY_BIN="$PWD/bin/caddy-race" go test -count=1 -run 'Reload|StreamsBilled' ./integration
