/**
 * Fixtures for the SessionObject tests: a manual clock (per object instance, over one shared time),
 * test task kinds with controllable behaviour, a log of their invocations, and stub helpers.
 *
 * The Durable Objects of the main worker run in the tests' isolate, so this module's state is shared
 * with them: the kinds installed through `registerTestKinds` and the seams set through `setHostSeams`
 * are what the next object instance uses (src/worker/session/kinds.ts, src/worker/platform/host-config.ts).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { BACKGROUND_CONTEXT, type Call } from "../../src/core/call.js";
import type { Harness } from "../../src/core/harness.js";
import type { Clock, InvocationMethod } from "../../src/core/host.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import {
  defineTaskKind,
  erase,
  type AnyTaskKind,
  type TaskDefinition,
  type TaskRoles,
} from "../../src/core/task-kind.js";
import type { Id, Task, TaskStateBase } from "../../src/storage/records.js";
import { setHostSeams, type HostReport } from "../../src/worker/platform/host-config.js";
import { registerTestKinds, resetTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { sessionRpc, type SessionRpc } from "../../src/worker/session/rpc.js";

export const call = BACKGROUND_CONTEXT;

// -------------------------------------------------------------------------------------------------
// Time

/** Shared time. It starts a day ahead of the real clock so that alarms set from it never fire on their
 * own during a test run: tests run alarms by hand (runDurableObjectAlarm). */
export class ManualTime {
  now = Math.ceil((Date.now() + 86_400_000) / 1000) * 1000;
}

/**
 * One object instance's clock. Sleepers belong to the instance that registered them, so a killed
 * instance's sleepers are never woken by a later instance advancing the shared time.
 */
export class ManualClock implements Clock {
  readonly #time: ManualTime;
  readonly #sleepers = new Set<{ until: number; resolve: () => void }>();

  constructor(time: ManualTime) {
    this.#time = time;
  }

  now(): number {
    return this.#time.now;
  }

