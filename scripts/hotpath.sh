#!/usr/bin/env bash
# The hot path's measurements, in one run: bin/caddy
# pinned to CPU 0 with taskset, the load generator and the zero-latency
# fake upstreams on CPU 1, a bare Caddy reverse_proxy to the same fakes (a
# Caddy of its own, bin/caddy-bench, also on CPU 0) as the baseline, and an
# A/A row (the bare proxy against itself) so the noise shows. At one
# connection the bare proxy is also measured with one durable record per
# request (fsync-on-bare), and the gateway against that
# (same-format-beyond-fsync). Last, with HOTPATH_BEFORE=<revision>, the
# gateway built at that revision (bin/caddy-before) and bin/caddy in turn
# against the bare proxy, a few rounds each, with the means, so a change's
# cost is measured in one run. Then the durability modes (sync and
# interval 5ms) side by side with the bare proxy, same format, at one
# connection and at 32, with a summary table of their p50, p99 and
# throughput. Last, what key and organization caps cost: within one
# gateway, a capped key of an account in a capped organization against
# a plain key batch for batch, both ways round, a few rounds, with the
# same-format ratio of the same run and what caps take off it. Prints
# Markdown; asserts nothing.
#
#   scripts/hotpath.sh            all of it (about nine minutes)
#
# Knobs: GW_BENCH_N (requests per target and scenario, 16000),
# HOTPATH_OUT (folder for the tables, default .cache/hotpath),
# GW_BENCH_ACCESS_LOG (both, the default: both sites write the access log
# of Caddyfile.example; gateway; none), GW_BENCH_BASELINE (shared: the bare
# proxy is served by the gateway's process instead of a Caddy of its own),
# HOTPATH_ROUNDS (rounds of bin/caddy and bin/caddy-before, 3),
# HOTPATH_BEFORE (a git revision to measure beside bin/caddy),
# HOTPATH_DURABILITY (the durability modes to measure, comma-separated:
# "sync,interval 5ms"; empty: none), HOTPATH_CAPS_ROUNDS (rounds of the
# caps measurement, 4; 0: none).
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
builds=()
if [[ -n ${HOTPATH_BEFORE:-} ]]; then
	# The gateway at another revision, built in a worktree of its own,
	# kept to the end: its rounds run from there, on its own
	# Caddyfile.example (an older gateway does not know newer options).
	tree=$(mktemp -d)
	git worktree add -q --detach "$tree" "$HOTPATH_BEFORE"
	trap 'git worktree remove --force "$tree"' EXIT
	(cd "$tree" && go run ./cmd/gwbuild -o "$OLDPWD/bin/caddy-before" >/dev/null)
	builds=(main before)
