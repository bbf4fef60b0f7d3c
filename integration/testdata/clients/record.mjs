// record.mjs records what messages-style client libraries send: each library
// is pointed at a local server that answers like the messages API and keeps
// every request (method, path, headers without the key, body). The
// recordings are the fixtures the integration tests replay through the
// gateway (chat_betas_test.go).
//
// Not run by the tests. To record again, outside the repository:
//
//	mkdir /tmp/betas && cd /tmp/betas && npm init -y
//	npm install ai @ai-sdk/anthropic @anthropic-ai/sdk @langchain/anthropic @langchain/core zod
//	node <repo>/integration/testdata/clients/record.mjs <repo>/integration/testdata/clients
//
// The libraries are loaded from the current directory's node_modules.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.cwd(), "record.cjs"));
const load = (name) => require(name);
const version = (name) => JSON.parse(fs.readFileSync(path.join(process.cwd(), "node_modules", name, "package.json"), "utf8")).version;

const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: node record.mjs <output directory>");
  process.exit(2);
}

// The model every library is asked for: a messages-style id the gateway
// serves, for which the libraries turn on their model-dependent features.
const MODEL = "claude-sonnet-4-5";
const KEY = "sk-recorded-key";
const PROMPT = "What is the weather in Paris?";
const WEATHER = { city: "Paris", temperature_c: 21 };

// Headers that name the key or the connection, left out of a recording.
const DROP = new Set(["x-api-key", "authorization", "host", "content-length", "connection"]);

let current = null; // the recording under way: { library, call, requests }

