/**
 * TaskRuntime (§5.2): the capabilities an execute/recover/abort invocation gets. It is bound to its
 * invocation: a commit whose call carries another (or no) invocation identity is refused, so a leaked
 * runtime cannot write on behalf of a task it no longer owns (§6.5).
 */
import { track, type Tracker } from "@earendil-works/chord/delta";
import type { Entry, Id, Task, TaskStateBase } from "../storage/records.js";
import { watchHub } from "./watch-hub.js";
import type { Call } from "./call.js";
import type { ConversationHandle } from "./conversation.js";
import type { Driver } from "./driver.js";
import { invocationOf, type Invocation } from "./driver-types.js";
import type { EntryKind } from "./entries.js";
import type { ExecutionEnv } from "./env.js";
import { PicoError } from "./errors.js";
import type { Harness } from "./harness.js";
import type { ListHandle, ValueHandle } from "./handles.js";
import { listHandle, valueHandle } from "./harness.js";
import type { InvocationMethod } from "./host.js";
import { bind, type ListRef, type ValueRef, type ValueSpec } from "./state.js";
import type {
  ConfigSpec,
  ConfigValues,
  PreviewSpec,
  ReadTask,
  TaskDefinition,
  TaskRoles,
  TaskRuntimeLike,
} from "./task-kind-types.js";
import { readWait, waitValue, type AnswerOutcome, type WaitRecord } from "./answers.js";
import { conversationTx, type ConversationTx, type ScratchTx, type TxBuilder } from "./tx.js";

export interface TaskRuntime extends TaskRuntimeLike {
  readonly taskId: Id;
  readonly conversationId: Id;
  readonly method: InvocationMethod;
  commit<T>(plan: (tx: ConversationTx) => T | Promise<T>, call: Call): Promise<T>;
  /**
   * The same commit through the erased builder, bound to this task's conversation: the built-in turn
   * kinds use it so the placement helpers (src/kinds/placement.ts), which take a TxBuilder, apply.
   */
  commitBuilder<T>(plan: (b: TxBuilder) => T | Promise<T>, call: Call): Promise<T>;
  scratch<T>(plan: (sc: ScratchTx) => T | Promise<T>, call: Call): Promise<T>;
  /** The injected clock; task code never reads Date.now(). */
  now(): number;
  /** The harness's execution environment, FileSystem & Shell (§5.2): its own methods, no wrappers. */
  readonly env: ExecutionEnv;
  /**
   * Sleep until `untilMs`, observing cancellation; the host learns the wake time (alarms). Returns early
   * only when the host interrupts the sleep (`Driver.interruptSleep`, after it committed a change the
   * sleeper should re-plan for); a kind that allows that compares `now()` with its time. `Infinity`
   * sleeps with no wake time (no alarm): only an interrupt or cancellation ends it.
   */
  sleep(untilMs: number, call: Call): Promise<void>;
  /**
   * Park until a route records the answer to this task's wait for `key` (src/core/answers.ts), or until
   * `options.until` passes (the alarm wakes an evicted object then), observing cancellation. Declares
   * the wait durably (one commit when it is new), returns at once when it is already answered or past
   * its deadline, so a restarted invocation calls it again and finds what was recorded meanwhile. Like
   * a sleep, a parked wait is not busy and a kill while parked is no crash. The kind ends
   * the wait (`endWait`) in the commit that records what the answer caused.
   */
  awaitAnswer(key: string, options: { readonly until?: number } | undefined, call: Call): Promise<AnswerOutcome>;
  config<C extends ConfigSpec>(
    kind: { readonly kind: string; readonly config?: C },
    call: Call,
  ): Promise<ConfigValues<C>>;
  conversation(id: Id, call: Call): Promise<ConversationHandle | undefined>;
  abortTask(id: Id, call: Call): Promise<void>;
  /** Cleanup's cancellation request: an already-terminal target counts as finished (§6.3). */
  markIfLive(ids: readonly Id[], call: Call): Promise<Id[]>;
  waitForTask(id: Id, options: { budgetMs?: number } | undefined, call: Call): Promise<boolean>;
  getTask(id: Id, call: Call): Promise<Task | undefined>;
  getTask<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    id: Id,
    call: Call,
  ): Promise<ReadTask<S, R> | undefined>;
  getEntry(id: Id, call: Call): Promise<Entry | undefined>;
  getEntry<E extends Entry>(kind: EntryKind<E>, id: Id, call: Call): Promise<E | undefined>;
  /** Session and own-conversation state; scratch specs bind to this task. */
  value<T>(addr: ValueRef<T>): ValueHandle<T>;
  list<T>(addr: ListRef<T>): ListHandle<T>;
  /**
   * Start this invocation's preview (§5.2, §9.4): a Chord delta tracker over `initial` that the kind
   * mutates in place (`tracker.state`). The harness flushes it after each scratch commit of this task
   * and with its settlement commit, and watchers receive the ops as task_output in that commit's
   * message; the first flush is the base. Built from durable scratch on attach or reopen, so a
   * recovering invocation passes what it rebuilt. Nothing shown may be lost (§7.4: write, then
   * publish): the kind mutates the preview only inside the plan of the commit that holds that output
   * (a scratch commit writing it, or the settlement recording it), never ahead of it.
   */
  preview<P extends object>(initial: P): Tracker<P>;
  /**
   * This invocation's current preview tracker, if one was started: the one the driver built with the
   * kind's `preview.init` when the invocation started, or the latest `preview(initial)`. `P` is the
   * kind's own preview type; the runtime does not check it.
   */
  currentPreview<P extends object>(): Tracker<P> | undefined;
}

