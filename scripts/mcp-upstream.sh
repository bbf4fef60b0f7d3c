# Sourced by scripts/conformance.sh and scripts/mcp-clients.sh: the MCP
# gateway's upstream server for their runs, scripts/mcp-upstream.mjs (the
# TypeScript SDK's server, tools echo and add).

# The packages the server imports, pinned: the SDK is the newest 1.x, with
# the zod it takes its tools' schemas in. A script installs them into its
# cache beside its other packages.
mcp_upstream_packages=(@modelcontextprotocol/sdk@1.32.2 zod@4.6.7)

# mcp_upstream_start <cache dir> <work dir> <name>: copies the server into
# <cache dir> (it imports the packages from the node_modules there), starts
# it on a free loopback port, waits until it prints that port, sets
# upstream_pid and exports GW_MCP_SERVERS=<name>=http://127.0.0.1:<port>/mcp.
# Its output goes to <work dir>/upstream.port and upstream.log. The caller
# kills upstream_pid on exit. Exits 1 when the server does not start.
mcp_upstream_start() {
	local dir=$1 work=$2 name=$3
	cp scripts/mcp-upstream.mjs "$dir/"
	node "$dir/mcp-upstream.mjs" >"$work/upstream.port" 2>"$work/upstream.log" &
	upstream_pid=$!
	for _ in $(seq 1 100); do
		[[ -s "$work/upstream.port" ]] && break
		kill -0 "$upstream_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [[ ! -s "$work/upstream.port" ]]; then
		echo "the upstream MCP server did not start" >&2
		tail -20 "$work/upstream.log" >&2
		exit 1
	fi
	export GW_MCP_SERVERS="$name=http://127.0.0.1:$(head -1 "$work/upstream.port")/mcp"
}
