/**
 * Every session as an MCP server (docs/mcp.md "Every session as an MCP server"): the SDK's own Client,
 * over its streamable-HTTP transport whose fetch goes to the Worker, lists the session's tools, sends a
 * message the echo model answers, polls a result, reads the transcript and answers a client tool from
 * the pending list; a caller of another tenant gets the same 404 as for a session that does not exist.
 */
import { SELF, abortAllDurableObjects } from "cloudflare:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { afterEach, describe, expect, it } from "vitest";
import { BASE, call, json, lastSeq, token, uniqueSession, until } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TOOLS = ["get_result", "get_transcript", "list_pending", "respond_pending", "send_message"];

async function connect(session: string, jwt: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${BASE}/v1/sessions/${session}/mcp`), {
    fetch: (url, init) => SELF.fetch(new Request(url, init)),
    requestInit: { headers: { authorization: `Bearer ${jwt}` } },
  });
  const client = new Client(
    { name: "mcp-serve-test", version: "1" },
    { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
  );
  await client.connect(transport);
  return client;
}

interface ToolOutcome {
  readonly isError: boolean;
  readonly text: string;
  readonly structured: Record<string, unknown>;
}

async function tool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<ToolOutcome> {
  const result = await client.callTool({ name, arguments: args });
  const content = (result.content ?? []) as { type: string; text?: string }[];
  return {
    isError: result.isError === true,
    text: content.map((part) => part.text ?? "").join(""),
    structured: (result.structuredContent ?? {}) as Record<string, unknown>,
  };
}

/** A raw MCP POST (initialize), as a client that is not the SDK would send it. */
async function initialize(session: string, jwt: string): Promise<Response> {
  return call("POST", `/v1/sessions/${session}/mcp`, {
    token: jwt,
    headers: { accept: "application/json, text/event-stream" },
    body: {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    },
  });
}

describe("every session as an MCP server", () => {
  it("A session answers an MCP client", async () => {
    const tenant = "mcp-serve";
    const session = uniqueSession("mcp");
    const operator = await token(tenant, "operator");
    const defined = await call("PUT", "/v1/tools/ask_user", {
      token: operator,
      body: {
        description: "Ask the user",
        parameters: { type: "object", properties: { q: { type: "string" } } },
        handler: { type: "client" },
      },
    });
    expect(defined.status, await defined.clone().text()).toBe(201);
    const jwt = await token(tenant, "client");
    const created = await call("PUT", `/v1/sessions/${session}`, {
      token: jwt,
      body: { model: "echo", selectedTools: ["ask_user"] },
    });
    expect(created.status).toBe(201);

    const client = await connect(session, jwt);
    // The tool list never changes (the same five tools on every request), and initialize says so.
    expect(client.getServerCapabilities()?.tools).toEqual({ listChanged: false });
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name).sort()).toEqual(TOOLS);
    expect(listed.tools.find((t) => t.name === "send_message")?.inputSchema.required).toEqual(["input"]);

    // A message the echo model answers within the wait: the answer text and the input id.
    const sent = await tool(client, "send_message", { input: "hello over MCP", wait_seconds: 10 });
    expect(sent.isError).toBe(false);
    expect(sent.text).toBe("hello over MCP");
    expect(sent.structured).toMatchObject({ status: "done", duplicate: false, answer: "hello over MCP" });
    const inputId = sent.structured["inputId"];
    expect(typeof inputId).toBe("number");
    const again = await tool(client, "get_result", { input_id: inputId });
    expect(again).toMatchObject({ isError: false, text: "hello over MCP", structured: { inputId, status: "done" } });

    // request_key is the Idempotency-Key: a retry is the first acceptance, and writes nothing.
    const keyed = await tool(client, "send_message", { input: "keyed", request_key: "mcp-key-1", wait_seconds: 10 });
    const before = await lastSeq(tenant, session);
    const retried = await tool(client, "send_message", { input: "keyed", request_key: "mcp-key-1", wait_seconds: 0 });
    expect(retried.structured).toMatchObject({ inputId: keyed.structured["inputId"], duplicate: true });
    expect(await lastSeq(tenant, session)).toBe(before);

    // A call of a client tool: not final within the wait, so the input id to poll; then the pending list.
    const asked = await tool(client, "send_message", { input: '/call ask_user {"q":"the answer?"}', wait_seconds: 0 });
    expect(asked.isError).toBe(false);
    expect(asked.structured["answer"]).toBeUndefined();
    const askedId = asked.structured["inputId"];
    expect(asked.text).toContain(`get_result with input_id ${String(askedId)}`);
    const item = await until(
      async () => {
        const items = (await tool(client, "list_pending")).structured["items"] as { id: string; name: string }[];
        return items.find((i) => i.name === "ask_user");
      },
      "the client tool's pending item",
      1_000,
    );
    const pending = await tool(client, "get_result", { input_id: askedId });
    expect(pending.structured["status"]).not.toBe("done");
    const answered = await tool(client, "respond_pending", {
      id: item.id,
      output: "forty-two",
      request_key: "answer-1",
    });
    expect(answered).toMatchObject({ isError: false, structured: { id: item.id, duplicate: false } });
    // The same answer again with a key is a duplicate; without one it is the route's 409.
    expect(
      await tool(client, "respond_pending", { id: item.id, output: "forty-two", request_key: "answer-1" }),
    ).toMatchObject({ isError: false, structured: { duplicate: true } });
    const twice = await tool(client, "respond_pending", { id: item.id, output: "forty-two" });
    expect(twice.isError).toBe(true);
    expect(twice.text).toMatch(/^already_answered: /);
    const done = await until(
      async () => {
        const result = await tool(client, "get_result", { input_id: askedId });
        return result.structured["status"] === "done" ? result : undefined;
      },
      "the answer after the client tool",
      1_000,
    );
    expect(done.text).toBe("forty-two");

    // The transcript, by cursor.
    const transcript = await tool(client, "get_transcript", { limit: 1000 });
    expect(transcript.isError).toBe(false);
    const entries = transcript.structured["items"] as { id: number }[];
    expect(JSON.stringify(entries)).toContain("hello over MCP");
    const lastId = entries[entries.length - 1]?.id ?? 0;
    const rest = await tool(client, "get_transcript", { after: lastId });
    expect(rest.structured["items"]).toEqual([]);

    // A problem from a route is a tool error with the problem's code and detail.
    const missing = await tool(client, "get_result", { input_id: 999_999 });
    expect(missing.isError).toBe(true);
    expect(missing.text).toMatch(/^input_not_found: /);
    expect(missing.structured).toMatchObject({ code: "input_not_found", status: 404 });
    // Arguments outside a tool's schema are a tool error too, and nothing is sent to the session.
    const seqBefore = await lastSeq(tenant, session);
    for (const args of [{}, { input: "" }, { input: "x", wait_seconds: 61 }]) {
      const refused = await tool(client, "send_message", args);
      expect(refused.isError, JSON.stringify(args)).toBe(true);
      expect(refused.text).toContain("Input validation error");
    }
    expect(await lastSeq(tenant, session)).toBe(seqBefore);
    await client.close();

    // Stateless: no session id, no SSE stream (GET 405), nothing to delete (DELETE 405).
    const raw = await initialize(session, jwt);
    expect(raw.status).toBe(200);
    expect(raw.headers.get("content-type")).toContain("application/json");
    expect(raw.headers.get("mcp-session-id")).toBeNull();
    await raw.body?.cancel();
    for (const method of ["GET", "DELETE"]) {
      const response = await call(method, `/v1/sessions/${session}/mcp`, {
        token: jwt,
        headers: { accept: "text/event-stream" },
      });
      expect(response.status, method).toBe(405);
      expect(response.headers.get("allow")).toBe("POST");
      await response.body?.cancel();
    }
  });

  it("An MCP caller from another tenant sees nothing", async () => {
    const session = uniqueSession("mcp-tenant");
    const owner = await token("mcp-owner", "client");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: owner, body: { model: "echo" } })).status).toBe(201);
    const ownerClient = await connect(session, owner);
    expect((await tool(ownerClient, "send_message", { input: "a secret of the owner", wait_seconds: 10 })).text).toBe(
      "a secret of the owner",
    );
    await ownerClient.close();
    const seq = await lastSeq("mcp-owner", session);

    // Another tenant: the SDK client cannot even initialize.
    const intruder = await token("mcp-intruder", "operator");
    await expect(connect(session, intruder)).rejects.toThrow(/404/);
    // Its raw requests get exactly what a tenant gets for a session nobody created under that name.
    const foreign = await initialize(session, intruder);
    const unknown = await initialize(session, await token("mcp-nobody", "operator"));
    expect(foreign.status).toBe(404);
    const foreignBody = await foreign.text();
    expect(foreignBody).toBe(await unknown.text());
    expect(JSON.parse(foreignBody)).toMatchObject({
      code: "session_not_found",
      instance: `/v1/sessions/${session}/mcp`,
    });
    expect(foreignBody).not.toContain("mcp-owner");
    expect(foreignBody).not.toContain("secret");
    // A tool call without initialize (the server is stateless) is refused the same way, and writes nothing.
    const sent = await call("POST", `/v1/sessions/${session}/mcp`, {
      token: intruder,
      headers: { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
      body: { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "get_transcript", arguments: {} } },
    });
    expect(sent.status).toBe(404);
    expect(JSON.stringify(await json(sent))).not.toContain("secret");
    expect(await lastSeq("mcp-owner", session)).toBe(seq);
    expect(await lastSeq("mcp-intruder", session)).toBe(0);
  });
});
