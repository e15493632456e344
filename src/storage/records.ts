/**
 * The stored records of pico v3 (§2, §4, §5, §7): conversations, entries, tasks, state addresses and the
 * atomic commit batch. Storage understands these shapes and nothing about tasks' meaning, prompts or
 * plugins. Everything here is plain JSON so every backend stores it the same way.
 */
import type { JsonObject, JsonValue, Message } from "@earendil-works/pi-ai";

export type { JsonObject, JsonValue, Message };

/** A session sequence number (§2.1): positive safe integer, the id of whatever it created. */
export type Id = number;

// ---------------------------------------------------------------------------------------------
// Conversations (§2.5)

export interface Conversation {
  readonly id: Id;
  /** Forked from `conversationId` at entry `at` (inclusive); `at: 0` is a fork at "start". */
  readonly parent?: { readonly conversationId: Id; readonly at: Id };
  /** The task that created this conversation (a child, e.g. a subagent's). */
  readonly owner?: Id;
}

// ---------------------------------------------------------------------------------------------
// Entries (§2.1)

export type ContextEdit =
  | { readonly target: Id; readonly action: "omit" }
  | { readonly target: Id; readonly action: "replace"; readonly messages: readonly Message[] };

export interface EntryIdentity {
  readonly id: Id;
  readonly conversationId: Id;
  readonly kind: string;
  readonly byTaskId?: Id;
}

export interface EntryBase extends EntryIdentity {
  readonly key?: string;
}

export interface EntryData<Data extends JsonValue = JsonValue> {
  readonly data: Data;
}

export interface ModelProjection<Model extends Message = Message> {
  readonly model: readonly Model[];
}

export interface ContextHead {
  /** First retained transcript entry, inclusive. Presence marks the entry as a head. */
  readonly head: Id;
}

export interface ContextEdits {
  readonly edits: readonly ContextEdit[];
}

export type Entry = EntryBase & Partial<EntryData & ModelProjection & ContextHead & ContextEdits>;

// ---------------------------------------------------------------------------------------------
// Tasks (§5.1)

export type TaskRole = "start" | "inflight" | "terminal";

/** Task state is strict JSON with a status discriminant. */
export type TaskStateBase = JsonObject & { readonly status: string };

export interface Task<State extends TaskStateBase = TaskStateBase> {
  readonly id: Id;
  readonly conversationId: Id;
  readonly kind: string;
  readonly role: TaskRole;
  readonly state: State;
  readonly after: readonly Id[];
  readonly background?: true;
  readonly turn?: true;
  readonly owns?: readonly Id[];
  readonly abort?: true;
}

// ---------------------------------------------------------------------------------------------
// State addresses (§4.1)

export type Scope = { readonly session: true } | { readonly conversation: Id } | { readonly scratch: Id };

export interface Address {
  readonly scope: Scope;
  readonly namespace: string;
  readonly key?: string;
  /** Rewindable conversation state keeps its history; everything else is current only. */
  readonly rewind: boolean;
}

declare const valueType: unique symbol;
declare const listType: unique symbol;

/** A value address; the phantom member carries the payload type only for the compiler. */
export interface Value<T> extends Address {
  readonly [valueType]?: T;
}

/** A list address; the phantom member carries the element type only for the compiler. */
export interface List<T> extends Address {
  readonly [listType]?: T;
}

export interface Version<T> {
  readonly seq: Id;
  readonly value: T;
}

export interface Element<T> {
  readonly id: Id;
  readonly value: T;
}

// ---------------------------------------------------------------------------------------------
// Batches (§7.3)

export type StateWrite =
  | { readonly type: "value.set"; readonly addr: Address; readonly value: JsonValue }
  | { readonly type: "value.delete"; readonly addr: Address }
  | { readonly type: "list.append"; readonly addr: Address; readonly value: JsonValue }
  | { readonly type: "list.remove"; readonly addr: Address; readonly element: Id }
  | { readonly type: "list.clear"; readonly addr: Address };

export type MainWrite =
  | StateWrite
  | { readonly type: "createConversation"; readonly conversation: Conversation }
  | { readonly type: "deleteConversation"; readonly id: Id }
  | { readonly type: "entry"; readonly entry: Entry }
  | { readonly type: "task"; readonly task: Task }
  /** Replaces state and role. `abort: true` sets the durable mark, which no later write clears; `owns`,
   * when present, replaces the task's owned conversations (a running task that creates a child). */
  | {
      readonly type: "patch";
      readonly id: Id;
      readonly role: TaskRole;
      readonly state: TaskStateBase;
      readonly abort?: true;
      readonly owns?: readonly Id[];
    }
  | { readonly type: "settle"; readonly id: Id; readonly role: "terminal"; readonly state: TaskStateBase };

export type CommitBatch =
  | { readonly kind: "main"; readonly writes: readonly MainWrite[] }
  | { readonly kind: "scratch"; readonly task: Id; readonly writes: readonly StateWrite[] };

// ---------------------------------------------------------------------------------------------
// Queries and pages (§7.2)

export interface Page<T> {
  readonly items: readonly T[];
  /** Cursor for the following page in the same direction, when more items exist. */
  readonly next?: Id;
  /** The storage's lastSeq when the page was read. */
  readonly readAt: Id;
}

/**
 * Paging: with only `before`, the page is the newest `limit` items below it (returned ascending) and
 * `next` is the page's first id, to be passed as `before` again. Otherwise the page is the oldest
 * `limit` items above `after` (and below `before`, if given), and `next` is its last id, to be passed
 * as `after` again. `next` is absent when nothing more matches.
 */
export interface Cursor {
  readonly after?: Id;
  readonly before?: Id;
  readonly limit: number;
}

export interface ConversationQuery extends Cursor {
  readonly parent?: Id;
  readonly ownedFrom?: Id;
}

export interface EntryQuery extends Cursor {
  readonly conversationId: Id;
  readonly kind?: string;
  readonly key?: string;
  /** Inclusive logical range over the fork-aware transcript. */
  readonly from?: Id;
  readonly through?: Id;
}

export interface TaskQuery extends Cursor {
  readonly conversationIds?: readonly Id[];
  /** true: role is start or inflight; false: terminal. */
  readonly live?: boolean;
  readonly role?: TaskRole;
  readonly kind?: string;
  readonly abort?: boolean;
}

export interface ListQuery extends Cursor {
  /** Read as of this entry id (rewindable conversation lists only); 0 is before the first entry. */
  readonly at?: Id;
}

export interface ValueQuery {
  readonly scope: Scope;
  readonly namespace: string;
  readonly after?: string;
  readonly limit: number;
}
