/**
 * Fixtures for the driver tests (§6, §10.2): deferred promises to hold an invocation at a precise point,
 * a manual fake clock, a storage wrapper with a commit barrier that can also "crash" (the old harness
 * loses its storage while the data survives for a reopen), and a scripted task kind whose methods the
 * test supplies.
 */
import { BACKGROUND_CONTEXT, withAbortSignal, type Call } from "../../src/core/call.js";
import { Harness, type HarnessOptions } from "../../src/core/harness.js";
import type { Clock } from "../../src/core/host.js";
import { HookRegistry } from "../../src/core/hooks.js";
import { conversationValue } from "../../src/core/state.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { defineTaskKind, erase, type AnyTaskKind, type TypedTask } from "../../src/core/task-kind.js";
import type { CommitBatch, Id } from "../../src/storage/records.js";
import { StorageError, type Storage } from "../../src/storage/storage.js";

export const call = BACKGROUND_CONTEXT;

// ---------------------------------------------------------------------------------------------
// Deferred promises and yielding

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
  readonly settled: boolean;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  let reject: (error: unknown) => void = () => undefined;
  let settled = false;
  const promise = new Promise<T>((res, rej) => {
    resolve = (v) => {
      settled = true;
      res(v);
    };
    reject = (e) => {
      settled = true;
      rej(e);
    };
  });
  // Unobserved rejections of test-only deferreds are not failures.
  promise.catch(() => undefined);
  return {
    promise,
    resolve: (v) => resolve(v),
    reject: (e) => reject(e),
    get settled() {
      return settled;
    },
  };
}

/** Let the line and dispatched invocations settle: line round-trips interleaved with macrotask yields. */
export async function flush(h: Harness, rounds = 6): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await h.line.run(() => undefined);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }
}

/** Macrotask yields only (safe while the line is blocked at a storage barrier). */
export async function ticks(n = 3): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setTimeout(resolve, 0));
}

