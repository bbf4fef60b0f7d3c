#!/usr/bin/env bash
# The hot path's measurements, in one run: bin/caddy
# pinned to CPU 0 with taskset, the load generator and the zero-latency
# fake upstreams on CPU 1, a bare Caddy reverse_proxy to the same fakes (a
# Caddy of its own, bin/caddy-bench, also on CPU 0) as the baseline, and an
# A/A row (the bare proxy against itself) so the noise shows. At one
# connection the bare proxy is also measured with one durable record per
# request (fsync-on-bare), and the gateway against that
# (same-format-beyond-fsync). Prints Markdown; asserts nothing.
#
#   scripts/hotpath.sh            all of it (about three minutes)
#
# Knobs: GW_BENCH_N (requests per target and scenario, 16000),
# HOTPATH_OUT (folder for the tables, default .cache/hotpath),
# GW_BENCH_ACCESS_LOG (both, the default: both sites write the access log
# of Caddyfile.example; gateway; none), GW_BENCH_BASELINE (shared: the bare
# proxy is served by the gateway's process instead of a Caddy of its own).
# Needs two CPUs or more; on one CPU nothing is pinned.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=${HOTPATH_OUT:-.cache/hotpath}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export GW_BENCH=1 GW_BENCH_N=${GW_BENCH_N:-16000} GW_BENCH_BATCH=${GW_BENCH_BATCH:-200}
pin=() gwpin=()
if [[ $(nproc) -ge 2 ]]; then
	export GW_BENCH_GATEWAY_CPUS=0
	pin=(taskset -c 1-$(($(nproc) - 1)))
	gwpin=(taskset -c 0)
fi

go run ./cmd/gwbuild >/dev/null
# The baselines' Caddy, with the handler that makes one record durable per
# request (integration/benchsync): the one fsync a durable charge needs,
# measured where the gateway pays it.
synced=
if [[ ${GW_BENCH_BASELINE:-} != shared ]]; then
	export GW_BENCH_SYNC_BIN=$PWD/bin/caddy-bench
	go run ./cmd/gwbuild -o "$GW_BENCH_SYNC_BIN" -with github.com/caddy-gw/caddy-gw/integration/benchsync >/dev/null
	synced=fsync-on-bare,same-format-beyond-fsync,
fi
go test -c -o "$out/integration.test" ./integration
run() { # name, test, then env assignments
	local name=$1 test=$2
	shift 2
	echo "## $name"
	(cd integration && env "$@" "${pin[@]}" "$out/integration.test" -test.count=1 -test.timeout=30m \
		-test.run "^$test\$" | grep -v '^        {' | grep -E '^\||^fsync|concurrent streams|^[0-9]+ requests|^Latencies' || true)
	echo
}
{
	# The fsync a charge waits for runs on the gateway's CPU; it is slower
	# there than on the others on some machines, so both are reported.
	load=("${pin[@]}")
	pin=("${gwpin[@]}")
	run "fsync of one durable charge, on the gateway's CPU" TestFsyncReport
	pin=("${load[@]}")
	run "fsync of one durable charge, on the load generator's CPUs" TestFsyncReport
	run "32 connections, one account" TestBenchReport GW_BENCH_CONC=32 GW_BENCH_ACCOUNTS=1 \
		GW_BENCH_SCENARIOS=aa-bare-vs-bare,same-format,translated-messages-in,translated-chat-in,same-format-stream
	run "32 connections, 32 accounts" TestBenchReport GW_BENCH_CONC=32 GW_BENCH_ACCOUNTS=32 \
		GW_BENCH_SCENARIOS=aa-bare-vs-bare,same-format,translated-messages-in,translated-chat-in
	run "one connection" TestBenchReport GW_BENCH_CONC=1 GW_BENCH_ACCOUNTS=1 GW_BENCH_N=$((GW_BENCH_N / 2)) \
		GW_BENCH_SCENARIOS=aa-bare-vs-bare,same-format,${synced}translated-messages-in,translated-chat-in,same-format-stream
	run "1,000 concurrent streams" TestStreamsRSSReport
} | tee "$out/hotpath.md"