fi
go test -c -o "$out/integration.test" ./integration
tests=integration # where run runs the tests from (whose ../Caddyfile.example they load)
run() { # name, test, then env assignments
	local name=$1 test=$2
	shift 2
	echo "## $name"
	(cd "$tests" && env "$@" "${pin[@]}" "$out/integration.test" -test.count=1 -test.timeout=30m \
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
	# This revision and the one before in turn, so that both meet the
	# machine in the same states; single runs move by a few hundredths.
	for i in $(seq "${HOTPATH_ROUNDS:-3}"); do
		for build in "${builds[@]}"; do
			bin=$PWD/bin/caddy
			tests=integration
			if [[ $build != main ]]; then
				bin=$PWD/bin/caddy-$build
				tests=$tree/integration
			fi
			run "32 connections, one account, $build, round $i" TestBenchReport GW_CADDY_BIN="$bin" \
				GW_BENCH_CONC=32 GW_BENCH_ACCOUNTS=1 GW_BENCH_SCENARIOS=aa-bare-vs-bare,same-format
		done
		tests=integration
	done
	# Each durability mode beside the bare proxy, in a gateway of its own.
	IFS=, read -r -a durabilities <<<"${HOTPATH_DURABILITY-sync,interval 5ms}"
	for conc in 1 32; do
		n=$GW_BENCH_N
		[[ $conc == 1 ]] && n=$((GW_BENCH_N / 2))
		for dur in "${durabilities[@]}"; do
			run "durability $dur, $conc connection(s)" TestBenchReport GW_BENCH_DURABILITY="$dur" \
				GW_BENCH_CONC=$conc GW_BENCH_ACCOUNTS=1 GW_BENCH_N=$n GW_BENCH_SCENARIOS=same-format
		done
	done
	# Caps against none in one gateway, each in either place of the
	# interleaving, beside the bare proxy.
	for i in $(seq "${HOTPATH_CAPS_ROUNDS:-4}"); do
		run "caps, round $i" TestBenchReport GW_BENCH_CONC=32 GW_BENCH_ACCOUNTS=1 \
			GW_BENCH_SCENARIOS=aa-bare-vs-bare,same-format,caps-vs-plain,plain-vs-caps,plain-vs-plain
	done
} | tee "$out/hotpath.md"
# The rounds' throughput and CPU ratios, and their means.
awk '/^## 32 connections, one account, (main|before), round/ { build = $6; sub(/,$/, "", build) }
	build != "" && /^\| same-format \| [0-9]/ {
		split($0, f, "|")
		if (f[4] ~ /×/) { # the median of the batches side by side, after the sums
			m = f[4]; gsub(/[ ×]/, "", m); sm[build] += m; meds[build] = meds[build] " " m "×"; build = ""
			next
		}
		r = f[5]; c = f[9]; gsub(/[ ×]/, "", r); gsub(/[ ×]/, "", c)
		n[build]++; sr[build] += r; sc[build] += c; runs[build] = runs[build] " " r "×"
	}
	END {
		if (!n["main"] || !n["before"]) exit
		print "## This revision and the one before: same format, 32 connections, one account\n"
		print "| build | throughput ratio, each round | mean | median of the batches, each round | mean | CPU ratio, mean |"
		print "|---|---|--:|---|--:|--:|"
		for (b in n) printf "| %s |%s | %.3f× |%s | %.3f× | %.3f× |\n", b, runs[b], sr[b] / n[b], meds[b], sm[b] / n[b], sc[b] / n[b]
		printf "\nThe change since the revision before costs %.3f of the throughput ratio (%.3f of the median of the batches, %.3f of the CPU ratio).\n",
			sr["before"] / n["before"] - sr["main"] / n["main"], sm["before"] / n["before"] - sm["main"] / n["main"],
			sc["before"] / n["before"] - sc["main"] / n["main"]
	}' "$out/hotpath.md" | tee -a "$out/hotpath.md"
# The durability modes side by side: same format, one account.
awk '/^## / { dur = ""; lat = 0 }
	/^## durability / { dur = $0; sub(/^## durability /, "", dur); conns = dur; sub(/.*, /, "", conns); sub(/ connection\(s\)$/, "", conns)
		sub(/, [0-9]+ connection\(s\)$/, "", dur); k = conns SUBSEP dur; keys[++nk] = k; mode[k] = dur; conn[k] = conns }
	dur != "" && !lat && /^\| same-format \| latency \|/ { split($0, f, "|"); b50[k] = f[4]; g50[k] = f[5]; b99[k] = f[8]; g99[k] = f[9]; lat = 1 }
	dur != "" && /^\| same-format \| [0-9]/ { split($0, f, "|"); breq[k] = f[3]; greq[k] = f[4] }
	END {
		if (!nk) exit
		print "## Durability: the gateway in each mode and the bare proxy, same format, one account\n"
		print "| connections | durability | bare p50 µs | gateway p50 µs | bare p99 µs | gateway p99 µs | bare req/s | gateway req/s |"
		print "|--:|---|--:|--:|--:|--:|--:|--:|"
		for (i = 1; i <= nk; i++) {
			k = keys[i]
			printf "| %s | %s |%s|%s|%s|%s|%s|%s|\n", conn[k], mode[k], b50[k], g50[k], b99[k], g99[k], breq[k], greq[k]
		}
	}' "$out/hotpath.md" | tee -a "$out/hotpath.md"
# What caps cost: per round, from the medians of the batches side by side
# (a stall falls in one batch), caps against plain is the square root of
# caps-vs-plain over plain-vs-caps (a bias of either place cancels), and
# what caps take off the same-format ratio is that ratio times (1 - it);
# the same for the CPU.
awk '/^## / { caps = ($0 ~ /^## caps, round/) }
	caps && /^\| [a-z-]+ \| [0-9]+ \| [0-9.]+× \|/ {
		split($0, f, "|"); name = f[2]; gsub(/ /, "", name); r = f[4]; u = f[5]; gsub(/[ ×]/, "", r); gsub(/[ ×]/, "", u)
		if (name == "same-format") sf = r
		if (name == "caps-vs-plain") { cp = r; cpu1 = u }
		if (name == "plain-vs-caps") { pc = r; cpu2 = u }
		if (name == "plain-vs-plain") {
			n++; c = sqrt(cp / pc); cc = sqrt(cpu1 / cpu2); sc += c; scc += cc; ssf += sf
			loss = sf * (1 - c); sl += loss; sll += loss * loss
			rows = rows sprintf("| %d | %.3f× | %.3f× | %.3f× | %.3f× | %.3f× | %.3f× | %.3f |\n", n, sf, cp, pc, r, c, cc, loss)
		}
	}
	END {
		if (!n) exit
		print "## Caps: a capped key of an account in a capped organization against a plain key, one gateway, 32 connections\n"
		print "Medians of the batches side by side: the throughput ratios, then caps / plain in throughput and in CPU.\n"
		print "| round | same format / bare | caps-vs-plain | plain-vs-caps | plain-vs-plain | caps / plain | caps / plain, CPU | caps take off the ratio |"
		print "|--:|--:|--:|--:|--:|--:|--:|--:|"
		printf "%s", rows
		mc = sc / n; ml = sl / n
		sdl = (n > 1) ? sqrt((sll - n * ml * ml) / (n - 1)) : 0
		printf "\nMeans over %d rounds: caps / plain %.3f× (in CPU %.3f×), same format / bare %.3f×; caps take %.3f off the ratio (standard error %.3f).\n",
			n, mc, scc / n, ssf / n, ml, sdl / sqrt(n)
	}' "$out/hotpath.md" | tee -a "$out/hotpath.md"
