// Connects the TypeScript MCP clients to the MCP servers of a running
// gateway and checks what each sees: @modelcontextprotocol/sdk 1.x in the
// sessions era (2025-11-25) and @modelcontextprotocol/client 2.x in the
// stateless era (2026-07-28), pinned and negotiated ('auto'), each at the
// routing server (/mcp), the tools server (/mcp-tools/) and the MCP
// gateway (/mcp-gateway/ and /mcp-gateway/<server>/). Run by
// scripts/mcp-clients.sh, which installs the clients beside a copy of this
// file, starts the MCP gateway's upstream server (scripts/mcp-upstream.mjs)
// and the gateway; it passes MCP_BASE (the gateway's base URL), MCP_KEY (a
// key of a paid, cleared account), MCP_CADDYFILE (the gateway's Caddyfile,
// for the models flux_models lists) and MCP_UPSTREAM (the upstream
// server's name in the gateway).
// Prints a line per client and server, then "mcp-clients: N passed,
// N failed"; exits 1 when a check failed.
import { readFileSync } from 'node:fs';

import { Client as SdkClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as SdkTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';

const base = process.env.MCP_BASE;
const key = process.env.MCP_KEY;
const upstream = process.env.MCP_UPSTREAM;
const caddyfile = readFileSync(process.env.MCP_CADDYFILE, 'utf8');

const sessionsEra = '2025-11-25';
const statelessEra = '2026-07-28';

// What each server lists to a paid, cleared account (no connected apps).
const servers = {
	'/mcp': { name: 'gw-routing', tools: ['flux_route', 'flux_explain', 'flux_models'], call: checkRouting },
	'/mcp-tools/': {
		name: 'gw-tools',
		tools: ['list_capabilities', 'web_fetch', 'web_search', 'image_generate', 'transcribe', 'speak'],
		call: checkTools,
	},
	// The upstream server's tools (scripts/mcp-upstream.mjs), in its order,
	// named <server>__<tool> at /mcp-gateway/.
	'/mcp-gateway/': {
		name: 'gw-mcp-gateway',
		tools: [`${upstream}__echo`, `${upstream}__add`],
		call: (c, era, tools) => checkGateway(c, era, `${upstream}__`, tools),
	},
	[`/mcp-gateway/${upstream}/`]: {
		name: `gw-mcp-gateway/${upstream}`,
		tools: ['echo', 'add'],
		call: (c, era, tools) => checkGateway(c, era, '', tools),
	},
};
// gatewayPrice is what a call of an upstream tool costs: Caddyfile.example's
// GW_MCP_PRICE by default, in USD as the receipt writes it.
const gatewayPrice = '0.001';

// flux_models lists the lanes, then every chat model of the Caddyfile as
// gw-pinned-<model>, in its order, but for the models of the clouds'
// providers (left out: no credentials here).
const clouds = new Set(['gemini', 'vertex', 'bedrock']);
const modelIDs = [
	'gw-auto', 'gw-fast', 'gw-standard', 'gw-reasoning',
	...[...caddyfile.matchAll(/^\s*model (\S+) \{\n\s*provider (\S+)$/gm)]
		.filter((m) => !clouds.has(m[2]))
		.map((m) => `gw-pinned-${m[1]}`),
];
// list_capabilities: the abilities of the account's plan.
const abilities = ['fetch', 'images', 'search', 'speech', 'transcription'];

const sdkVersion = JSON.parse(readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url))).version;
const client2Version = JSON.parse(readFileSync(new URL('./node_modules/@modelcontextprotocol/client/package.json', import.meta.url))).version;

const clients = [
	{ label: `@modelcontextprotocol/sdk ${sdkVersion}`, era: sessionsEra, connect: connectSdk },
	{ label: `@modelcontextprotocol/client ${client2Version} pin`, era: statelessEra,
		connect: (url, fetch) => connect2(url, fetch, { pin: statelessEra }) },
	{ label: `@modelcontextprotocol/client ${client2Version} auto`, era: statelessEra,
		connect: (url, fetch) => connect2(url, fetch, 'auto') },
];

class Mismatch extends Error {}

function expect(cond, what, got) {
	if (!cond) throw new Mismatch(`${what}; got ${JSON.stringify(got)}`);
}

function expectEqual(got, want, what) {
	expect(JSON.stringify(got) === JSON.stringify(want), `${what}: want ${JSON.stringify(want)}`, got);
}

