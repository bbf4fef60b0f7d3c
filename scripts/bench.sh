#!/usr/bin/env bash
# Measures the gateway against a bare Caddy reverse_proxy to the same fake
# upstream in one run (the baseline in a Caddy of its own, or in the
# gateway's process with GW_BENCH_BASELINE=shared), and prints a Markdown
# table of p50/p99 latency and throughput with the ratios gateway/baseline
# (integration/bench_test.go, TestBenchReport; page reading, audio and the
# MCP gateway in fetch_bench_test.go, audio_bench_test.go and
# mcp_gateway_bench_test.go).
#
#   scripts/bench.sh           build bin/caddy, print the table
#   scripts/bench.sh -bench    also run the Go benchmarks (2000 requests each)
#
# Knobs (environment): GW_BENCH_N (2000 requests per target and scenario),
# GW_BENCH_CONC (8 concurrent clients), GW_BENCH_BATCH (100 requests per
# interleaved batch), GW_BENCH_ACCOUNTS (1 account per scenario carries the
# gateway's load), GW_BENCH_BUDGET (90s per scenario at most),
# GW_BENCH_OUT (also write the table to a file), GW_BENCH_PROFILE (write a
# CPU profile of the gateway process under load; read it with
# `go tool pprof -top bin/caddy <file>`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

go run ./cmd/gwbuild
GW_BENCH=1 go test -count=1 -timeout 30m -run '^(TestBenchReport|TestFetchBenchReport|TestToolsBenchReport|TestMCPGatewayBenchReport|TestAudioBenchReport|TestImagesBenchReport|TestNodesBenchReport)$' -v ./integration

if [[ "${1:-}" == "-bench" ]]; then
	go test -count=1 -timeout 30m -run '^$' -bench . -benchtime 2000x ./integration
fi
