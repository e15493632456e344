/**
 * The turn script of the eviction sweeps (evictions.test.ts, evictions-subagents.test.ts, the full sweep
 * evictions-full.sweep.ts), run by the harness of eviction-harness.ts: killed after commit k, reopened by
 * the alarm alone, checked at that quiescent point, finished, and compared with the uninterrupted run:
 *
 * - every accepted input reaches exactly one terminal result, or is `waiting` after a failed group;
 * - no answer is duplicated (each answer entry resolves one group; the visible context equals the
 *   uninterrupted run's);
 * - every request key maps to one acceptance;
 * - no live task is left without a wake (after quiescence nothing is live but sleepers with a wake);
 * - the model-visible context (requestMessages, display-only partials excluded) and the answers of
 *   every conversation equal the uninterrupted run's.
 *
 * The script is data (`Step`, a tagged union): new features join it as new variants with their own
 * `submit` case. Steps are idempotent by their request keys or by counting what they created, so the
 * step a kill interrupted is simply re-submitted.
 */
import { runInDurableObject } from "cloudflare:test";
import { expect } from "vitest";
import type { Harness } from "../../src/core/harness.js";
import { priorAcceptance, queueInput, type QueuedInput } from "../../src/core/inbox.js";
import { acceptInput } from "../../src/kinds/placement.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import type { Id } from "../../src/storage/records.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import {
  acceptanceOf,
  expectInboxKeysOnce,
  expectSettled,
  resultOf,
  runScenario,
  visibleContext,
  type Scenario,
} from "./eviction-harness.js";
import { call, clockOf, harnessOf, until, type Seams, type TestSession } from "./session-fixtures.js";

/** One step of the script. New features add variants here and cases in `submit`. */
export type Step =
  /** One commit: accept `input` (a turn) and queue its followUp/steer items behind it. */
  | {
      readonly type: "prompt";
      readonly key: string;
      readonly input: string;
      readonly followUp?: string;
      readonly steer?: string;
    }
  /** A webhook delivery: queued by its delivery id (a request key of its own namespace). */
  | { readonly type: "webhook"; readonly key: string; readonly input: string }
  /** Fork the root at its newest entry; later steps of `conversation: "fork"` go there. */
  | { readonly type: "fork" }
  /** A manual collapse of the root (background, §8.4). */
  | { readonly type: "collapse" }
  /** Abort the root's foreground work (nothing live at a step boundary: withdraws nothing, must not disturb). */
  | { readonly type: "abort" };

/**
 * A deterministic script of `turns` turns mixing tool calls, queued followUps and steers, webhooks, a fork, a collapse
 * and an abort.
 */
export function script(turns: number): Step[] {
  const steps: Step[] = [];
  for (let i = 0; i < turns; i++) {
    const tool = i % 3 === 1 ? `/call echo {"text":"tool ${i}"}` : `turn ${i}`;
    if (i % 5 === 2)
      steps.push({ type: "prompt", key: `p${i}`, input: tool, followUp: `follow ${i}`, steer: `steer ${i}` });
    else if (i % 7 === 3) steps.push({ type: "webhook", key: `w${i}`, input: `webhook ${i}` });
    else steps.push({ type: "prompt", key: `p${i}`, input: tool });
    if (i === Math.floor(turns / 3)) steps.push({ type: "fork" });
    if (i === Math.floor(turns / 2)) steps.push({ type: "collapse" });
    if (i === Math.floor((2 * turns) / 3)) steps.push({ type: "abort" });
  }
  return steps;
}

/** What a run ends with: compared between the uninterrupted run and every killed one. */
export interface RunOutcome {
  /** Commits the script made in its first instance (the boundaries a sweep can kill at). */
  readonly commits: number;
  /** Per conversation (in creation order): the model-visible context, normalized. */
  readonly contexts: readonly string[];
  /** Request key -> terminal status (and the answer's text for done). */
  readonly results: Readonly<Record<string, string>>;
}