// recorder returns a fetch that records each exchange: the HTTP method,
// the request's headers and JSON-RPC method, the answer's status and
// Mcp-Session-Id.
function recorder() {
	const log = [];
	const fetch = async (url, init = {}) => {
		const headers = new Headers(init.headers);
		let method;
		if (typeof init.body === 'string') {
			try { method = JSON.parse(init.body).method; } catch { /* not JSON: recorded without a method */ }
		}
		const res = await globalThis.fetch(url, init);
		log.push({ http: init.method || 'GET', headers, method, status: res.status, session: res.headers.get('mcp-session-id') });
		return res;
	};
	return { log, fetch };
}

const auth = { headers: { Authorization: `Bearer ${key}` } };
const clientInfo = { name: 'caddy-gw-mcp-clients', version: '1.0.0' };

async function connectSdk(url, fetch) {
	const transport = new SdkTransport(new URL(url), { requestInit: auth, fetch });
	const client = new SdkClient(clientInfo);
	await client.connect(transport);
	return { client, transport };
}

async function connect2(url, fetch, mode) {
	const transport = new Transport2(new URL(url), { requestInit: auth, fetch });
	const client = new Client2(clientInfo, { versionNegotiation: { mode } });
	await client.connect(transport);
	return { client, transport };
}

// checkSessionsEra: initialize, never server/discover; the routing server
// issues a session (48 hex digits), the tools server none.
function checkSessionsEra(c, path, log) {
	const posts = log.filter((e) => e.http === 'POST');
	expectEqual(posts[0]?.method, 'initialize', 'first request');
	expect(!posts.some((e) => e.method === 'server/discover'), 'server/discover sent in the sessions era', posts.map((e) => e.method));
	expectEqual(c.transport.protocolVersion, sessionsEra, 'negotiated protocol version');
	if (path === '/mcp') {
		expect(/^[0-9a-f]{48}$/.test(c.transport.sessionId || ''), 'Mcp-Session-Id of 48 hex digits', c.transport.sessionId);
	} else {
		expectEqual(c.transport.sessionId, undefined, 'Mcp-Session-Id of the tools server');
	}
}

// checkStatelessEra: server/discover first, no initialize, every POST at
// 2026-07-28 with Mcp-Method, no session either way.
function checkStatelessEra(c, log) {
	const posts = log.filter((e) => e.http === 'POST');
	expectEqual(posts[0]?.headers.get('mcp-method'), 'server/discover', 'first request\'s Mcp-Method');
	expect(!posts.some((e) => e.method === 'initialize'), 'initialize sent in the stateless era', posts.map((e) => e.method));
	for (const e of posts) {
		expectEqual(e.headers.get('mcp-protocol-version'), statelessEra, `${e.method}'s Mcp-Protocol-Version`);
		expectEqual(e.headers.get('mcp-method'), e.method, `${e.method}'s Mcp-Method`);
	}
	expect(!log.some((e) => e.session || e.headers.has('mcp-session-id')), 'no Mcp-Session-Id in the stateless era',
		log.filter((e) => e.session || e.headers.has('mcp-session-id')).map((e) => e.method));
	expectEqual(c.client.getProtocolEra(), 'modern', 'protocol era');
	expectEqual(c.client.getNegotiatedProtocolVersion(), statelessEra, 'negotiated protocol version');
	expectEqual(c.transport.sessionId, undefined, 'session id');
}

// structured checks a tool result: not an error, one text block holding
// the structured content as JSON; returns the structured content.
function structured(res, tool) {
	expectEqual(res.isError, false, `${tool} isError`);
	expectEqual(res.content?.length, 1, `${tool} content blocks`);
	expectEqual(res.content[0].type, 'text', `${tool} content type`);
	expectEqual(JSON.parse(res.content[0].text), res.structuredContent, `${tool} text = structuredContent`);
	return res.structuredContent;
}

async function checkRouting(c, era) {
	const models = structured(await c.client.callTool({ name: 'flux_models', arguments: {} }), 'flux_models');
	expectEqual(models.tier, 'all', 'flux_models tier');
	expectEqual(models.models.map((m) => m.id), modelIDs, 'flux_models ids');
	for (const m of models.models) {
		const pinned = m.id.startsWith('gw-pinned-');
		expectEqual(m.tier, pinned ? 'pinned' : m.id.slice('gw-'.length), `${m.id} tier`);
		if (pinned) {
			expect(['openai', 'anthropic'].includes(m.provider), `${m.id} provider`, m.provider);
			expect(/^\d+\.\d\d$/.test(m.input_usd_per_m) && /^\d+\.\d\d$/.test(m.output_usd_per_m), `${m.id} prices as USD strings`, m);
		}
	}
	// An unknown decision: a tool result with isError in the stateless era,
	// -32602 in the sessions era.
	const args = { name: 'flux_explain', arguments: { decision_id: 'dec_unknown' } };
	if (era === statelessEra) {
		const res = await c.client.callTool(args);
		expectEqual(res.isError, true, 'flux_explain of an unknown decision: isError');
		expectEqual(res.structuredContent,
			{ capability: 'flux_explain', error: 'invalid_request', message: 'unknown decision_id', retryable: false },
			'flux_explain of an unknown decision');
	} else {
		let err;
		try { await c.client.callTool(args); } catch (e) { err = e; }
		expectEqual(err?.code, -32602, 'flux_explain of an unknown decision: JSON-RPC code');
	}
}

