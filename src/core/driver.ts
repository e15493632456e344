/**
 * The driver (§6): the scheduler that lives on the commit line. It keeps the live-task map with status
 * epochs, one running invocation per task id, conversation membership, reverse dependency edges, the
 * ownership links live work needs, attachments and waiters, and the lifecycle phase. Every decision is
 * made on the line from these indexes after a durable batch; task methods, signals and waiter callbacks
 * run outside it. There is no polling loop and no storage scan after a task returns.
 *
 * This class is the driver's face and its lifecycle (shutdown, close); the concepts live beside it:
 * driver-state.ts (the indexes and the fail-stop), driver-apply.ts (seeding at open, applying each
 * commit), driver-admission.ts (what may commit, abort marks), driver-dispatch.ts (reservation,
 * dispatch, completion), driver-waiters.ts (drive and waitForTask), driver-sleep.ts (declared waits).
 * The harness it serves is reached only through `DriverSession` and `DriverWiring` (driver-types.ts).
 */
import type { Id, MainWrite, Task } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import type { Clock, DriverHost, FaultReport } from "./host.js";
import type { CommitOrigin, CommittedBatch } from "./session-types.js";
import type { TxBuilder } from "./tx-builder.js";
import { admit, admitChange, isCurrent, markWrites, originOf, validate } from "./driver-admission.js";
import { applied, seed } from "./driver-apply.js";
import { attachScope, reconsider, release, unpark } from "./driver-dispatch.js";
import { answerArrived, awaitAnswer, interruptSleep, sleep } from "./driver-sleep.js";
import { DriverState } from "./driver-state.js";
import {
  describeError,
  invocationKey,
  type Action,
  type DriverSession,
  type DriverWiring,
  type InspectResult,
  type Invocation,
  type Phase,
} from "./driver-types.js";
import { checkSelfDrive, driveScope, waitForTask } from "./driver-waiters.js";

export {
  invocationOf,
  type DriverSession,
  type DriverWiring,
  type InspectResult,
  type Invocation,
  type Phase,
} from "./driver-types.js";

export class Driver {
  readonly #s: DriverState;
  readonly clock: Clock;
  /** The scheduler's attachment, handed to drive (driver-waiters.ts does not import the scheduler). */
  readonly #attach = (scope: Id | "session", call: Call): Action => attachScope(this.#s, scope, call);

  constructor(session: DriverSession, host: DriverHost, wiring: DriverWiring) {
    this.#s = new DriverState(session, host, wiring);
    this.clock = this.#s.clock;
  }

  get phase(): Phase {
    return this.#s.phase;
  }

  get fault(): FaultReport | undefined {
    return this.#s.fault;
  }

  /**
   * Invocations in flight that are not parked in a sleep. A task sleeping until a durable wake time
   * costs nothing while it waits: the host sets its alarm at `nextWake` instead of keeping
   * the process awake with heartbeats, and after an eviction execute sleeps only the remainder (§5.3).
   */
  get busy(): boolean {
    return this.#s.busy;
  }

  /** The earliest wake time among sleeping tasks. */
  get nextWake(): number | undefined {
    return this.#s.nextWake;
  }

  /**
   * Is some live task not parked in a wait for an external answer without a deadline? Those need no
   * alarm: the route that records the answer opens the object. Nor does a start task held back by a
   * live dependency (post_tools behind its tool calls): it runs when the dependency settles, and the
   * dependency has its own reason to wake, or none when it waits on such an answer. Every other live
   * task needs a reason to wake (a heartbeat while busy, a wake time while asleep, a guard until
   * dispatched).
   */
  get hasLiveToWake(): boolean {
    const s = this.#s;
    for (const [id, lt] of s.live) {
      if (s.sleepers.has(id) && s.sleepers.get(id) === undefined) continue;
      if (lt.task.role === "start" && lt.task.abort !== true && lt.task.after.some((dep) => s.live.has(dep))) continue;
      return true;
    }
    return false;
  }

  liveCount(): number {
    return this.#s.live.size;
  }

