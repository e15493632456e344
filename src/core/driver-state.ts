/**
 * The driver's in-memory state (§6.1, §6.2): the live-task map with status epochs, the running
 * invocation per task id, conversation membership, reverse dependency edges, the ownership links live
 * work needs, attachments and waiters, declared waits, and the lifecycle phase, with the questions
 * the scheduler asks of them (served? idle? drained? a dependency cycle?), the host notification of
 * busy and wake time, and the fail-stop that ends the session. Every decision is made on the line from
 * these indexes; the files beside this one (driver-*.ts) hold the operations, driver.ts ties them.
 */
import type { Id, MainWrite, Task } from "../storage/records.js";
import { PicoError } from "./errors.js";
import { systemClock, type Clock, type DriverHost, type FaultReport, type WorkStretch } from "./host.js";
import type { AnyTaskKind } from "./task-kind-types.js";
import type { Span } from "./telemetry.js";
import type { Action, DriverSession, DriverWiring, Invocation, Phase } from "./driver-types.js";

export interface LiveTask {
  task: Task;
  statusEpoch: number;
}

export interface Waiter {
  readonly scope: Id | "session";
  /** The task whose invocation waits, if any (checked against cycle-creating admissions, §6.2). */
  readonly taskId: Id | undefined;
  readonly resolve: (result: "idle" | "closed") => void;
  readonly reject: (error: unknown) => void;
  readonly detach: () => void;
}

export interface TaskWaiter {
  readonly taskId: Id;
  readonly resolve: (done: boolean) => void;
  readonly reject: (error: unknown) => void;
  readonly detach: () => void;
}

const MIN_LINK_BUDGET = 256;

export class DriverState {
  readonly session: DriverSession;
  readonly host: DriverHost;
  /** What the harness plugged in: invocation running and the watchers' fault/close. */
  readonly wiring: DriverWiring;
  readonly clock: Clock;
  readonly live = new Map<Id, LiveTask>();
  readonly running = new Map<Id, Invocation>();
  /** The terminal status of a task that settled while an invocation of it ran (for `afterInvoke`). */
  readonly settledStatus = new Map<Id, string>();
  readonly byConversation = new Map<Id, Set<Id>>();
  readonly dependents = new Map<Id, Set<Id>>();
  readonly parked = new Set<Id>();
  readonly withheld = new Set<Id>();
  readonly orphaned: Task[] = [];
  /** conversation -> owner task and the owner's conversation (immutable links). */
  readonly links = new Map<Id, { readonly owner?: Id; readonly ownerConversation?: Id }>();
  /** Prune unused links once the map outgrows this (amortized O(1) per link added). */
  linkBudget = MIN_LINK_BUDGET;
  readonly attached = new Set<Id>();
  sessionAttached = false;
  readonly waiters = new Set<Waiter>();
  /** Resolvers of `Invocation.done`, private to the driver. */
  readonly finish = new WeakMap<Invocation, () => void>();
  readonly taskWaiters = new Set<TaskWaiter>();
  /**
   * Invocations parked in a declared wait: a sleep until a durable wake time, or a wait for
   * an external answer with an optional deadline (undefined: no wake time). Parked is not busy.
   */
  readonly sleepers = new Map<Id, number | undefined>();
  /** Per running invocation: how its current working stretch began (the host's kill counting). */
  readonly stretch = new Map<Id, WorkStretch>();
  /** Answer waiters of parked invocations, by task (`awaitAnswer`). */
  readonly answerWaiters = new Map<Id, () => void>();
  /** Interrupters of tasks sleeping in `sleep` (`interruptSleep`). */
  readonly interrupts = new Map<Id, () => void>();
  /** Running tasks interrupted while not asleep: their next `sleep` returns at once. */
  readonly pendingInterrupts = new Set<Id>();
  /** Answers recorded for a running task before its waiter registered (read by `awaitAnswer`). */
  readonly arrived = new Set<Id>();
  /** Invocations started per live task in this process (telemetry's invocation number). */
  readonly invocations = new Map<Id, number>();
  /** The open `invoke_agent` span per conversation in a turn (driver-turn-spans.ts). */
  readonly turnSpans = new Map<Id, Span>();
  /**
   * The span of each running invocation, by task: the parent of a turn span in a conversation that task
   * owns (a subagent's turn nests under the tool call that runs it, driver-turn-spans.ts).
   */
  readonly invocationSpans = new Map<Id, Span>();
  phase: Phase = "open";
  /** A host bookkeeping failure met while reserving; the reservation round fail-stops on it. */
  hostFailure: FaultReport | undefined;
  fault: FaultReport | undefined;
  closing: Promise<void> | undefined;
  shutdown: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | undefined;
  lastWake: number | undefined;
  lastBusy = false;
  /** Writes the driver itself built (marks, orphaning); they bypass ownership checks. */
  readonly internal = new WeakSet<MainWrite>();

