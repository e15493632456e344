/**
 * The SQLite backend (§7.5) over the synchronous SQL surface of a Durable Object's `ctx.storage`
 * (`SqlHost`, sql.ts). Used by the session Durable Object; the workerd tests and benchmarks run it there.
 *
 * This file is the `Storage` object and its reads; a commit is written by sqlite-write.ts (one
 * `transactionSync` per batch, docs/design.md), values and lists by sqlite-state.ts. Reads are indexed LIMIT
 * queries whose cost is fork depth plus the requested range; "latest" is a descending indexed read with
 * LIMIT 1. The object keeps no copy of history in memory: only lastSeq, the small kinds table, and
 * bounded write-through caches of conversations' fork links, task records, current values
 * (sqlite-cache.ts, sqlite-state.ts) and the newest entries it committed (sqlite-tails.ts). The object is
 * the only writer of its database, so its own commits are the only changes; every open starts them
 * empty (docs/performance.md "Cost per turn").
 *
 * Rows read and written by every statement accumulate in `stats` (and per statement while `profile()`
 * runs), so tests and benchmarks can diff them.
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
import { type BatchView, checkBatch, checkCursor, forkSegments, type Segment } from "./shared.js";
import { type Storage, StorageError } from "./storage.js";
import { migrate } from "./migrations.js";

export { migrate, SCHEMA_VERSION } from "./migrations.js";
import type { SqlHost, SqlRow, SqlValue } from "./sql.js";
import {
  checkPosition,
  chunks,
  CountedSql,
  placeholders,
  type SqlStats,
  type StatementProfile,
  storableIds,
  text,
} from "./sqlite-db.js";
import { pageMerged, pageParts, type Part } from "./sqlite-paging.js";
import { SqliteState } from "./sqlite-state.js";
import {
  byId,
  CONVERSATION_COLUMNS,
  decodeConversation,
  decodeEntry,
  decodeTask,
  ENTRY_COLUMNS,
  TASK_READ_COLUMNS,
} from "./sqlite-rows.js";
import { RecordCache } from "./sqlite-cache.js";
import { EntryTails } from "./sqlite-tails.js";
import { highWaterMark, writeBatch, type WriteTarget } from "./sqlite-write.js";

/** Entries this object committed kept in memory, newest ones (see EntryTail); older ones are re-read. */
const ENTRY_CACHE = 4096;

interface SegmentPart extends Part {
  readonly conversationId: Id;
}

export interface SqliteStorageOptions {
  /** Entries kept in the write-through entry cache (default 4,096; tests make it small). */
  readonly entryCache?: number;
}

export class SqliteStorage implements Storage {
  readonly #db: CountedSql;
  readonly #state: SqliteState;
  #lastSeq: Id;
  #closed = false;
  readonly #records: RecordCache;
  readonly #tails: EntryTails;
  /** What a commit writes through (sqlite-write.ts). */
  readonly #target: WriteTarget;
  readonly #view: BatchView;

  /** Rows read and written by this object's statements so far (monotonically increasing). */
  readonly stats: Readonly<SqlStats>;

  /**
   * Open a session's storage (synchronous): apply pending migrations, then read lastSeq and the kinds
   * table. Throws StorageError("version") when the stored schema is newer than this code.
   */
  static open(host: SqlHost, options: SqliteStorageOptions = {}): SqliteStorage {
    const entryCache = options.entryCache ?? ENTRY_CACHE;
    if (!(Number.isSafeInteger(entryCache) && entryCache >= 0))
      throw new StorageError("bad_query", `entryCache must be a non-negative integer, got ${String(entryCache)}`);
    migrate(host);
    return new SqliteStorage(host, entryCache);
  }

