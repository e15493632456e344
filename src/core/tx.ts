/**
 * Transactions (§9.2): `Tx` for the session, `ConversationTx` with a conversation bound, `ScratchTx` for
 * one task's scratch. Each is a typed view over the erased `TxBuilder` (tx-builder.ts, re-exported
 * here), which reads committed state (reads are promises) and buffers writes synchronously; ids are
 * minted while building and final once the commit line persists the batch (§3.1). A throwing builder
 * discards everything and consumes no ids (§3.3).
 */
import type { Conversation, Entry, Id, JsonObject, Task, TaskStateBase } from "../storage/records.js";
import type { EntryDraft, EntryInput, EntryKind } from "./entries.js";
import type { ListRef, ValueRef } from "./state.js";
import { queueInput, writeEntry, type QueuedInput } from "./inbox.js";
import type {
  ExactWrite,
  ReadTask,
  StatesWithRole,
  TaskDefinition,
  TaskRoles,
  TypedTask,
  WriteArgs,
} from "./task-kind-types.js";
import type { ConversationSpec, ListTx, TaskSpec, TxBuilder, ValueTx } from "./tx-builder.js";

export * from "./tx-builder.js";
export type { CommitOrigin } from "./session-types.js";

type PatchArgs<
  S extends TaskStateBase,
  R extends TaskRoles<S>,
  Roles extends "start" | "inflight" | "terminal",
> = WriteArgs<StatesWithRole<S, R, Roles>>;

/** Committed-state reads available inside a builder (no Call: the builder runs on the line). */
export interface TxReads {
  getEntry(id: Id): Promise<Entry | undefined>;
  getEntry<E extends Entry>(kind: EntryKind<E>, id: Id): Promise<E | undefined>;
  getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>>;
  getEntries<E extends Entry>(kind: EntryKind<E>, ids: readonly Id[]): Promise<ReadonlyMap<Id, E>>;
  getTask(id: Id): Promise<Task | undefined>;
  getTask<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    id: Id,
  ): Promise<ReadTask<S, R> | undefined>;
  getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>>;
  getTasks<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    ids: readonly Id[],
  ): Promise<ReadonlyMap<Id, ReadTask<S, R>>>;
  getConversation(id: Id): Promise<Conversation | undefined>;
}

interface TaskWrites {
  patch<S extends TaskStateBase, R extends TaskRoles<S>, A extends NoInfer<PatchArgs<S, R, "start" | "inflight">>>(
    task: TypedTask<S, R>,
    ...args: A & NoInfer<ExactWrite<StatesWithRole<S, R, "start" | "inflight">, A>>
  ): void;
  settle<S extends TaskStateBase, R extends TaskRoles<S>, A extends NoInfer<PatchArgs<S, R, "terminal">>>(
    task: TypedTask<S, R>,
    ...args: A & NoInfer<ExactWrite<StatesWithRole<S, R, "terminal">, A>>
  ): void;
}

export interface Tx extends TxReads, TaskWrites {
  /** The erased builder behind this view, for built-in kinds' placement helpers. */
  readonly builder: TxBuilder;
  value<T>(addr: ValueRef<T>): ValueTx<T>;
  list<T>(addr: ListRef<T>): ListTx<T>;
  entry<E extends Entry>(kind: EntryKind<E>, conversationId: Id, input: EntryInput<E>): Id;
  /**
   * Append now when the conversation has no live turn task, else queue for the next boundary (§5.8); returns the
   * inputId.
   */
  write<E extends Entry>(kind: EntryKind<E>, conversationId: Id, input: EntryInput<E>): Id;
  /** Queue an input (§8.1); returns the inputId. */
  queueInput(conversationId: Id, input: QueuedInput): Id;
  task<S extends TaskStateBase, R extends TaskRoles<S>>(
    kind: TaskDefinition<S, R>,
    spec: TaskSpec<S> & { readonly conversationId: Id },
  ): Id;
  createConversation(spec: ConversationSpec): Id;
  deleteConversation(id: Id): void;
}

