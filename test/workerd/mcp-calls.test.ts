/**
 * Calling MCP tools (docs/mcp.md "Calling MCP tools"): a tenant registers a real MCP server
 * (`McpTestServer`, built with the SDK's server classes, on the host fetch seam) and its tools are
 * selectable as `{server}__{tool}`; the echo model calls one (`/call NAME {json}`), and the call runs as a background
 * `remote_call` task with an `mcp` target: a fresh MCP client per attempt (initialize, then
 * `tools/call`), its deadline on the host clock, reset by progress and capped.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { acceptInput } from "../../src/kinds/placement.js";
import type { RemoteCallState } from "../../src/kinds/remote-call-state.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { MCP_TOOL_TIMEOUT_MS } from "../../src/worker/directory/mcp-snapshot.js";
import { MCP_CALL_MAX_MS } from "../../src/worker/remote/mcp-transport.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { ElicitResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { call as httpCall, json, token, uniqueSession, until } from "./http-fixtures.js";
import {
  createSession,
  inputDone,
  refreshMcpServer,
  registerMcpServer,
  send,
  sessionStub,
} from "./mcp-call-fixtures.js";
import { McpTestServer, mcpFetch, type McpTestTool } from "./mcp-fixtures.js";
import { call as background, clockOf, harnessOf, ManualClock, ManualTime, resetSeams } from "./session-fixtures.js";
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

/** What a scripted long tool does next: report progress, or answer. */
type Step = "progress" | "done";

/** The steps of a long tool, released by the test one at a time. */
class Steps {
  readonly #waiting: ((step: Step) => void)[] = [];
  readonly #queued: Step[] = [];