  private constructor(host: SqlHost, entryCache: number) {
    this.#db = new CountedSql(host);
    this.stats = this.#db.stats;
    this.#state = new SqliteState(this.#db, (id, cap) => this.#segments(id, cap));
    this.#lastSeq = highWaterMark(this.#db);
    const records = new RecordCache(this.#db);
    this.#records = records;
    this.#tails = new EntryTails(entryCache, (row) => this.#decodeEntry(row));
    this.#target = { db: this.#db, state: this.#state, records, tails: this.#tails };
    const conversation = (id: Id): Conversation | undefined => {
      const stored = records.conversation(id);
      return stored === undefined || stored.deleted ? undefined : stored.conversation;
    };
    const task = (id: Id) => records.task(id);
    const lastSeq = (): Id => this.#lastSeq;
    this.#view = {
      get lastSeq() {
        return lastSeq();
      },
      conversation,
      task,
    };
  }

  get lastSeq(): Id {
    return this.#lastSeq;
  }

  /**
   * Record rows read and written per statement (whitespace-normalized SQL text) from now until
   * `stopProfile()`; the returned map fills as statements run (benchmarks print it).
   */
  profile(): ReadonlyMap<string, StatementProfile> {
    return this.#db.profile();
  }

  stopProfile(): void {
    this.#db.stopProfile();
  }

