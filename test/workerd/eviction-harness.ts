/**
 * Eviction at every commit boundary (DESIGN §3, §5.3, §6.4): a scripted session in a real session
 * Durable Object, run once uninterrupted and then, in separate runs, killed right after commit k
 * (`ctx.abort()` once that commit is durable: the platform's own reset, nothing of the instance survives;
 * from commit k on no further commit of the instance reaches storage, so exactly k commits are durable,
 * which each run asserts).
 * After the kill only the alarm reopens it (no request); the runner then checks every invariant at
 * that quiescent point, finishes the script, and compares the end state with the uninterrupted run:
 *
 * - every accepted input reaches exactly one terminal result, or is `waiting` after a failed group;
 * - no answer is duplicated (each answer entry resolves one group; the visible context equals the
 *   uninterrupted run's);
 * - every request key maps to one acceptance;
 * - no live task is left without a wake (after quiescence nothing is live but sleepers with a wake);
 * - the model-visible context (requestMessages, display-only partials excluded) and the answers of
 *   every conversation equal the uninterrupted run's.
 *
 * The script is data (`Step`, a tagged union): jobs, subagents, schedules and rig hooks join it as new
 * variants with their own `submit` and `done` cases (issues 10 and 11). Steps are idempotent by their
 * request keys or by counting what they created, so the step a kill interrupted is simply re-submitted.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { expect } from "vitest";
import type { Harness } from "../../src/core/harness.js";
import { requestMessages } from "../../src/core/context.js";
import { bindInbox, bindResult, priorAcceptance, queueInput, requestKey, type Acceptance, type InputResult, type QueuedInput } from "../../src/core/inbox.js";
import { bindTo } from "../../src/core/state.js";
import { acceptInput } from "../../src/kinds/placement.js";
import { defaultTurnOptions } from "../../src/kinds/services.js";
import { waitingInputs } from "../../src/kinds/waiting.js";
import type { Id } from "../../src/storage/records.js";
import type { SessionObject } from "../../src/worker/session-object.js";
import { call, clockOf, harnessOf, TestSession, until, type Seams } from "./session-fixtures.js";

/** One step of the script. New features add variants here and cases in `submit`. */
export type Step =
  /** One commit: accept `input` (a turn) and queue its followUp/steer items behind it. */
  | { readonly type: "prompt"; readonly key: string; readonly input: string; readonly followUp?: string; readonly steer?: string }
  /** A webhook delivery: queued by its delivery id (a request key of its own namespace). */
  | { readonly type: "webhook"; readonly key: string; readonly input: string }
  /** Fork the root at its newest entry; later steps of `conversation: "fork"` go there. */
  | { readonly type: "fork" }
  /** A manual collapse of the root (background, §8.4). */
  | { readonly type: "collapse" }
  /** Abort the root's foreground work (nothing live at a step boundary: withdraws nothing, must not disturb). */
  | { readonly type: "abort" };