/** Resolve when `predicate` holds, flushing between checks (bounded, never a wall-clock sleep). */
export async function until(h: Harness, predicate: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (predicate()) return;
    await flush(h, 1);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Outcome of a promise without throwing: the error, or "ok" with its value. */
export async function outcome<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A call whose signal the test controls; counts listener registration on that signal. */
export function cancellableCall(): {
  call: Call;
  controller: AbortController;
  added: () => number;
  removed: () => number;
} {
  const controller = new AbortController();
  const signal = controller.signal;
  let added = 0;
  let removed = 0;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((...args: Parameters<AbortSignal["addEventListener"]>) => {
    if (args[0] === "abort") added += 1;
    add(...args);
  }) as AbortSignal["addEventListener"];
  signal.removeEventListener = ((...args: Parameters<AbortSignal["removeEventListener"]>) => {
    if (args[0] === "abort") removed += 1;
    remove(...args);
  }) as AbortSignal["removeEventListener"];
  return { call: withAbortSignal(signal, BACKGROUND_CONTEXT), controller, added: () => added, removed: () => removed };
}

// ---------------------------------------------------------------------------------------------
// Fake clock

interface Timer {
  readonly until: number;
  readonly fire: () => void;
}

/** A manual clock: sleeps resolve only when the test advances time past their wake time. */
export class FakeClock implements Clock {
  #now: number;
  readonly #timers = new Set<Timer>();

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  sleep(untilMs: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      if (untilMs <= this.#now) {
        resolve();
        return;
      }
      const onAbort = (): void => {
        this.#timers.delete(timer);
        reject(signal?.reason);
      };
      const timer: Timer = {
        until: untilMs,
        fire: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      this.#timers.add(timer);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  advance(ms: number): void {
    this.#now += ms;
    for (const timer of [...this.#timers]) {
      if (timer.until <= this.#now) {
        this.#timers.delete(timer);
        timer.fire();
      }
    }
  }

  get pending(): number {
    return this.#timers.size;
  }
}

// ---------------------------------------------------------------------------------------------
// Storage barrier and crash

/**
 * Wraps a storage: commits can be held at a barrier (built and validated, not yet durable), and the
 * wrapper can be closed or "crashed" without closing the inner storage, so a fresh harness can reopen
 * the same data through `reopen()` (a process restart over durable state).
 */
export class GateStorage implements Storage {
  #barrier: Deferred | undefined;
  #hit: Deferred | undefined;
  closed = false;
  readonly batches: CommitBatch[] = [];

  constructor(readonly inner: Storage) {}

  /** Hold the next commits at the barrier; resolves when the first one arrives there. */
  pause(): Promise<void> {
    this.#barrier = deferred();
    this.#hit = deferred();
    return this.#hit.promise;
  }

  resume(): void {
    const barrier = this.#barrier;
    this.#barrier = undefined;
    barrier?.resolve();
  }

  /** The process died: this wrapper refuses everything; the data stays for `reopen()`. */
  crash(): void {
    this.closed = true;
    this.resume();
  }

  reopen(): GateStorage {
    return new GateStorage(this.inner);
  }

  #open(): void {
    if (this.closed) throw new StorageError("closed", "storage is closed");
  }

  get lastSeq(): Id {
    return this.inner.lastSeq;
  }

  async commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    this.#open();
    const barrier = this.#barrier;
    if (barrier !== undefined) {
      this.#hit?.resolve();
      await barrier.promise;
    }
    this.#open();
    const result = await this.inner.commit(batch);
    this.batches.push(batch);
    return result;
  }

  getConversations: Storage["getConversations"] = async (ids) => (this.#open(), this.inner.getConversations(ids));
  scanConversations: Storage["scanConversations"] = async (q) => (this.#open(), this.inner.scanConversations(q));
  getEntries: Storage["getEntries"] = async (ids) => (this.#open(), this.inner.getEntries(ids));
  scanEntries: Storage["scanEntries"] = async (q) => (this.#open(), this.inner.scanEntries(q));
  newestHead: Storage["newestHead"] = async (c, at) => (this.#open(), this.inner.newestHead(c, at));
  entryKinds: Storage["entryKinds"] = async () => (this.#open(), this.inner.entryKinds());
  getTasks: Storage["getTasks"] = async (ids) => (this.#open(), this.inner.getTasks(ids));
  scanTasks: Storage["scanTasks"] = async (q) => (this.#open(), this.inner.scanTasks(q));
  getValue: Storage["getValue"] = async (addr, at) => (this.#open(), this.inner.getValue(addr, at));
  scanValues: Storage["scanValues"] = async (q) => (this.#open(), this.inner.scanValues(q));
  readList: Storage["readList"] = async (addr, q) => (this.#open(), this.inner.readList(addr, q));

  async close(): Promise<void> {
    this.closed = true;
  }
}

// ---------------------------------------------------------------------------------------------
// A scripted task kind

export type StepState =
  | { status: "pending"; tag: string; refs: number[] }
  | { status: "running"; tag: string; refs: number[] }
  | { status: "done"; tag: string; refs: number[] }
  | { status: "failed"; tag: string; refs: number[] }
  | { status: "aborted"; tag: string; refs: number[] };

export const stepRoles = {
  pending: "start",
  running: "inflight",
  done: "terminal",
  failed: "terminal",
  aborted: "terminal",
} as const;

export type StepTask = TypedTask<StepState, typeof stepRoles>;
export type StepMethod = (task: StepTask, runtime: TaskRuntime, call: Call) => Promise<void>;

export interface StepMethods {
  readonly execute?: StepMethod;
  readonly recover?: StepMethod;
  readonly abort?: StepMethod;
}

/** Settle a step task in one of its terminal statuses, keeping its payload (and optionally new refs). */
export function settleStep(
  runtime: TaskRuntime,
  task: StepTask,
  status: "done" | "failed" | "aborted",
  call: Call,
  refs = task.state.refs,
): Promise<void> {
  const payload = { tag: task.state.tag, refs };
  return runtime.commit((tx) => {
    if (status === "done") tx.settle(task, "done", payload);
    else if (status === "failed") tx.settle(task, "failed", payload);
    else tx.settle(task, "aborted", payload);
  }, call);
}

/** Patch a step task to a live status. */
export function patchStep(
  runtime: TaskRuntime,
  task: StepTask,
  status: "pending" | "running",
  call: Call,
  refs = task.state.refs,
): Promise<void> {
  const payload = { tag: task.state.tag, refs };
  return runtime.commit((tx) => {
    if (status === "pending") tx.patch(task, "pending", payload);
    else tx.patch(task, "running", payload);
  }, call);
}

/** A kind over StepState: execute and recover settle done, abort settles aborted, unless scripted. */
export function stepKind(name: string, methods: StepMethods = {}, options: { turn?: true } = {}) {
  return defineTaskKind<StepState, TaskRuntime>()({
    kind: name,
    roles: stepRoles,
    initialStatus: "pending",
    ...(options.turn === true ? { turn: true as const } : {}),
    execute: methods.execute ?? ((task, runtime, c) => settleStep(runtime, task, "done", c)),
    recover: methods.recover ?? ((task, runtime, c) => settleStep(runtime, task, "done", c)),
    abort: methods.abort ?? ((task, runtime, c) => settleStep(runtime, task, "aborted", c)),
  });
}

export type StepKind = ReturnType<typeof stepKind>;

export function openWith(
  storage: Storage,
  kinds: readonly StepKind[],
  options: Omit<HarnessOptions, "taskKinds"> & { extraKinds?: readonly AnyTaskKind[] } = {},
): Promise<Harness> {
  const { extraKinds, ...rest } = options;
  return Harness.open(storage, { ...rest, taskKinds: [...kinds.map((k) => erase(k)), ...(extraKinds ?? [])] }, call);
}

/** Create a step task from the host. */
export function addStep(
  h: Harness,
  kind: StepKind,
  conversationId: Id,
  options: { tag?: string; refs?: number[]; after?: readonly Id[]; background?: true } = {},
): Promise<Id> {
  return h.commit(
    (tx) =>
      tx.task(kind, {
        conversationId,
        state: { status: "pending", tag: options.tag ?? "t", refs: options.refs ?? [] },
        ...(options.after === undefined ? {} : { after: options.after }),
        ...(options.background === undefined ? {} : { background: true as const }),
      }),
    call,
  );
}

/** Per-task invocation bookkeeping: events in order and concurrent invocations per task. */
export class Trace {
  readonly events: string[] = [];
  readonly #active = new Map<Id, number>();
  maxConcurrent = 0;

  /** Wrap a method: records `${method}:start:${id}` / `:end:` / `:threw:` and the concurrency high-water mark. */
  wrap(method: "execute" | "recover" | "abort", body: StepMethod): StepMethod {
    return async (task, runtime, c) => {
      const n = (this.#active.get(task.id) ?? 0) + 1;
      this.#active.set(task.id, n);
      this.maxConcurrent = Math.max(this.maxConcurrent, n);
      this.events.push(`${method}:start:${task.state.tag}`);
      try {
        await body(task, runtime, c);
        this.events.push(`${method}:end:${task.state.tag}`);
      } catch (error) {
        this.events.push(`${method}:threw:${task.state.tag}`);
        throw error;
      } finally {
        this.#active.set(task.id, (this.#active.get(task.id) ?? 1) - 1);
      }
    };
  }

  count(event: string): number {
    return this.events.filter((e) => e === event).length;
  }
}

/** Per-tag gates: a test kind awaits `gates.get(tag)`; the test resolves it. */
export class Gates {
  readonly #map = new Map<string, Deferred>();
  get(tag: string): Deferred {
    let d = this.#map.get(tag);
    if (d === undefined) this.#map.set(tag, (d = deferred()));
    return d;
  }
  open(tag: string): void {
    this.get(tag).resolve();
  }
}

/** Await `gate`, or reject with the call's cancellation reason (cooperative cancellation). */
export function cancellable(gate: Promise<void>, c: Call): Promise<void> {
  const signal = c.abortSignal;
  if (signal === undefined) return gate;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    gate.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      (e: unknown) => reject(e),
    );
  });
}

/** The tag a spawned child's first step task gets (set through spawn's initial values). */
export const childTag = conversationValue<string>("test.child.tag", { rewind: false });

/**
 * A turn API whose "first generation" of a spawned child is a step task of `kind`, tagged with the
 * child's initial `childTag` value and holding the prompt's inputId in refs (core tests have no
 * generation kind). spawn is the only turn operation it supports.
 */
export function installStepTurns(h: Harness, kind: StepKind): void {
  const unsupported = (): never => {
    throw new Error("the step turn API supports spawn only");
  };
  h.turns = {
    hooks: new HookRegistry(),
    generation: { kind: kind.kind },
    firstGeneration: (b, conversationId, inputs, initial) =>
      Promise.resolve(
        b.task(kind, conversationId, {
          state: { status: "pending", tag: initial(childTag) ?? "child", refs: [...inputs] },
        }),
      ),
    accept: unsupported,
    prompt: unsupported,
    collapse: unsupported,
    reset: unsupported,
  };
}
