/**
 * End-to-end check for CI, the README's MCP walk (docs/mcp.md), over `wrangler dev --local` (what
 * `npm start` runs, with the deploy bundle's AJV stub in place). Both ways:
 * - a remote MCP server (scripts/mcp-endpoint.ts, built with the SDK's server classes, bearer-protected)
 *   registered by an operator with its header as a sealed secret; a session selects
 *   `demo__search_issues`, the echo model calls it, and the tool's answer comes back in the turn;
 * - the MCP SDK's own Client, over real HTTP, the way a third party connects: it lists a session's tools,
 *   sends a message the echo model answers, and a token of another tenant cannot even initialize.
 * Offline; prints one line and exits non-zero on failure. Run by Node directly (type stripping).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { sign } from "hono/jwt";
import { signalGroup, startDev } from "./drill-kit.ts";
import { startMcpEndpoint } from "./mcp-endpoint.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const JWT_SECRET = "e2e-only-jwt-secret-0123456789abcdef";
const SESSION = "e2e-mcp";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.listen(0, "127.0.0.1", () => {
      const port = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(port));
    });
  });
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

async function token(tenant: string, role = "client"): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return sign({ tenant, role, iat: now, exp: now + 600 }, JWT_SECRET, "HS256");
}

function mcpClient(base: string, jwt: string): { client: Client; transport: StreamableHTTPClientTransport } {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/v1/sessions/${SESSION}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${jwt}` } },
  });
  return { client: new Client({ name: "pico-e2e", version: "1" }), transport };
}

const dir = mkdtempSync(join(tmpdir(), "pico-e2e-mcp-"));
const envFile = join(dir, "operator.env");
writeFileSync(
  envFile,
  [
    `JWT_SECRET=${JWT_SECRET}`,
    "WEBHOOK_MASTER_SECRET=e2e-only-webhook-master-secret",
    "SECRETS_SEALING_KEY=e2e-only-secrets-sealing-key-0123456789",
    "SUBJECT_HASH_KEY=e2e-only-subject-hash-key-0123456789",
    "DEFAULT_MODEL=echo",
    "",
  ].join("\n"),
);
const remote = await startMcpEndpoint({
  port: await freePort(),
  token: "e2e-demo-secret",
  stepMs: 10,
  log: () => undefined,
});
const port = await freePort();
const inspector = await freePort();
// Its own state directory, so it runs beside the other CI stages (SQLite locks a shared .wrangler/state).
const dev = startDev({ root, port, inspector, persist: join(dir, "state"), envFile, env: "dev" });

async function waitFor(url: string, deadline: number): Promise<void> {
  while (Date.now() < deadline && !dev.exited) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error(`${url} did not come up`);
}

let failed: unknown;
try {
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`${base}/health`, Date.now() + 120_000);
  const owner = await token("e2e-mcp");
  const created = await fetch(`${base}/v1/sessions/${SESSION}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "echo/echo" }),
  });
  check(created.status === 201, `PUT session: ${created.status} ${await created.text()}`);

  // A remote MCP server as a tool source: registered (its bearer header sealed), selected, called by the model.
  const operator = await token("e2e-mcp", "operator");
  const registered = await fetch(`${base}/v1/mcp-servers/demo`, {
    method: "PUT",
    headers: { authorization: `Bearer ${operator}`, "content-type": "application/json" },
    body: JSON.stringify({ url: remote.url, headers: { authorization: "Bearer e2e-demo-secret" } }),
  });
  const registration = await registered.text();
  check(
    registered.status === 201 && !registration.includes("e2e-demo-secret"),
    `PUT mcp server: ${registered.status} ${registration}`,
  );
  const tooled = await fetch(`${base}/v1/sessions/e2e-mcp-tools`, {
    method: "PUT",
    headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "echo/echo", selectedTools: ["demo__search_issues"] }),
  });
  check(tooled.status === 201, `PUT session with demo__search_issues: ${tooled.status} ${await tooled.text()}`);
  const asked = await fetch(`${base}/v1/sessions/e2e-mcp-tools/conversations/root/inputs?wait=30`, {
    method: "POST",
    headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
    body: JSON.stringify({ input: '/call demo__search_issues {"query":"login"}' }),
  });
  const answer = await asked.text();
  check(asked.status === 201 && answer.includes('"status":"done"'), `the tool call's input: ${asked.status} ${answer}`);
  const entries = await (
    await fetch(`${base}/v1/sessions/e2e-mcp-tools/conversations/root/entries?limit=50`, {
      headers: { authorization: `Bearer ${owner}` },
    })
  ).text();
  check(
    entries.includes("Crash when login is empty"),
    `the MCP tool's result is not in the transcript: ${entries.slice(0, 2000)}`,
  );
  check(
    remote.calls.length === 1 && remote.calls[0]?.tool === "search_issues",
    `the MCP server saw ${JSON.stringify(remote.calls)}`,
  );

  const { client, transport } = mcpClient(base, owner);
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  check(
    JSON.stringify(tools) ===
      JSON.stringify(["get_result", "get_transcript", "list_pending", "respond_pending", "send_message"]),
    `tools/list: ${JSON.stringify(tools)}`,
  );
  const sent = await client.callTool({
    name: "send_message",
    arguments: { input: "hello over MCP", wait_seconds: 30 },
  });
  const text = ((sent.content ?? []) as { text?: string }[]).map((part) => part.text ?? "").join("");
  check(sent.isError !== true && text === "hello over MCP", `send_message: ${JSON.stringify(sent)}`);
  const inputId = (sent.structuredContent as { inputId?: number } | undefined)?.inputId;
  const polled = await client.callTool({ name: "get_result", arguments: { input_id: inputId } });
  check(
    (polled.structuredContent as { status?: string } | undefined)?.status === "done",
    `get_result: ${JSON.stringify(polled)}`,
  );
  await client.close();

  const other = mcpClient(base, await token("e2e-mcp-other"));
  const refused = await other.client.connect(other.transport).then(
    () => "connected",
    (error: unknown) => String(error),
  );
  check(refused.includes("404"), `another tenant's client: ${refused}`);
  console.log(
    "e2e MCP: ok (a registered MCP server's tool called by the echo model once; the SDK Client over wrangler dev: tools/list, send_message answered by echo, get_result; another tenant 404)",
  );
} catch (error) {
  failed = error;
  console.log(`e2e MCP: FAILED: ${error instanceof Error ? error.message : String(error)}`);
  console.log(dev.log.split("\n").slice(-30).join("\n"));
} finally {
  signalGroup(dev, "SIGTERM");
  rmSync(dir, { recursive: true, force: true });
  await remote.close();
}
process.exit(failed === undefined ? 0 : 1);