async function checkTools(c) {
	const caps = structured(await c.client.callTool({ name: 'list_capabilities', arguments: {} }), 'list_capabilities');
	expectEqual(caps.tier, 'paid', 'list_capabilities tier');
	expectEqual(caps.premium_unlocked, true, 'list_capabilities premium_unlocked');
	expectEqual(Object.keys(caps.enabled).sort(), abilities, 'list_capabilities abilities');
	for (const [name, a] of Object.entries(caps.enabled)) {
		expectEqual(Object.keys(a).sort(), ['est_microcents', 'premium'], `${name} fields`);
		expect(Number.isInteger(a.est_microcents) && a.est_microcents > 0, `${name} est_microcents a positive integer`, a.est_microcents);
		expectEqual(a.premium, true, `${name} premium`);
	}
}

// receipt checks a gateway tool result: not an error (isError false, or
// absent as the server sent it), one text block, and _meta carrying the
// receipt (a request id and the price); returns the text and the request
// id.
function receipt(res, tool) {
	expectEqual(res.isError ?? false, false, `${tool} isError`);
	expectEqual(res.content?.map((b) => b.type), ['text'], `${tool} content types`);
	const meta = res._meta ?? {};
	expect(/^req-\S+$/.test(meta['gw/request_id'] ?? ''), `${tool} _meta gw/request_id starting req-`, meta);
	expectEqual(meta['gw/cost_usd'], gatewayPrice, `${tool} _meta gw/cost_usd`);
	return { text: res.content[0].text, id: meta['gw/request_id'] };
}

// checkGateway: each tool's description ends with its price; echo returns
// its text and add the sum, each with a receipt of its own.
async function checkGateway(c, era, prefix, tools) {
	for (const t of tools) {
		expect(t.description?.endsWith(`\n\nPrice: ${gatewayPrice} USD per successful call.`), `${t.name} description ending with its price`, t.description);
	}
	const text = `mcp-clients ${era} ${prefix || 'own names'}`;
	const echo = receipt(await c.client.callTool({ name: `${prefix}echo`, arguments: { text } }), `${prefix}echo`);
	expectEqual(echo.text, text, `${prefix}echo text`);
	const add = receipt(await c.client.callTool({ name: `${prefix}add`, arguments: { a: 2, b: 40 } }), `${prefix}add`);
	expectEqual(add.text, '42', `${prefix}add text`);
	expect(add.id !== echo.id, 'a request id of each call', [echo.id, add.id]);
}

async function run(cl, path) {
	const srv = servers[path];
	const { log, fetch } = recorder();
	const c = await cl.connect(base + path, fetch);
	try {
		if (cl.era === sessionsEra) checkSessionsEra(c, path, log);
		else checkStatelessEra(c, log);
		expectEqual(c.client.getServerVersion()?.name, srv.name, 'server name');
		const { tools } = await c.client.listTools();
		expectEqual(tools.map((t) => t.name), srv.tools, 'tools/list names');
		await srv.call(c, cl.era, tools);
		if (cl.era === statelessEra) checkStatelessEra(c, log);
		if (c.transport.sessionId) {
			// The sessions era's end: DELETE with the session, 204.
			await c.transport.terminateSession();
			expectEqual(log.at(-1)?.http, 'DELETE', 'last request');
			expectEqual(log.at(-1)?.status, 204, 'DELETE status');
		}
	} finally {
		await c.client.close();
	}
	return `${log.length} requests`;
}

let passed = 0;
let failed = 0;
for (const cl of clients) {
	for (const path of Object.keys(servers)) {
		try {
			const note = await run(cl, path);
			console.log(`${cl.label} ${cl.era} ${path}: ok (${note})`);
			passed++;
		} catch (e) {
			console.log(`${cl.label} ${cl.era} ${path}: FAIL ${e instanceof Mismatch ? e.message : String(e)}`);
			failed++;
		}
	}
}
console.log(`mcp-clients: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