  next(): Promise<Step> {
    const queued = this.#queued.shift();
    return queued === undefined ? new Promise((resolve) => this.#waiting.push(resolve)) : Promise.resolve(queued);
  }

  release(step: Step): void {
    const waiting = this.#waiting.shift();
    if (waiting === undefined) this.#queued.push(step);
    else waiting(step);
  }
}

/** A tool that reports progress at each released step and answers at "done". */
function longTool(name: string, steps: Steps): McpTestTool {
  return {
    name,
    inputSchema: {},
    run: async (_args, progress) => {
      for (let n = 0; ; n++) {
        if ((await steps.next()) === "done")
          return { content: [{ type: "text", text: `${name} finished after ${n} progress notifications` }] };
        await progress(n + 1);
      }
    },
  };
}

/**
 * Release the long tool's next step from inside the session's object: the server runs in the session's
 * outbound fetch, so what it does next must run in that object's context, not the test's.
 */
async function release(tenant: string, name: string, steps: Steps, step: Step): Promise<void> {
  await runInDurableObject(sessionStub(tenant, name), () => steps.release(step));
}

/** Move the session's manual clock to `ms`. */
async function advance(tenant: string, name: string, time: ManualTime, ms: number): Promise<void> {
  time.now = ms;
  await runInDurableObject(sessionStub(tenant, name), (instance: SessionObject) => clockOf(instance).advanceTo(ms));
}

/** Until something in the session sleeps until exactly `at` (the MCP call's deadline, once its progress arrived). */
async function sleeperAt(tenant: string, name: string, at: number): Promise<void> {
  await until(
    async () =>
      (
        await runInDurableObject(sessionStub(tenant, name), (instance: SessionObject) => clockOf(instance).sleeping())
      ).includes(at)
        ? true
        : undefined,
    `a sleeper until ${at}`,
  );
}

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
    const registered = await registerMcpServer(TENANT, server, { headers: { authorization: "Bearer wake-secret" } });
    const tool = "wake__lookup";
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
    await until(
      async () => ((await entriesOf(TENANT, name, "tool_result")).length === 2 ? true : undefined),
      "the second call's result",
    );

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
    // The registered header went with every request, the woken object's too.
    expect(after.every((r) => r.headers["authorization"] === "Bearer wake-secret")).toBe(true);
    const calls = await tasksOf(TENANT, name, "remote_call");
    expect(calls).toHaveLength(2);
    const second = calls[1]?.state as unknown as RemoteCallState;
    expect(second).toMatchObject({
      status: "settled",
      attempts: 1,
      target: {
        type: "mcp",
        tool,
        server: "wake",
        remoteTool: "lookup",
        url: server.url,
        idempotent: false,
        snapshot: registered.snapshot,
      },
      outcome: { type: "output", output: { content: [{ type: "text", text: "record 2" }] }, isError: false },
    });
  });

  it("Progress keeps a long MCP call alive; the budget still bounds it", async () => {
    const time = new ManualTime();
    const steps = new Steps();
    const BUILD = longTool("build", steps);
    const server = new McpTestServer("slow", [BUILD]);
    setHostSeams({ fetch: mcpFetch(server), clock: () => new ManualClock(time) });
    await registerMcpServer(TENANT, server);
    const tool = "slow__build";
    const timeout = MCP_TOOL_TIMEOUT_MS;
    const budget = 4 * timeout;
    const name = uniqueSession("mcp-progress");
    await createSession(TENANT, name, [tool], { budgetMs: budget });

    // Progress at two thirds of the timeout, four times, keeps the call alive past twice its timeout, within the
    // blocking budget.
    const start = time.now;
    const step = (timeout * 2) / 3;
    const first = await send(TENANT, name, `/call ${tool} {}`);
    await until(async () => (server.callsOf("build").length === 1 ? true : undefined), "the call reached the server");
    await sleeperAt(TENANT, name, start + timeout);
    for (let n = 1; n <= 4; n++) {
      await advance(TENANT, name, time, start + n * step);
      await release(TENANT, name, steps, "progress");
      await sleeperAt(TENANT, name, start + n * step + timeout);
    }
    await release(TENANT, name, steps, "done");
    await inputDone(TENANT, name, first.inputId);
    const [done] = await entriesOf(TENANT, name, "tool_result");
    expect(textOf(done).split("\n<harness>")[0]).toBe("build finished after 4 progress notifications");
    expect(done?.model?.[0]?.isError).toBe(false);
    expect(done?.data?.["delegated"] ?? null).toBeNull();

    // A call that keeps reporting progress past the budget: the tool call delegates at the budget (the
    // turn goes on), and the call ends at its cap as a timeout, whose notice is the late result.
    const second = time.now;
    const late = await send(TENANT, name, `/call ${tool} {}`);
    await until(
      async () => (server.callsOf("build").length === 2 ? true : undefined),
      "the second call reached the server",
    );
    await sleeperAt(TENANT, name, second + timeout);
    let at = second;
    for (let n = 1; at + timeout / 2 < second + MCP_CALL_MAX_MS; n++) {
      at += timeout / 2;
      await advance(TENANT, name, time, at);
      await release(TENANT, name, steps, "progress");
      await sleeperAt(TENANT, name, Math.min(at + timeout, second + MCP_CALL_MAX_MS));
      if (n === 8) {
        // At the budget (four timeouts): the tool call delegated and the input is done; the call runs on.
        await inputDone(TENANT, name, late.inputId);
        const results = await entriesOf(TENANT, name, "tool_result");
        expect(results).toHaveLength(2);
        const [rc] = (await tasksOf(TENANT, name, "remote_call")).slice(1);
        expect(results[1]?.data?.["delegated"]).toBe(rc?.id);
        expect(textOf(results[1])).toContain(`still running as remote call ${rc?.id}`);
        expect(rc?.state.status).toBe("dispatched");
      }
    }
    expect(await entriesOf(TENANT, name, "notice")).toHaveLength(0);
    await advance(TENANT, name, time, second + MCP_CALL_MAX_MS);
    await until(
      async () => ((await entriesOf(TENANT, name, "notice")).length === 1 ? true : undefined),
      "the late result's notice",
    );
    const [rc] = (await tasksOf(TENANT, name, "remote_call")).slice(1);
    expect(rc?.state).toMatchObject({ status: "settled", attempts: 1, outcome: { type: "error", code: "timeout" } });
    const [notice] = await entriesOf(TENANT, name, "notice");
    expect(textOf(notice)).toContain(`Remote call ${rc?.id} (tool ${tool}) failed (timeout).`);
    expect(textOf(notice)).toContain(`still running after its cap of ${MCP_CALL_MAX_MS} ms`);
    expect(server.callsOf("build")).toHaveLength(2);
    expect(await entriesOf(TENANT, name, "tool_result")).toHaveLength(2);
  });

  it("Pinned tool schema is what the model saw", async () => {
    const steps = new Steps();
    // The server's tool before and after it changes: another argument, and no longer idempotent.
    const before: McpTestTool = {
      name: "lookup",
      inputSchema: { properties: { id: { type: "integer" } }, required: ["id"], additionalProperties: false },
      annotations: { idempotentHint: true },
      run: async (args) =>
        (await steps.next()) === "done" ? { content: [{ type: "text", text: `v1 ${JSON.stringify(args)}` }] } : "hang",
    };
    const after: McpTestTool = {
      name: "lookup",
      inputSchema: { properties: { key: { type: "string" } }, required: ["key"], additionalProperties: false },
      run: (args) => ({ content: [{ type: "text", text: `v2 ${JSON.stringify(args)}` }] }),
    };
    const server = new McpTestServer("pin", [before]);
    // Sessions re-read the catalog at every turn, so a refresh is seen by the next one.
    setHostSeams({ fetch: mcpFetch(server), catalogTtlMs: 0 });
    const s1 = (await registerMcpServer(TENANT, server)).snapshot;
    const tool = "pin__lookup";
    const name = uniqueSession("mcp-pin");
    await createSession(TENANT, name, [tool]);

    // A call made from the first snapshot is in flight when the server changes its tools and the
    // tenant's snapshot is refreshed.
    const first = await send(TENANT, name, `/call ${tool} {"id":1}`);
    await until(async () => (server.callsOf("lookup").length === 1 ? true : undefined), "the call reached the server");
    server.setTools([after]);
    const s2 = (await refreshMcpServer(TENANT, "pin")).snapshot;
    expect(s2).not.toBe(s1);
    // The running call keeps the definition it captured.
    const [running] = await tasksOf(TENANT, name, "tool");
    expect(running?.state).toMatchObject({
      status: "running",
      def: {
        name: tool,
        definition: {
          parameters: { type: "object", ...before.inputSchema },
          handler: { type: "mcp", snapshot: s1, idempotent: true },
        },
      },
    });

    // The object dies with the call in flight; the alarm alone brings it back and the call is replayed
    // from what it captured: the same arguments, sent again because the snapshot said idempotent.
    await abortAllDurableObjects();
    expect(await runDurableObjectAlarm(sessionStub(TENANT, name))).toBe(true);
    await inputDone(TENANT, name, first.inputId);
    expect(server.callsOf("lookup").map((c) => c.arguments)).toEqual([{ id: 1 }, { id: 1 }]);
    const [replayed] = await tasksOf(TENANT, name, "remote_call");
    expect(replayed?.state).toMatchObject({
      status: "settled",
      attempts: 2,
      arguments: { id: 1 },
      target: { type: "mcp", server: "pin", remoteTool: "lookup", snapshot: s1, idempotent: true },
      outcome: { type: "output", isError: false },
    });

    // What the model was given: the first snapshot's schema for the call it made; the refreshed one
    // from the next request on (a system entry lists each tool as it was offered).
    const offered = (await entriesOf(TENANT, name, "system")).flatMap(
      (e) => (e.model?.[0] as { toolsAdded?: { name: string; parameters: unknown }[] } | undefined)?.toolsAdded ?? [],
    );
    expect(offered[0]).toMatchObject({ name: tool, parameters: { type: "object", ...before.inputSchema } });
    expect(offered.at(-1)).toMatchObject({ name: tool, parameters: { type: "object", ...after.inputSchema } });
    const [replayedResult] = await entriesOf(TENANT, name, "tool_result");
    expect(textOf(replayedResult).split("\n<harness>")[0]).toBe('v2 {"id":1}');

    // New calls use the refreshed snapshot: the old arguments no longer validate (nothing is sent), the
    // new ones do, and the call carries the new snapshot.
    const stale = await send(TENANT, name, `/call ${tool} {"id":3}`, 10);
    expect(stale.result.status).toBe("done");
    const refused = (await entriesOf(TENANT, name, "tool_result")).at(-1);
    expect(refused?.model?.[0]?.isError).toBe(true);
    expect(textOf(refused)).toContain('Validation failed for tool "pin__lookup"');
    expect(textOf(refused)).toContain('"id": 3');
    expect(server.callsOf("lookup")).toHaveLength(2);
    const fresh = await send(TENANT, name, `/call ${tool} {"key":"k"}`, 10);
    expect(fresh.result.status).toBe("done");
    const answered = (await entriesOf(TENANT, name, "tool_result")).at(-1);
    expect(textOf(answered).split("\n<harness>")[0]).toBe('v2 {"key":"k"}');
    expect(server.callsOf("lookup").map((c) => c.arguments)).toEqual([{ id: 1 }, { id: 1 }, { key: "k" }]);
    const calls = await tasksOf(TENANT, name, "remote_call");
    expect(calls).toHaveLength(2);
    expect(calls[1]?.state).toMatchObject({
      attempts: 1,
      target: { snapshot: s2, idempotent: false },
      arguments: { key: "k" },
    });
  });

  it("an MCP server with approval always parks each call on the pending list until it is approved or denied", async () => {
    const server = new McpTestServer("gated", [LOOKUP]);
    setHostSeams({ fetch: mcpFetch(server) });
    await registerMcpServer(TENANT, server, { approval: "always" });
    const tool = "gated__lookup";
    const name = uniqueSession("mcp-approval");
    await createSession(TENANT, name, [tool]);
    const client = await token(TENANT, "client");
    const pendingItem = async (): Promise<{ id: string; type: string; name: string; arguments: unknown }> =>
      until(async () => {
        const items = (
          await json<{ items: { id: string; type: string; name: string; arguments: unknown }[] }>(
            await httpCall("GET", `/v1/sessions/${name}/pending`, { token: client }),
          )
        ).items;
        return items[0];
      }, "the approval");

    const first = await send(TENANT, name, `/call ${tool} {"id":5}`);
    const item = await pendingItem();
    expect(item).toMatchObject({ type: "approval", name: tool, arguments: { id: 5 } });
    expect(server.calls).toHaveLength(0);
    expect(
      (await httpCall("POST", `/v1/sessions/${name}/pending/${item.id}`, { token: client, body: { approve: true } }))
        .status,
    ).toBe(200);
    await inputDone(TENANT, name, first.inputId);
    expect(server.callsOf("lookup").map((c) => c.arguments)).toEqual([{ id: 5 }]);
    expect(textOf((await entriesOf(TENANT, name, "tool_result"))[0]).split("\n<harness>")[0]).toBe("record 5");

    const second = await send(TENANT, name, `/call ${tool} {"id":6}`);
    const denied = await pendingItem();
    expect(
      (
        await httpCall("POST", `/v1/sessions/${name}/pending/${denied.id}`, {
          token: client,
          body: { approve: false, reason: "not now" },
        })
      ).status,
    ).toBe(200);
    await inputDone(TENANT, name, second.inputId);
    expect(textOf((await entriesOf(TENANT, name, "tool_result"))[1])).toContain("Tool call denied: not now");
    expect(server.calls).toHaveLength(1);
  });

  it("tool errors, JSON-RPC errors, HTTP errors and an elicitation are error results the model reads", async () => {
    const tools: McpTestTool[] = [
      {
        name: "fails",
        inputSchema: {},
        run: () => ({ content: [{ type: "text", text: "no such order" }], isError: true }),
      },
      { name: "structured", inputSchema: {}, run: () => ({ content: [], structuredContent: { total: 3 } }) },
      {
        name: "throws",
        inputSchema: {},
        run: () => Promise.reject(new McpError(ErrorCode.InvalidParams, "order must be positive")),
      },
      {
        name: "asks",
        inputSchema: {},
        run: async (_args, _progress, extra) => {
          await extra.sendRequest(
            {
              method: "elicitation/create",
              params: { message: "Which account?", requestedSchema: { type: "object", properties: {} } },
            },
            ElicitResultSchema,
          );
          return { content: [{ type: "text", text: "answered" }] };
        },
      },
    ];
    const server = new McpTestServer("odd", tools);
    const refusing = new McpTestServer("refusing", [LOOKUP]);
    const broken = new McpTestServer("broken", [LOOKUP]);
    // Both answer as MCP servers when registered, then refuse (403) and fail (502) every request.
    let failing = false;
    setHostSeams({
      fetch: async (request) => {
        if (failing && refusing.serves(request))
          return new Response(JSON.stringify({ error: "forbidden" }), { status: 403 });
        if (failing && broken.serves(request)) return new Response("bad gateway", { status: 502 });
        return mcpFetch(server, refusing, broken)(request);
      },
    });
    for (const registered of [server, refusing, broken]) await registerMcpServer(TENANT, registered);
    failing = true;
    const names = [...tools.map((t) => `odd__${t.name}`), "refusing__lookup", "broken__lookup"];
    const name = uniqueSession("mcp-errors");
    await createSession(TENANT, name, names);
    for (const tool of names)
      expect(
        (await send(TENANT, name, `/call ${tool} ${tool.endsWith("lookup") ? '{"id":1}' : "{}"}`, 10)).result.status,
      ).toBe("done");
    const results = await entriesOf(TENANT, name, "tool_result");
    const seen = results.map((r) => [r.model?.[0]?.isError, textOf(r).split("\n<harness>")[0]]);
    expect(seen[0]).toEqual([true, "no such order"]);
    expect(seen[1]).toEqual([false, '{"total":3}']);
    expect(results[1]?.data?.["details"]).toMatchObject({
      structuredContent: { total: 3 },
      mcp: { server: "odd", tool: "structured", snapshot: expect.any(String) },
    });
    expect(seen[2]?.[0]).toBe(true);
    expect(seen[2]?.[1]).toContain(`The MCP server "odd" answered with an error (code ${ErrorCode.InvalidParams})`);
    expect(seen[2]?.[1]).toContain("order must be positive");
    expect(seen[3]?.[0]).toBe(true);
    expect(seen[3]?.[1]).toContain(
      'The MCP server "odd" asked for user input during the call (elicitation/create), which this service declines',
    );
    expect(seen[4]?.[0]).toBe(true);
    expect(seen[4]?.[1]).toContain('MCP server "refusing" (tool lookup) refused remote call');
    expect(seen[4]?.[1]).toContain("HTTP 403");
    expect(results[4]?.data?.["details"]).toMatchObject({ error: "http_status", http: { status: 403 } });
    expect(seen[5]?.[0]).toBe(true);
    expect(seen[5]?.[1]).toContain('to MCP server "broken" (tool lookup) failed: HTTP 502');
    expect(results[5]?.data?.["details"]).toMatchObject({ error: "failed", http: { status: 502 } });
    expect(refusing.calls).toHaveLength(0);
  });
});
