/**
 * The one harness for every kill-at-commit scenario (§5.3, §6.4): a scripted session in a
 * real session Durable Object, run once uninterrupted and then, in separate runs, killed right after
 * commit k (`ctx.abort()` once that commit is durable: the platform's own reset, nothing of the instance
 * survives; from commit k on no further commit of the instance reaches storage, so exactly k commits are
 * durable, which each run asserts). After the kill only the alarm reopens it (no request); the runner then
 * checks the scenario's invariants at that quiescent point, finishes the script, checks them again at
 * the end and returns what the scenario compares with the uninterrupted run.
 *
 * A scenario (`Scenario`) is its steps (each idempotent, so the step a kill interrupted is simply
 * submitted again), how it submits one and waits for quiescence, its invariants after the reopen and at
 * the end, and what it compares. The scenarios: the turn script (eviction-script.ts; evictions.test.ts,
 * evictions-subagents.test.ts, the full sweep), jobs and schedules (evictions-jobs.test.ts) and a rig
 * (evictions-rig.test.ts). The checks several of them share are exported below.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { expect } from "vitest";
import type { SessionConfigBody } from "../../src/api/schemas.js";
import { requestMessages } from "../../src/core/context.js";
import type { ConversationHandle } from "../../src/core/conversation.js";
import type { Harness } from "../../src/core/harness.js";
import {
  bindInbox,
  bindResult,
  requestKey,
  type Acceptance,
  type InputResult,
  type QueuedInput,
} from "../../src/core/inbox.js";
import { bindTo } from "../../src/core/state.js";
import { waitingInputs } from "../../src/kinds/waiting.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, harnessOf, TestSession } from "./session-fixtures.js";

/** One kill-at-commit scenario, for `runScenario`; `S` is its step, `O` what a run ends with. */
export interface Scenario<S, O> {
  /** What the scenario's session is created with. */
  readonly config: SessionConfigBody;
  /**
   * The tenant a session is created for (as over HTTP, so it has a directory row and its tenant's endpoints); none by
   * default.
   */
  readonly tenant?: string;
  readonly steps: readonly S[];
  /** Submit one step; idempotent, so the step a kill interrupted may be submitted again. */
  submit(session: TestSession, step: S, index: number): Promise<void>;
  /** Until the session is quiescent; `step` is the step just submitted (undefined after the reopen). */
  quiesce(session: TestSession, step: S | undefined): Promise<void>;
  /** The scenario's invariants at the reopened quiescent point; `index` is the step the kill interrupted. */
  checkReopened(session: TestSession, index: number): Promise<void>;
  /** The scenario's invariants once every step ran, and the end state compared across runs. */
  checkEnd(session: TestSession): Promise<O>;
  /** Once commit k is durable, right before the abort, with the dying instance. */
  beforeAbort?(instance: SessionObject): void;
  /**
   * After the kill, before anything reopens the object: reads of its durable rows (a fresh instance's constructor opens
   * and writes nothing).
   */
  inspectKilled?(storage: DurableObjectStorage): void;
  /** After the alarm (or a request) reopened the object, before it quiesces. */
  afterReopen?(session: TestSession): Promise<void>;
  /**
   * false: commits the dying instance makes after commit k, before the abort lands, are not held back
   * (so the kill lands at k or a little later, and that is not asserted). Default true: exactly k.
   */
  readonly exactBoundary?: boolean;
}

/**
 * Run `scenario` in a fresh session named after `name`; with `killAt`, kill the object right after its
 * k-th commit. Returns the scenario's end state and the commits the first instance made (the boundaries
 * a sweep can kill at).
 */
export async function runScenario<S, O>(
  scenario: Scenario<S, O>,
  name: string,
  killAt?: number,
): Promise<O & { readonly commits: number }> {
  const session = new TestSession(name);
  expect(
    (
      await session.rpc.createSession(
        scenario.config,
        scenario.tenant === undefined ? undefined : { tenant: scenario.tenant, session: name },
      )
    ).ok,
  ).toBe(true);
  const { commits } = await killAtCommit(session, scenario, killAt);
  return { ...(await scenario.checkEnd(session)), commits };
}

