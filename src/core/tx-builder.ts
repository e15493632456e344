/**
 * The transaction builder (§9.2, §3.1, §3.3): the erased implementation behind the `Tx`, `ConversationTx`
 * and `ScratchTx` views (tx.ts). It reads committed state (reads are promises) and buffers writes
 * synchronously; ids are minted while building and final once the commit line persists the batch. A
 * throwing builder discards everything and consumes no ids. Built-in kinds' placement helpers and the
 * inbox operations write through it directly.
 */
import type {
  Address,
  CommitBatch,
  Conversation,
  Element,
  Entry,
  Id,
  JsonObject,
  JsonValue,
  ListQuery,
  MainWrite,
  Page,
  StateWrite,
  Task,
  TaskQuery,
  TaskStateBase,
} from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import type { EntryDraft, EntryKind } from "./entries.js";
import { invalid, PicoError } from "./errors.js";
import type { CommitOrigin } from "./session-types.js";
import { bind, type Binding, type ListRef, type ValueRef } from "./state.js";
import { roleOf, type TaskKindRegistry } from "./task-kind-types.js";

export interface ValueTx<T> {
  /** Committed value, current or (rewindable conversation values) as of entry `at`. */
  get(at?: Id): Promise<T | undefined>;
  set(value: T): void;
  delete(): void;
}

export interface ListTx<T> {
  append(value: T): Id;
  remove(element: Id): void;
  clear(): void;
  read(query?: Partial<ListQuery>): Promise<Page<Element<T>>>;
}

/** Task creation: the complete initial tagged state; flags fixed for life (§5.1). */
export interface TaskSpec<S extends TaskStateBase> {
  readonly state: S;
  readonly after?: readonly Id[];
  readonly background?: true;
  readonly owns?: readonly Id[];
}

export interface ConversationSpec {
  readonly parent?: { readonly conversationId: Id; readonly at: Id };
  readonly owner?: Id;
}

const DEFAULT_LIST_PAGE = 1000;

/**
 * The erased implementation behind all three views. It numbers writes as it goes from the lastSeq it
 * read when it started; storage numbers the batch from the same lastSeq and gets the same ids (§7.3).
 */
export class TxBuilder {
  readonly writes: MainWrite[] = [];
  readonly #storage: Storage;
  readonly #kinds: TaskKindRegistry;
  readonly #binding: Binding;
  readonly #scratchTask: Id | undefined;
  readonly #origin: CommitOrigin | undefined;
  readonly #inTurn: (conversationId: Id) => boolean;
  readonly #now: () => number;
  #seq: Id;
  #sawEntry = false;
  #frozen = false;

  constructor(
    storage: Storage,
    kinds: TaskKindRegistry,
    options: {
      binding?: Binding;
      scratchTask?: Id;
      origin?: CommitOrigin | undefined;
      inTurn?: (conversationId: Id) => boolean;
      now?: () => number;
    } = {},
  ) {
    this.#storage = storage;
    this.#kinds = kinds;
    this.#binding = options.binding ?? {};
    this.#scratchTask = options.scratchTask;
    this.#origin = options.origin;
    this.#inTurn = options.inTurn ?? (() => false);
    this.#now = options.now ?? (() => 0);
    this.#seq = storage.lastSeq;
  }

  /** The harness's injected clock, for timestamps a commit writes (never Date.now() on the line). */
  now(): number {
    return this.#now();
  }

  /** Whether the conversation has a live turn task (committed state, from the driver's index). */
  inTurn(conversationId: Id): boolean {
    return this.#inTurn(conversationId);
  }

  get origin(): CommitOrigin | undefined {
    return this.#origin;
  }

  /** Stop accepting writes (after the builder returned); a leaked handle cannot add to the batch. */
  freeze(): void {
    this.#frozen = true;
  }