export interface ConversationTx extends TxReads, TaskWrites {
  readonly conversationId: Id;
  /** The erased builder behind this view, for built-in kinds' placement helpers. */
  readonly builder: TxBuilder;
  value<T>(addr: ValueRef<T>): ValueTx<T>;
  list<T>(addr: ListRef<T>): ListTx<T>;
  entry<E extends Entry>(kind: EntryKind<E>, input: EntryInput<E>): Id;
  write<E extends Entry>(kind: EntryKind<E>, input: EntryInput<E>): Id;
  queueInput(input: QueuedInput): Id;
  task<S extends TaskStateBase, R extends TaskRoles<S>>(kind: TaskDefinition<S, R>, spec: TaskSpec<S>): Id;
  createConversation(spec: ConversationSpec): Id;
}

export interface ScratchTx {
  readonly taskId: Id;
  value<T>(addr: ValueRef<T>): ValueTx<T>;
  list<T>(addr: ListRef<T>): ListTx<T>;
}

// ---------------------------------------------------------------------------------------------
// Public views over the builder. Their typed signatures are the interfaces above; the builder is
// erased, so the views adapt arguments and nothing else.

export function sessionTx(b: TxBuilder): Tx {
  return {
    builder: b,
    ...reads(b),
    ...taskWrites(b),
    value: (addr) => b.value(addr),
    list: (addr) => b.list(addr),
    entry: (kind, conversationId, input) => b.entry(kind, conversationId, input as EntryDraft),
    write: (kind, conversationId, input) =>
      writeEntry(b, conversationId, kind.kind, input as EntryDraft, b.inTurn(conversationId)),
    queueInput: (conversationId, input) => queueInput(b, conversationId, input),
    task: (kind, spec) => b.task(kind, spec.conversationId, spec),
    createConversation: (spec) => b.createConversation(spec),
    deleteConversation: (id) => b.deleteConversation(id),
  };
}

export function conversationTx(b: TxBuilder, conversationId: Id): ConversationTx {
  return {
    conversationId,
    builder: b,
    ...reads(b),
    ...taskWrites(b),
    value: (addr) => b.value(addr),
    list: (addr) => b.list(addr),
    entry: (kind, input) => b.entry(kind, conversationId, input as EntryDraft),
    write: (kind, input) => writeEntry(b, conversationId, kind.kind, input as EntryDraft, b.inTurn(conversationId)),
    queueInput: (input) => queueInput(b, conversationId, input),
    task: (kind, spec) => b.task(kind, conversationId, spec),
    createConversation: (spec) => b.createConversation(spec),
  };
}

export function scratchTx(b: TxBuilder, taskId: Id): ScratchTx {
  return { taskId, value: (addr) => b.value(addr), list: (addr) => b.list(addr) };
}

function reads(b: TxBuilder): TxReads {
  return {
    getEntry: ((kindOrId: EntryKind | Id, id?: Id) => b.getEntry(kindOrId, id)) as TxReads["getEntry"],
    getEntries: ((kindOrIds: EntryKind | readonly Id[], ids?: readonly Id[]) =>
      b.getEntries(kindOrIds, ids)) as TxReads["getEntries"],
    getTask: ((kindOrId: { readonly kind: string } | Id, id?: Id) => b.getTask(kindOrId, id)) as TxReads["getTask"],
    getTasks: ((kindOrIds: { readonly kind: string } | readonly Id[], ids?: readonly Id[]) =>
      b.getTasks(kindOrIds, ids)) as TxReads["getTasks"],
    getConversation: (id) => b.getConversation(id),
  };
}

function taskWrites(b: TxBuilder): TaskWrites {
  return {
    patch: ((task: Task, status: string, payload: JsonObject) => b.patch(task, status, payload)) as TaskWrites["patch"],
    settle: ((task: Task, status: string, payload: JsonObject) =>
      b.settle(task, status, payload)) as TaskWrites["settle"],
  };
}