function answer(req, body, res) {
  const stream = body && body.stream === true;
  const tools = Array.isArray(body?.tools) ? body.tools : [];
  const structured = body?.output_config?.format || body?.output_format;
  let content;
  if (req.url.startsWith("/v1/messages/count_tokens")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ input_tokens: 42 }));
    return;
  }
  if (structured) {
    content = [{ type: "text", text: JSON.stringify(WEATHER) }];
  } else if (tools.length > 0) {
    const t = tools[0];
    const input = t.name === "get_weather" ? { city: "Paris" } : WEATHER;
    content = [{ type: "tool_use", id: "toolu_01RecordedCall0000000000", name: t.name, input }];
  } else {
    content = [{ type: "text", text: "Sunny, 21 °C." }];
  }
  const stop = content[0].type === "tool_use" ? "tool_use" : "end_turn";
  const usage = { input_tokens: 40, output_tokens: 12 };
  const message = { id: "msg_01Recorded000000000000", type: "message", role: "assistant", model: body?.model ?? MODEL, content, stop_reason: stop, stop_sequence: null, usage };
  if (!stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(message));
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const send = (name, data) => res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
  send("message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 40, output_tokens: 1 } } });
  content.forEach((block, index) => {
    if (block.type === "text") {
      send("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
      send("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: block.text } });
    } else {
      send("content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } });
      send("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } });
    }
    send("content_block_stop", { type: "content_block_stop", index });
  });
  send("message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 12 } });
  send("message_stop", { type: "message_stop" });
  res.end();
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const text = Buffer.concat(chunks).toString("utf8");
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (!DROP.has(k)) headers[k] = v;
    }
    current?.requests.push({ method: req.method, path: req.url, headers, body });
    answer(req, body, res);
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${server.address().port}`;

const recordings = {}; // file name → { library, version, calls: [...] }

async function record(file, library, call, fn) {
  current = { call, requests: [] };
  try {
    await fn();
  } catch (err) {
    current.error = String(err?.message ?? err);
  }
  const entry = recordings[file] ?? (recordings[file] = { library, version: version(library), calls: [] });
  entry.calls.push({ call, ...(current.error ? { client_error: current.error } : {}), requests: current.requests });
  current = null;
}

const { z } = load("zod");
const weatherSchema = z.object({ city: z.string(), temperature_c: z.number() });
const cityInput = z.object({ city: z.string().describe("The city") });

// Vercel AI SDK with its Anthropic provider.
{
  const { generateText, streamText, tool, Output } = load("ai");
  const { createAnthropic } = load("@ai-sdk/anthropic");
  const anthropic = createAnthropic({ baseURL: `${base}/v1`, apiKey: KEY });
  const tools = { get_weather: tool({ description: "Current weather for a city.", inputSchema: cityInput }) };
  const file = "ai-sdk-anthropic.json";
  const lib = "@ai-sdk/anthropic";
  await record(file, lib, "tool call", () => generateText({ model: anthropic(MODEL), tools, prompt: PROMPT, maxRetries: 0 }));
  await record(file, lib, "tool call, streaming", async () => {
    const r = streamText({ model: anthropic(MODEL), tools, prompt: PROMPT, maxRetries: 0 });
    for await (const _ of r.fullStream);
  });
  await record(file, lib, "structured output", () =>
    generateText({ model: anthropic(MODEL), output: Output.object({ schema: weatherSchema }), prompt: PROMPT, maxRetries: 0 }));
  await record(file, lib, "structured output, streaming", async () => {
    const r = streamText({ model: anthropic(MODEL), output: Output.object({ schema: weatherSchema }), prompt: PROMPT, maxRetries: 0 });
    for await (const _ of r.fullStream);
  });
}

// The official TypeScript SDK.
{
  const Anthropic = load("@anthropic-ai/sdk").default ?? load("@anthropic-ai/sdk");
  const client = new Anthropic({ baseURL: base, apiKey: KEY, maxRetries: 0 });
  const tools = [{ name: "get_weather", description: "Current weather for a city.", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
  const messages = [{ role: "user", content: PROMPT }];
  const schema = { type: "object", properties: { city: { type: "string" }, temperature_c: { type: "number" } }, required: ["city", "temperature_c"], additionalProperties: false };
  const file = "anthropic-sdk-typescript.json";
  const lib = "@anthropic-ai/sdk";
  await record(file, lib, "tool call", () => client.messages.create({ model: MODEL, max_tokens: 1024, tools, messages }));
  await record(file, lib, "tool call, streaming", () => client.messages.stream({ model: MODEL, max_tokens: 1024, tools, messages }).finalMessage());
  await record(file, lib, "structured output", () =>
    client.messages.parse({ model: MODEL, max_tokens: 1024, messages, output_config: { format: { type: "json_schema", schema } } }));
  await record(file, lib, "structured output, streaming", () =>
    client.messages.stream({ model: MODEL, max_tokens: 1024, messages, output_config: { format: { type: "json_schema", schema } } }).finalMessage());
  await record(file, lib, "beta structured output", () =>
    client.beta.messages.parse({ model: MODEL, max_tokens: 1024, messages, output_format: { type: "json_schema", schema } }));
  await record(file, lib, "beta structured output, streaming", () =>
    client.beta.messages.stream({ model: MODEL, max_tokens: 1024, messages, output_format: { type: "json_schema", schema } }).finalMessage());
  await record(file, lib, "beta count tokens", () => client.beta.messages.countTokens({ model: MODEL, tools, messages }));
}

// LangChain.
{
  const { ChatAnthropic } = load("@langchain/anthropic");
  const { tool } = load("@langchain/core/tools");
  const getWeather = tool(async () => "21", { name: "get_weather", description: "Current weather for a city.", schema: cityInput });
  const make = (streaming) => new ChatAnthropic({ model: MODEL, apiKey: KEY, anthropicApiUrl: base, maxRetries: 0, streaming });
  const file = "langchain-anthropic.json";
  const lib = "@langchain/anthropic";
  await record(file, lib, "tool call", () => make(false).bindTools([getWeather]).invoke(PROMPT));
  await record(file, lib, "tool call, streaming", async () => {
    for await (const _ of await make(true).bindTools([getWeather]).stream(PROMPT));
  });
  await record(file, lib, "structured output", () => make(false).withStructuredOutput(weatherSchema).invoke(PROMPT));
  await record(file, lib, "structured output, json schema", () =>
    make(false).withStructuredOutput(weatherSchema, { method: "jsonSchema" }).invoke(PROMPT));
  // A streaming model streams under invoke too.
  await record(file, lib, "structured output, json schema, streaming", () =>
    make(true).withStructuredOutput(weatherSchema, { method: "jsonSchema" }).invoke(PROMPT));
}

server.close();
fs.mkdirSync(outDir, { recursive: true });
for (const [file, entry] of Object.entries(recordings)) {
  fs.writeFileSync(path.join(outDir, file), JSON.stringify(entry, null, 2) + "\n");
  for (const c of entry.calls) {
    const betas = c.requests.map((r) => r.headers["anthropic-beta"] ?? "-").join(" | ");
    console.log(`${entry.library}@${entry.version}: ${c.call}: ${c.requests.length} request(s), betas ${betas}${c.client_error ? ", client error: " + c.client_error : ""}`);
  }
}
