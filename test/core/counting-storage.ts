/**
 * A `Storage` wrapper that counts reads (calls and records returned), so tests and benchmarks can pin
 * what context derivation reads: cold = fork depth + range since the newest head, warm = nothing.
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
} from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";

export interface ReadCounts {
  /** Read calls of any kind. */
  calls: number;
  /** Records returned by reads (entries, heads, conversations, ...). */
  rows: number;
  scanEntries: number;
  newestHead: number;
}

export class CountingStorage implements Storage {
  readonly counts: ReadCounts = { calls: 0, rows: 0, scanEntries: 0, newestHead: 0 };

  constructor(readonly inner: Storage) {}

  reset(): ReadCounts {
    const before = { ...this.counts };
    Object.assign(this.counts, { calls: 0, rows: 0, scanEntries: 0, newestHead: 0 });
    return before;
  }

  #read(rows: number): void {
    this.counts.calls++;
    this.counts.rows += rows;
  }

  get lastSeq(): Id {
    return this.inner.lastSeq;
  }

  commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    return this.inner.commit(batch);
  }

  async getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    const found = await this.inner.getConversations(ids);
    this.#read(found.size);
    return found;
  }

  async scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    const page = await this.inner.scanConversations(q);
    this.#read(page.items.length);
    return page;
  }

  async getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    const found = await this.inner.getEntries(ids);
    this.#read(found.size);
    return found;
  }

  async scanEntries(q: EntryQuery): Promise<Page<Entry>> {
    const page = await this.inner.scanEntries(q);
    this.counts.scanEntries++;
    this.#read(page.items.length);
    return page;
  }

  async newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
    const head = await this.inner.newestHead(conversationId, at);
    this.counts.newestHead++;
    this.#read(head === undefined ? 0 : 1);
    return head;
  }

  async entryKinds(): Promise<readonly string[]> {
    const kinds = await this.inner.entryKinds();
    this.#read(kinds.length);
    return kinds;
  }

  async getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    const found = await this.inner.getTasks(ids);
    this.#read(found.size);
    return found;
  }

  async scanTasks(q: TaskQuery): Promise<Page<Task>> {
    const page = await this.inner.scanTasks(q);
    this.#read(page.items.length);
    return page;
  }

  async getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined> {
    const version = await this.inner.getValue(addr, at);
    this.#read(version === undefined ? 0 : 1);
    return version;
  }

  async scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    const page = await this.inner.scanValues(q);
    this.#read(page.items.length);
    return page;
  }

  async readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>> {
    const page = await this.inner.readList(addr, q);
    this.#read(page.items.length);
    return page;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