  constructor(session: DriverSession, host: DriverHost, wiring: DriverWiring) {
    this.session = session;
    this.host = host;
    this.wiring = wiring;
    this.clock = host.clock ?? systemClock;
  }

  /**
   * Invocations in flight that are not parked in a sleep. A task sleeping until a durable wake time
   * costs nothing while it waits: the host sets its alarm at `nextWake` instead of keeping
   * the process awake with heartbeats, and after an eviction execute sleeps only the remainder (§5.3).
   */
  get busy(): boolean {
    for (const id of this.running.keys()) if (!this.sleepers.has(id)) return true;
    return false;
  }

  /** The earliest wake time among sleeping tasks. */
  get nextWake(): number | undefined {
    let min: number | undefined;
    for (const t of this.sleepers.values()) if (t !== undefined && (min === undefined || t < min)) min = t;
    return min;
  }

  // ---------------------------------------------------------------------------------------------
  // The live map and the ancestry it needs

  addLive(task: Task): void {
    this.live.set(task.id, { task, statusEpoch: 0 });
    let set = this.byConversation.get(task.conversationId);
    if (set === undefined) this.byConversation.set(task.conversationId, (set = new Set()));
    set.add(task.id);
  }

  removeLive(id: Id): LiveTask | undefined {
    const lt = this.live.get(id);
    if (lt === undefined) return undefined;
    this.live.delete(id);
    const set = this.byConversation.get(lt.task.conversationId);
    set?.delete(id);
    if (set?.size === 0) this.byConversation.delete(lt.task.conversationId);
    for (const dep of lt.task.after) {
      const ds = this.dependents.get(dep);
      ds?.delete(id);
      if (ds?.size === 0) this.dependents.delete(dep);
    }
    this.parked.delete(id);
    this.withheld.delete(id);
    this.invocations.delete(id);
    return lt;
  }

  edge(dep: Id, dependent: Id): void {
    let set = this.dependents.get(dep);
    if (set === undefined) this.dependents.set(dep, (set = new Set()));
    set.add(dependent);
  }

  /** Batch-load ownership links upward from these conversations (depth reads, never history). */
  async loadLinks(conversationIds: readonly Id[]): Promise<void> {
    const storage = this.session.storage;
    let pending = conversationIds.filter((id) => !this.links.has(id));
    while (pending.length > 0) {
      const conversations = await storage.getConversations(pending);
      const owners = [...conversations.values()].flatMap((c) => (c.owner === undefined ? [] : [c.owner]));
      const ownerTasks = owners.length === 0 ? new Map<Id, Task>() : await storage.getTasks(owners);
      const next: Id[] = [];
      for (const id of pending) {
        const c = conversations.get(id);
        if (c?.owner === undefined) {
          this.links.set(id, {});
          continue;
        }
        const ownerConversation = ownerTasks.get(c.owner)?.conversationId;
        this.links.set(
          id,
          ownerConversation === undefined ? { owner: c.owner } : { owner: c.owner, ownerConversation },
        );
        if (ownerConversation !== undefined && !this.links.has(ownerConversation)) next.push(ownerConversation);
      }
      pending = [...new Set(next)];
    }
  }