/**
 * Run `steps` in a fresh session; with `killAt`, kill the object right after its k-th commit. With
 * `deploy` (the deploy drill), the instance that reopens after the kill runs that deployed version id:
 * the same checks hold across a version change, and no kill is counted under the old version.
 */
export async function runScript(
  seams: Seams,
  name: string,
  steps: readonly Step[],
  killAt?: number,
  deploy?: string,
): Promise<RunOutcome> {
  const firstVersion = seams.version;
  const scenario: Scenario<Step, Omit<RunOutcome, "commits">> = {
    // The script calls the echo tool (`/call echo`), selected by name.
    config: { model: "echo", selectedTools: ["echo"] },
    steps,
    submit: (session, step, index) =>
      runInDurableObject(session.stub, (instance: SessionObject) => submit(harnessOf(instance), step, index, steps)),
    quiesce: (session) => quiesce(session, seams),
    // The deploy drill: every instance after this kill runs the new deployed version.
    beforeAbort: () => {
      if (deploy !== undefined) seams.version = deploy;
    },
    afterReopen: async (session) => {
      if (deploy === undefined) return;
      const inspection = await session.rpc.inspect();
      // The reopened instance runs the new version; deploys reset the kill counters (nothing counts
      // under the old version) and nothing is quarantined.
      expect(inspection.version).toBe(deploy);
      expect(inspection.kills.filter((k) => k.version !== deploy)).toEqual([]);
      expect(inspection.quarantined).toEqual([]);
    },
    checkReopened: (session, index) => checkInvariants(session, steps.slice(0, index + 1), false),
    checkEnd: async (session) => {
      await checkInvariants(session, steps, true);
      return outcome(session, steps);
    },
  };
  try {
    return await runScenario(scenario, name, killAt);
  } finally {
    seams.version = firstVersion;
  }
}

/** Submit one step; idempotent, so a step a kill interrupted may be submitted again. */
async function submit(h: Harness, step: Step, index: number, steps: readonly Step[]): Promise<void> {
  const root = h.rootId;
  switch (step.type) {
    case "prompt":
      await h.commitBound(call, { conversationId: root }, async (b) => {
        if ((await priorAcceptance(b, step.key)) !== undefined) return;
        await acceptInput(b, root, { input: step.input, requestId: step.key }, defaultTurnOptions, h.now());
        if (step.followUp !== undefined)
          queueInput(b, root, { mode: "followUp", input: step.followUp, requestId: `${step.key}:f` });
        if (step.steer !== undefined)
          queueInput(b, root, { mode: "steer", input: step.steer, requestId: `${step.key}:s` });
      });
      return;
    case "webhook":
      await h.commitBound(call, { conversationId: root }, async (b) => {
        if ((await priorAcceptance(b, step.key)) !== undefined) return;
        const item: QueuedInput = { mode: "followUp", input: step.input, requestId: step.key };
        if (b.inTurn(root)) queueInput(b, root, item);
        else await acceptInput(b, root, { input: step.input, requestId: step.key }, defaultTurnOptions, h.now());
      });
      return;
    case "fork": {
      const forksBefore = steps.slice(0, index).filter((s) => s.type === "fork").length;
      if ((await h.conversations({ limit: 100 }, call)).items.length > forksBefore + 1) return;
      await (await h.root(call)).fork({ at: "start" }, call);
      return;
    }
    case "collapse": {
      const before = steps.slice(0, index).filter((s) => s.type === "collapse").length;
      if ((await h.storage.scanTasks({ kind: "collapse", limit: 100 })).items.length > before) return;
      await (await h.root(call)).collapse(undefined, call);
      return;
    }
    case "abort":
      await (await h.root(call)).abort(call);
      return;
    default: {
      const never: never = step;
      throw new Error(`unknown step ${JSON.stringify(never)}`);
    }
  }
}