  sleep(untilMs: number, signal: AbortSignal | undefined): Promise<void> {
    if (untilMs <= this.#time.now) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const sleeper = {
        until: untilMs,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.#sleepers.delete(sleeper);
        reject(signal?.reason);
      };
      this.#sleepers.add(sleeper);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** When this instance's sleepers are due, earliest first (what a test waits on before moving time). */
  sleeping(): number[] {
    return [...this.#sleepers].map((s) => s.until).sort((a, b) => a - b);
  }

  /** Move the shared time forward and wake this instance's sleepers that are due. */
  advanceTo(ms: number): void {
    this.#time.now = Math.max(this.#time.now, ms);
    for (const sleeper of [...this.#sleepers]) {
      if (sleeper.until <= this.#time.now) {
        this.#sleepers.delete(sleeper);
        sleeper.resolve();
      }
    }
  }
}

export interface Seams {
  readonly time: ManualTime;
  version: string;
  readonly reports: HostReport[];
}

/** Install a manual clock, a settable version and a report log for the next object instances. */
export function installSeams(): Seams {
  const seams: Seams = { time: new ManualTime(), version: "v1", reports: [] };
  setHostSeams({
    clock: () => new ManualClock(seams.time),
    version: () => seams.version,
    report: (report) => seams.reports.push(report),
  });
  return seams;
}

export function resetSeams(): void {
  setHostSeams({});
  resetTestKinds();
}

// -------------------------------------------------------------------------------------------------
// Invocation log

export interface LoggedCall {
  readonly kind: string;
  readonly taskId: Id;
  readonly method: InvocationMethod;
  readonly status: string;
}

const log: LoggedCall[] = [];
const logWaiters = new Set<() => void>();

export function logCall(kind: string, task: Task, method: InvocationMethod): void {
  log.push({ kind, taskId: task.id, method, status: task.state.status });
  for (const wake of [...logWaiters]) wake();
}

export function calls(taskId: Id): LoggedCall[] {
  return log.filter((entry) => entry.taskId === taskId);
}

export function clearLog(): void {
  log.length = 0;
}

/** Resolve once `taskId` has been invoked `count` times in all (bounded by real time, never asserted). */
export async function waitForCalls(taskId: Id, count: number): Promise<LoggedCall[]> {
  await until(() => calls(taskId).length >= count, `task ${taskId} invoked ${count} times`);
  return calls(taskId);
}

/** The value of an RPC result, or its problem's detail thrown: for steps a test expects to succeed. */
export async function ok<T>(
  outcome: Promise<{ ok: true; value: T } | { ok: false; problem: { detail: string } }>,
): Promise<T> {
  const result = await outcome;
  if (!result.ok) throw new Error(result.problem.detail);
  return result.value;
}

/** Poll `predicate` between macrotasks; fails (without asserting any time) after many rounds. */
export async function until(predicate: () => boolean | Promise<boolean>, what: string, rounds = 2000): Promise<void> {
  for (let round = 0; round < rounds; round += 1) {
    if (await predicate()) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 2);
      logWaiters.add(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    logWaiters.clear();
  }
  throw new Error(`gave up waiting for: ${what}`);
}

/** Never resolves; rejects with the call's abort reason when its signal fires (like a provider stream). */
function hangUntilCancelled(c: Call): Promise<never> {
  return new Promise<never>((_resolve, reject) => {
    const signal = c.abortSignal;
    if (signal === undefined) return;
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

// -------------------------------------------------------------------------------------------------
// Test kinds

/** Retry: pending -> retry_wait (wake time durable in state) -> sleeps in execute -> done at its wake. */
export type RetryState =
  | { status: "pending"; delayMs: number }
  | { status: "retry_wait"; delayMs: number; notBefore: number }
  | { status: "done"; delayMs: number; resumedAt: number }
  | { status: "aborted"; delayMs: number };

export const retryKind = defineTaskKind<RetryState, TaskRuntime>()({
  kind: "test.retry",
  roles: { pending: "start", retry_wait: "start", done: "terminal", aborted: "terminal" },
  initialStatus: "pending",
  async execute(task, runtime, c) {
    logCall("test.retry", task, "execute");
    let notBefore: number;
    if (task.state.status === "pending") {
      notBefore = runtime.now() + task.state.delayMs;
      await runtime.commit((tx) => tx.patch(task, "retry_wait", { delayMs: task.state.delayMs, notBefore }), c);
    } else if (task.state.status === "retry_wait") {
      notBefore = task.state.notBefore;
    } else return;
    // §5.3: the task sleeps in its own execute; after a kill, execute sleeps only the remainder.
    await runtime.sleep(notBefore, c);
    await runtime.commit((tx) => tx.settle(task, "done", { delayMs: task.state.delayMs, resumedAt: runtime.now() }), c);
  },
  async recover(task, _runtime, _c) {
    logCall("test.retry", task, "recover");
  },
  async abort(task, runtime, c) {
    logCall("test.retry", task, "abort");
    await runtime.commit((tx) => tx.settle(task, "aborted", { delayMs: task.state.delayMs }), c);
  },
});

/** Kill-prone work: execute commits inflight, then blocks on the world until killed or cancelled. The
 * `recovers` flag decides whether recover settles (true) or blocks again (false). */
export type StuckState =
  | { status: "pending"; recovers: boolean }
  | { status: "running"; recovers: boolean }
  | { status: "done"; recovers: boolean; by: string }
  | { status: "aborted"; recovers: boolean };

export const stuckKind = defineTaskKind<StuckState, TaskRuntime>()({
  kind: "test.stuck",
  roles: { pending: "start", running: "inflight", done: "terminal", aborted: "terminal" },
  initialStatus: "pending",
  async execute(task, runtime, c) {
    logCall("test.stuck", task, "execute");
    // §5.3 rule 1: commit an inflight status before the external effect.
    await runtime.commit((tx) => tx.patch(task, "running", { recovers: task.state.recovers }), c);
    await hangUntilCancelled(c);
  },
  async recover(task, runtime, c) {
    logCall("test.stuck", task, "recover");
    if (task.state.recovers) {
      await runtime.commit((tx) => tx.settle(task, "done", { recovers: true, by: "recover" }), c);
      return;
    }
    await hangUntilCancelled(c);
  },
  async abort(task, runtime, c) {
    logCall("test.stuck", task, "abort");
    await runtime.commit((tx) => tx.settle(task, "aborted", { recovers: task.state.recovers }), c);
  },
});

/** A recurring loop: every execute goes through running (and a due retry_wait every third round) back
 * to its start status, returning normally each time; done after `rounds`. */
export type LoopState =
  | { status: "planned"; round: number; rounds: number }
  | { status: "running"; round: number; rounds: number }
  | { status: "retry_wait"; round: number; rounds: number; notBefore: number }
  | { status: "done"; round: number; rounds: number };

export const loopKind = defineTaskKind<LoopState, TaskRuntime>()({
  kind: "test.loop",
  roles: { planned: "start", running: "inflight", retry_wait: "start", done: "terminal" },
  initialStatus: "planned",
  async execute(task, runtime, c) {
    logCall("test.loop", task, "execute");
    const { round, rounds } = task.state;
    if (task.state.status === "retry_wait") {
      await runtime.sleep(task.state.notBefore, c);
      await runtime.commit((tx) => tx.patch(task, "planned", { round: round + 1, rounds }), c);
      return;
    }
    await runtime.commit((tx) => tx.patch(task, "running", { round, rounds }), c);
    if (round >= rounds) {
      await runtime.commit((tx) => tx.settle(task, "done", { round, rounds }), c);
    } else if (round % 3 === 0) {
      await runtime.commit((tx) => tx.patch(task, "retry_wait", { round, rounds, notBefore: runtime.now() }), c);
    } else {
      await runtime.commit((tx) => tx.patch(task, "planned", { round: round + 1, rounds }), c);
    }
  },
  async recover(task, runtime, c) {
    logCall("test.loop", task, "recover");
    await runtime.commit((tx) => tx.patch(task, "planned", { round: task.state.round, rounds: task.state.rounds }), c);
  },
  async abort(task, runtime, c) {
    logCall("test.loop", task, "abort");
    await runtime.commit((tx) => tx.settle(task, "done", { round: task.state.round, rounds: task.state.rounds }), c);
  },
});

/** Breaks the task contract (§5.3 rule 3) when `broken`: execute returns without a transition. */
export type ContractState = { status: "pending"; note: string } | { status: "done"; note: string };

export function contractKind(broken: boolean) {
  return defineTaskKind<ContractState, TaskRuntime>()({
    kind: "test.contract",
    roles: { pending: "start", done: "terminal" },
    initialStatus: "pending",
    async execute(task, runtime, c) {
      logCall("test.contract", task, "execute");
      if (broken) return;
      await runtime.commit((tx) => tx.settle(task, "done", { note: "fixed" }), c);
    },
    async recover(task, _runtime, _c) {
      logCall("test.contract", task, "recover");
    },
    async abort(task, runtime, c) {
      logCall("test.contract", task, "abort");
      await runtime.commit((tx) => tx.settle(task, "done", { note: "aborted" }), c);
    },
  });
}

export function installKinds(extra: readonly AnyTaskKind[] = []): void {
  registerTestKinds([erase(retryKind), erase(stuckKind), erase(loopKind), erase(contractKind(false)), ...extra]);
}

// -------------------------------------------------------------------------------------------------
// Stubs

let objects = 0;

/**
 * One session object under test. A stub that reached an aborted object stays broken ("Application
 * called abortAllDurableObjects()"), so every access makes a fresh stub for the same id.
 */
export class TestSession {
  readonly id: DurableObjectId;

  constructor(name: string) {
    objects += 1;
    this.id = env.SESSIONS.idFromName(`session-object:${name}:${objects}:${crypto.randomUUID()}`);
  }

  get stub(): DurableObjectStub<SessionObject> {
    return env.SESSIONS.get(this.id);
  }

  get rpc(): SessionRpc {
    return sessionRpc(this.stub);
  }
}

/** The instance's open harness (opened by create, an operation or an alarm). */
export function harnessOf(instance: SessionObject): Harness {
  const harness = instance.harness;
  if (harness === undefined) throw new Error("the session object has not opened its harness");
  return harness;
}

export function clockOf(instance: SessionObject): ManualClock {
  const clock = instance.clock;
  if (!(clock instanceof ManualClock)) throw new Error("the session object does not run on the manual clock");
  return clock;
}

/** Commit one task into the root conversation of an open session. */
export function addTask<S extends TaskStateBase, R extends TaskRoles<S>>(
  session: TestSession,
  kind: TaskDefinition<S, R>,
  state: S,
): Promise<Id> {
  return runInDurableObject(session.stub, async (instance: SessionObject) => {
    const root = await harnessOf(instance).root(call);
    return root.commit((tx) => tx.task(kind, { state }), call);
  });
}

/** The stored task, read through the instance's open harness. */
export function taskOf(session: TestSession, id: Id): Promise<Task | undefined> {
  return runInDurableObject(session.stub, async (instance: SessionObject) =>
    (await harnessOf(instance).storage.getTasks([id])).get(id),
  );
}
