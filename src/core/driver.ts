/**
 * The driver (§6): the scheduler that lives on the commit line. It keeps the live-task map with status
 * epochs, one running invocation per task id, conversation membership, reverse dependency edges, the
 * ownership links live work needs, attachments and waiters, and the lifecycle phase. Every decision is
 * made on the line from these indexes after a durable batch; task methods, signals and waiter callbacks
 * run outside it. There is no polling loop and no storage scan after a task returns.
 */
import type { Conversation, Id, MainWrite, Task } from "../storage/records.js";
import { BACKGROUND_CONTEXT, createContextKey, withAbortSignal, withContextValue, type Call } from "./call.js";
import { PicoError, TaskCancelled } from "./errors.js";
import type { Harness } from "./harness.js";
import type { CommitOrigin, CommittedBatch } from "./session-types.js";
import { systemClock, type Clock, type DriverHost, type FaultReport, type InvocationMethod, type WorkStretch } from "./host.js";
import { createRuntime, releaseRuntime, startPreview, type TaskRuntime } from "./runtime.js";
import { watchHub } from "./watch-hub.js";
import { INBOX_NAMESPACE } from "./inbox.js";
import type { AnyTaskKind } from "./task-kind-types.js";
import type { TxBuilder } from "./tx-builder.js";
import { invocationSpanKey, noopTracer, type InvocationOutcome, type Span } from "./telemetry.js";

export type Phase = "open" | "stopping" | "closing" | "faulted" | "closed";

interface LiveTask {
  task: Task;
  statusEpoch: number;
}

/** One execute/recover/abort call; its object identity is the mutation authority (§6.5). */
export interface Invocation {
  readonly taskId: Id;
  /** The task's conversation: the slot keeps its subtree busy until the method returns (§6.4 delete). */
  readonly conversationId: Id;
  readonly method: InvocationMethod;
  readonly controller: AbortController;
  readonly initialStatusEpoch: number;
  /** The task's nth invocation in this process (1-based), for telemetry. */
  readonly number: number;
  readonly kind: AnyTaskKind;
  /** The snapshot the method receives, taken when the slot was reserved. */
  readonly task: Task;
  /** Resolves once the method returned and its completion was processed on the line. Exists from
   * reservation on, so close/fault join a slot even before its dispatch ran. */
  readonly done: Promise<void>;
}

/** The reason an interrupted sleep's timer is aborted with (never seen outside the driver). */
const INTERRUPTED: unique symbol = Symbol("pico.sleep.interrupted");

/** Private: only the driver installs and reads invocation identity. */
const invocationKey = createContextKey<Invocation>("pico.invocation");

interface Waiter {
  readonly scope: Id | "session";
  /** The task whose invocation waits, if any (checked against cycle-creating admissions, §6.2). */
  readonly taskId: Id | undefined;
  readonly resolve: (result: "idle" | "closed") => void;
  readonly reject: (error: unknown) => void;
  readonly detach: () => void;
}

interface TaskWaiter {
  readonly taskId: Id;
  readonly resolve: (done: boolean) => void;
  readonly reject: (error: unknown) => void;
  readonly detach: () => void;
}

export interface InspectResult {
  readonly start: readonly Task[];
  readonly inflight: readonly Task[];
  readonly orphaned: readonly Task[];
  readonly parked: readonly Task[];
  readonly quarantined: readonly Task[];
}

/** Work to do after leaving the line. */
type Action = () => void;

const MIN_LINK_BUDGET = 256;

export class Driver {
  readonly #harness: Harness;
  readonly #host: DriverHost;
  readonly clock: Clock;
  readonly #live = new Map<Id, LiveTask>();
  readonly #running = new Map<Id, Invocation>();
  /** The terminal status of a task that settled while an invocation of it ran (for `afterInvoke`). */
  readonly #settledStatus = new Map<Id, string>();
  readonly #byConversation = new Map<Id, Set<Id>>();
  readonly #dependents = new Map<Id, Set<Id>>();
  readonly #parked = new Set<Id>();
  readonly #withheld = new Set<Id>();
  readonly #orphaned: Task[] = [];
  /** conversation -> owner task and the owner's conversation (immutable links). */
  readonly #links = new Map<Id, { readonly owner?: Id; readonly ownerConversation?: Id }>();
  /** Prune unused links once the map outgrows this (amortized O(1) per link added). */
  #linkBudget = MIN_LINK_BUDGET;
  readonly #attached = new Set<Id>();
  #sessionAttached = false;
  readonly #waiters = new Set<Waiter>();
  /** Resolvers of `Invocation.done`, private to the driver. */
  readonly #finish = new WeakMap<Invocation, () => void>();
  readonly #taskWaiters = new Set<TaskWaiter>();
  /**
   * Invocations parked in a declared wait (DESIGN §3): a sleep until a durable wake time, or a wait for
   * an external answer with an optional deadline (undefined: no wake time). Parked is not busy.
   */
  readonly #sleepers = new Map<Id, number | undefined>();
  /** Per running invocation: how its current working stretch began (the host's kill counting). */
  readonly #stretch = new Map<Id, WorkStretch>();
  /** Answer waiters of parked invocations, by task (`awaitAnswer`). */
  readonly #answerWaiters = new Map<Id, () => void>();
  /** Interrupters of tasks sleeping in `sleep` (`interruptSleep`). */
  readonly #interrupts = new Map<Id, () => void>();
  /** Running tasks interrupted while not asleep: their next `sleep` returns at once. */
  readonly #pendingInterrupts = new Set<Id>();
  /** Answers recorded for a running task before its waiter registered (read by `awaitAnswer`). */
  readonly #arrived = new Set<Id>();
  /** Invocations started per live task in this process (telemetry's invocation number). */
  readonly #invocations = new Map<Id, number>();
  #phase: Phase = "open";
  /** A host bookkeeping failure met while reserving; the reservation round fail-stops on it. */
  #hostFailure: FaultReport | undefined;
  #fault: FaultReport | undefined;
  #closing: Promise<void> | undefined;
  #shutdown: { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } | undefined;
  #lastWake: number | undefined;
  #lastBusy = false;
  /** Writes the driver itself built (marks, orphaning); they bypass ownership checks. */
  readonly #internal = new WeakSet<MainWrite>();

  constructor(harness: Harness, host: DriverHost) {
    this.#harness = harness;
    this.#host = host;
    this.clock = host.clock ?? systemClock;
  }

  get phase(): Phase {
    return this.#phase;
  }

  get fault(): FaultReport | undefined {
    return this.#fault;
  }