/**
 * The sweep's runner: submit the steps one by one in `session`, killing the object right after its k-th
 * commit (`ctx.abort()` once that commit is durable; from commit k on no further commit of the instance
 * reaches storage, so exactly k commits are durable, which it asserts). After the kill only the alarm
 * reopens it (live work must have one; with nothing live and no alarm, a request does), then the
 * scenario's invariants are checked at quiescence and the interrupted step is submitted again.
 */
async function killAtCommit<S, O>(
  session: TestSession,
  run: Scenario<S, O>,
  killAt: number | undefined,
): Promise<{ commits: number }> {
  const { steps } = run;
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
      await run.submit(session, step, index);
      await run.quiesce(session, step);
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
      if (live > 0)
        expect(
          armed,
          `live work has an alarm after the kill at commit ${killAt ?? 0} (step ${index}: ${JSON.stringify(steps[index])})`,
        ).not.toBeNull();
      if (armed !== null) expect(await runDurableObjectAlarm(session.stub)).toBe(true);
      // With nothing live and no alarm, the next request is what opens it.
      else await session.rpc.inspect();
      await run.afterReopen?.(session);
      await run.quiesce(session, undefined);
      await run.checkReopened(session, index);
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

// -------------------------------------------------------------------------------------------------
// Checks several scenarios share

/** The acceptance a request key maps to in the root conversation, if it was accepted. */
export async function acceptanceOf(h: Harness, key: string): Promise<Acceptance | undefined> {
  return (await h.storage.getValue(bindTo(requestKey(key), h.rootId)))?.value;
}

/** An accepted input's result, if it has one. */
export async function resultOf(h: Harness, acceptance: Acceptance): Promise<InputResult | undefined> {
  return (await h.storage.getValue(bindResult(acceptance.conversationId, acceptance.inputId)))?.value as
    InputResult | undefined;
}

/**
 * An accepted input (`label` names it) has one terminal result, or is `waiting` after a failed group. Returns its
 * result.
 */
export async function expectSettled(
  h: Harness,
  label: string,
  acceptance: Acceptance,
): Promise<InputResult | undefined> {
  const result = await resultOf(h, acceptance);
  const waiting = (await h.storage.getValue(bindTo(waitingInputs, acceptance.conversationId)))?.value ?? [];
  const terminal = result?.status === "done" || result?.status === "unanswered";
  expect(
    terminal || (result?.status === "queued" && waiting.includes(acceptance.inputId)),
    `input ${label} is ${JSON.stringify(result)}`,
  ).toBe(true);
  return result;
}

/** Every element of the root's inbox has one acceptance at most (a request key never maps to two inputs). */
export async function expectInboxKeysOnce(h: Harness): Promise<void> {
  const inbox = await h.storage.readList<QueuedInput>(bindInbox(h.rootId), { limit: 1000 });
  const requestIds = inbox.items.map((e) => e.value.requestId).filter((r) => r !== undefined);
  expect(new Set(requestIds).size).toBe(requestIds.length);
}

/**
 * A conversation's model-visible context (requestMessages: display-only partials excluded), as JSON
 * without what differs between equal runs (ids, times, usage); `text` rewrites every string in it.
 */
export async function visibleContext(
  handle: ConversationHandle,
  text: (value: string) => string = (value) => value,
): Promise<string> {
  const messages = requestMessages(await handle.contextEntries(undefined, call));
  return JSON.stringify(messages, (key, value: unknown) =>
    key === "timestamp" ||
    key === "usage" ||
    key === "responseId" ||
    key === "id" ||
    key === "toolCallId" ||
    key === "durationMs"
      ? undefined
      : typeof value === "string"
        ? text(value)
        : value,
  );
}