  /**
   * Release ancestry nothing needs any more (§6.2): keep the links upward from conversations with live
   * tasks or outstanding invocations; a later task in a pruned conversation reloads its links.
   */
  pruneLinks(): void {
    if (this.links.size <= this.linkBudget) return;
    const keep = new Set<Id>();
    const need = (conversation: Id): void => {
      let c: Id | undefined = conversation;
      while (c !== undefined && !keep.has(c)) {
        keep.add(c);
        c = this.links.get(c)?.ownerConversation;
      }
    };
    for (const conversation of this.byConversation.keys()) need(conversation);
    for (const inv of this.running.values()) need(inv.conversationId);
    for (const id of [...this.links.keys()]) if (!keep.has(id)) this.links.delete(id);
    this.linkBudget = Math.max(MIN_LINK_BUDGET, 2 * this.links.size);
  }

  async ownerConversation(taskId: Id): Promise<Id | undefined> {
    return (await this.session.storage.getTasks([taskId])).get(taskId)?.conversationId;
  }

  // ---------------------------------------------------------------------------------------------
  // Questions the scheduler asks

  /** A task is served when the session is attached or an ownership ancestor of its conversation is. */
  served(task: Task): boolean {
    if (this.sessionAttached) return true;
    let conversation: Id | undefined = task.conversationId;
    const seen = new Set<Id>();
    while (conversation !== undefined && !seen.has(conversation)) {
      if (this.attached.has(conversation)) return true;
      seen.add(conversation);
      conversation = this.links.get(conversation)?.ownerConversation;
    }
    return false;
  }

  /** Are the entry kinds and sections a task kind needs all registered (§5.2 `needs`)? */
  needsMet(kind: AnyTaskKind): boolean {
    const needs = kind.needs;
    if (needs === undefined) return true;
    for (const name of needs.entryKinds ?? []) if (!this.session.entryKinds.has(name)) return false;
    for (const key of needs.sections ?? []) if (!this.session.sections.has(key)) return false;
    return true;
  }

  idle(scope: Id | "session"): boolean {
    if (scope === "session") {
      for (const lt of this.live.values())
        if (lt.task.background !== true && !this.parked.has(lt.task.id)) return false;
      return true;
    }
    for (const id of this.byConversation.get(scope) ?? []) {
      const lt = this.live.get(id);
      if (lt !== undefined && lt.task.background !== true && !this.parked.has(id)) return false;
    }
    return true;
  }

  drained(): boolean {
    if (this.running.size > 0) return false;
    for (const id of this.live.keys()) if (!this.parked.has(id)) return false;
    return true;
  }

  /** Does `target` (or its unresolved dependency path) lead back to `waiter`? */
  dependsOn(target: Id, waiter: Id): boolean {
    // A terminal waiter (its method still unwinding) satisfies every dependency on it: no cycle.
    if (!this.live.has(waiter)) return false;
    const stack = [target];
    const seen = new Set<Id>();
    while (stack.length > 0) {
      const id = stack.pop() as Id;
      if (id === waiter) return true;
      if (seen.has(id)) continue;
      seen.add(id);
      const lt = this.live.get(id);
      if (lt !== undefined) stack.push(...lt.task.after);
    }
    return false;
  }

  /** Is `task` (foreground) part of conversation `scope`'s foreground set? */
  inForegroundScope(task: Task, scope: Id): boolean {
    let conversation: Id | undefined = task.conversationId;
    let current: Task | undefined = task;
    while (conversation !== undefined && current !== undefined) {
      if (current.background === true) return false;
      if (conversation === scope) return true;
      const link = this.links.get(conversation);
      if (link?.owner === undefined) return false;
      current = this.live.get(link.owner)?.task;
      conversation = link.ownerConversation;
    }
    return false;
  }