const trackers = new WeakMap<
  TaskRuntime,
  { readonly taskId: Id; readonly tracker: Tracker<object>; readonly harness: Harness }
>();

/** Called by the driver when the invocation returns: the preview value stays, flushing stops. */
export function releaseRuntime(runtime: TaskRuntime): void {
  const attached = trackers.get(runtime);
  if (attached === undefined) return;
  trackers.delete(runtime);
  watchHub(attached.harness).previews.detach(attached.taskId, attached.tracker);
}

/**
 * Invocation start (§9.4): a kind that declares `preview` gets its preview built once from durable
 * scratch with `preview.init`, so the first flush (the base) already holds what survived a restart.
 */
export async function startPreview(runtime: TaskRuntime, spec: PreviewSpec, task: Task, call: Call): Promise<void> {
  const initial = await spec.init(
    { value: (addr) => ({ get: runtime.value(addr).get }), list: (addr) => ({ read: runtime.list(addr).read }) },
    call,
    task,
  );
  runtime.preview(initial);
}

/**
 * Run one invocation's method (§5.2) with a runtime bound to it: the kind's preview is started first
 * (execute and recover), and the runtime is released when the method returns, whichever way. The
 * harness hands this to its driver (`DriverWiring.invoke`), which dispatches and completes invocations.
 */
export function runInvocation(harness: Harness, driver: Driver, inv: Invocation, call: Call): Promise<void> {
  const task = inv.task;
  const runtime = createRuntime(harness, driver, inv, task);
  const method = inv.kind[inv.method] as (task: Task, runtime: TaskRuntime, call: Call) => Promise<void>;
  const preview = inv.method === "abort" ? undefined : inv.kind.preview;
  return (async () => {
    if (preview !== undefined) await startPreview(runtime, preview, task, call);
    return method.call(inv.kind, task, runtime, call);
  })().finally(() => releaseRuntime(runtime));
}

