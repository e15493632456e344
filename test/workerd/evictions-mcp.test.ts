/**
 * Eviction at every commit boundary of MCP tool calls (docs/mcp.md "Calling MCP tools"): a session
 * created with a tenant (as over HTTP) calls two tools of a real MCP server (`McpTestServer`), one
 * without and one with `idempotentHint`; run once uninterrupted, then once per commit k killed right
 * after commit k (`ctx.abort()` once it is durable) and reopened by the alarm alone (`runScenario`,
 * eviction-harness.ts).
 *
 * At every quiescent point: each accepted input has one terminal result, each call at most one result
 * entry and at most one remote call, and the server saw the non-idempotent tool called at most once. At
 * the end each call has exactly one result entry and its remote call settled once; the results equal
 * the uninterrupted run's, except that a kill while the non-idempotent call was `dispatched` settles it
 * `outcome_unknown` (never sent twice). The idempotent one may be sent again, and always answers.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import type { Harness } from "../../src/core/harness.js";
import { priorAcceptance } from "../../src/core/inbox.js";
import { acceptInput } from "../../src/kinds/placement.js";
import { remoteCallDefinition } from "../../src/kinds/remote-call.js";
import type { RemoteCallState } from "../../src/kinds/remote-call-state.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { toolResultKind } from "../../src/core/entries.js";
import type { Entry } from "../../src/storage/records.js";
import { decodeState } from "../../src/storage/sqlite-codec.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import {
  acceptanceOf,
  expectInboxKeysOnce,
  expectSettled,
  resultOf,
  runScenario,
  type Scenario,
} from "./eviction-harness.js";
import { call, clockOf, harnessOf, ManualClock, ManualTime, resetSeams, type TestSession } from "./session-fixtures.js";
import { uniqueSession, until } from "./http-fixtures.js";
import { createSession, inputDone, registerMcpServer, send, sessionStub } from "./mcp-call-fixtures.js";
import { McpTestServer, mcpFetch, type McpTestTool } from "./mcp-fixtures.js";
import { entriesOf, textOf } from "./tool-fixtures.js";

const TENANT = "evict-mcp";

const CHARGE: McpTestTool = {
  name: "charge",
  inputSchema: { properties: { id: { type: "integer" } }, required: ["id"] },
  run: () => ({ content: [{ type: "text", text: "charged 1" }] }),
};

const SYNC: McpTestTool = {
  name: "sync",
  inputSchema: { properties: { id: { type: "integer" } }, required: ["id"] },
  annotations: { idempotentHint: true },
  run: () => ({ content: [{ type: "text", text: "synced 2" }] }),
};

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

interface Step {
  readonly key: string;
  readonly tool: string;
  readonly input: string;
}

/** The tool, whose first call the server holds (never answers). */
function holdOnce(tool: McpTestTool): McpTestTool {
  let calls = 0;
  return {
    ...tool,
    run: (args, progress, extra) => (++calls === 1 ? "hang" : (tool.run?.(args, progress, extra) ?? "hang")),
  };
}

const STEPS: readonly Step[] = [
  { key: "once", tool: "shop__charge", input: '/call shop__charge {"id":1}' },
  { key: "again", tool: "shop__sync", input: '/call shop__sync {"id":2}' },
];

const OUTPUT: Readonly<Record<string, string>> = { shop__charge: "charged 1", shop__sync: "synced 2" };

interface Outcome {
  /** Tool -> its result entry's text (the model-visible data without the harness block) and error code. */
  readonly results: Readonly<Record<string, string>>;
}

async function submit(h: Harness, step: Step): Promise<void> {
  const root = h.rootId;
  await h.commitBound(call, { conversationId: root }, async (b) => {
    if ((await priorAcceptance(b, step.key)) !== undefined) return;
    await acceptInput(b, root, { input: step.input, requestId: step.key }, defaultTurnOptions, h.now());
  });
}

