/**
 * The `Storage` interface of pico v3 §7.2: point reads, batched reads, bounded indexed scans and one
 * atomic commit. A backend knows nothing of tasks' meaning; it checks scope, sequences and structure
 * (§7.3), persists a batch whole or not at all, and answers logical, fork-aware reads.
 *
 * Implementations: `MemoryStorage` (memory.ts), `JsonlStorage` (jsonl.ts, over a `Files` interface) and
 * `SqliteStorage` (sqlite.ts, over the synchronous SQL surface of a Durable Object's `ctx.storage`).
 * Every one of them runs the same contract suite (test/contract).
 */
import type {
  CommitBatch,
  Conversation,
  ConversationQuery,
  Element,
  Entry,
  EntryQuery,
  Id,
  JsonValue,
  List,
  ListQuery,
  Page,
  Task,
  TaskQuery,
  Value,
  ValueQuery,
  Version,
} from "./records.js";

export interface Storage {
  /** The last committed sequence; 0 for empty storage. */
  readonly lastSeq: Id;

  /**
   * Persist one batch atomically. Write i gets sequence `lastSeq + 1 + i`. A malformed batch rejects
   * with a `StorageError` and writes nothing; an empty batch writes nothing and returns an empty range
   * (`first = lastSeq + 1`, `last = lastSeq`).
   */
  commit(batch: CommitBatch): Promise<{ first: number; last: number }>;

  getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>>;
  scanConversations(q: ConversationQuery): Promise<Page<Conversation>>;

  getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>>;
  /** Full entries of the logical, fork-aware transcript of `q.conversationId`. */
  scanEntries(q: EntryQuery): Promise<Page<Entry>>;
  /** The newest fork-visible entry with a stored `head` whose id is at or before `at`. */
  newestHead(conversationId: Id, at: Id): Promise<Entry | undefined>;
  /** The distinct entry kind strings ever stored, without scanning entries. */
  entryKinds(): Promise<readonly string[]>;

  getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>>;
  /** Omitted `conversationIds`: the entire session. */
  scanTasks(q: TaskQuery): Promise<Page<Task>>;

  /**
   * Current value, or (rewindable conversation addresses only) the value as of entry `at`, following
   * fork cutoffs (§4.4). A deletion reads as undefined. Historical reads of sticky, session or scratch
   * addresses reject with `historical_read`.
   */
  getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined>;
  /** Current values of one scope and namespace, ordered by key (the conversation's own, not inherited). */
  scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>>;
  /** Visible elements, fork-aware for rewindable conversation lists, honouring clears and removes. */
  readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>>;

  close(): Promise<void>;
}

export type StorageErrorCode =
  /** The batch breaks a structural rule (scope, sequence, reference, shape); nothing was written. */
  | "malformed_batch"
  /** A payload exceeds the backend's size limit; nothing was written. */
  | "too_large"
  /** A historical read of an address that keeps no history. */
  | "historical_read"
  /** A query argument is invalid (limit, cursor, unknown conversation). */
  | "bad_query"
  /** Stored data cannot be opened: a malformed complete line, a newer schema version, inconsistent ranges. */
  | "corrupt"
  | "version"
  /** The storage was closed. */
  | "closed"
  /**
   * An earlier write's outcome is uncertain (it failed after bytes may have landed); this object refuses
   * every later operation. Reopen to recover the last complete batch and its lastSeq (§3.3).
   */
  | "faulted";

export class StorageError extends Error {
  override readonly name = "StorageError";
  constructor(
    readonly code: StorageErrorCode,
    message: string,
  ) {
    super(message);
  }
}