/** Until nothing runs: sleepers are woken by moving the manual clock to their wake and running the alarm. */
async function quiesce(session: TestSession, seams: Seams): Promise<void> {
  for (let round = 0; round < 50; round++) {
    try {
      await until(async () => !(await session.rpc.inspect()).busy, "no invocation busy");
    } catch (error) {
      // An invocation that stays busy while it waits on a sleeper (a subagent tool driving a child whose
      // generation is parked in retry_wait) is woken by time alone: advance to the sleeper's wake below.
      if ((await session.rpc.inspect()).nextWake === undefined) throw error;
    }
    const inspection = await session.rpc.inspect();
    if (inspection.busy && inspection.nextWake !== undefined) {
      const wake = inspection.nextWake;
      seams.time.now = Math.max(seams.time.now, wake);
      await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
      continue;
    }
    if (inspection.start.length === 0 && inspection.inflight.length === 0) return;
    if (inspection.nextWake === undefined) {
      // Live work that nothing wakes is the bug this sweep hunts; it fails below.
      await until(
        async () =>
          (await session.rpc.inspect()).nextWake !== undefined ||
          (await session.rpc.inspect()).start.length + (await session.rpc.inspect()).inflight.length === 0,
        "a live task without a wake",
      );
      continue;
    }
    const wake = inspection.nextWake;
    seams.time.now = Math.max(seams.time.now, wake);
    await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(wake));
  }
  throw new Error("the session never became quiescent");
}

async function checkInvariants(session: TestSession, submitted: readonly Step[], complete: boolean): Promise<void> {
  await runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const inspection = await h.inspect(call);
    // No live task without a wake.
    expect([...inspection.start, ...inspection.inflight]).toEqual([]);
    const answers = new Map<string, Id>();
    for (const key of keysOf(submitted)) {
      const acceptance = await acceptanceOf(h, key);
      if (acceptance === undefined) {
        // Only the step a kill interrupted may be unsubmitted at the mid-run check.
        expect(complete, `request key ${key} has no acceptance`).toBe(false);
        continue;
      }
      const result = await expectSettled(h, key, acceptance);
      if (result?.status === "done" && result.answer !== undefined) answers.set(key, result.answer);
    }
    // An answer is a real final answer entry, never a display-only partial; duplicates would show as
    // an extra answer in the visible context, which the end comparison with the uninterrupted run catches.
    for (const [key, answer] of answers) {
      const entry = await h.getEntry(answer, call);
      expect((entry?.model?.[0] as { stopReason?: string } | undefined)?.stopReason, `answer of ${key}`).not.toBe(
        "aborted",
      );
    }
    await expectInboxKeysOnce(h);
  });
}

async function outcome(session: TestSession, steps: readonly Step[]): Promise<Omit<RunOutcome, "commits">> {
  return runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const contexts: string[] = [];
    for (const conversation of (await h.conversations({ limit: 100 }, call)).items) {
      const handle = await h.conversation(conversation.id, call);
      if (handle === undefined) continue;
      contexts.push(await visibleContext(handle));
    }
    const results: Record<string, string> = {};
    for (const key of keysOf(steps)) {
      const acceptance = await acceptanceOf(h, key);
      if (acceptance === undefined) {
        results[key] = "missing";
        continue;
      }
      const result = await resultOf(h, acceptance);
      const answer =
        result?.status === "done" && result.answer !== undefined ? await h.getEntry(result.answer, call) : undefined;
      results[key] =
        `${result?.status ?? "missing"}${answer === undefined ? "" : `: ${JSON.stringify(answer.model?.[0] === undefined ? null : (answer.model[0] as { content?: unknown }).content)}`}`;
    }
    return { contexts, results };
  });
}

/** Every request key the steps use, in script order. */
function keysOf(steps: readonly Step[]): string[] {
  return steps.flatMap((s) =>
    s.type === "prompt"
      ? [s.key, ...(s.followUp === undefined ? [] : [`${s.key}:f`]), ...(s.steer === undefined ? [] : [`${s.key}:s`])]
      : s.type === "webhook"
        ? [s.key]
        : [],
  );
}