/** Until nothing runs: sleepers are woken by moving the manual clock to their wake. */
async function quiesce(session: TestSession, time: ManualTime, killed: () => boolean): Promise<void> {
  for (let round = 0; round < 200; round++) {
    // Once the kill landed, only the alarm may open the object again: no request until then.
    if (killed()) throw new Error("killed");
    const inspection = await session.rpc.inspect();
    if (!inspection.busy && inspection.start.length === 0 && inspection.inflight.length === 0) return;
    if (inspection.nextWake !== undefined && inspection.nextWake > time.now) {
      const wake = inspection.nextWake;
      time.now = wake;
      await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("the session never became quiescent");
}

async function toolResults(h: Harness): Promise<Entry[]> {
  const entries = await h.storage.scanEntries({ conversationId: h.rootId, limit: 1000 });
  return entries.items.filter((e) => e.kind === toolResultKind.kind);
}

function resultText(entry: Entry): string {
  const message = entry.model?.[0] as { toolName?: string; content?: { type: string; text?: string }[] } | undefined;
  const text = (message?.content ?? []).map((p) => p.text ?? "").join("");
  return text.split("\n<harness>")[0] ?? "";
}

function toolOf(entry: Entry): string {
  return (entry.model?.[0] as { toolName?: string } | undefined)?.toolName ?? "";
}

async function runTools(
  name: string,
  killAt?: number,
): Promise<
  Outcome & {
    readonly commits: number;
    readonly dispatchedAtKill: readonly string[];
    readonly calls: { readonly charge: number; readonly sync: number };
  }
> {
  const time = new ManualTime();
  const server = new McpTestServer("shop", [CHARGE, SYNC]);
  setHostSeams({ clock: () => new ManualClock(time), fetch: mcpFetch(server) });
  await registerMcpServer(TENANT, server);
  const session = `${name}-${killAt ?? 0}`;
  let dispatchedAtKill: string[] = [];
  let dead = false;

  const check = async (s: TestSession, complete: boolean): Promise<void> => {
    await runInDurableObject(s.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const inspection = await h.inspect(call);
      expect([...inspection.start, ...inspection.inflight]).toEqual([]);
      for (const step of STEPS) {
        const acceptance = await acceptanceOf(h, step.key);
        if (acceptance === undefined) {
          expect(complete, `request key ${step.key} has no acceptance`).toBe(false);
          continue;
        }
        await expectSettled(h, step.key, acceptance);
      }
      await expectInboxKeysOnce(h);
      const results = await toolResults(h);
      const calls = (await h.storage.scanTasks({ kind: remoteCallDefinition.kind, limit: 100 })).items;
      for (const step of STEPS) {
        const mine = results.filter((e) => toolOf(e) === step.tool);
        expect(mine.length, `result entries of ${step.tool}`).toBeLessThanOrEqual(1);
        const remote = calls.filter((t) => (t.state as RemoteCallState).name === step.tool);
        expect(remote.length, `remote calls of ${step.tool}`).toBeLessThanOrEqual(1);
        if (complete) {
          expect(mine).toHaveLength(1);
          expect(remote).toHaveLength(1);
        }
        for (const task of remote) expect(task.role).toBe("terminal");
      }
      expect(server.callsOf("charge").length, "calls of the non-idempotent tool").toBeLessThanOrEqual(1);
    });
  };

  const scenario: Scenario<Step, Outcome> = {
    config: { model: "echo", selectedTools: STEPS.map((s) => s.tool) },
    tenant: TENANT,
    steps: STEPS,
    submit: (s, step) => runInDurableObject(s.stub, (instance: SessionObject) => submit(harnessOf(instance), step)),
    quiesce: (s) => quiesce(s, time, () => dead),
    beforeAbort: () => {
      dead = true;
    },
    afterReopen: async () => {
      dead = false;
    },
    inspectKilled: (storage) => {
      dispatchedAtKill = storage.sql
        .exec("SELECT state, status FROM tasks WHERE kind = ? AND status = 'dispatched'", remoteCallDefinition.kind)
        .toArray()
        .map((row) => (decodeState(String(row["state"]), () => String(row["status"])) as { name?: string }).name ?? "");
    },
    checkReopened: (s) => check(s, false),
    checkEnd: async (s) => {
      await check(s, true);
      return runInDurableObject(s.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        const results: Record<string, string> = {};
        for (const entry of await toolResults(h)) {
          const details = (entry.data as { details?: { error?: string } } | undefined)?.details;
          results[toolOf(entry)] = `${resultText(entry)}${details?.error === undefined ? "" : ` [${details.error}]`}`;
        }
        for (const step of STEPS) {
          const acceptance = await acceptanceOf(h, step.key);
          expect(
            acceptance === undefined ? undefined : (await resultOf(h, acceptance))?.status,
            `input ${step.key}`,
          ).toBe("done");
        }
        return { results };
      });
    },
  };
  const outcome = await runScenario(scenario, session, killAt);
  return {
    ...outcome,
    dispatchedAtKill,
    calls: { charge: server.callsOf("charge").length, sync: server.callsOf("sync").length },
  };
}