/** A deterministic script of `turns` turns mixing tool calls, queued followUps and steers, webhooks, a fork, a collapse and an abort. */
export function script(turns: number): Step[] {
  const steps: Step[] = [];
  for (let i = 0; i < turns; i++) {
    const tool = i % 3 === 1 ? `/call echo {"text":"tool ${i}"}` : `turn ${i}`;
    if (i % 5 === 2) steps.push({ type: "prompt", key: `p${i}`, input: tool, followUp: `follow ${i}`, steer: `steer ${i}` });
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
export async function runScript(seams: Seams, name: string, steps: readonly Step[], killAt?: number, deploy?: string): Promise<RunOutcome> {
  const firstVersion = seams.version;
  try {
    return await runSteps(seams, name, steps, killAt, deploy);
  } finally {
    seams.version = firstVersion;
  }
}

async function runSteps(seams: Seams, name: string, steps: readonly Step[], killAt: number | undefined, deploy: string | undefined): Promise<RunOutcome> {
  const session = new TestSession(name);
  expect((await session.rpc.createSession({ model: "echo" })).ok).toBe(true);
  const { commits } = await killAtCommit({
    session,
    steps,
    killAt,
    submit: (step, index) => runInDurableObject(session.stub, (instance: SessionObject) => submit(harnessOf(instance), step, index, steps)),
    quiesce: () => quiesce(session, seams),
    // The deploy drill: every instance after this kill runs the new deployed version.
    beforeAbort: () => {
      if (deploy !== undefined) seams.version = deploy;
    },
    afterReopen: async () => {
      if (deploy === undefined) return;
      const inspection = await session.rpc.inspect();
      // The reopened instance runs the new version; deploys reset the kill counters (nothing counts
      // under the old version) and nothing is quarantined.
      expect(inspection.version).toBe(deploy);
      expect(inspection.kills.filter((k) => k.version !== deploy)).toEqual([]);
      expect(inspection.quarantined).toEqual([]);
    },
    checkReopened: (index) => checkInvariants(session, steps.slice(0, index + 1), false),
  });
  await checkInvariants(session, steps, true);
  return { commits, ...(await outcome(session, steps)) };
}

/** One scenario of a kill-at-commit-k sweep, for `killAtCommit`. */
export interface KillRun<S> {
  readonly session: TestSession;
  readonly steps: readonly S[];
  /** Kill right after this commit; undefined for the uninterrupted run. */
  readonly killAt: number | undefined;
  /** Submit one step; idempotent, so the step a kill interrupted may be submitted again. */
  submit(step: S, index: number): Promise<void>;
  /** Until the session is quiescent; `step` is the step just submitted (undefined after the reopen). */
  quiesce(step: S | undefined): Promise<void>;
  /** The invariants at the reopened quiescent point; `index` is the step the kill interrupted. */
  checkReopened(index: number): Promise<void>;
  /** Once commit k is durable, right before the abort, with the dying instance. */
  beforeAbort?(instance: SessionObject): void;
  /** After the kill, before anything reopens the object: reads of its durable rows (a fresh instance's constructor opens and writes nothing). */
  inspectKilled?(storage: DurableObjectStorage): void;
  /**
   * false: commits the dying instance makes after commit k, before the abort lands, are not held back
   * (so the kill lands at k or a little later, and that is not asserted). Default true: exactly k.
   */
  readonly exactBoundary?: boolean;
  /** After the alarm (or a request) reopened the object, before it quiesces. */
  afterReopen?(): Promise<void>;
}

/**
 * The sweep's runner: submit `steps` one by one in `session`, killing the object right after its k-th
 * commit (`ctx.abort()` once that commit is durable; from commit k on no further commit of the instance
 * reaches storage, so exactly k commits are durable, which it asserts). After the kill only the alarm
 * reopens it (live work must have one; with nothing live and no alarm, a request does), then the
 * scenario's invariants are checked at quiescence and the interrupted step is submitted again.
 * Returns the commits the first instance made (the boundaries a sweep can kill at).
 */
export async function killAtCommit<S>(run: KillRun<S>): Promise<{ commits: number }> {
  const { session, steps, killAt } = run;
  const exact = run.exactBoundary !== false;
  const counter: { commits: number; killed: boolean; atKill?: number } = { commits: 0, killed: false };
  await runInDurableObject(session.stub, (instance: SessionObject, state) => {
    const h = harnessOf(instance);
    // The kill lands exactly at commit k: from commit k on, no further commit of this instance reaches
    // storage (each waits, and the kill takes it), so nothing after k is durable however long the
    // storage flush before the abort takes.
    const storage = h.storage;
    const commit = storage.commit.bind(storage);
    if (exact) storage.commit = (batch) => (counter.killed ? new Promise<never>(() => undefined) : commit(batch));
    h.onCommit(() => {
      counter.commits += 1;
      if (killAt !== undefined && counter.commits === killAt && !counter.killed) {
        counter.killed = true;
        // Killed once commit k (and the alarm written with it) is durable: an abort before the output
        // gate opens would take the commit with it, which is no boundary at all.
        void state.storage.sync().then(() => {
          counter.atKill = counter.commits;
          run.beforeAbort?.(instance);
          state.abort("eviction sweep");
        });
      }
    });
  });
  let index = 0;
  let reopened = false;
  while (index < steps.length) {
    const step = steps[index] as S;
    try {
      await run.submit(step, index);
      await run.quiesce(step);
      index += 1;
    } catch (error) {
      if (!counter.killed || reopened) throw error;
    }
    if (counter.killed && !reopened) {
      reopened = true;
      // Only the alarm reopens the object; then, with no request, the invariants hold at quiescence.
      // Read without opening the session (a fresh instance's constructor writes nothing): durable live
      // work must have an alarm that wakes it.
      const { armed, live } = await runInDurableObject(session.stub, async (_instance, state) => {
        run.inspectKilled?.(state.storage);
        return {
          armed: await state.storage.getAlarm(),
          live: state.storage.sql.exec("SELECT count(*) AS n FROM tasks WHERE role != 'terminal'").one()["n"] as number,
        };
      });
      if (live > 0) expect(armed, `live work has an alarm after the kill at commit ${killAt ?? 0} (step ${index}: ${JSON.stringify(steps[index])})`).not.toBeNull();
      if (armed !== null) expect(await runDurableObjectAlarm(session.stub)).toBe(true);
      // With nothing live and no alarm, the next request is what opens it.
      else await session.rpc.inspect();
      await run.afterReopen?.();
      await run.quiesce(undefined);
      await run.checkReopened(index);
      // The interrupted step is re-submitted (idempotent) by the loop unless it completed.
    }
  }
  if (killAt !== undefined) {
    expect(counter.killed).toBe(true);
    // The instance died with exactly k commits durable, not more.
    if (exact) expect(counter.atKill, `commits durable when the kill landed (k = ${killAt})`).toBe(killAt);
  }
  return { commits: counter.commits };
}

/** Submit one step; idempotent, so a step a kill interrupted may be submitted again. */
async function submit(h: Harness, step: Step, index: number, steps: readonly Step[]): Promise<void> {
  const root = h.rootId;
  switch (step.type) {
    case "prompt":
      await h.commitBound(call, { conversationId: root }, async (b) => {
        if ((await priorAcceptance(b, step.key)) !== undefined) return;
        await acceptInput(b, root, { input: step.input, requestId: step.key }, defaultTurnOptions, h.now());
        if (step.followUp !== undefined) queueInput(b, root, { mode: "followUp", input: step.followUp, requestId: `${step.key}:f` });
        if (step.steer !== undefined) queueInput(b, root, { mode: "steer", input: step.steer, requestId: `${step.key}:s` });
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
      await until(async () => (await session.rpc.inspect()).nextWake !== undefined || (await session.rpc.inspect()).start.length + (await session.rpc.inspect()).inflight.length === 0, "a live task without a wake");
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
      const result = (await h.storage.getValue(bindResult(acceptance.conversationId, acceptance.inputId)))?.value as InputResult | undefined;
      const waiting = (await h.storage.getValue(bindTo(waitingInputs, acceptance.conversationId)))?.value ?? [];
      const terminal = result?.status === "done" || result?.status === "unanswered";
      expect(terminal || (result?.status === "queued" && waiting.includes(acceptance.inputId)), `input ${key} is ${JSON.stringify(result)}`).toBe(true);
      if (result?.status === "done" && result.answer !== undefined) answers.set(key, result.answer);
    }
    // An answer is a real final answer entry, never a display-only partial; duplicates would show as
    // an extra answer in the visible context, which the end comparison with the uninterrupted run catches.
    for (const [key, answer] of answers) {
      const entry = await h.getEntry(answer, call);
      expect((entry?.model?.[0] as { stopReason?: string } | undefined)?.stopReason, `answer of ${key}`).not.toBe("aborted");
    }
    // Every inbox element has one acceptance at most (a request key never maps to two inputs).
    const inbox = await h.storage.readList<QueuedInput>(bindInbox(h.rootId), { limit: 1000 });
    const requestIds = inbox.items.map((e) => e.value.requestId).filter((r) => r !== undefined);
    expect(new Set(requestIds).size).toBe(requestIds.length);
  });
}

async function outcome(session: TestSession, steps: readonly Step[]): Promise<Omit<RunOutcome, "commits">> {
  return runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const contexts: string[] = [];
    for (const conversation of (await h.conversations({ limit: 100 }, call)).items) {
      const handle = await h.conversation(conversation.id, call);
      if (handle === undefined) continue;
      const messages = requestMessages(await handle.contextEntries(undefined, call));
      contexts.push(JSON.stringify(messages, (key, value: unknown) => (key === "timestamp" || key === "usage" || key === "responseId" || key === "id" || key === "toolCallId" || key === "durationMs" ? undefined : value)));
    }
    const results: Record<string, string> = {};
    for (const key of keysOf(steps)) {
      const acceptance = await acceptanceOf(h, key);
      if (acceptance === undefined) {
        results[key] = "missing";
        continue;
      }
      const result = (await h.storage.getValue(bindResult(acceptance.conversationId, acceptance.inputId)))?.value as InputResult | undefined;
      const answer = result?.status === "done" && result.answer !== undefined ? await h.getEntry(result.answer, call) : undefined;
      results[key] = `${result?.status ?? "missing"}${answer === undefined ? "" : `: ${JSON.stringify(answer.model?.[0] === undefined ? null : (answer.model[0] as { content?: unknown }).content)}`}`;
    }
    return { contexts, results };
  });
}

async function acceptanceOf(h: Harness, key: string): Promise<Acceptance | undefined> {
  return (await h.storage.getValue(bindTo(requestKey(key), h.rootId)))?.value;
}

/** Every request key the steps use, in script order. */
function keysOf(steps: readonly Step[]): string[] {
  return steps.flatMap((s) => (s.type === "prompt" ? [s.key, ...(s.followUp === undefined ? [] : [`${s.key}:f`]), ...(s.steer === undefined ? [] : [`${s.key}:s`])] : s.type === "webhook" ? [s.key] : []));
}
