/**
 * Eviction at every commit boundary of HTTP tool calls (docs/tools.md): a session created with a tenant
 * (as over HTTP) calls a non-idempotent and an idempotent HTTP tool whose product endpoint answers 200;
 * run once uninterrupted, then once per commit k killed right after commit k (`ctx.abort()` once it is
 * durable) and reopened by the alarm alone (`runScenario`, eviction-harness.ts).
 *
 * At every quiescent point: each accepted input has one terminal result, each call at most one result
 * entry and at most one remote call, every request of a call carries that call's key, and the
 * non-idempotent endpoint saw at most one request. At the end each call has exactly one result entry and
 * its remote call settled once; the results equal the uninterrupted run's, except that a kill while the
 * non-idempotent request was `dispatched` settles it `outcome_unknown` (never sent twice).
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
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
import { defineTool, ProductEndpoint } from "./tool-fixtures.js";

const TENANT = "evict-tools";

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

interface Step {
  readonly key: string;
  readonly tool: string;
  readonly input: string;
}

const STEPS: readonly Step[] = [
  { key: "once", tool: "charge", input: '/call charge {"id":1}' },
  { key: "again", tool: "sync", input: '/call sync {"id":2}' },
];

const OUTPUT: Readonly<Record<string, string>> = { charge: '{"charged":1}', sync: '{"synced":2}' };

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
): Promise<Outcome & { readonly commits: number; readonly dispatchedAtKill: readonly string[] }> {
  const time = new ManualTime();
  const endpoint = new ProductEndpoint(TENANT)
    .reply("charge", () => ({ status: 200, body: { output: { charged: 1 } } }))
    .reply("sync", () => ({ status: 200, body: { output: { synced: 2 } } }));
  setHostSeams({ clock: () => new ManualClock(time), fetch: endpoint.fetch });
  await defineTool(TENANT, "charge", { idempotent: false });
  await defineTool(TENANT, "sync", { idempotent: true });
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
        for (const task of remote) {
          expect(task.role).toBe("terminal");
          for (const request of endpoint.seen(step.tool))
            expect(request.key).toMatch(new RegExp(`^${session}:[0-9a-v]{10}:${task.id}$`));
        }
      }
      expect(endpoint.seen("charge").length, "requests of the non-idempotent tool").toBeLessThanOrEqual(1);
    });
  };

  const scenario: Scenario<Step, Outcome> = {
    config: { model: "echo", selectedTools: ["charge", "sync"] },
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
  return { ...outcome, dispatchedAtKill };
}

describe("HTTP tools under eviction", () => {
  it("HTTP tool call survives eviction at every commit boundary", async () => {
    const base = await runTools("evict-http");
    expect(base.results).toEqual({ charge: OUTPUT["charge"], sync: OUTPUT["sync"] });
    expect(base.commits).toBeGreaterThan(4);
    let unknown = 0;
    for (let k = 1; k <= base.commits; k++) {
      const run = await runTools("evict-http", k);
      expect(run.results["sync"], `k = ${k}: the idempotent call`).toBe(OUTPUT["sync"]);
      if (run.results["charge"] === OUTPUT["charge"]) continue;
      // Only a kill while the non-idempotent request was dispatched makes its outcome unknown.
      expect(run.dispatchedAtKill, `k = ${k}: ${run.results["charge"]}`).toContain("charge");
      expect(run.results["charge"]).toContain("[outcome_unknown]");
      unknown += 1;
    }
    // The dispatched mark is a boundary of its own.
    expect(unknown).toBeGreaterThanOrEqual(1);
  });
});