describe("MCP calls under eviction", () => {
  it("MCP call survives eviction at every commit boundary", async () => {
    const base = await runTools("evict-mcp");
    expect(base.results).toEqual(OUTPUT);
    expect(base.calls).toEqual({ charge: 1, sync: 1 });
    expect(base.commits).toBeGreaterThan(4);
    let unknown = 0;
    for (let k = 1; k <= base.commits; k++) {
      const run = await runTools("evict-mcp", k);
      expect(run.results["shop__sync"], `k = ${k}: the idempotent call`).toBe(OUTPUT["shop__sync"]);
      expect(run.calls.charge, `k = ${k}: calls of the non-idempotent tool`).toBeLessThanOrEqual(1);
      if (run.results["shop__charge"] === OUTPUT["shop__charge"]) continue;
      // Only a kill while the non-idempotent call was dispatched makes its outcome unknown.
      expect(run.dispatchedAtKill, `k = ${k}: ${run.results["shop__charge"]}`).toContain("shop__charge");
      expect(run.results["shop__charge"]).toContain("[outcome_unknown]");
      unknown += 1;
    }
    // The dispatched mark is a boundary of its own.
    expect(unknown).toBeGreaterThanOrEqual(1);

    // At a commit boundary the kill lands before the call leaves. Killed while the server holds each call
    // (it surely arrived): the non-idempotent one settles outcome_unknown and is not sent again; the
    // idempotent one is sent again and answers.
    const held = new McpTestServer("hold", [holdOnce(CHARGE), holdOnce(SYNC)]);
    setHostSeams({ fetch: mcpFetch(held) });
    const name = uniqueSession("evict-mcp-held");
    await registerMcpServer(TENANT, held);
    await createSession(TENANT, name, ["hold__charge", "hold__sync"]);
    for (const tool of ["charge", "sync"] as const) {
      const accepted = await send(TENANT, name, `/call hold__${tool} {"id":3}`);
      await until(
        async () => (held.callsOf(tool).length === 1 ? true : undefined),
        `the ${tool} call reached the server`,
      );
      await abortAllDurableObjects();
      expect(await runDurableObjectAlarm(sessionStub(TENANT, name))).toBe(true);
      await inputDone(TENANT, name, accepted.inputId);
    }
    const [charged, synced] = await entriesOf(TENANT, name, "tool_result");
    expect(charged?.data?.["details"]).toMatchObject({ error: "outcome_unknown" });
    expect(textOf(charged)).toContain(
      'may have reached MCP server "hold" (tool charge) before a restart; it is never re-sent',
    );
    expect(textOf(synced).split("\n<harness>")[0]).toBe("synced 2");
    expect(held.callsOf("charge")).toHaveLength(1);
    expect(held.callsOf("sync")).toHaveLength(2);
  });
});
