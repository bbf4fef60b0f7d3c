// An upstream MCP server for the MCP gateway's conformance run
// (scripts/conformance.sh): @modelcontextprotocol/sdk 1.x's McpServer on
// its Streamable HTTP transport, with sessions (the 2025-11-25 era), no
// authentication, at http://127.0.0.1:<port>/mcp. It listens on a free
// loopback port and prints that port on stdout once it listens; it runs
// until it is killed. Its tools: echo (returns its text) and add (the sum
// of two numbers).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const endpoint = '/mcp';

// newServer is one session's server, with the tools.
function newServer() {
	const server = new McpServer({ name: 'conformance-upstream', version: '1.0.0' });
	server.registerTool(
		'echo',
		{ description: 'Returns the text it is given.', inputSchema: { text: z.string().describe('The text to return.') } },
		async ({ text }) => ({ content: [{ type: 'text', text }] }),
	);
	server.registerTool(
		'add',
		{ description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } },
		async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
	);
	return server;
}

// The sessions' transports by session id.
const transports = new Map();

// fail answers a request the transport is not asked to serve.
function fail(res, status, message) {
	res.writeHead(status, { 'Content-Type': 'application/json' });
	res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

const http = createServer(async (req, res) => {
	if (new URL(req.url, 'http://127.0.0.1').pathname !== endpoint) {
		fail(res, 404, 'not found');
		return;
	}
	try {
		const sid = req.headers['mcp-session-id'];
		let transport = sid === undefined ? undefined : transports.get(sid);
		if (sid !== undefined && transport === undefined) {
			fail(res, 404, 'Session not found');
			return;
		}
		if (transport === undefined) {
			// A request without a session: an initialize opens one; the
			// transport refuses anything else (400).
			transport = new StreamableHTTPServerTransport({
				sessionIdGenerator: () => randomUUID(),
				onsessioninitialized: (id) => transports.set(id, transport),
			});
			transport.onclose = () => {
				if (transport.sessionId !== undefined) transports.delete(transport.sessionId);
			};
			await newServer().connect(transport);
		}
		await transport.handleRequest(req, res);
		// A transport that opened no session served nothing more.
		if (transport.sessionId === undefined) await transport.close();
	} catch (err) {
		console.error('mcp-upstream:', err);
		if (!res.headersSent) fail(res, 500, 'internal error');
	}
});
http.listen(0, '127.0.0.1', () => console.log(http.address().port));