  batch(): CommitBatch {
    if (this.#scratchTask !== undefined) {
      return { kind: "scratch", task: this.#scratchTask, writes: this.writes as StateWrite[] };
    }
    return { kind: "main", writes: this.writes };
  }

  /** Append one write; harness-internal writers (abort marks, orphaning) use this directly. */
  push(write: MainWrite): Id {
    if (this.#frozen)
      throw invalid("this transaction has already been committed; writes after the builder returned are refused");
    this.writes.push(write);
    this.#seq += 1;
    return this.#seq;
  }

  #state(write: StateWrite): Id {
    const scope = write.addr.scope;
    if (this.#scratchTask !== undefined) {
      if (!("scratch" in scope)) throw invalid("a scratch transaction writes only its task's scratch (§4.6)");
    } else if ("scratch" in scope) {
      throw invalid("a main commit never writes scratch; use runtime.scratch (§4.6)");
    }
    if (this.#sawEntry && "conversation" in scope && write.addr.rewind) {
      throw invalid(
        `rewindable conversation state (${write.addr.namespace}) must be written before entries in a commit (§3.2)`,
      );
    }
    return this.push(write);
  }

  value<T>(ref: ValueRef<T>): ValueTx<T> {
    const addr = bind(ref, this.#binding);
    return {
      get: async (at?: Id) => (await this.#storage.getValue(addr, at))?.value,
      set: (value: T) => {
        this.#state({ type: "value.set", addr, value: value as JsonValue });
      },
      delete: () => {
        this.#state({ type: "value.delete", addr });
      },
    };
  }

  list<T>(ref: ListRef<T>): ListTx<T> {
    const addr: Address = bind(ref, this.#binding);
    return {
      append: (value: T) => this.#state({ type: "list.append", addr, value: value as JsonValue }),
      remove: (element: Id) => {
        this.#state({ type: "list.remove", addr, element });
      },
      clear: () => {
        this.#state({ type: "list.clear", addr });
      },
      read: (query?: Partial<ListQuery>) => this.#storage.readList<T>(addr, { limit: DEFAULT_LIST_PAGE, ...query }),
    };
  }

  entry(kind: { readonly kind: string }, conversationId: Id, draft: EntryDraft): Id {
    if (this.#scratchTask !== undefined) throw invalid("a scratch transaction cannot append entries");
    const id = this.#seq + 1;
    const { head, key, data, model, edits } = draft;
    const entry: Entry = {
      id,
      conversationId,
      kind: kind.kind,
      ...(this.#origin === undefined ? {} : { byTaskId: this.#origin.taskId }),
      ...(key === undefined ? {} : { key }),
      ...(data === undefined ? {} : { data }),
      ...(model === undefined ? {} : { model }),
      ...(head === undefined ? {} : { head: head === "self" ? id : head }),
      ...(edits === undefined ? {} : { edits }),
    };
    this.#sawEntry = true;
    return this.push({ type: "entry", entry });
  }

  task(kindDef: { readonly kind: string }, conversationId: Id, spec: TaskSpec<TaskStateBase>): Id {
    if (this.#scratchTask !== undefined) throw invalid("a scratch transaction cannot create tasks");
    const kind = this.#kinds.get(kindDef.kind);
    if (kind === undefined) throw new PicoError("not_found", `task kind ${kindDef.kind} is not registered`);
    const status = spec.state.status;
    if (status !== kind.initialStatus) {
      throw invalid(`a new ${kind.kind} task starts in ${kind.initialStatus}, not ${status}`);
    }
    const id = this.#seq + 1;
    const task: Task = {
      id,
      conversationId,
      kind: kind.kind,
      role: roleOf(kind, status),
      state: spec.state,
      after: [...(spec.after ?? [])],
      ...(spec.background ? { background: true as const } : {}),
      ...(kind.turn ? { turn: true as const } : {}),
      ...(spec.owns === undefined ? {} : { owns: [...spec.owns] }),
    };
    return this.push({ type: "task", task });
  }

  patch(task: Task, status: string, payload: JsonObject): void {
    this.#taskWrite(task, status, payload, "patch");
  }

  settle(task: Task, status: string, payload: JsonObject): void {
    this.#taskWrite(task, status, payload, "settle");
  }

  #taskWrite(task: Task, status: string, payload: JsonObject, type: "patch" | "settle"): void {
    if (this.#scratchTask !== undefined) throw invalid("a scratch transaction cannot change tasks");
    if (Object.hasOwn(payload, "status")) throw invalid("the payload must not include status; pass it as the target");
    const kind = this.#kinds.get(task.kind);
    if (kind === undefined) throw new PicoError("not_found", `task kind ${task.kind} is not registered`);
    const role = roleOf(kind, status);
    const state = { ...payload, status } as TaskStateBase;
    if (type === "patch") {
      if (role === "terminal") throw invalid(`${status} is terminal: use settle`);
      this.push({ type: "patch", id: task.id, role, state });
    } else {
      if (role !== "terminal") throw invalid(`${status} is not terminal: use patch`);
      this.push({ type: "settle", id: task.id, role: "terminal", state });
    }
  }

  createConversation(spec: ConversationSpec): Id {
    if (this.#scratchTask !== undefined) throw invalid("a scratch transaction cannot create conversations");
    const id = this.#seq + 1;
    const conversation: Conversation = {
      id,
      ...(spec.parent === undefined
        ? {}
        : { parent: { conversationId: spec.parent.conversationId, at: spec.parent.at } }),
      ...(spec.owner === undefined ? {} : { owner: spec.owner }),
    };
    return this.push({ type: "createConversation", conversation });
  }

  deleteConversation(id: Id): void {
    this.push({ type: "deleteConversation", id });
  }

  // reads -------------------------------------------------------------------------------------

  async getEntry(kindOrId: EntryKind | Id, maybeId?: Id): Promise<Entry | undefined> {
    const id = typeof kindOrId === "number" ? kindOrId : (maybeId as Id);
    const entry = (await this.#storage.getEntries([id])).get(id);
    if (typeof kindOrId === "number") return entry;
    return kindOrId.is(entry) ? entry : undefined;
  }

  async getEntries(kindOrIds: EntryKind | readonly Id[], maybeIds?: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    return readEntries(this.#storage, kindOrIds, maybeIds);
  }

  async getTask(kindOrId: { readonly kind: string } | Id, maybeId?: Id): Promise<Task | undefined> {
    const id = typeof kindOrId === "number" ? kindOrId : (maybeId as Id);
    const task = (await this.#storage.getTasks([id])).get(id);
    if (typeof kindOrId === "number") return task;
    return task?.kind === kindOrId.kind ? task : undefined;
  }

  async getTasks(
    kindOrIds: { readonly kind: string } | readonly Id[],
    maybeIds?: readonly Id[],
  ): Promise<ReadonlyMap<Id, Task>> {
    return readTasks(this.#storage, kindOrIds, maybeIds);
  }

  /** An indexed task scan over committed state (e.g. "is a collapse live here?"). */
  scanTasks(query: TaskQuery): Promise<Page<Task>> {
    return this.#storage.scanTasks(query);
  }

  async getConversation(id: Id): Promise<Conversation | undefined> {
    return (await this.#storage.getConversations([id])).get(id);
  }
}

/** Shared typed/untyped batched entry read: a typed read omits entries of another kind. */
export async function readEntries(
  storage: Storage,
  kindOrIds: EntryKind | readonly Id[],
  maybeIds?: readonly Id[],
): Promise<ReadonlyMap<Id, Entry>> {
  if (isIdList(kindOrIds)) return storage.getEntries(kindOrIds);
  const all = await storage.getEntries(maybeIds ?? []);
  const typed = new Map<Id, Entry>();
  for (const [id, entry] of all) if (kindOrIds.is(entry)) typed.set(id, entry);
  return typed;
}

/** Shared typed/untyped batched task read: a typed read omits tasks of another kind. */
export async function readTasks(
  storage: Storage,
  kindOrIds: { readonly kind: string } | readonly Id[],
  maybeIds?: readonly Id[],
): Promise<ReadonlyMap<Id, Task>> {
  if (isIdList(kindOrIds)) return storage.getTasks(kindOrIds);
  const all = await storage.getTasks(maybeIds ?? []);
  const typed = new Map<Id, Task>();
  for (const [id, task] of all) if (task.kind === kindOrIds.kind) typed.set(id, task);
  return typed;
}

function isIdList(value: unknown): value is readonly Id[] {
  return Array.isArray(value);
}
