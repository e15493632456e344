/**
 * Calling MCP tools (docs/mcp.md "Calling MCP tools"): a tenant's catalog offers a real MCP server's
 * tools (`McpTestServer`, built with the SDK's server classes, on the host fetch seam) as
 * `{server}__{tool}`; the echo model calls one (`/call NAME {json}`), and the call runs as a background
 * `remote_call` task with an `mcp` target: a fresh MCP client per attempt (initialize, then
 * `tools/call`), its deadline on the host clock, reset by progress and capped.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { acceptInput } from "../../src/kinds/placement.js";
import type { RemoteCallState } from "../../src/kinds/remote-call-state.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { setHostSeams } from "../../src/worker/host-config.js";
import type { SessionObject } from "../../src/worker/session-object.js";
import { uniqueSession, until } from "./http-fixtures.js";
import { createSession, inputDone, offerMcpTool, send, sessionStub } from "./mcp-call-fixtures.js";
import { McpTestServer, mcpFetch, type McpTestTool } from "./mcp-fixtures.js";
import { call as background, harnessOf, resetSeams } from "./session-fixtures.js";
import { entriesOf, tasksOf, textOf } from "./tool-fixtures.js";

const TENANT = "mcp-calls";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const LOOKUP: McpTestTool = {
  name: "lookup",
  description: "Looks up a record",
  inputSchema: { properties: { id: { type: "integer" } }, required: ["id"], additionalProperties: false },
  run: (args) => ({ content: [{ type: "text", text: `record ${String(args["id"])}` }] }),
};

/**
 * Accept `input` in the session's root conversation and kill the object right after that commit is
 * durable (no later commit of the instance reaches storage): only the alarm runs its turn.
 */
async function acceptThenEvict(stub: DurableObjectStub<SessionObject>, input: string, key: string): Promise<void> {
  const evicted = runInDurableObject(stub, async (instance: SessionObject, state) => {
    const h = harnessOf(instance);
    const storage = h.storage;
    const commit = storage.commit.bind(storage);
    let killed = false;
    storage.commit = (batch) => (killed ? new Promise<never>(() => undefined) : commit(batch));
    h.onCommit(() => {
      if (killed) return;
      killed = true;
      void state.storage.sync().then(() => state.abort("evicted"));
    });
    await h.commitBound(background, { conversationId: h.rootId }, async (b) => {
      await acceptInput(b, h.rootId, { input, requestId: key }, defaultTurnOptions, h.now());
    });
  });
  // The abort may land before the callback returns: the instance is gone either way.
  await evicted.catch((error: unknown) => {
    if (!(error instanceof Error && error.message.includes("evicted"))) throw error;
  });
}

describe("MCP calls", () => {
  it("MCP tools are callable right after a wake without a reconnect", async () => {
    const server = new McpTestServer("wake", [LOOKUP]);
    setHostSeams({ fetch: mcpFetch(server) });
    const tool = await offerMcpTool(TENANT, server, LOOKUP);
    const name = uniqueSession("mcp-wake");
    await createSession(TENANT, name, [tool]);
    const first = await send(TENANT, name, `/call ${tool} {"id":1}`, 10);
    expect(first.result.status).toBe("done");
    expect(server.callsOf("lookup")).toHaveLength(1);

    // Evicted; then an input is accepted and the object killed before its turn: the alarm alone wakes
    // it, and its very first work is the MCP call.
    await abortAllDurableObjects();
    // A read opens the new instance (its harness), writing nothing.
    expect(await tasksOf(TENANT, name, "remote_call")).toHaveLength(1);
    await acceptThenEvict(sessionStub(TENANT, name), `/call ${tool} {"id":2}`, "after-wake");
    const seen = server.requests.length;
    expect(await runDurableObjectAlarm(sessionStub(TENANT, name))).toBe(true);
    await until(async () => ((await entriesOf(TENANT, name, "tool_result")).length === 2 ? true : undefined), "the second call's result");

    const results = await entriesOf(TENANT, name, "tool_result");
    expect(results.map((r) => [textOf(r).split("\n<harness>")[0], r.model?.[0]?.isError])).toEqual([
      ["record 1", false],
      ["record 2", false],
    ]);
    // The woken object connected afresh: initialize first, then the call, with no MCP session id (none
    // is stored, and none is needed).
    const after = server.requests.slice(seen).filter((r) => r.method === "POST");
    expect(after.map((r) => r.rpc)).toEqual(["initialize", "notifications/initialized", "tools/call"]);
    expect(server.requests.every((r) => r.headers["mcp-session-id"] === undefined)).toBe(true);
    expect(server.callsOf("lookup").map((c) => c.arguments)).toEqual([{ id: 1 }, { id: 2 }]);
    const calls = await tasksOf(TENANT, name, "remote_call");
    expect(calls).toHaveLength(2);
    const second = calls[1]?.state as unknown as RemoteCallState;
    expect(second).toMatchObject({
      status: "settled",
      attempts: 1,
      target: { type: "mcp", tool, server: "wake", remoteTool: "lookup", url: server.url, idempotent: false, snapshot: "snapshot-1" },
      outcome: { type: "output", output: { content: [{ type: "text", text: "record 2" }] }, isError: false },
    });
  });
});
