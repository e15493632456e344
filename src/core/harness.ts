/**
 * The Harness (§9.1): a session's handles over one Storage and one commit line. It owns the line, the
 * kind registries and the commit pipeline (build -> validate -> persist -> update indexes -> publish ->
 * dispatch), and hands out conversation handles. Hosts (the Durable Object) open one per session.
 *
 * One concept that needs the room: the session object every layer holds, so its public surface (open,
 * commits, reads, handles, registration, drive and lifecycle) is here, each a few lines delegating to
 * the piece that does the work: transactions (tx.ts), validation (validate.ts, spawn.ts), the driver
 * (driver.ts, which reaches the harness only through `DriverSession` and the `DriverWiring` given to it
 * below), the runtime (runtime.ts) and the watch hub (watch-hub.ts).
 */
import type {
  CommitBatch,
  Conversation,
  ConversationQuery,
  Cursor,
  Element,
  Entry,
  Id,
  JsonValue,
  ListQuery,
  MainWrite,
  Page,
  Task,
  TaskStateBase,
} from "../storage/records.js";
import { StorageError, type Storage } from "../storage/storage.js";
import { recordAnswer } from "./answers.js";
import type { Call } from "./call.js";
import { ConversationHandle, type TurnApi } from "./conversation.js";
import { builtinEntryKinds, EntryKindRegistry, type EntryKind } from "./entries.js";
import { noExecutionEnv, type ExecutionEnv } from "./env.js";
import { PicoError } from "./errors.js";
import { ownedSubtree } from "./ownership.js";
import { CommitLine } from "./line.js";
import { bind, type Binding, type ListRef, type ValueRef, type ValueSpec } from "./state.js";
import type { AnyTaskKind, ReadTask, TaskDefinition, TaskRoles } from "./task-kind-types.js";
import { TaskKindRegistry } from "./task-kind-types.js";
import type { ListHandle, ValueHandle } from "./handles.js";
import type { BatchObserver, CommitListener, CommitOrigin, CommittedBatch, HarnessReport } from "./session-types.js";
import { LineRegistry, PlainSectionStore, type AnySection, type SectionStore } from "./registry.js";
import { readEntries, readTasks, scratchTx, sessionTx, TxBuilder, type ScratchTx, type Tx } from "./tx.js";
import { validateMainBatch, type LiveTurns } from "./validate.js";
import { validateOwnerAgreement } from "./spawn.js";
import { originCommitSlot } from "./origin-commit.js";
import { requestKey, type Acceptance } from "./inbox.js";
import { Driver, type InspectResult } from "./driver.js";
import { runInvocation } from "./runtime.js";
import { watchHub } from "./watch-hub.js";
import type { DriverHost, FaultReport } from "./host.js";

export type { BatchObserver, BatchView, CommitListener, CommittedBatch, HarnessReport } from "./session-types.js";
export type { ListHandle, ValueHandle } from "./handles.js";

/** An initial root value: typed pairs built with `initialValue`. */
export interface InitialValue {
  readonly spec: ValueSpec<unknown>;
  readonly value: JsonValue;
}

export function initialValue<T extends JsonValue>(spec: ValueSpec<T>, value: T): InitialValue {
  return { spec, value };
}

export interface HarnessOptions {
  /** Entry kinds added to the built-ins. */
  readonly entryKinds?: readonly EntryKind[];
  readonly taskKinds?: readonly AnyTaskKind[];
  /** Values of a fresh root, written in the creating commit; ignored on reopen (§9.5). */
  readonly rootValues?: readonly InitialValue[];
  /** Clock, invocation bookkeeping, wake/busy notifications and fault reports (the host's side). */
  readonly host?: DriverHost;
  readonly report?: (report: HarnessReport) => void;
  /** The execution environment (FileSystem & Shell) tasks and tools reach as `runtime.env` (§5.2, §9.3). */
  readonly env?: ExecutionEnv;
  /** Sees each main batch before validation and may add to it (session-types.ts `BatchObserver`). */
  readonly observeBatch?: BatchObserver;
}

