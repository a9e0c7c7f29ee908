// The TypeScript SDK's (1.x) OAuth client against the gateway: node ts_oauth_client.mjs URL QUERY
//
// Runs the SDK's whole flow over Streamable HTTP: the gateway's 401 names its resource metadata,
// the SDK reads it and the authorization server's metadata, registers itself (dynamic client
// registration), and sends the browser to the authorization URL with PKCE. Here "the browser"
// follows that URL without a person: the test's authorization server approves at once and
// redirects to our redirect URI, whose code and state we take; the SDK then exchanges the code
// for a token and we connect again and call agent_query once.
// Prints one JSON line: {"ok", "text", "unauthorized", "token", "error"}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, query] = process.argv.slice(2);
const REDIRECT = "http://127.0.0.1:9/callback"; // never reached: we read the redirect ourselves
const out = { ok: false, text: null, unauthorized: false, token: null, error: null };

let client = undefined;
let saved = { state: crypto.randomUUID() };
let received = null;
const provider = {
  get redirectUrl() {
    return REDIRECT;
  },
  get clientMetadata() {
    return {
      client_name: "ts-oauth-test-client",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state: () => saved.state,
  clientInformation: () => client,
  saveClientInformation: (info) => {
    client = info;
  },
  tokens: () => saved.tokens,
  saveTokens: (tokens) => {
    saved.tokens = tokens;
  },
  saveCodeVerifier: (verifier) => {
    saved.verifier = verifier;
  },
  codeVerifier: () => saved.verifier,
  redirectToAuthorization: async (authorizationUrl) => {
    const answer = await fetch(authorizationUrl, { redirect: "manual" });
    const location = new URL(answer.headers.get("location"));
    if (`${location.origin}${location.pathname}` !== REDIRECT) throw new Error(`redirected to ${location}`);
    if (location.searchParams.get("state") !== saved.state) throw new Error("the state came back changed");
    received = location.searchParams.get("code");
  },
};

const endpoint = new URL(`${url}/mcp`);
try {
  const first = new StreamableHTTPClientTransport(endpoint, { authProvider: provider });
  try {
    await new Client({ name: "ts-oauth-test-client", version: "1.0.0" }).connect(first);
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
    out.unauthorized = true;
  }
  if (!received) throw new Error("the flow did not reach the authorization endpoint");
  await first.finishAuth(received);
  out.token = saved.tokens?.access_token ?? null;
  const mcp = new Client({ name: "ts-oauth-test-client", version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(endpoint, { authProvider: provider }));
  const result = await mcp.callTool({ name: "agent_query", arguments: { query } });
  out.ok = !result.isError;
  out.text = result.content?.[0]?.text ?? null;
  await mcp.close().catch(() => {});
} catch (error) {
  out.error = String(error?.stack ?? error);
}
console.log(JSON.stringify(out));