  async commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    this.#assertOpen();
    const checked = checkBatch(batch, this.#view);
    const { first, last } = checked;
    if (batch.writes.length === 0) return { first, last };
    const publish = writeBatch(this.#target, batch, checked);
    // Publish in-memory changes only after the transaction committed.
    this.#lastSeq = last;
    publish();
    return { first, last };
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  // -------------------------------------------------------------------------------------------
  // Conversations

  async getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    this.#assertOpen();
    // Cached conversations (tombstones included) answer without a row; only the rest are read.
    const wanted = storableIds(ids);
    const missing = wanted.filter((id) => this.#records.cachedConversation(id) === undefined);
    const read = this.#byIds(
      missing,
      `SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE deleted IS NULL AND id IN`,
      (row) => this.#records.cacheConversation(decodeConversation(row)).conversation,
    );
    if (missing.length === wanted.length) return read;
    const found = new Map<Id, Conversation>();
    for (const id of wanted) {
      const cached = this.#records.cachedConversation(id);
      const conversation = cached === undefined ? read.get(id) : cached.deleted ? undefined : cached.conversation;
      if (conversation !== undefined) found.set(id, conversation);
    }
    return found;
  }

  async scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    this.#assertOpen();
    const where = ["deleted IS NULL"];
    const params: SqlValue[] = [];
    if (q.parent !== undefined) {
      where.push("parent = ?");
      params.push(q.parent);
    }
    if (q.ownedFrom !== undefined) {
      where.push("owner = ?");
      params.push(q.ownedFrom);
    }
    const fetch = (_: Part, from: Id, through: Id, descending: boolean, limit: number) =>
      this.#db
        .rows(
          `SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE ${where.join(" AND ")} AND id BETWEEN ? AND ?
           ORDER BY id ${descending ? "DESC" : "ASC"} LIMIT ?`,
          ...params,
          from,
          through,
          limit,
        )
        .map((row) => this.#records.cacheConversation(decodeConversation(row)).conversation);
    return pageParts([{ from: 1, through: Number.MAX_SAFE_INTEGER }], fetch, byId, q, this.#lastSeq);
  }

  /** Fork segments (§2.4) over conversations including tombstones: a deleted source still resolves. */
  #segments(conversationId: Id, cap: Id = Number.MAX_SAFE_INTEGER): Segment[] {
    return forkSegments(conversationId, (id) => this.#records.conversation(id)?.conversation, cap);
  }

  // -------------------------------------------------------------------------------------------
  // Entries

  async getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    this.#assertOpen();
    const wanted = storableIds(ids);
    const missing = wanted.filter((id) => !this.#tails.has(id));
    const read = this.#byIds(missing, `SELECT ${ENTRY_COLUMNS} FROM entries WHERE id IN`, (row) =>
      this.#decodeEntry(row),
    );
    if (missing.length === wanted.length) return read;
    const found = new Map<Id, Entry>();
    for (const id of wanted) {
      const entry = this.#tails.entry(id) ?? read.get(id);
      if (entry !== undefined) found.set(id, entry);
    }
    return found;
  }

  async scanEntries(q: EntryQuery): Promise<Page<Entry>> {
    this.#assertOpen();
    checkPosition("from", q.from);
    checkPosition("through", q.through);
    const segments = this.#segments(q.conversationId, q.through ?? Number.MAX_SAFE_INTEGER);
    checkCursor(q);
    const where: string[] = [];
    const params: SqlValue[] = [];
    let index = "INDEXED BY entries_by_conversation";
    let kindId: number | undefined;
    if (q.kind !== undefined) {
      const kind = this.#records.kindId(q.kind);
      kindId = kind;
      if (kind === undefined) return { items: [], readAt: this.#lastSeq };
      where.push("kind = ?");
      params.push(kind);
      // With kind and key the (conversation, kind, key, id) index is an exact ordered range; with kind
      // alone, (conversation, kind, id) is: either way rows of other kinds are never read.
      index = q.key !== undefined ? "INDEXED BY entries_by_kind_key" : "INDEXED BY entries_by_kind";
    }
    if (q.key !== undefined) {
      where.push("key = ?");
      params.push(q.key);
    }
    const filter = where.map((w) => ` AND ${w}`).join("");
    const from = q.from ?? 0;
    // Oldest segment first; a conversation's own entries all follow its creation.
    const parts: SegmentPart[] = segments
      .map((s) => ({ conversationId: s.conversationId, from: Math.max(from, s.conversationId + 1), through: s.cap }))
      .reverse();
    const stored = (part: SegmentPart, lo: Id, hi: Id, descending: boolean, limit: number): Entry[] =>
      this.#db
        .rows(
          `SELECT ${ENTRY_COLUMNS} FROM entries ${index} WHERE conversation = ?${filter} AND id BETWEEN ? AND ?
           ORDER BY id ${descending ? "DESC" : "ASC"} LIMIT ?`,
          part.conversationId,
          ...params,
          lo,
          hi,
          limit,
        )
        .map((row) => this.#decodeEntry(row));
    // Ids above a segment's tail floor come from the tail; only the range below it is read.
    const fetch = (part: SegmentPart, lo: Id, hi: Id, descending: boolean, limit: number): Entry[] => {
      const tail = this.#tails.of(part.conversationId);
      if (tail === undefined || hi <= tail.floor) return stored(part, lo, hi, descending, limit);
      const cachedFrom = Math.max(lo, tail.floor + 1);
      if (descending) {
        const rows = this.#tails.read(tail, cachedFrom, hi, kindId, q.key, true, limit);
        return rows.length < limit && lo <= tail.floor
          ? [...rows, ...stored(part, lo, tail.floor, true, limit - rows.length)]
          : rows;
      }
      const rows = lo <= tail.floor ? stored(part, lo, tail.floor, false, limit) : [];
      return rows.length < limit
        ? [...rows, ...this.#tails.read(tail, cachedFrom, hi, kindId, q.key, false, limit - rows.length)]
        : rows;
    };
    return pageParts(parts, fetch, byId, q, this.#lastSeq);
  }

  async newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
    this.#assertOpen();
    checkPosition("at", at);
    for (const segment of this.#segments(conversationId, at)) {
      if (segment.cap <= segment.conversationId) continue;
      const row = this.#db.first(
        `SELECT ${ENTRY_COLUMNS} FROM entries INDEXED BY entries_heads
         WHERE conversation = ? AND head IS NOT NULL AND id <= ? ORDER BY id DESC LIMIT 1`,
        segment.conversationId,
        segment.cap,
      );
      if (row !== undefined) return this.#decodeEntry(row);
    }
    return undefined;
  }

  async entryKinds(): Promise<readonly string[]> {
    this.#assertOpen();
    const names = this.#db.rows("SELECT name FROM kinds ORDER BY name").map((row) => text(row, "name"));
    return Object.freeze(names);
  }

  #decodeEntry(row: SqlRow): Entry {
    return decodeEntry(row, (id) => this.#records.kindName(id));
  }

  // -------------------------------------------------------------------------------------------
  // Tasks

  async getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    this.#assertOpen();
    const found = new Map<Id, Task>();
    const missing = storableIds(ids).filter((id) => this.#records.cachedTask(id) === undefined);
    const read = this.#byIds(missing, `SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id IN`, decodeTask);
    for (const task of read.values()) this.#records.cacheTask(task);
    for (const id of storableIds(ids)) {
      const task = this.#records.cachedTask(id) ?? read.get(id);
      if (task !== undefined) found.set(id, task);
    }
    return found;
  }

  async scanTasks(q: TaskQuery): Promise<Page<Task>> {
    this.#assertOpen();
    const where: string[] = [];
    const params: SqlValue[] = [];
    // Live tasks (and the live roles) come from the partial index tasks_live (conversation, id) WHERE
    // settled IS NULL (the literal clause lets SQLite use it). Live tasks are few, so a session-wide live
    // scan reads the whole partial index and sorts. Scans that include finished tasks walk the table in
    // id order (operator listings; no index on finished tasks, each would be a billed row per task).
    const live = q.live === true || q.role === "start" || q.role === "inflight";
    if (live) where.push("settled IS NULL");
    if (q.live === false) where.push("settled IS NOT NULL");
    if (q.role !== undefined) {
      where.push("role = ?");
      params.push(q.role);
    }
    if (q.kind !== undefined) {
      where.push("kind = ?");
      params.push(q.kind);
    }
    if (q.abort !== undefined) {
      where.push("abort = ?");
      params.push(q.abort ? 1 : 0);
    }
    // One ordered index range per conversation, merged by id: an IN list would make SQLite sort every
    // matching task before the LIMIT.
    const source =
      (conversation: Id | undefined) =>
      (from: Id, through: Id, descending: boolean, limit: number): Task[] => {
        const clauses = [...where];
        const bound = [...params];
        if (conversation !== undefined) {
          clauses.push("conversation = ?");
          bound.push(conversation);
        }
        clauses.push("id BETWEEN ? AND ?");
        const index = live ? "INDEXED BY tasks_live" : "";
        return this.#db
          .rows(
            `SELECT ${TASK_READ_COLUMNS} FROM tasks ${index} WHERE ${clauses.join(" AND ")} ORDER BY id ${descending ? "DESC" : "ASC"} LIMIT ?`,
            ...bound,
            from,
            through,
            limit,
          )
          .map(decodeTask);
      };
    const sources =
      q.conversationIds === undefined
        ? [source(undefined)]
        : storableIds(q.conversationIds).map((conversation) => source(conversation));
    return pageMerged(sources, byId, q, this.#lastSeq);
  }

  // -------------------------------------------------------------------------------------------
  // Values and lists

  async getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined> {
    this.#assertOpen();
    return this.#state.getValue(addr, at) as Version<T> | undefined;
  }

  async scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    this.#assertOpen();
    return this.#state.scanValues(q, this.#lastSeq);
  }

  async readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>> {
    this.#assertOpen();
    return this.#state.readList(addr, q, this.#lastSeq) as Page<Element<T>>;
  }

  /**
   * Records by id, in chunks under the bound-parameter limit, returned in the order the ids were asked
   * for (as the in-memory backends do). `select` ends with "id IN"; the placeholder list is appended.
   */
  #byIds<T extends { readonly id: Id }>(ids: readonly Id[], select: string, decode: (row: SqlRow) => T): Map<Id, T> {
    const wanted = storableIds(ids);
    const rows = new Map<Id, T>();
    for (const chunk of chunks(wanted)) {
      for (const row of this.#db.rows(`${select} (${placeholders(chunk.length)})`, ...chunk)) {
        const item = decode(row);
        rows.set(item.id, item);
      }
    }
    const found = new Map<Id, T>();
    for (const id of wanted) {
      const item = rows.get(id);
      if (item !== undefined) found.set(id, item);
    }
    return found;
  }

  #assertOpen(): void {
    if (this.#closed) throw new StorageError("closed", "storage is closed");
  }
}