  /**
   * Invocations in flight that are not parked in a sleep. A task sleeping until a durable wake time
   * costs nothing while it waits (DESIGN §3): the host sets its alarm at `nextWake` instead of keeping
   * the process awake with heartbeats, and after an eviction execute sleeps only the remainder (§5.3).
   */
  get busy(): boolean {
    for (const id of this.#running.keys()) if (!this.#sleepers.has(id)) return true;
    return false;
  }

  /** The earliest wake time among sleeping tasks. */
  get nextWake(): number | undefined {
    let min: number | undefined;
    for (const t of this.#sleepers.values()) if (t !== undefined && (min === undefined || t < min)) min = t;
    return min;
  }

  /**
   * Is some live task not parked in a wait for an external answer without a deadline? Those need no
   * alarm: the route that records the answer opens the object (DESIGN §3). Every other live task needs
   * a reason to wake (a heartbeat while busy, a wake time while asleep, a guard until dispatched).
   */
  get hasLiveToWake(): boolean {
    for (const id of this.#live.keys()) if (!this.#sleepers.has(id) || this.#sleepers.get(id) !== undefined) return true;
    return false;
  }

  liveCount(): number {
    return this.#live.size;
  }

  /** Ownership links held in memory (bounded by live work, not by history). */
  get ancestrySize(): number {
    return this.#links.size;
  }

  // ---------------------------------------------------------------------------------------------
  // Open (§6.4): seed the live map and the ancestry it needs; start nothing.

  async seed(call: Call): Promise<void> {
    const storage = this.#harness.storage;
    const live: Task[] = [];
    let after: Id | undefined;
    for (;;) {
      const page = await storage.scanTasks({ live: true, limit: 1000, ...(after === undefined ? {} : { after }) });
      live.push(...page.items);
      if (page.next === undefined) break;
      after = page.next;
    }
    const orphans: Task[] = [];
    for (const task of live) {
      if (this.#harness.taskKinds.has(task.kind)) continue;
      if (task.background) this.#parked.add(task.id);
      else orphans.push(task);
    }
    for (const task of live) {
      if (orphans.includes(task)) continue;
      this.#addLive(task);
    }
    for (const task of this.#live.values()) {
      for (const dep of task.task.after) if (this.#live.has(dep)) this.#edge(dep, task.task.id);
    }
    await this.#loadLinks([...new Set(live.map((t) => t.conversationId))]);
    if (orphans.length > 0) {
      // The only case in which the harness settles a task it does not own (§5.1).
      await this.#harness.commitInternal((b) => {
        for (const task of orphans) {
          const write: MainWrite = { type: "settle", id: task.id, role: "terminal", state: { ...task.state, status: "orphaned" } };
          this.#internal.add(write);
          b.push(write);
        }
      }, call);
      for (const task of orphans) this.#orphaned.push({ ...task, role: "terminal", state: { ...task.state, status: "orphaned" } });
    }
  }

  /** Batch-load ownership links upward from these conversations (depth reads, never history). */
  async #loadLinks(conversationIds: readonly Id[]): Promise<void> {
    const storage = this.#harness.storage;
    let pending = conversationIds.filter((id) => !this.#links.has(id));
    while (pending.length > 0) {
      const conversations = await storage.getConversations(pending);
      const owners = [...conversations.values()].flatMap((c) => (c.owner === undefined ? [] : [c.owner]));
      const ownerTasks = owners.length === 0 ? new Map<Id, Task>() : await storage.getTasks(owners);
      const next: Id[] = [];
      for (const id of pending) {
        const c = conversations.get(id);
        if (c?.owner === undefined) {
          this.#links.set(id, {});
          continue;
        }
        const ownerConversation = ownerTasks.get(c.owner)?.conversationId;
        this.#links.set(id, ownerConversation === undefined ? { owner: c.owner } : { owner: c.owner, ownerConversation });
        if (ownerConversation !== undefined && !this.#links.has(ownerConversation)) next.push(ownerConversation);
      }
      pending = [...new Set(next)];
    }
  }

  #addLive(task: Task): void {
    this.#live.set(task.id, { task, statusEpoch: 0 });
    let set = this.#byConversation.get(task.conversationId);
    if (set === undefined) this.#byConversation.set(task.conversationId, (set = new Set()));
    set.add(task.id);
  }

  #removeLive(id: Id): LiveTask | undefined {
    const lt = this.#live.get(id);
    if (lt === undefined) return undefined;
    this.#live.delete(id);
    const set = this.#byConversation.get(lt.task.conversationId);
    set?.delete(id);
    if (set?.size === 0) this.#byConversation.delete(lt.task.conversationId);
    for (const dep of lt.task.after) {
      const ds = this.#dependents.get(dep);
      ds?.delete(id);
      if (ds?.size === 0) this.#dependents.delete(dep);
    }
    this.#parked.delete(id);
    this.#withheld.delete(id);
    this.#invocations.delete(id);
    return lt;
  }

  #edge(dep: Id, dependent: Id): void {
    let set = this.#dependents.get(dep);
    if (set === undefined) this.#dependents.set(dep, (set = new Set()));
    set.add(dependent);
  }

  // ---------------------------------------------------------------------------------------------
  // Commit pipeline hooks (called by Harness on the line)

  /** The committing invocation's origin, if the call carries one. */
  originOf(call: Call): CommitOrigin | undefined {
    const inv = call.value(invocationKey);
    if (inv === undefined) return undefined;
    const lt = this.#live.get(inv.taskId);
    return { taskId: inv.taskId, turn: (lt?.task.turn ?? inv.kind.turn) === true };
  }

  /** Whether `inv` is still its task's running invocation (a runtime acts only while it is, §6.5). */
  isCurrent(inv: Invocation): boolean {
    return this.#running.get(inv.taskId) === inv;
  }

  /** Admission (§6.3, §6.4): phase, exact invocation identity and the durable mark, before the builder runs. */
  admit(call: Call, internal: boolean, scratchTask: Id | undefined, mark = false): void {
    if (this.#phase === "faulted") throw new PicoError("faulted", `the session faulted: ${this.#fault?.message ?? "unknown"}`);
    if (this.#phase === "closing" || this.#phase === "closed") throw new PicoError("closed", "the session is closing");
    if (internal) return;
    const inv = call.value(invocationKey);
    if (inv === undefined) {
      // Host cancellation stays allowed while stopping; every other host write is refused.
      if (this.#phase === "stopping" && !mark) throw new PicoError("closed", "the session is shutting down; only abort cleanup may commit");
      if (scratchTask !== undefined) throw new PicoError("contract", `scratch of task ${scratchTask} is written only by its running invocation`);
      return;
    }
    if (this.#running.get(inv.taskId) !== inv) {
      throw new PicoError("contract", `a stale ${inv.method} invocation of task ${inv.taskId} tried to commit`);
    }
    if (scratchTask !== undefined && scratchTask !== inv.taskId) {
      throw new PicoError("contract", `task ${inv.taskId} tried to write task ${scratchTask}'s scratch`);
    }
    const lt = this.#live.get(inv.taskId);
    // §6.1: authority ends at settlement. The invocation keeps its slot until it returns, but once its
    // task left the live map it may not write again (neither main nor scratch).
    if (lt === undefined) {
      throw new PicoError("contract", `task ${inv.taskId} has settled; its ${inv.method} invocation has no write authority left (§6.1)`);
    }
    if (inv.method !== "abort") {
      if (lt.task.abort === true || this.#phase === "stopping") throw new TaskCancelled(inv.taskId);
    }
  }

  /** Whole-batch authority checks before persistence. */
  validate(writes: readonly MainWrite[], call: Call, internal: boolean): void {
    if (internal) return;
    const inv = call.value(invocationKey);
    for (const write of writes) {
      // §6.4: while stopping a host may still mark for abort, and nothing else; a commit that carries marks
      // alongside other writes (fork({ abort: true }) creates a conversation) is refused whole.
      if (this.#phase === "stopping" && inv === undefined && !this.#internal.has(write)) {
        throw new PicoError("closed", "the session is shutting down; only abort cleanup may commit");
      }
      switch (write.type) {
        case "patch":
        case "settle": {
          if (this.#internal.has(write)) break;
          const owner = this.#running.get(write.id);
          if (owner !== undefined && owner !== inv) {
            throw new PicoError(
              "contract",
              `task ${write.id} is owned by its running ${owner.method} invocation; only it may change its state (abort marks remain allowed)`,
            );
          }
          break;
        }
        case "task":
        case "createConversation":
          if (inv?.method === "abort") {
            throw new PicoError("contract", `task ${inv.taskId}'s abort handler cannot create tasks or conversations (§6.3)`);
          }
          if (write.type === "task") this.#checkNewWaitCycles(write.task);
          break;
        case "list.append":
          // §6.3: nor can it queue future work via accept/nextRun (steer, followUp, nextRun are inbox
          // elements). A queued write is a record, not work: it lands at the next boundary and starts no
          // turn, so cleanup may report what happened (a job's killed notice into a busy conversation).
          if (inv?.method === "abort" && write.addr.namespace === INBOX_NAMESPACE && !isQueuedWrite(write.value)) {
            throw new PicoError("contract", `task ${inv.taskId}'s abort handler cannot queue input (§6.3)`);
          }
          break;
        default:
          break;
      }
    }
  }

  /** After persistence, on the line: apply every write to the indexes, then reserve work (§6.1). */
  async applied(commit: CommittedBatch): Promise<Action> {
    if (commit.batch.kind !== "main") return () => undefined;
    const touched = new Set<Id>();
    const signals: Invocation[] = [];
    const newConversations: Conversation[] = [];
    const taskConversations = new Set<Id>();
    for (const write of commit.batch.writes) {
      switch (write.type) {
        case "task": {
          if (write.task.role === "terminal") break;
          this.#addLive(write.task);
          for (const dep of write.task.after) if (this.#live.has(dep)) this.#edge(dep, write.task.id);
          touched.add(write.task.id);
          taskConversations.add(write.task.conversationId);
          break;
        }
        case "patch": {
          const lt = this.#live.get(write.id);
          if (lt === undefined) break;
          const marked = lt.task.abort === true || write.abort === true;
          if (write.state.status !== lt.task.state.status) lt.statusEpoch += 1;
          lt.task = {
            ...lt.task,
            role: write.role,
            state: write.state,
            ...(marked ? { abort: true as const } : {}),
            ...(write.owns === undefined ? {} : { owns: write.owns }),
          };
          if (write.abort === true) {
            const running = this.#running.get(write.id);
            if (running !== undefined && running.method !== "abort") signals.push(running);
          }
          touched.add(write.id);
          break;
        }
        case "settle": {
          const lt = this.#removeLive(write.id);
          if (lt === undefined) break;
          if (this.#running.has(write.id)) this.#settledStatus.set(write.id, write.state.status);
          for (const dependent of this.#dependents.get(write.id) ?? []) touched.add(dependent);
          this.#dependents.delete(write.id);
          touched.add(write.id);
          break;
        }
        case "createConversation":
          newConversations.push(write.conversation);
          break;
        default:
          break;
      }
    }
    for (const c of newConversations) {
      const ownerConversation = c.owner === undefined ? undefined : (this.#live.get(c.owner)?.task.conversationId ?? (await this.#ownerConversation(c.owner)));
      this.#links.set(c.id, c.owner === undefined ? {} : ownerConversation === undefined ? { owner: c.owner } : { owner: c.owner, ownerConversation });
    }
    await this.#loadLinks([...taskConversations]);
    const actions = this.#reconsider(touched);
    this.#pruneLinks();
    return () => {
      for (const inv of signals) inv.controller.abort(new TaskCancelled(inv.taskId));
      actions();
    };
  }

  /**
   * Release ancestry nothing needs any more (§6.2): keep the links upward from conversations with live
   * tasks or outstanding invocations; a later task in a pruned conversation reloads its links.
   */
  #pruneLinks(): void {
    if (this.#links.size <= this.#linkBudget) return;
    const keep = new Set<Id>();
    const need = (conversation: Id): void => {
      let c: Id | undefined = conversation;
      while (c !== undefined && !keep.has(c)) {
        keep.add(c);
        c = this.#links.get(c)?.ownerConversation;
      }
    };
    for (const conversation of this.#byConversation.keys()) need(conversation);
    for (const inv of this.#running.values()) need(inv.conversationId);
    for (const id of [...this.#links.keys()]) if (!keep.has(id)) this.#links.delete(id);
    this.#linkBudget = Math.max(MIN_LINK_BUDGET, 2 * this.#links.size);
  }

  async #ownerConversation(taskId: Id): Promise<Id | undefined> {
    return (await this.#harness.storage.getTasks([taskId])).get(taskId)?.conversationId;
  }

  // ---------------------------------------------------------------------------------------------
  // Serving, reservation, dispatch

  /** A task is served when the session is attached or an ownership ancestor of its conversation is. */
  #served(task: Task): boolean {
    if (this.#sessionAttached) return true;
    let conversation: Id | undefined = task.conversationId;
    const seen = new Set<Id>();
    while (conversation !== undefined && !seen.has(conversation)) {
      if (this.#attached.has(conversation)) return true;
      seen.add(conversation);
      conversation = this.#links.get(conversation)?.ownerConversation;
    }
    return false;
  }

  #reserve(id: Id, out: Invocation[]): void {
    if (this.#phase !== "open" && this.#phase !== "stopping") return;
    const lt = this.#live.get(id);
    if (lt === undefined || this.#running.has(id) || this.#parked.has(id)) return;
    if (!this.#served(lt.task)) return;
    let method: InvocationMethod;
    if (lt.task.abort === true) method = "abort";
    else if (this.#phase === "stopping" || this.#withheld.has(id)) return;
    else if (lt.task.role === "start") {
      if (lt.task.after.some((dep) => this.#live.has(dep))) return;
      method = "execute";
    } else if (lt.task.role === "inflight") method = "recover";
    else return;
    const kind = this.#harness.taskKinds.get(lt.task.kind);
    // A missing kind, or a kind whose declared needs are not all registered, parks the task until a
    // registration supplies them (§6.4, §9.6).
    if (kind === undefined || !this.#needsMet(kind)) {
      this.#parked.add(id);
      return;
    }
    // An execute (or recover) whose kind declares it sleeps until a durable time first is parked from
    // its dispatch: its wake is known now, it is not busy (no transient heartbeat, DESIGN §3), and it is
    // not working, so the host counts no kill for it until it wakes. Its runtime.sleep takes over the
    // entry; completion (or a sleep already due) removes it.
    const sleepsUntil = method === "abort" ? undefined : kind.sleepsUntil?.(lt.task.state);
    const startsParked = sleepsUntil !== undefined && sleepsUntil > this.clock.now();
    let allowed: boolean;
    try {
      allowed = this.#host.beforeInvoke?.(lt.task, method, { parked: startsParked }) !== false;
    } catch (error) {
      // The host could not make its bookkeeping durable: running the task without it would defeat the
      // safety valve it exists for. Nothing starts; the session fail-stops once reservation ends.
      this.#hostFailure ??= {
        taskId: id,
        kind: lt.task.kind,
        method,
        error,
        message: `host bookkeeping before task ${id} (${lt.task.kind}) ${method} failed: ${describe(error)}`,
      };
      return;
    }
    if (!allowed && method !== "abort") {
      this.#withheld.add(id);
      return;
    }
    let finish: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const number = (this.#invocations.get(id) ?? 0) + 1;
    this.#invocations.set(id, number);
    const inv: Invocation = {
      taskId: id,
      conversationId: lt.task.conversationId,
      method,
      controller: new AbortController(),
      initialStatusEpoch: lt.statusEpoch,
      number,
      kind,
      task: lt.task,
      done,
    };
    this.#finish.set(inv, finish);
    this.#running.set(id, inv);
    this.#stretch.set(id, "start");
    // Infinity: parked with no wake time (a route's commit and interruptSleep end that sleep).
    if (startsParked) this.#sleepers.set(id, Number.isFinite(sleepsUntil) ? sleepsUntil : undefined);
    out.push(inv);
  }

  /** Reconsider changed tasks and waiters; returns what to do after the line. */
  #reconsider(ids: Iterable<Id>): Action {
    const reserved: Invocation[] = [];
    for (const id of ids) this.#reserve(id, reserved);
    const failure = this.#hostFailure;
    if (failure !== undefined) {
      this.#hostFailure = undefined;
      // Nothing reserved in this round was dispatched: release the slots so close does not wait on them.
      for (const inv of reserved) {
        this.#running.delete(inv.taskId);
        this.#finish.get(inv)?.();
      }
      return this.#failStop(failure);
    }
    const waiterActions = this.#checkWaiters();
    const notify = this.#notifyHost();
    return () => {
      for (const inv of reserved) this.#dispatch(inv);
      waiterActions();
      notify();
    };
  }

  #dispatch(inv: Invocation): void {
    const task = inv.task;
    const span = this.#startSpan(inv);
    const call = withContextValue(invocationSpanKey, span, withContextValue(invocationKey, inv, withAbortSignal(inv.controller.signal, BACKGROUND_CONTEXT)));
    const runtime = createRuntime(this.#harness, this, inv, task);
    const method = inv.kind[inv.method] as (task: Task, runtime: TaskRuntime, call: Call) => Promise<void>;
    const preview = inv.method === "abort" ? undefined : inv.kind.preview;
    void (async () => {
      if (preview !== undefined) await startPreview(runtime, preview, task, call);
      return method.call(inv.kind, task, runtime, call);
    })()
      .finally(() => releaseRuntime(runtime))
      .then(
        () => this.#complete(inv, undefined, false),
        (error: unknown) => this.#complete(inv, error, true),
      )
      // The span ends exactly once, here, whichever way the invocation and its completion went.
      .then(
        (outcome) => endSpan(span, outcome.outcome, outcome.error),
        (error: unknown) => {
          endSpan(span, "failed", error);
          throw error;
        },
      )
      // A failing host hook in the completion must not become an unhandled rejection.
      .catch((error: unknown) => this.#harness.report({ type: "listener_error", error }))
      .finally(() => this.#finish.get(inv)?.());
  }

  /** One span per invocation (§6.5), through the host's tracer; a throwing tracer degrades to no-op. */
  #startSpan(inv: Invocation): Span {
    const telemetry = this.#host.telemetry;
    try {
      return (telemetry?.tracer ?? noopTracer).startSpan(`pico.task.${inv.method}`, {
        ...(telemetry?.session === undefined ? {} : { "pico.session": telemetry.session }),
        "pico.conversation": inv.conversationId,
        "pico.task.id": inv.taskId,
        "pico.task.kind": inv.task.kind,
        "pico.task.status": inv.task.state.status,
        "pico.method": inv.method,
        "pico.phase": this.#phase,
        "pico.invocation": inv.number,
      });
    } catch (error) {
      this.#harness.report({ type: "listener_error", error });
      return noopTracer.startSpan("", {});
    }
  }

  /** Invocation completion enters the line (§6.1); resolves with how the invocation ended. */
  #complete(inv: Invocation, error: unknown, threw: boolean): Promise<{ outcome: InvocationOutcome; error?: unknown }> {
    let outcome: InvocationOutcome = "closed";
    return this.#harness.line
      .run(() => {
        const settledStatus = this.#settledStatus.get(inv.taskId);
        this.#settledStatus.delete(inv.taskId);
        if (this.#running.get(inv.taskId) !== inv) return () => undefined;
        this.#running.delete(inv.taskId);
        this.#sleepers.delete(inv.taskId);
        this.#stretch.delete(inv.taskId);
        this.#answerWaiters.delete(inv.taskId);
        this.#arrived.delete(inv.taskId);
        this.#pendingInterrupts.delete(inv.taskId);
        this.#host.afterInvoke?.(inv.taskId, inv.method, this.#live.get(inv.taskId)?.task.state.status ?? settledStatus ?? inv.task.state.status);
        if (this.#phase === "closing" || this.#phase === "closed" || this.#phase === "faulted") {
          return this.#notifyHost();
        }
        const lt = this.#live.get(inv.taskId);
        const kind = inv.kind.kind;
        if (threw) {
          if (!this.#isCancellation(error, inv)) {
            outcome = "failed";
            return this.#failStop({ taskId: inv.taskId, kind, method: inv.method, error, message: `task ${inv.taskId} (${kind}) ${inv.method} threw: ${describe(error)}` });
          }
          outcome = "cancelled";
        } else if (inv.method === "abort") {
          if (lt !== undefined) {
            outcome = "contract";
            return this.#failStop({ taskId: inv.taskId, kind, method: inv.method, error: undefined, message: `task ${inv.taskId} (${kind}) abort returned without settling` });
          }
          outcome = "settled";
        } else if (lt !== undefined && lt.statusEpoch === inv.initialStatusEpoch && !inv.controller.signal.aborted && lt.task.abort !== true) {
          outcome = "contract";
          return this.#failStop({
            taskId: inv.taskId,
            kind,
            method: inv.method,
            error: undefined,
            message: `task ${inv.taskId} (${kind}) ${inv.method} returned without a committed status transition (§5.3)`,
          });
        } else if (lt === undefined) outcome = "settled";
        else if (lt.task.abort === true || inv.controller.signal.aborted) outcome = "cancelled";
        else outcome = "progressed";
        this.#pruneLinks();
        return this.#reconsider([inv.taskId]);
      })
      .then((after) => {
        after();
        return threw ? { outcome, error } : { outcome };
      });
  }

  #isCancellation(error: unknown, inv: Invocation): boolean {
    if (error instanceof TaskCancelled) return true;
    if (!inv.controller.signal.aborted) return false;
    if (error === inv.controller.signal.reason) return true;
    if (error instanceof PicoError && (error.code === "closed" || error.code === "task_cancelled")) return true;
    return typeof error === "object" && error !== null && (error as { name?: unknown }).name === "AbortError";
  }

  #notifyHost(): Action {
    const wake = this.nextWake;
    const busy = this.busy;
    const wakeChanged = wake !== this.#lastWake;
    const busyChanged = busy !== this.#lastBusy;
    this.#lastWake = wake;
    this.#lastBusy = busy;
    return () => {
      // The reason that appears goes first, so a host that keeps the minimum of both (one alarm) never
      // sees a moment with neither when a sleeper wakes or an invocation parks (no transient clear).
      if (busy && busyChanged) this.#host.busyChanged?.(busy);
      if (wakeChanged) this.#host.wakeChanged?.(wake);
      if (!busy && busyChanged) this.#host.busyChanged?.(busy);
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Faults (§6.1): fail-stop

  /**
   * Uncertain persistence (§3.3, §6.3): a batch's storage write failed in a way that may have left it
   * durable. The session fail-stops on the line; reopening recovers the last complete batch.
   */
  persistenceFailed(error: unknown, call: Call): Action {
    if (this.#phase !== "open" && this.#phase !== "stopping") return () => undefined;
    const inv = call.value(invocationKey);
    return this.#failStop({
      ...(inv === undefined ? {} : { taskId: inv.taskId, kind: inv.kind.kind, method: inv.method }),
      error,
      message: `a commit's persistence is uncertain (${describe(error)}); reopen the session to recover its last complete batch (§3.3)`,
    });
  }

  #failStop(report: FaultReport): Action {
    this.#phase = "faulted";
    this.#fault = report;
    const waiters = [...this.#waiters];
    const taskWaiters = [...this.#taskWaiters];
    this.#waiters.clear();
    this.#taskWaiters.clear();
    const shutdown = this.#shutdown;
    const error = new PicoError("faulted", report.message, { cause: report.error });
    const running = [...this.#running.values()];
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
      this.#host.faulted?.(report);
      watchHub(this.#harness).fault(report);
      void Promise.allSettled(running.map((inv) => inv.done)).then(() => this.#harness.storage.close().catch(() => undefined));
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Drive and waiters (§6.2)

  #idle(scope: Id | "session"): boolean {
    if (scope === "session") {
      for (const lt of this.#live.values()) if (lt.task.background !== true && !this.#parked.has(lt.task.id)) return false;
      return true;
    }
    for (const id of this.#byConversation.get(scope) ?? []) {
      const lt = this.#live.get(id);
      if (lt !== undefined && lt.task.background !== true && !this.#parked.has(id)) return false;
    }
    return true;
  }

  #checkWaiters(): Action {
    const ready: Waiter[] = [];
    for (const w of this.#waiters) if (this.#idle(w.scope)) ready.push(w);
    for (const w of ready) this.#waiters.delete(w);
    const done: TaskWaiter[] = [];
    for (const w of this.#taskWaiters) if (!this.#live.has(w.taskId)) done.push(w);
    for (const w of done) this.#taskWaiters.delete(w);
    const shutdown = this.#phase === "stopping" && this.#drained() ? this.#shutdown : undefined;
    return () => {
      for (const w of ready) {
        w.detach();
        w.resolve("idle");
      }
      for (const w of done) {
        w.detach();
        w.resolve(true);
      }
      if (shutdown !== undefined) shutdown.resolve();
    };
  }

  /** Attach a scope persistently: its work (and owned descendants' work) is served (§6.2). */
  attach(scope: Id | "session", call: Call): Promise<void> {
    return this.#harness.line
      .run(() => {
        this.#admitLifecycle();
        return this.#attach(scope, call);
      })
      .then((after) => after());
  }

  #attach(scope: Id | "session", call: Call): Action {
    const inv = call.value(invocationKey);
    if (inv !== undefined && scope === "session") {
      throw new PicoError("contract", `task ${inv.taskId} cannot drive or attach the whole session from inside its own invocation`);
    }
    const first = scope === "session" ? !this.#sessionAttached : !this.#attached.has(scope) && !this.#sessionAttached;
    if (scope === "session") this.#sessionAttached = true;
    else this.#attached.add(scope);
    // A new attachment inspects the live map once; ordinary completions never scan it.
    return first ? this.#reconsider([...this.#live.keys()]) : () => undefined;
  }

  #admitLifecycle(): void {
    if (this.#phase === "faulted") throw new PicoError("faulted", `the session faulted: ${this.#fault?.message ?? "unknown"}`);
  }

  /** drive(call): attach, then wait for the scope's idle predicate; the signal cancels only this waiter. */
  drive(scope: Id | "session", call: Call): Promise<"idle" | "closed"> {
    return this.#drive(scope, call, undefined);
  }

  /**
   * drive with a blocking budget (§8.3): like drive, but when `budgetMs` passes on the driver's clock
   * before the scope is idle, only this waiter is removed and it resolves "budget"; the scope stays
   * attached, so its work goes on. A tool waiting on a child conversation uses it.
   */
  driveWithin(scope: Id | "session", budgetMs: number, call: Call): Promise<"idle" | "closed" | "budget"> {
    return new Promise<"idle" | "closed" | "budget">((resolve, reject) => {
      this.#drive(scope, call, { ms: budgetMs, expired: () => resolve("budget") }).then(resolve, reject);
    });
  }

  #drive(scope: Id | "session", call: Call, budget: { readonly ms: number; readonly expired: () => void } | undefined): Promise<"idle" | "closed"> {
    return new Promise<"idle" | "closed">((resolve, reject) => {
      void this.#harness.line
        .run((): Action => {
          this.#admitLifecycle();
          if (this.#phase === "closing" || this.#phase === "closed") return () => resolve("closed");
          this.#checkSelfDrive(scope, call);
          const attachActions = this.#attach(scope, call);
          if (this.#phase === "faulted") {
            // Attaching reserved work and the reservation itself fail-stopped: the waiter rejects.
            const error = new PicoError("faulted", `the session faulted: ${this.#fault?.message ?? "unknown"}`);
            return () => {
              attachActions();
              reject(error);
            };
          }
          const signal = call.abortSignal;
          if (signal?.aborted) {
            return () => {
              attachActions();
              reject(signal.reason);
            };
          }
          if (this.#idle(scope)) {
            return () => {
              attachActions();
              resolve("idle");
            };
          }
          const onAbort = (): void => {
            // The listener enqueues removal on the line; the waiter is removed exactly once.
            void this.#harness.line.run(() => {
              if (this.#waiters.delete(waiter)) {
                waiter.detach();
                reject(signal?.reason);
              }
            });
          };
          const timer = new AbortController();
          const waiter: Waiter = {
            scope,
            taskId: call.value(invocationKey)?.taskId,
            resolve,
            reject,
            detach: () => {
              signal?.removeEventListener("abort", onAbort);
              timer.abort();
            },
          };
          this.#waiters.add(waiter);
          signal?.addEventListener("abort", onAbort, { once: true });
          if (budget !== undefined) {
            // The budget removes only this waiter (on the line, exactly once); the attachment stays.
            this.clock.sleep(this.clock.now() + budget.ms, timer.signal).then(
              () =>
                this.#harness.line.run(() => {
                  if (this.#waiters.delete(waiter)) {
                    waiter.detach();
                    budget.expired();
                  }
                }),
              () => undefined,
            );
          }
          return attachActions;
        })
        .then((after) => after(), reject);
    });
  }

  /**
   * The known-self-wait check of a drive of `scope` by this call, for callers that must reject before
   * they write (prompt checks before its acceptance, §6.2). Call it on the line.
   */
  checkDrive(scope: Id | "session", call: Call): void {
    this.#checkSelfDrive(scope, call);
  }

  /**
   * Known self-waits (§6.2): a foreground task cannot drive its own foreground scope, nor a scope whose
   * foreground set holds a task whose unresolved dependency path leads back to the caller (this also
   * catches a background task T driving a foreground D with after: [T]).
   */
  #checkSelfDrive(scope: Id | "session", call: Call): void {
    const inv = call.value(invocationKey);
    if (inv === undefined) return;
    const lt = this.#live.get(inv.taskId);
    if (lt !== undefined && lt.task.background !== true && (scope === "session" || this.#inForegroundScope(lt.task, scope))) {
      throw new PicoError("contract", `foreground task ${inv.taskId} cannot drive its own foreground scope (conversation ${String(scope)}); that wait could never finish (§6.2)`);
    }
    if (scope === "session" || !this.#live.has(inv.taskId)) return;
    for (const id of this.foregroundClosure(scope).tasks) {
      if (this.#dependsOn(id, inv.taskId)) {
        throw new PicoError(
          "contract",
          `task ${inv.taskId} cannot drive conversation ${scope}: its foreground task ${id} waits, through its dependencies, for task ${inv.taskId} (§6.2)`,
        );
      }
    }
  }

  /**
   * Cycle-creating admission (§6.2): a new foreground task whose dependencies lead back to a task that is
   * waiting on a drive of a scope the new task would join is rejected before persistence.
   */
  #checkNewWaitCycles(task: Task): void {
    if (task.background === true || task.role === "terminal") return;
    for (const waiter of this.#waiters) {
      if (waiter.taskId === undefined || waiter.scope === "session") continue;
      if (!task.after.some((dep) => this.#dependsOn(dep, waiter.taskId as Id))) continue;
      if (this.#inForegroundScope(task, waiter.scope)) {
        throw new PicoError(
          "contract",
          `new task ${task.id} in conversation ${task.conversationId} would wait, through its dependencies, for task ${waiter.taskId}, which is driving conversation ${waiter.scope} (§6.2)`,
        );
      }
    }
  }

  /** Is `task` (foreground) part of conversation `scope`'s foreground set? */
  #inForegroundScope(task: Task, scope: Id): boolean {
    let conversation: Id | undefined = task.conversationId;
    let current: Task | undefined = task;
    while (conversation !== undefined && current !== undefined) {
      if (current.background === true) return false;
      if (conversation === scope) return true;
      const link = this.#links.get(conversation);
      if (link?.owner === undefined) return false;
      current = this.#live.get(link.owner)?.task;
      conversation = link.ownerConversation;
    }
    return false;
  }

  /** Wait until a task is terminal, or `budgetMs` passes (false). Known self-waits reject (§6.2). */
  waitForTask(id: Id, options: { budgetMs?: number } | undefined, call: Call): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      void this.#harness.line
        .run((): Action => {
          this.#admitLifecycle();
          if (this.#phase === "closing" || this.#phase === "closed") throw new PicoError("closed", "the session is closing");
          const inv = call.value(invocationKey);
          if (inv !== undefined && this.#dependsOn(id, inv.taskId)) {
            throw new PicoError("contract", `task ${inv.taskId} cannot wait for task ${id}: its unresolved dependencies lead back to the waiter (§6.2)`);
          }
          if (!this.#live.has(id)) return () => resolve(true);
          const signal = call.abortSignal;
          const budget = new AbortController();
          const onAbort = (): void => {
            void this.#harness.line.run(() => {
              if (this.#taskWaiters.delete(waiter)) {
                waiter.detach();
                reject(signal?.reason);
              }
            });
          };
          const waiter: TaskWaiter = {
            taskId: id,
            resolve,
            reject,
            detach: () => {
              signal?.removeEventListener("abort", onAbort);
              budget.abort();
            },
          };
          this.#taskWaiters.add(waiter);
          signal?.addEventListener("abort", onAbort, { once: true });
          if (options?.budgetMs !== undefined) {
            const until = this.clock.now() + options.budgetMs;
            this.clock.sleep(until, budget.signal).then(
              () =>
                this.#harness.line.run(() => {
                  if (this.#taskWaiters.delete(waiter)) {
                    waiter.detach();
                    resolve(false);
                  }
                }),
              () => undefined,
            );
          }
          return () => undefined;
        })
        .then((after) => after(), reject);
    });
  }

  /** Does `target` (or its unresolved dependency path) lead back to `waiter`? */
  #dependsOn(target: Id, waiter: Id): boolean {
    // A terminal waiter (its method still unwinding) satisfies every dependency on it: no cycle.
    if (!this.#live.has(waiter)) return false;
    const stack = [target];
    const seen = new Set<Id>();
    while (stack.length > 0) {
      const id = stack.pop() as Id;
      if (id === waiter) return true;
      if (seen.has(id)) continue;
      seen.add(id);
      const lt = this.#live.get(id);
      if (lt !== undefined) stack.push(...lt.task.after);
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Cancellation (§6.3)

  /** Mark one live task; a terminal or unknown task rejects (unless `ifLive`). */
  async mark(ids: readonly Id[], call: Call, options: { ifLive?: boolean } = {}): Promise<Id[]> {
    // Admitted as the caller's commit: a stale or marked execute/recover cannot mark (§6.3).
    return this.#harness.commitMarks((b) => this.markWrites(b, ids, options), call);
  }

  /** Push abort marks into a batch being built on the line (one commit with other writes, §6.3). */
  markWrites(b: TxBuilder, ids: readonly Id[], options: { ifLive?: boolean } = {}): Id[] {
    const marked: Id[] = [];
    for (const id of ids) {
      const lt = this.#live.get(id);
      if (lt === undefined) {
        if (options.ifLive) continue;
        throw new PicoError("invalid_commit", `task ${id} is not live; only live tasks can be marked for abort`);
      }
      if (lt.task.abort === true || marked.includes(id)) continue;
      const write: MainWrite = { type: "patch", id, role: lt.task.role, state: lt.task.state, abort: true };
      this.#internal.add(write);
      b.push(write);
      marked.push(id);
    }
    return marked;
  }

  /** The foreground ownership closure of a conversation (§5.6): live foreground tasks, recursively through owned conversations. */
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
      for (const id of this.#byConversation.get(c) ?? []) {
        const lt = this.#live.get(id);
        if (lt === undefined || lt.task.background === true) continue;
        tasks.push(id);
        for (const owned of lt.task.owns ?? []) stack.push(owned);
      }
    }
    return { tasks, conversations };
  }

  liveTask(id: Id): Task | undefined {
    return this.#live.get(id)?.task;
  }

  /** Live turn tasks of a conversation (§5.8's inTurn), from the index. */
  liveTurnTasks(conversationId: Id): number {
    let n = 0;
    for (const id of this.#byConversation.get(conversationId) ?? []) if (this.#live.get(id)?.task.turn === true) n += 1;
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
        c = this.#links.get(c)?.ownerConversation;
      }
      return false;
    };
    for (const lt of this.#live.values()) if (inSubtree(lt.task.conversationId)) return true;
    // A slot is outstanding until its method returns, even after its task settled (§6.4).
    for (const inv of this.#running.values()) if (inSubtree(inv.conversationId)) return true;
    return false;
  }

  // ---------------------------------------------------------------------------------------------
  // Sleep: in memory, reported to the host as a wake time (DESIGN §3)

  /**
   * Sleep until `untilMs`; `Infinity` sleeps with no wake time (the host arms no alarm for it), so only
   * `interruptSleep` or cancellation end it. An `interruptSleep` that came while the invocation was
   * running but not asleep makes this sleep return at once, so a task that read its durable state and
   * then sleeps cannot miss a change committed in between.
   */
  async sleep(taskId: Id, untilMs: number, call: Call): Promise<void> {
    const wakeAt = Number.isFinite(untilMs) ? untilMs : undefined;
    if (wakeAt !== undefined && wakeAt <= this.clock.now()) {
      this.#pendingInterrupts.delete(taskId);
      // A wake registered at dispatch (sleepsUntil) that has passed meanwhile: the task is awake.
      if (this.#sleepers.has(taskId)) await this.#onLine(() => this.#wake(taskId));
      return;
    }
    const sleep = new AbortController();
    const interrupt = (): void => sleep.abort(INTERRUPTED);
    // Parking and registering the interrupter are one step on the line: an interruptSleep is either
    // pending before it (the sleep does not start) or finds the interrupter.
    const parked = await this.#harness.line.run((): Action | undefined => {
      if (this.#pendingInterrupts.delete(taskId)) return undefined;
      this.#interrupts.set(taskId, interrupt);
      return this.#park(taskId, wakeAt);
    });
    if (parked === undefined) {
      if (this.#sleepers.has(taskId)) await this.#onLine(() => this.#wake(taskId));
      return;
    }
    parked();
    const cancel = (): void => sleep.abort(call.abortSignal?.reason);
    if (call.abortSignal?.aborted === true) cancel();
    else call.abortSignal?.addEventListener("abort", cancel, { once: true });
    try {
      if (wakeAt !== undefined) await this.clock.sleep(wakeAt, sleep.signal);
      else {
        await new Promise<never>((_resolve, reject) => {
          if (sleep.signal.aborted) reject(sleep.signal.reason);
          else sleep.signal.addEventListener("abort", () => reject(sleep.signal.reason), { once: true });
        });
      }
    } catch (error) {
      // An interrupted sleep returns early; cancellation still rejects.
      if (error !== INTERRUPTED || call.abortSignal?.aborted === true) throw error;
    } finally {
      call.abortSignal?.removeEventListener("abort", cancel);
      if (this.#interrupts.get(taskId) === interrupt) this.#interrupts.delete(taskId);
      await this.#onLine(() => this.#wake(taskId));
    }
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
    return this.#harness.line.run(() => {
      const interrupt = this.#interrupts.get(taskId);
      if (interrupt === undefined) {
        if (this.#running.has(taskId)) this.#pendingInterrupts.add(taskId);
        return false;
      }
      this.#interrupts.delete(taskId);
      interrupt();
      return true;
    });
  }

  /**
   * Park the invocation of `taskId` until `answerArrived(taskId)` or the deadline `untilMs` (the alarm
   * wakes an evicted object then), observing cancellation. The second kind of declared wait (DESIGN
   * §3): not busy, no heartbeat, no kill counted while parked. The answer itself is durable state the
   * caller reads (runtime.awaitAnswer); this only parks and wakes.
   */
  async awaitAnswer(taskId: Id, untilMs: number | undefined, call: Call): Promise<"answered" | "deadline"> {
    let answered: () => void = () => undefined;
    const arrival = new Promise<"answered">((resolve) => (answered = () => resolve("answered")));
    const parked = await this.#harness.line.run((): Action | undefined => {
      if (this.#arrived.delete(taskId)) return undefined;
      this.#answerWaiters.set(taskId, answered);
      return this.#park(taskId, untilMs);
    });
    if (parked === undefined) return "answered";
    parked();
    const timer = new AbortController();
    const abort = (): void => timer.abort(call.abortSignal?.reason);
    call.abortSignal?.addEventListener("abort", abort, { once: true });
    try {
      const cancelled = new Promise<never>((_resolve, reject) => {
        if (call.abortSignal?.aborted === true) reject(call.abortSignal.reason);
        else timer.signal.addEventListener("abort", () => reject(timer.signal.reason), { once: true });
      });
      cancelled.catch(() => undefined);
      const deadline = untilMs === undefined ? [] : [this.clock.sleep(untilMs, timer.signal).then(() => "deadline" as const)];
      return await Promise.race([arrival, cancelled, ...deadline]);
    } finally {
      call.abortSignal?.removeEventListener("abort", abort);
      timer.abort(new PicoError("closed", "the wait ended"));
      await this.#onLine(() => {
        if (this.#answerWaiters.get(taskId) === answered) this.#answerWaiters.delete(taskId);
        return this.#wake(taskId);
      });
    }
  }

  /** An answer to `taskId`'s wait was committed: wake its parked invocation (on the line). */
  answerArrived(taskId: Id): Promise<void> {
    return this.#onLine(() => {
      const waiter = this.#answerWaiters.get(taskId);
      if (waiter !== undefined) {
        this.#answerWaiters.delete(taskId);
        waiter();
      } else if (this.#running.has(taskId)) this.#arrived.add(taskId);
      return () => undefined;
    });
  }

  /** On the line: the invocation of `taskId` parks (the host learns its stretch ended alive). */
  #park(taskId: Id, untilMs: number | undefined): Action {
    if (!this.#sleepers.has(taskId)) this.#host.parked?.(taskId, this.#stretch.get(taskId) ?? "start");
    const previous = this.#sleepers.get(taskId);
    this.#sleepers.set(taskId, previous === undefined ? untilMs : untilMs === undefined ? previous : Math.min(untilMs, previous));
    return this.#notifyHost();
  }

  /** On the line: a parked invocation of `taskId` works again (the host counts the new stretch). */
  #wake(taskId: Id): Action {
    if (!this.#sleepers.delete(taskId)) return () => undefined;
    if (this.#running.has(taskId)) {
      this.#stretch.set(taskId, "wake");
      this.#host.woke?.(taskId);
    }
    return this.#notifyHost();
  }

  #onLine(step: () => Action): Promise<void> {
    return this.#harness.line.run(step).then((after) => after());
  }

  /** Wake sleepers whose time has come (an alarm fired); sleeping itself is the clock's business. */
  release(taskId: Id): Promise<void> {
    return this.#harness.line
      .run(() => {
        this.#withheld.delete(taskId);
        return this.#reconsider([taskId]);
      })
      .then((after) => after());
  }

  /** Are the entry kinds and sections a task kind needs all registered (§5.2 `needs`)? */
  #needsMet(kind: AnyTaskKind): boolean {
    const needs = kind.needs;
    if (needs === undefined) return true;
    for (const name of needs.entryKinds ?? []) if (!this.#harness.entryKinds.has(name)) return false;
    for (const key of needs.sections ?? []) if (!this.#harness.sections.has(key)) return false;
    return true;
  }

  /**
   * Re-examine every parked task after a registry change (§9.6): those whose kind and needs are now
   * registered are reserved; the others park again. The parked set is small (tasks waiting for code).
   */
  unpark(): Action {
    const ids = [...this.#parked];
    this.#parked.clear();
    return this.#reconsider(ids);
  }

  /** Admission of a registry change (§9.6): like a commit's, by lifecycle and invocation identity. */
  admitChange(call: Call): void {
    this.#admitLifecycle();
    if (this.#phase === "closing" || this.#phase === "closed") throw new PicoError("closed", "the session is closing");
    const inv = call.value(invocationKey);
    if (inv !== undefined && this.#running.get(inv.taskId) !== inv) {
      throw new PicoError("contract", `a stale ${inv.method} invocation of task ${inv.taskId} tried to change a registry`);
    }
  }

  hasLiveOfKind(kind: string): boolean {
    for (const lt of this.#live.values()) if (lt.task.kind === kind) return true;
    return false;
  }

  inspect(): InspectResult {
    const start: Task[] = [];
    const inflight: Task[] = [];
    const parked: Task[] = [];
    const quarantined: Task[] = [];
    for (const lt of this.#live.values()) {
      if (this.#parked.has(lt.task.id)) parked.push(lt.task);
      else if (lt.task.role === "start") start.push(lt.task);
      else inflight.push(lt.task);
      if (this.#withheld.has(lt.task.id)) quarantined.push(lt.task);
    }
    return { start, inflight, orphaned: [...this.#orphaned], parked, quarantined };
  }

  // ---------------------------------------------------------------------------------------------
  // Lifecycle (§6.4)

  #drained(): boolean {
    if (this.#running.size > 0) return false;
    for (const id of this.#live.keys()) if (!this.#parked.has(id)) return false;
    return true;
  }

  /** One marking batch for every live task, then serve cancellation and close once drained. */
  shutdown(call: Call): Promise<void> {
    // A task-bearing shutdown rejects before it could become the shared lifecycle operation (§6.4).
    const inv = call.value(invocationKey);
    if (inv !== undefined) return Promise.reject(new PicoError("contract", `task ${inv.taskId} cannot shut down the session it runs in`));
    if (this.#shutdown !== undefined) return this.#shutdown.promise;
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
      const after = await this.#harness.line.run(async () => {
        this.#admitLifecycle();
        if (this.#phase === "closing" || this.#phase === "closed") throw new PicoError("closed", "the session is closing");
        this.#phase = "stopping";
        const ids = [...this.#live.keys()].filter((id) => !this.#parked.has(id));
        const marked = await this.#harness.commitInternalOnLine((b) => this.markWrites(b, ids, { ifLive: true }), call);
        this.#sessionAttached = true;
        const reconsidered = this.#reconsider([...this.#live.keys()]);
        return () => {
          marked.after?.();
          reconsidered();
        };
      });
      after();
      await drained;
      await this.close(call);
    })();
    this.#shutdown = { promise, resolve, reject };
    return promise;
  }

  /** Stop admission, signal and join every owned call, then close storage. Repeated calls share it. */
  close(call: Call): Promise<void> {
    // Close joins every invocation; from inside one it would wait for itself (§6.4).
    const inv = call.value(invocationKey);
    if (inv !== undefined) return Promise.reject(new PicoError("contract", `task ${inv.taskId} cannot close the session it runs in`));
    this.#closing ??= (async () => {
      const running = await this.#harness.line.run(() => {
        if (this.#phase !== "faulted") this.#phase = "closing";
        const waiters = [...this.#waiters];
        this.#waiters.clear();
        const taskWaiters = [...this.#taskWaiters];
        this.#taskWaiters.clear();
        for (const w of waiters) {
          w.detach();
          w.resolve("closed");
        }
        for (const w of taskWaiters) {
          w.detach();
          w.reject(new PicoError("closed", "the session closed"));
        }
        if (this.#shutdown !== undefined && !this.#drained()) this.#shutdown.reject(new PicoError("closed", "close interrupted shutdown"));
        return [...this.#running.values()];
      });
      const reason = new PicoError("closed", "the session is closing");
      for (const inv of running) inv.controller.abort(reason);
      await Promise.all(running.map((inv) => inv.done));
      await this.#harness.storage.close().catch(() => undefined);
      watchHub(this.#harness).close();
      if (this.#phase !== "faulted") this.#phase = "closed";
    })();
    return this.#closing;
  }
}

function endSpan(span: Span, outcome: InvocationOutcome, error: unknown): void {
  try {
    span.setAttribute("pico.outcome", outcome);
    if (error !== undefined && outcome !== "cancelled") span.recordError(error);
    if (outcome === "failed" || outcome === "contract") span.setStatus("error", error === undefined ? `invocation ended: ${outcome}` : describe(error));
    else span.setStatus("ok");
  } finally {
    span.end();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** For the runtime: the invocation a call carries (private to core). */
export function invocationOf(call: Call): Invocation | undefined {
  return call.value(invocationKey);
}

/** Whether an inbox element is a queued write (mode "write"), the one kind of queued input cleanup may add. */
function isQueuedWrite(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as { mode?: unknown }).mode === "write";
}
