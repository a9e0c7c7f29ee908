// A TypeScript-SDK (1.x) client for the gateway's tests: node ts_client.mjs URL TRANSPORT OPTIONS_JSON
//
// Connects over "http" (Streamable HTTP) or "sse", calls agent_query once with the given request
// options, and prints one JSON line: {"ok", "text", "progress", "asked", "error"}.
// OPTIONS_JSON: {"query", "timeout", "resetTimeoutOnProgress", "elicit": "approve"|"decline"|null}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, transportName, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson);
const capabilities = options.elicit ? { elicitation: {} } : {};
const client = new Client({ name: "ts-test-client", version: "1.0.0" }, { capabilities });
const asked = [];
if (options.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params.message);
    return options.elicit === "approve"
      ? { action: "accept", content: { approve: true } }
      : { action: "decline" };
  });
}
const transport =
  transportName === "sse"
    ? new SSEClientTransport(new URL(`${url}/sse`))
    : new StreamableHTTPClientTransport(new URL(`${url}/mcp`));
const progress = [];
const out = { ok: false, text: null, progress, asked, error: null };
try {
  await client.connect(transport);
  const result = await client.callTool(
    { name: "agent_query", arguments: { query: options.query } },
    undefined,
    {
      timeout: options.timeout,
      resetTimeoutOnProgress: options.resetTimeoutOnProgress,
      onprogress: (p) => progress.push(p.message ?? null),
    },
  );
  out.ok = !result.isError;
  out.text = result.content?.[0]?.text ?? null;
} catch (error) {
  out.error = String(error?.message ?? error);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