export class Harness {
  readonly storage: Storage;
  /** Entry kinds (§9.6): pure reads; `register`/`replace`/`remove` are Calls on the line. */
  readonly entryKinds: LineRegistry<EntryKind>;
  /** Task kinds (§9.6); removal rejects while live tasks of the kind exist. */
  readonly taskKinds: LineRegistry<AnyTaskKind>;
  /** System sections (§9.6); the turn kit installs its section registry as the store (`useSections`). */
  readonly sections: LineRegistry<AnySection>;
  readonly line = new CommitLine();
  readonly now: () => number;
  readonly driver: Driver;
  /** `runtime.env` of every invocation (§5.2): the host's, or one whose methods all reject. */
  readonly env: ExecutionEnv;
  /** The turn API, installed by the kinds layer (accept, prompt, collapse, reset). */
  turns: TurnApi | undefined;
  #listeners = new Set<CommitListener>();
  #conversations = new Map<Id, ConversationHandle>();
  #liveTurns: LiveTurns;
  #report: (report: HarnessReport) => void;
  readonly #observeBatch: BatchObserver | undefined;
  #rootId: Id = 1;
  readonly #entryKinds: EntryKindRegistry;
  readonly #taskKinds: TaskKindRegistry;
  #sectionStore: SectionStore = new PlainSectionStore();
  /** Whether a section change reached the store (then the store can no longer be swapped). */
  #sectionsChanged = false;