export function createRuntime(harness: Harness, driver: Driver, inv: Invocation, task: Task): TaskRuntime {
  const binding = { conversationId: task.conversationId, taskId: task.id };
  // Every runtime method, reads included, checks that its call carries this runtime's invocation and
  // that the invocation is still current (§6.5): a leaked runtime or call cannot act for the task.
  const own = (call: Call): void => {
    if (invocationOf(call) !== inv) {
      throw new PicoError(
        "contract",
        `task ${task.id}'s runtime was used with a call that does not carry its ${inv.method} invocation`,
      );
    }
    if (!driver.isCurrent(inv)) {
      throw new PicoError(
        "contract",
        `task ${task.id}'s ${inv.method} invocation has returned; its runtime no longer acts for the task`,
      );
    }
  };
  const owned =
    <A extends unknown[], R>(f: (...args: [...A, Call]) => Promise<R>) =>
    async (...args: [...A, Call]): Promise<R> => {
      own(args[args.length - 1] as Call);
      return f(...args);
    };
  const runtime: TaskRuntime = {
    taskId: task.id,
    conversationId: task.conversationId,
    method: inv.method,
    commit: async (plan, call) => {
      own(call);
      return harness.commitBound(call, binding, (b) => plan(conversationTx(b, task.conversationId)));
    },
    commitBuilder: async (plan, call) => {
      own(call);
      return harness.commitBound(call, binding, plan);
    },
    scratch: async (plan, call) => {
      own(call);
      return harness.scratch(call, task.id, plan);
    },
    now: () => driver.clock.now(),
    env: harness.env,
    sleep: async (untilMs, call) => {
      own(call);
      return driver.sleep(task.id, untilMs, call);
    },
    awaitAnswer: async (key, options, call) => {
      own(call);
      const until = options?.until;
      let wait = await readWait(harness.storage, task.id);
      if (wait === undefined || wait.key !== key || (wait.answer === undefined && wait.until !== until)) {
        const declared: WaitRecord = {
          key,
          since: wait?.key === key ? wait.since : driver.clock.now(),
          ...(until === undefined ? {} : { until }),
        };
        await harness.commitBound(call, binding, (b) => b.value(waitValue(task.id)).set(declared));
        wait = declared;
      }
      for (;;) {
        if (wait.answer !== undefined) return { type: "answered", value: wait.answer.value, at: wait.answer.at };
        if (until !== undefined && until <= driver.clock.now()) return { type: "deadline", until };
        const woke = await driver.awaitAnswer(task.id, until, call);
        own(call);
        const now: WaitRecord | undefined = await readWait(harness.storage, task.id);
        if (now === undefined || now.key !== key)
          throw new PicoError(
            "contract",
            `task ${task.id}'s wait for ${JSON.stringify(key)} was ended while it waited`,
          );
        wait = now;
        if (woke === "deadline" && wait.answer === undefined && until !== undefined) return { type: "deadline", until };
      }
    },
    config: async (kind, call) => {
      own(call);
      const spec = (kind.config ?? {}) as ConfigSpec;
      const keys = Object.keys(spec);
      const values = await Promise.all(
        keys.map(
          async (key) => (await harness.storage.getValue(bind(spec[key] as ValueSpec<unknown>, binding)))?.value,
        ),
      );
      return Object.fromEntries(keys.map((key, i) => [key, values[i]])) as never;
    },
    conversation: async (id, call) => {
      own(call);
      return harness.conversation(id, call);
    },
    abortTask: async (id, call) => {
      own(call);
      await driver.mark([id], call);
    },
    markIfLive: async (ids, call) => {
      own(call);
      return driver.mark(ids, call, { ifLive: true });
    },
    waitForTask: async (id, options, call) => {
      own(call);
      return driver.waitForTask(id, options, call);
    },
    getTask: (async (a: { readonly kind: string } | Id, b: Id | Call, c?: Call) => {
      own(typeof a === "number" ? (b as Call) : (c as Call));
      return typeof a === "number"
        ? harness.getTask(a, b as Call)
        : harness.getTask(a as TaskDefinition<TaskStateBase, TaskRoles<TaskStateBase>>, b as Id, c as Call);
    }) as TaskRuntime["getTask"],
    getEntry: (async (a: EntryKind | Id, b: Id | Call, c?: Call) => {
      own(typeof a === "number" ? (b as Call) : (c as Call));
      return typeof a === "number" ? harness.getEntry(a, b as Call) : harness.getEntry(a, b as Id, c as Call);
    }) as TaskRuntime["getEntry"],
    value: (addr) => {
      const handle = valueHandle(harness, addr, binding);
      return {
        get: owned(handle.get),
        getAt: owned(handle.getAt),
        set: owned(handle.set),
        delete: owned(handle.delete),
      };
    },
    list: (addr) => {
      const handle = listHandle(harness, addr, binding);
      return {
        read: owned(handle.read),
        append: owned(handle.append),
        remove: owned(handle.remove),
        clear: owned(handle.clear),
      };
    },
    preview: <P extends object>(initial: P): Tracker<P> => {
      const previous = trackers.get(runtime);
      const hub = watchHub(harness).previews;
      if (previous !== undefined) hub.detach(task.id, previous.tracker);
      const tracker = track(initial);
      trackers.set(runtime, { taskId: task.id, tracker: tracker as Tracker<object>, harness });
      hub.attach(task.id, tracker as Tracker<object>);
      return tracker;
    },
    currentPreview: <P extends object>(): Tracker<P> | undefined =>
      trackers.get(runtime)?.tracker as Tracker<P> | undefined,
  };
  return runtime;
}