  /**
   * Is some live task not a background task (a turn, or work a turn started)? A schedule or the witness waiting
   * for its next run is live but not work anyone waits on. Read from the live map, which a commit updates before
   * its listeners run.
   */
  get hasForegroundWork(): boolean {
    for (const lt of this.#s.live.values()) if (lt.task.background !== true) return true;
    return false;
  }

  /** Ownership links held in memory (bounded by live work, not by history). */
  get ancestrySize(): number {
    return this.#s.links.size;
  }

  // ---------------------------------------------------------------------------------------------
  // Open (§6.4) and the commit pipeline's hooks (called by Harness on the line)

  /** Seed the live map and the ancestry it needs at open; start nothing (driver-apply.ts). */
  seed(call: Call): Promise<void> {
    return seed(this.#s, call);
  }

  /** The committing invocation's origin, if the call carries one. */
  originOf(call: Call): CommitOrigin | undefined {
    return originOf(this.#s, call);
  }

  /** Whether `inv` is still its task's running invocation (a runtime acts only while it is, §6.5). */
  isCurrent(inv: Invocation): boolean {
    return isCurrent(this.#s, inv);
  }

  /** Admission (§6.3, §6.4): phase, exact invocation identity and the durable mark, before the builder runs. */
  admit(call: Call, internal: boolean, scratchTask: Id | undefined, mark = false): void {
    admit(this.#s, call, internal, scratchTask, mark);
  }

  /** Whole-batch authority checks before persistence. */
  validate(writes: readonly MainWrite[], call: Call, internal: boolean): void {
    validate(this.#s, writes, call, internal);
  }

  /** After persistence, on the line: apply every write to the indexes, then reserve work (§6.1). */
  applied(commit: CommittedBatch): Promise<Action> {
    return applied(this.#s, commit);
  }

  /** Admission of a registry change (§9.6): like a commit's, by lifecycle and invocation identity. */
  admitChange(call: Call): void {
    admitChange(this.#s, call);
  }

  /**
   * Re-examine every parked task after a registry change (§9.6): those whose kind and needs are now
   * registered are reserved; the others park again. The parked set is small (tasks waiting for code).
   */
  unpark(): Action {
    return unpark(this.#s);
  }

  // ---------------------------------------------------------------------------------------------
  // Faults (§6.1): fail-stop

  /**
   * Uncertain persistence (§3.3, §6.3): a batch's storage write failed in a way that may have left it
   * durable. The session fail-stops on the line; reopening recovers the last complete batch.
   */
  persistenceFailed(error: unknown, call: Call): Action {
    if (this.#s.phase !== "open" && this.#s.phase !== "stopping") return () => undefined;
    const inv = call.value(invocationKey);
    return this.#s.failStop({
      ...(inv === undefined ? {} : { taskId: inv.taskId, kind: inv.kind.kind, method: inv.method }),
      error,
      message: `a commit's persistence is uncertain (${describeError(error)}); reopen the session to recover its last complete batch (§3.3)`,
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Drive and waiters (§6.2)

  /** Attach a scope persistently: its work (and owned descendants' work) is served (§6.2). */
  attach(scope: Id | "session", call: Call): Promise<void> {
    return this.#s.session.line
      .run(() => {
        this.#s.admitLifecycle();
        return attachScope(this.#s, scope, call);
      })
      .then((after) => after());
  }

  /** drive(call): attach, then wait for the scope's idle predicate; the signal cancels only this waiter. */
  drive(scope: Id | "session", call: Call): Promise<"idle" | "closed"> {
    return driveScope(this.#s, scope, call, undefined, this.#attach);
  }

  /**
   * drive with a blocking budget (§8.3): like drive, but when `budgetMs` passes on the driver's clock
   * before the scope is idle, only this waiter is removed and it resolves "budget"; the scope stays
   * attached, so its work goes on. A tool waiting on a child conversation uses it.
   */
  driveWithin(scope: Id | "session", budgetMs: number, call: Call): Promise<"idle" | "closed" | "budget"> {
    return new Promise<"idle" | "closed" | "budget">((resolve, reject) => {
      driveScope(this.#s, scope, call, { ms: budgetMs, expired: () => resolve("budget") }, this.#attach).then(
        resolve,
        reject,
      );
    });
  }

  /**
   * The known-self-wait check of a drive of `scope` by this call, for callers that must reject before
   * they write (prompt checks before its acceptance, §6.2). Call it on the line.
   */
  checkDrive(scope: Id | "session", call: Call): void {
    checkSelfDrive(this.#s, scope, call);
  }

  /** Wait until a task is terminal, or `budgetMs` passes (false). Known self-waits reject (§6.2). */
  waitForTask(id: Id, options: { budgetMs?: number } | undefined, call: Call): Promise<boolean> {
    return waitForTask(this.#s, id, options, call);
  }

  // ---------------------------------------------------------------------------------------------
  // Cancellation (§6.3) and the index's answers

  /** Mark one live task; a terminal or unknown task rejects (unless `ifLive`). */
  async mark(ids: readonly Id[], call: Call, options: { ifLive?: boolean } = {}): Promise<Id[]> {
    // Admitted as the caller's commit: a stale or marked execute/recover cannot mark (§6.3).
    return this.#s.session.commitMarks((b) => markWrites(this.#s, b, ids, options), call);
  }

  /** Push abort marks into a batch being built on the line (one commit with other writes, §6.3). */
  markWrites(b: TxBuilder, ids: readonly Id[], options: { ifLive?: boolean } = {}): Id[] {
    return markWrites(this.#s, b, ids, options);
  }

  /**
   * The foreground ownership closure of a conversation (§5.6): live foreground tasks, recursively through owned
   * conversations.
   */
  foregroundClosure(conversationId: Id): { tasks: Id[]; conversations: Id[] } {
    return this.#s.foregroundClosure(conversationId);
  }

  liveTask(id: Id): Task | undefined {
    return this.#s.live.get(id)?.task;
  }

  /** Live turn tasks of a conversation (§5.8's inTurn), from the index. */
  liveTurnTasks(conversationId: Id): number {
    return this.#s.liveTurnTasks(conversationId);
  }

  /** Live tasks or running invocations anywhere in a conversation's ownership subtree. */
  subtreeBusy(conversationId: Id): boolean {
    return this.#s.subtreeBusy(conversationId);
  }

  hasLiveOfKind(kind: string): boolean {
    for (const lt of this.#s.live.values()) if (lt.task.kind === kind) return true;
    return false;
  }

  inspect(): InspectResult {
    const start: Task[] = [];
    const inflight: Task[] = [];
    const parked: Task[] = [];
    const quarantined: Task[] = [];
    for (const lt of this.#s.live.values()) {
      if (this.#s.parked.has(lt.task.id)) parked.push(lt.task);
      else if (lt.task.role === "start") start.push(lt.task);
      else inflight.push(lt.task);
      if (this.#s.withheld.has(lt.task.id)) quarantined.push(lt.task);
    }
    return { start, inflight, orphaned: [...this.#s.orphaned], parked, quarantined };
  }

  // ---------------------------------------------------------------------------------------------
  // Declared waits: in memory, reported to the host as a wake time (driver-sleep.ts)

  /**
   * Sleep until `untilMs`; `Infinity` sleeps with no wake time (the host arms no alarm for it), so only
   * `interruptSleep` or cancellation end it. An `interruptSleep` that came while the invocation was
   * running but not asleep makes this sleep return at once, so a task that read its durable state and
   * then sleeps cannot miss a change committed in between.
   */
  sleep(taskId: Id, untilMs: number, call: Call): Promise<void> {
    return sleep(this.#s, taskId, untilMs, call);
  }

  /**
   * End task `taskId`'s current `runtime.sleep` now (it returns early, before its time), so the task
   * re-plans from durable state in its own commit: for a host whose settings commit changed what the
   * sleeper waits for (the witness's patrol interval, a schedule's pause or edit). The host never
   * patches the task (§6.1). When the task's invocation is running but not asleep, its next sleep
   * returns at once instead (it may have read the state before the host's commit). Resolves whether a
   * sleep was interrupted now.
   */
  interruptSleep(taskId: Id): Promise<boolean> {
    return interruptSleep(this.#s, taskId);
  }

  /**
   * Park the invocation of `taskId` until `answerArrived(taskId)` or the deadline `untilMs` (the alarm
   * wakes an evicted object then), observing cancellation. The second kind of declared wait:
   * not busy, no heartbeat, no kill counted while parked. The answer itself is durable state the
   * caller reads (runtime.awaitAnswer); this only parks and wakes.
   */
  awaitAnswer(taskId: Id, untilMs: number | undefined, call: Call): Promise<"answered" | "deadline"> {
    return awaitAnswer(this.#s, taskId, untilMs, call);
  }

  /** An answer to `taskId`'s wait was committed: wake its parked invocation (on the line). */
  answerArrived(taskId: Id): Promise<void> {
    return answerArrived(this.#s, taskId);
  }

  /** Wake sleepers whose time has come (an alarm fired); sleeping itself is the clock's business. */
  release(taskId: Id): Promise<void> {
    return release(this.#s, taskId);
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle (§6.4)

  /** One marking batch for every live task, then serve cancellation and close once drained. */
  shutdown(call: Call): Promise<void> {
    // A task-bearing shutdown rejects before it could become the shared lifecycle operation (§6.4).
    const inv = call.value(invocationKey);
    if (inv !== undefined)
      return Promise.reject(new PicoError("contract", `task ${inv.taskId} cannot shut down the session it runs in`));
    if (this.#s.shutdown !== undefined) return this.#s.shutdown.promise;
    let resolve: () => void = () => undefined;
    let reject: (e: unknown) => void = () => undefined;
    const drained = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    drained.catch(() => undefined); // observed below; a close or fault may reject it first
    const promise = (async () => {
      // One line operation: enter stopping and commit one batch marking every live task (§6.4), so
      // no completion or commit can interleave between the phase change and the marks.
      const after = await this.#s.session.line.run(async () => {
        this.#s.admitLifecycle();
        if (this.#s.phase === "closing" || this.#s.phase === "closed")
          throw new PicoError("closed", "the session is closing");
        this.#s.phase = "stopping";
        const ids = [...this.#s.live.keys()].filter((id) => !this.#s.parked.has(id));
        const marked = await this.#s.session.commitInternalOnLine(
          (b) => this.markWrites(b, ids, { ifLive: true }),
          call,
        );
        this.#s.sessionAttached = true;
        const reconsidered = reconsider(this.#s, [...this.#s.live.keys()]);
        return () => {
          marked.after?.();
          reconsidered();
        };
      });
      after();
      await drained;
      await this.close(call);
    })();
    this.#s.shutdown = { promise, resolve, reject };
    return promise;
  }

  /** Stop admission, signal and join every owned call, then close storage. Repeated calls share it. */
  close(call: Call): Promise<void> {
    // Close joins every invocation; from inside one it would wait for itself (§6.4).
    const inv = call.value(invocationKey);
    if (inv !== undefined)
      return Promise.reject(new PicoError("contract", `task ${inv.taskId} cannot close the session it runs in`));
    this.#s.closing ??= (async () => {
      const running = await this.#s.session.line.run(() => {
        if (this.#s.phase !== "faulted") this.#s.phase = "closing";
        const waiters = [...this.#s.waiters];
        this.#s.waiters.clear();
        const taskWaiters = [...this.#s.taskWaiters];
        this.#s.taskWaiters.clear();
        for (const w of waiters) {
          w.detach();
          w.resolve("closed");
        }
        for (const w of taskWaiters) {
          w.detach();
          w.reject(new PicoError("closed", "the session closed"));
        }
        if (this.#s.shutdown !== undefined && !this.#s.drained())
          this.#s.shutdown.reject(new PicoError("closed", "close interrupted shutdown"));
        return [...this.#s.running.values()];
      });
      const reason = new PicoError("closed", "the session is closing");
      for (const inv of running) inv.controller.abort(reason);
      await Promise.all(running.map((inv) => inv.done));
      await this.#s.session.storage.close().catch(() => undefined);
      this.#s.wiring.closed();
      if (this.#s.phase !== "faulted") this.#s.phase = "closed";
    })();
    return this.#s.closing;
  }
}