  /**
   * The foreground ownership closure of a conversation (§5.6): live foreground tasks, recursively through owned
   * conversations.
   */
  foregroundClosure(conversationId: Id): { tasks: Id[]; conversations: Id[] } {
    const tasks: Id[] = [];
    const conversations: Id[] = [];
    const stack = [conversationId];
    const seen = new Set<Id>();
    while (stack.length > 0) {
      const c = stack.pop() as Id;
      if (seen.has(c)) continue;
      seen.add(c);
      conversations.push(c);
      for (const id of this.byConversation.get(c) ?? []) {
        const lt = this.live.get(id);
        if (lt === undefined || lt.task.background === true) continue;
        tasks.push(id);
        for (const owned of lt.task.owns ?? []) stack.push(owned);
      }
    }
    return { tasks, conversations };
  }

  /** Live turn tasks of a conversation (§5.8's inTurn), from the index. */
  liveTurnTasks(conversationId: Id): number {
    let n = 0;
    for (const id of this.byConversation.get(conversationId) ?? []) if (this.live.get(id)?.task.turn === true) n += 1;
    return n;
  }

  /** Live tasks or running invocations anywhere in a conversation's ownership subtree. */
  subtreeBusy(conversationId: Id): boolean {
    const inSubtree = (conversation: Id): boolean => {
      let c: Id | undefined = conversation;
      const seen = new Set<Id>();
      while (c !== undefined && !seen.has(c)) {
        if (c === conversationId) return true;
        seen.add(c);
        c = this.links.get(c)?.ownerConversation;
      }
      return false;
    };
    for (const lt of this.live.values()) if (inSubtree(lt.task.conversationId)) return true;
    // A slot is outstanding until its method returns, even after its task settled (§6.4).
    for (const inv of this.running.values()) if (inSubtree(inv.conversationId)) return true;
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // The host and the phase

  /** On the line: note whether busy or the next wake time changed; the host hears it after the line. */
  notifyHost(): Action {
    const wake = this.nextWake;
    const busy = this.busy;
    const wakeChanged = wake !== this.lastWake;
    const busyChanged = busy !== this.lastBusy;
    this.lastWake = wake;
    this.lastBusy = busy;
    return () => {
      // The reason that appears goes first, so a host that keeps the minimum of both (one alarm) never
      // sees a moment with neither when a sleeper wakes or an invocation parks (no transient clear).
      if (busy && busyChanged) this.host.busyChanged?.(busy);
      if (wakeChanged) this.host.wakeChanged?.(wake);
      if (!busy && busyChanged) this.host.busyChanged?.(busy);
    };
  }

  /** A faulted session admits nothing more. */
  admitLifecycle(): void {
    if (this.phase === "faulted")
      throw new PicoError("faulted", `the session faulted: ${this.fault?.message ?? "unknown"}`);
  }

  /**
   * Fail-stop (§6.1), on the line: the phase becomes faulted; after the line every waiter and a pending
   * shutdown reject, running invocations are aborted, the host and the watchers hear it, and storage
   * closes once the invocations returned.
   */
  failStop(report: FaultReport): Action {
    this.phase = "faulted";
    this.fault = report;
    const waiters = [...this.waiters];
    const taskWaiters = [...this.taskWaiters];
    this.waiters.clear();
    this.taskWaiters.clear();
    const shutdown = this.shutdown;
    const error = new PicoError("faulted", report.message, { cause: report.error });
    const running = [...this.running.values()];
    return () => {
      for (const w of waiters) {
        w.detach();
        w.reject(error);
      }
      for (const w of taskWaiters) {
        w.detach();
        w.reject(error);
      }
      shutdown?.reject(error);
      for (const inv of running) inv.controller.abort(error);
      this.host.faulted?.(report);
      this.wiring.faulted(report);
      void Promise.allSettled(running.map((inv) => inv.done)).then(() =>
        this.session.storage.close().catch(() => undefined),
      );
    };
  }

  /** Run `step` on the line, then its action after it. */
  onLine(step: () => Action): Promise<void> {
    return this.session.line.run(step).then((after) => after());
  }
}