  private constructor(storage: Storage, options: HarnessOptions) {
    this.storage = storage;
    this.#entryKinds = new EntryKindRegistry([...builtinEntryKinds, ...(options.entryKinds ?? [])]);
    this.#taskKinds = new TaskKindRegistry(options.taskKinds ?? []);
    const change = (body: () => void, call: Call): Promise<void> => this.#registryChange(body, call);
    this.entryKinds = new LineRegistry<EntryKind>(this.#entryKinds, change);
    const taskKinds = this.#taskKinds;
    this.taskKinds = new LineRegistry<AnyTaskKind>(
      {
        register: (kind) => taskKinds.register(kind),
        replace: (kind) => taskKinds.replace(kind),
        remove: (name) => {
          if (this.driver.hasLiveOfKind(name))
            throw new PicoError("conflict", `task kind ${name} still has live tasks`);
          taskKinds.remove(name);
        },
        get: (name) => taskKinds.get(name),
        has: (name) => taskKinds.has(name),
        names: () => taskKinds.names(),
      },
      change,
    );
    this.sections = new LineRegistry<AnySection>(
      {
        register: (section) => ((this.#sectionsChanged = true), this.#sectionStore.register(section)),
        replace: (section) => ((this.#sectionsChanged = true), this.#sectionStore.replace(section)),
        remove: (key) => ((this.#sectionsChanged = true), this.#sectionStore.remove(key)),
        get: (key) => this.#sectionStore.get(key),
        has: (key) => this.#sectionStore.has(key),
        names: () => this.#sectionStore.keys(),
      },
      change,
    );
    this.driver = new Driver(this, options.host ?? {}, {
      invoke: (inv, call) => runInvocation(this, this.driver, inv, call),
      faulted: (report) => watchHub(this).fault(report),
      closed: () => watchHub(this).close(),
    });
    this.now = () => this.driver.clock.now();
    this.env = options.env ?? noExecutionEnv;
    this.#report = options.report ?? (() => undefined);
    this.#observeBatch = options.observeBatch;
    this.#liveTurns = { liveTurnTasks: async (id) => this.driver.liveTurnTasks(id) };
  }

  /**
   * Open a session over its storage. Empty storage gets its root conversation and initial root values
   * in one commit; reopen creates nothing and starts nothing (§6.4, §9.5).
   */
  static async open(storage: Storage, options: HarnessOptions, call: Call): Promise<Harness> {
    const harness = new Harness(storage, options);
    const stored = await storage.entryKinds();
    const unknown = stored.filter((kind) => !harness.entryKinds.has(kind));
    if (unknown.length > 0) harness.#report({ type: "unregistered_entry_kinds", kinds: unknown });
    if (storage.lastSeq === 0) {
      await harness.commit((tx) => {
        const root = tx.createConversation({});
        for (const { spec, value } of options.rootValues ?? [])
          tx.value(bind(spec, { conversationId: root })).set(value);
        return root;
      }, call);
    }
    await harness.driver.seed(call);
    return harness;
  }

  report(report: HarnessReport): void {
    this.#report(report);
  }

  /** Observe every durable batch in commit order. Listeners observe only and never await the line. */
  onCommit(listener: CommitListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  // commits -------------------------------------------------------------------------------------

  /** Build and commit one main batch; resolves after persistence and publication (§9.2). A call that
   * carries a task invocation commits as that task (authority, inTurn). */
  commit<T>(plan: (tx: Tx) => T | Promise<T>, call: Call): Promise<T> {
    return this.#run(call, false, {}, (b) => plan(sessionTx(b)));
  }

  /** Commit through a builder with a conversation or task binding (handles and runtimes use this). */
  commitBound<T>(call: Call, binding: Binding, plan: (b: TxBuilder) => T | Promise<T>): Promise<T> {
    return this.#run(call, false, { binding }, plan);
  }

  static {
    // §5.8: an explicit origin is for the core's own transcript-rule tests, never the host API.
    originCommitSlot.run = (harness, origin, binding, plan, call) =>
      (harness as Harness).#run(call, false, { binding, origin }, plan);
  }

  /** The driver's own writes (abort marks, orphaning at open): admitted in every open phase. */
  commitInternal<T>(plan: (b: TxBuilder) => T | Promise<T>, call: Call): Promise<T> {
    return this.#run(call, true, {}, plan);
  }

  /**
   * Abort marks a caller requests (abortTask, cleanup's markIfLive): admitted as the caller's own commit,
   * so a stale or marked invocation cannot mark (§6.3), except that a host may still mark while stopping.
   */
  commitMarks<T>(plan: (b: TxBuilder) => T | Promise<T>, call: Call): Promise<T> {
    return this.#run(call, false, { mark: true }, plan);
  }

  /** An internal commit from inside a driver line operation (shutdown's marking batch, §6.4); the caller
   * runs `after` once it leaves the line. */
  commitInternalOnLine<T>(
    plan: (b: TxBuilder) => T | Promise<T>,
    call: Call,
  ): Promise<{ result: T; after: (() => void) | undefined }> {
    return this.#commitOnLine(call, true, {}, plan);
  }

  /** One scratch batch for task `taskId` (§4.6), by that task's running invocation. */
  scratch<T>(call: Call, taskId: Id, plan: (sc: ScratchTx) => T | Promise<T>): Promise<T> {
    return this.#run(call, false, { binding: { taskId }, scratchTask: taskId }, (b) => plan(scratchTx(b, taskId)));
  }

  async #run<T>(
    call: Call,
    internal: boolean,
    options: { binding?: Binding; scratchTask?: Id; origin?: CommitOrigin | undefined; mark?: true },
    plan: (b: TxBuilder) => T | Promise<T>,
  ): Promise<T> {
    const { result, after } = await this.line.run(() => this.#commitOnLine(call, internal, options, plan));
    if (after) after();
    return result;
  }

  /** One commit on the line: admit, build, validate, persist, update indexes, publish (§6.1). */
  async #commitOnLine<T>(
    call: Call,
    internal: boolean,
    options: { binding?: Binding; scratchTask?: Id; origin?: CommitOrigin | undefined; mark?: true },
    plan: (b: TxBuilder) => T | Promise<T>,
  ): Promise<{ result: T; after: (() => void) | undefined }> {
    this.driver.admit(call, internal, options.scratchTask, options.mark === true);
    const origin = internal ? undefined : "origin" in options ? options.origin : this.driver.originOf(call);
    const builder = new TxBuilder(this.storage, this.#taskKinds, {
      ...options,
      origin,
      inTurn: (id) => this.driver.liveTurnTasks(id) > 0,
      now: this.now,
    });
    const result = await plan(builder);
    if (this.#observeBatch !== undefined && options.scratchTask === undefined && builder.writes.length > 0) {
      await this.#observeBatch({ writes: [...builder.writes], first: this.storage.lastSeq + 1, origin }, builder);
    }
    builder.freeze();
    const batch = builder.batch();
    if (batch.writes.length === 0) return { result, after: undefined };
    if (batch.kind === "main") {
      await validateMainBatch(batch.writes, {
        storage: this.storage,
        origin,
        liveTurns: this.#liveTurns,
        subtrees: this.driver,
      });
      await validateOwnerAgreement(batch.writes, this.storage);
      this.driver.validate(batch.writes, call, internal);
    }
    const { first, last } = await this.storage
      .commit(batch)
      .catch((error: unknown) => {
        // A structural rejection wrote nothing, and a closed storage attempted nothing; any other failure
        // may have persisted the batch (§3.3): the session fail-stops, and the fault's notifications run
        // once this line operation is over.
        if (!(
          error instanceof StorageError &&
          (error.code === "malformed_batch" || error.code === "too_large" || error.code === "closed")
        )) {
          const after = this.driver.persistenceFailed(error, call);
          void this.line.run(() => undefined).then(after);
        }
        throw error;
      })
      .catch(async (error: unknown) => {
        // Work addressed to a deleted conversation (§6.4: delete, then reject new work in the subtree) is
        // refused by storage's structural check; say so in the caller's terms. Only on this failure path.
        if (error instanceof StorageError && error.code === "malformed_batch" && batch.kind === "main") {
          const gone = await missingConversation(this.storage, batch.writes);
          if (gone !== undefined)
            throw new PicoError(
              "not_found",
              `conversation ${gone} does not exist or was deleted; it accepts no new work (§6.4)`,
              { cause: error },
            );
        }
        throw error;
      });
    const committed: CommittedBatch = { first, last, batch, origin };
    this.#observe(committed);
    const after = await this.driver.applied(committed);
    this.#publish(committed);
    return { result, after };
  }

  /** Update process-local caches owned by handles (context caches see appended entries). */
  #observe(commit: CommittedBatch): void {
    if (commit.batch.kind !== "main") return;
    const byConversation = new Map<Id, Entry[]>();
    for (const write of commit.batch.writes) {
      // A deleted conversation has no handle any more, whichever path deleted it (§6.4).
      if (write.type === "deleteConversation") this.#conversations.delete(write.id);
      if (write.type !== "entry") continue;
      const list = byConversation.get(write.entry.conversationId) ?? [];
      list.push(write.entry);
      byConversation.set(write.entry.conversationId, list);
    }
    for (const [id, entries] of byConversation) this.#conversations.get(id)?.observe(entries, commit.last);
  }

  #publish(commit: CommittedBatch): void {
    for (const listener of this.#listeners) {
      try {
        listener(commit);
      } catch (error) {
        this.#report({ type: "listener_error", error });
      }
    }
  }

  // handles ---------------------------------------------------------------------------------------

  get rootId(): Id {
    return this.#rootId;
  }

  async root(call: Call): Promise<ConversationHandle> {
    const root = await this.conversation(this.#rootId, call);
    if (root === undefined) throw new PicoError("not_found", "the session has no root conversation");
    return root;
  }

  async conversation(id: Id, _call: Call): Promise<ConversationHandle | undefined> {
    const cached = this.#conversations.get(id);
    if (cached !== undefined) return cached;
    const record = (await this.storage.getConversations([id])).get(id);
    if (record === undefined) return undefined;
    const handle = this.#conversations.get(id) ?? new ConversationHandle(this, record);
    this.#conversations.set(id, handle);
    return handle;
  }

  /** Forget a handle (and its context cache); a later `conversation(id)` makes a fresh one. */
  release(id: Id): void {
    this.#conversations.delete(id);
  }

  conversations(query: ConversationQuery, _call: Call): Promise<Page<Conversation>> {
    return this.storage.scanConversations(query);
  }

  getEntry(id: Id, call: Call): Promise<Entry | undefined>;
  getEntry<E extends Entry>(kind: EntryKind<E>, id: Id, call: Call): Promise<E | undefined>;
  async getEntry(a: EntryKind | Id, b: Id | Call, _c?: Call): Promise<Entry | undefined> {
    const id = typeof a === "number" ? a : (b as Id);
    const entry = (await this.storage.getEntries([id])).get(id);
    return typeof a === "number" || a.is(entry) ? entry : undefined;
  }

  getEntries(ids: readonly Id[], call: Call): Promise<ReadonlyMap<Id, Entry>>;
  getEntries<E extends Entry>(kind: EntryKind<E>, ids: readonly Id[], call: Call): Promise<ReadonlyMap<Id, E>>;
  getEntries(a: EntryKind | readonly Id[], b: readonly Id[] | Call, _c?: Call): Promise<ReadonlyMap<Id, Entry>> {
    return Array.isArray(b) ? readEntries(this.storage, a, b as readonly Id[]) : readEntries(this.storage, a);
  }

  /** A transcript page of a conversation (fork-aware), per `Cursor`. */
  entries(
    conversationId: Id,
    page: Cursor & { readonly kind?: string; readonly key?: string },
    _call: Call,
  ): Promise<Page<Entry>> {
    return this.storage.scanEntries({ conversationId, ...page });
  }

  getTask(id: Id, call: Call): Promise<Task | undefined>;
  getTask<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    id: Id,
    call: Call,
  ): Promise<ReadTask<S, R> | undefined>;
  async getTask(a: { readonly kind: string } | Id, b: Id | Call, _c?: Call): Promise<Task | undefined> {
    const id = typeof a === "number" ? a : (b as Id);
    const task = (await this.storage.getTasks([id])).get(id);
    return typeof a === "number" || task?.kind === a.kind ? task : undefined;
  }

  getTasks(ids: readonly Id[], call: Call): Promise<ReadonlyMap<Id, Task>>;
  getTasks<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    ids: readonly Id[],
    call: Call,
  ): Promise<ReadonlyMap<Id, ReadTask<S, R>>>;
  getTasks(
    a: { readonly kind: string } | readonly Id[],
    b: readonly Id[] | Call,
    _c?: Call,
  ): Promise<ReadonlyMap<Id, Task>> {
    return Array.isArray(b) ? readTasks(this.storage, a, b as readonly Id[]) : readTasks(this.storage, a);
  }

  /** The acceptance a request key names, for a caller whose accept reply was lost (§3.4). */
  async acceptance(requestId: string, _call: Call): Promise<Acceptance | undefined> {
    return (await this.storage.getValue(bind(requestKey(requestId), {})))?.value;
  }

  /** A session-state handle (conversation specs need `bindTo` first). */
  value<T>(addr: ValueRef<T>): ValueHandle<T> {
    return valueHandle(this, addr, {});
  }

  list<T>(addr: ListRef<T>): ListHandle<T> {
    return listHandle(this, addr, {});
  }

  // registration (§9.6): changes serialize on the line -----------------------------------------------

  /**
   * One registry change as a line operation: admitted like a commit, applied, then every parked task is
   * re-examined (a registration may supply its missing kind, entry kind or section).
   */
  #registryChange(change: () => void, call: Call): Promise<void> {
    return this.line
      .run(() => {
        this.driver.admitChange(call);
        change();
        return this.driver.unpark();
      })
      .then((after) => after());
  }

  /**
   * Make `store` the section registry behind `sections` (the turn kit installs its own, whose snapshots
   * generations prepare from). Only before any section change went through the harness.
   */
  useSections(store: SectionStore): void {
    if (store === this.#sectionStore) return;
    if (this.#sectionsChanged)
      throw new PicoError(
        "contract",
        "the harness's sections were already changed; install the section registry first",
      );
    this.#sectionStore = store;
  }

  /** Same as `entryKinds.register`. */
  registerEntryKind<E extends Entry>(kind: EntryKind<E>, call: Call): Promise<EntryKind<E>> {
    return this.entryKinds.register(kind, call);
  }

  /** Same as `entryKinds.replace`. */
  replaceEntryKind<E extends Entry>(kind: EntryKind<E>, call: Call): Promise<EntryKind<E>> {
    return this.entryKinds.replace(kind, call);
  }

  /** Same as `entryKinds.remove`. */
  removeEntryKind(name: string, call: Call): Promise<void> {
    return this.entryKinds.remove(name, call);
  }

  // driving and lifecycle (§6.2-§6.4) ---------------------------------------------------------------

  /** Attach the whole session and wait until no foreground task is live anywhere. */
  drive(call: Call): Promise<"idle" | "closed"> {
    return this.driver.drive("session", call);
  }

  /** Attach the whole session persistently without waiting (hosts keep accepted work running). */
  attach(call: Call): Promise<void> {
    return this.driver.attach("session", call);
  }

  get fault(): FaultReport | undefined {
    return this.driver.fault;
  }

  async inspect(_call: Call): Promise<InspectResult> {
    return this.line.run(() => this.driver.inspect());
  }

  /**
   * Record the answer to task `taskId`'s wait for `key` (src/core/answers.ts), once, and wake the parked
   * invocation. Refused (writing nothing) when the task is not live or not waiting for `key`
   * (`not_found`) or the wait was already answered (`conflict`).
   */
  answer(taskId: Id, key: string, value: JsonValue, call: Call): Promise<{ readonly at: number }> {
    return recordAnswer(
      {
        storage: this.storage,
        commit: (plan, c) => this.commit(plan, c),
        now: () => this.driver.clock.now(),
        answerArrived: (id) => this.driver.answerArrived(id),
      },
      taskId,
      key,
      value,
      call,
    );
  }

  /** Mark one live task for abort; a terminal task rejects (§6.3). */
  async abortTask(id: Id, call: Call): Promise<void> {
    await this.driver.mark([id], call);
  }

  /**
   * Delete a conversation and its ownership subtree (§6.4): one commit deletes it and every conversation
   * it owns, down the tree, so no new work is accepted anywhere in it; validation rejects, writing
   * nothing, while the subtree has live tasks or running calls. Fork provenance is not ownership: a
   * fork of a deleted conversation stays, and entries it inherited are never erased. Resolves with the
   * deleted ids, the conversation first.
   */
  async deleteConversation(id: Id, call: Call): Promise<Id[]> {
    return this.commit(async (tx) => {
      if (!(await this.storage.getConversations([id])).has(id))
        throw new PicoError("not_found", `conversation ${id} does not exist`);
      const subtree = await ownedSubtree(this.storage, id);
      for (const conversation of subtree) tx.deleteConversation(conversation);
      return subtree;
    }, call);
  }

  shutdown(call: Call): Promise<void> {
    return this.driver.shutdown(call);
  }

  close(call: Call): Promise<void> {
    return this.driver.close(call);
  }

  /** Same as `taskKinds.register`. */
  async registerTaskKind(kind: AnyTaskKind, call: Call): Promise<void> {
    await this.taskKinds.register(kind, call);
  }

  /** Same as `taskKinds.replace`. */
  async replaceTaskKind(kind: AnyTaskKind, call: Call): Promise<void> {
    await this.taskKinds.replace(kind, call);
  }

  /** Same as `taskKinds.remove`. */
  removeTaskKind(name: string, call: Call): Promise<void> {
    return this.taskKinds.remove(name, call);
  }
}

export function valueHandle<T>(harness: Harness, ref: ValueRef<T>, binding: Binding): ValueHandle<T> {
  const addr = bind(ref, binding);
  return {
    get: async () => (await harness.storage.getValue(addr))?.value,
    getAt: async (at) => (await harness.storage.getValue(addr, at))?.value,
    set: (value, call) => harness.commitBound(call, binding, (b) => b.value(addr).set(value)),
    delete: (call) => harness.commitBound(call, binding, (b) => b.value(addr).delete()),
  };
}

export function listHandle<T>(harness: Harness, ref: ListRef<T>, binding: Binding): ListHandle<T> {
  const addr = bind(ref, binding);
  return {
    read: (query) => harness.storage.readList<T>(addr, { limit: 1000, ...query }),
    append: (value, call) => harness.commitBound(call, binding, (b) => b.list(addr).append(value)),
    remove: (element, call) => harness.commitBound(call, binding, (b) => b.list(addr).remove(element)),
    clear: (call) => harness.commitBound(call, binding, (b) => b.list(addr).clear()),
  };
}

/** The first conversation a batch writes into (entries, tasks, its scoped state) that is not there. */
async function missingConversation(storage: Storage, writes: readonly MainWrite[]): Promise<Id | undefined> {
  const created = new Set<Id>();
  const named = new Set<Id>();
  for (const write of writes) {
    switch (write.type) {
      case "createConversation":
        created.add(write.conversation.id);
        break;
      case "entry":
        named.add(write.entry.conversationId);
        break;
      case "task":
        named.add(write.task.conversationId);
        break;
      case "value.set":
      case "value.delete":
      case "list.append":
      case "list.remove":
      case "list.clear":
        if ("conversation" in write.addr.scope) named.add(write.addr.scope.conversation);
        break;
      case "deleteConversation":
      case "patch":
      case "settle":
        break;
      default: {
        const never: never = write;
        throw new PicoError("contract", `unknown write ${JSON.stringify(never)}`);
      }
    }
  }
  const ids = [...named].filter((id) => !created.has(id));
  if (ids.length === 0) return undefined;
  const found = await storage.getConversations(ids);
  return ids.find((id) => !found.has(id));
}
