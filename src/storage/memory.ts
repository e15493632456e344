/**
 * The memory backend (§7.4): a `Storage` over `MemoryState`, for tests, the reference behaviour of the
 * contract suite and the in-memory half of JSONL (`JsonlStorage` extends it and persists each checked
 * batch before calling `publish`). Nothing survives the object.
 *
 * Every read returns frozen records shared with the indexes, so callers cannot mutate storage.
 *
 * Storage version (§6.5): `MEMORY_STORAGE_VERSION` is recorded on the object; a caller that hands over a
 * version (e.g. a snapshot's) newer than this code is refused with StorageError("version").
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
import { checkBatch, type CheckedBatch } from "./shared.js";
import { type Storage, StorageError } from "./storage.js";
import { MemoryState } from "./memory-state.js";

/** The memory backend's storage format version (§6.5). */
export const MEMORY_STORAGE_VERSION = 1;

export class MemoryStorage implements Storage {
  /** The in-memory session; subclasses persist a batch before publishing it here. */
  protected readonly memory = new MemoryState();
  /** The recorded storage version of this session (§6.5). */
  readonly storageVersion: number;
  #closed = false;
  /** Set when a write's outcome became uncertain; every later operation rejects (§3.3). */
  #faulted: StorageError | undefined;

  constructor(options: { readonly storageVersion?: number } = {}) {
    const version = options.storageVersion ?? MEMORY_STORAGE_VERSION;
    if (!Number.isSafeInteger(version) || version < 1 || version > MEMORY_STORAGE_VERSION) {
      throw new StorageError(
        "version",
        `memory storage version ${version} is not one this code (version ${MEMORY_STORAGE_VERSION}) can open`,
      );
    }
    this.storageVersion = version;
  }

  get lastSeq(): Id {
    return this.memory.lastSeq;
  }

  async commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    this.assertOpen();
    const checked = checkBatch(batch, this.memory.view);
    try {
      this.publish(batch, checked);
    } catch (error) {
      // A batch half applied in memory is an uncertain write: stop this object (§3.3).
      throw this.markFaulted(error);
    }
    return { first: checked.first, last: checked.last };
  }

  /** Apply a batch `checkBatch` accepted against the current state. Never throws. */
  protected publish(batch: CommitBatch, checked: CheckedBatch): void {
    this.memory.apply(batch, checked);
  }

  protected assertOpen(): void {
    if (this.#closed) throw new StorageError("closed", "storage is closed");
    if (this.#faulted !== undefined) throw this.#faulted;
  }

  /**
   * Uncertain persistence (§3.3): a write failed after it may have reached the medium, so this object's
   * state and lastSeq can no longer be trusted; it refuses everything from now on, and a reopen recovers
   * the last complete batch. Returns the error to rethrow.
   */
  protected markFaulted(error: unknown): unknown {
    const detail = error instanceof Error ? error.message : String(error);
    this.#faulted ??= new StorageError(
      "faulted",
      `an earlier write's outcome is uncertain (${detail}); this storage refuses every operation: reopen it to recover the last complete batch (§3.3)`,
    );
    return error;
  }

  protected markClosed(): void {
    this.#closed = true;
  }

  async close(): Promise<void> {
    this.markClosed();
  }

  async getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    this.assertOpen();
    return this.memory.getConversations(ids);
  }

  async scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    this.assertOpen();
    return this.memory.scanConversations(q);
  }

  async getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    this.assertOpen();
    return this.memory.getEntries(ids);
  }

  async scanEntries(q: EntryQuery): Promise<Page<Entry>> {
    this.assertOpen();
    return this.memory.scanEntries(q);
  }

  async newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
    this.assertOpen();
    return this.memory.newestHead(conversationId, at);
  }

  async entryKinds(): Promise<readonly string[]> {
    this.assertOpen();
    return this.memory.entryKinds();
  }

  async getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    this.assertOpen();
    return this.memory.getTasks(ids);
  }

  async scanTasks(q: TaskQuery): Promise<Page<Task>> {
    this.assertOpen();
    return this.memory.scanTasks(q);
  }

  async getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined> {
    this.assertOpen();
    const version = this.memory.state.getValue(addr, at, (cap) => this.#segments(addr.scope, cap));
    return version as Version<T> | undefined;
  }

  async scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    this.assertOpen();
    return this.memory.state.scanValues(q.scope, q.namespace, q.after, q.limit, this.memory.lastSeq);
  }

  async readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>> {
    this.assertOpen();
    const page = this.memory.state.readList(addr, q, this.memory.lastSeq, (cap) => this.#segments(addr.scope, cap));
    return page as Page<Element<T>>;
  }

  #segments(scope: Value<unknown>["scope"], cap: Id) {
    if (!("conversation" in scope)) throw new StorageError("bad_query", "only conversation state has fork segments");
    return this.memory.segments(scope.conversation, cap);
  }
}
