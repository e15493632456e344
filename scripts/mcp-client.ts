/**
 * `npm run mcp-client -- --session S [--message TEXT] [--tenant T] [--role R] [--api URL]` connects the MCP
 * SDK's own `Client` to a session's MCP endpoint (`POST {api}/v1/sessions/{S}/mcp`, streamable HTTP) the
 * way a third party (an IDE, another agent platform) would: it lists the session's MCP tools and, with
 * --message, calls `send_message` (waiting up to 10 s for the answer) and prints the result. The bearer
 * token is signed offline with JWT_SECRET (environment or .dev.vars), like `npm run token`.
 * Defaults: --tenant acme, --role client, --api http://127.0.0.1:8787.
 */
import { sign } from "hono/jwt";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { devSecret, flags } from "./dev-secrets.ts";

try {
  const args = flags(process.argv.slice(2));
  const session = args.get("session");
  if (session === undefined) throw new Error("--session is required: the session to talk to");
  const api = args.get("api") ?? "http://127.0.0.1:8787";
  const now = Math.floor(Date.now() / 1000);
  const token = await sign(
    { tenant: args.get("tenant") ?? "acme", role: args.get("role") ?? "client", iat: now, exp: now + 600 },
    devSecret("JWT_SECRET"),
    "HS256",
  );
  const client = new Client({ name: "pico-edge-mcp-client", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${api}/v1/sessions/${encodeURIComponent(session)}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  const { tools } = await client.listTools();
  process.stdout.write(`tools: ${tools.map((t) => t.name).join(", ")}\n`);
  const message = args.get("message");
  if (message !== undefined) {
    const result = await client.callTool({ name: "send_message", arguments: { input: message, wait_seconds: 10 } });
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  }
  await client.close();
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
