#!/usr/bin/env bash
# Builds bin/caddy from xcaddy.json, then vets and tests every package.
# Extra arguments go to `go test` (for example: scripts/test.sh -run TestX -v).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

go run ./cmd/gwbuild
go vet ./...
go test -count=1 ./... "$@"
