/**
 * The MCP test server (mcp-fixtures.ts) answers the SDK's own Client inside workerd: the tool list,
 * a call, progress notifications on the SSE-streamed response, and a changed tool list.
 */
import { describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { McpTestServer, mcpFetch } from "./mcp-fixtures.js";
import { withMcpClient } from "../../src/worker/remote/mcp-connect.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";

async function connect(server: McpTestServer): Promise<Client> {
  const client = new Client(
    { name: "fixture-test", version: "1.0.0" },
    { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(server.url), {
      fetch: (input, init) => server.fetch(new Request(input, init)),
    }),
  );
  return client;
}

describe("MCP test server", () => {
  it("lists, calls with progress, and changes its tools", async () => {
    const server = new McpTestServer("fixture", [
      {
        name: "slow_sum",
        inputSchema: { properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
        annotations: { idempotentHint: true },
        run: async (args, progress) => {
          await progress(1, 2);
          await progress(2, 2);
          return { content: [{ type: "text", text: String(Number(args["a"]) + Number(args["b"])) }] };
        },
      },
    ]);
    const client = await connect(server);
    const listed = await client.listTools();
    expect(listed.tools.map((t) => [t.name, t.annotations?.idempotentHint])).toEqual([["slow_sum", true]]);
    const seen: number[] = [];
    const result = await client.callTool({ name: "slow_sum", arguments: { a: 2, b: 3 } }, undefined, {
      onprogress: (p) => seen.push(p.progress),
      resetTimeoutOnProgress: true,
    });
    expect(result.content).toEqual([{ type: "text", text: "5" }]);
    expect(seen).toEqual([1, 2]);
    expect(server.callsOf("slow_sum")).toHaveLength(1);
    server.setTools([{ name: "other", inputSchema: {} }]);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["other"]);
    await client.close();
  });

  it("withMcpClient connects through the host fetch seam with the endpoint's headers, and closes", async () => {
    const server = new McpTestServer("seam", [{ name: "echo", inputSchema: {} }]);
    setHostSeams({ fetch: mcpFetch(server) });
    try {
      const names = await withMcpClient(
        { url: server.url, headers: { authorization: "Bearer s3cret" } },
        async (client) => (await client.listTools()).tools.map((t) => t.name),
      );
      expect(names).toEqual(["echo"]);
      expect(server.requests.map((r) => r.rpc)).toContain("initialize");
      expect(server.requests.every((r) => r.headers["authorization"] === "Bearer s3cret")).toBe(true);
    } finally {
      setHostSeams({});
    }
  });
});
