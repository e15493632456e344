/**
 * The small write-through caches of `SqliteStorage` (§7.5; docs/performance.md): conversations (fork links and
 * tombstones), task records and the kinds table. A miss reads one indexed row and caches it; the write
 * path (sqlite-write.ts) updates them after a commit's transaction. The object is the only writer of its
 * database, so its own commits are the only changes and a cached record is the stored one; every open
 * starts them empty. Entry tails, the cache of newest entries, are in sqlite-tails.ts.
 */
import type { Id, Task } from "./records.js";
import { StorageError } from "./storage.js";
import { type CountedSql, int, text } from "./sqlite-db.js";
import {
  CONVERSATION_COLUMNS,
  decodeConversation,
  decodeTask,
  type StoredConversation,
  TASK_READ_COLUMNS,
} from "./sqlite-rows.js";

/** Conversations kept in memory for fork-chain resolution; older ones are re-read (one row each). */
const CONVERSATION_CACHE = 4096;
/** Task records kept in memory (live and recent ones); older ones are re-read (one row each). */
const TASK_CACHE = 4096;

export class RecordCache {
  readonly #db: CountedSql;
  readonly #conversations = new Map<Id, StoredConversation>();
  /**
   * Write-through cache of task records (§5.1): filled by this object's commits (published after the
   * transaction commits) and by reads. The object is the only writer of its database, so a cached record
   * is the stored one; a fresh object starts empty. Bounded; older records are re-read.
   */
  readonly #tasks = new Map<Id, Task>();
  readonly #kindIds = new Map<string, number>();
  readonly #kindNames = new Map<number, string>();

  /** Reads the whole kinds table (it is small). */
  constructor(db: CountedSql) {
    this.#db = db;
    for (const row of this.#db.rows("SELECT id, name FROM kinds")) this.rememberKind(text(row, "name"), int(row, "id"));
  }

  // -------------------------------------------------------------------------------------------
  // Conversations

  /** A cached conversation (tombstones included), without reading a row. */
  cachedConversation(id: Id): StoredConversation | undefined {
    return this.#conversations.get(id);
  }

  /** A conversation including tombstones, from the cache or one indexed row. */
  conversation(id: Id): StoredConversation | undefined {
    const cached = this.#conversations.get(id);
    if (cached !== undefined) return cached;
    if (!Number.isSafeInteger(id)) return undefined;
    const row = this.#db.first(`SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE id = ?`, id);
    return row === undefined ? undefined : this.cacheConversation(decodeConversation(row));
  }

  cacheConversation(stored: StoredConversation): StoredConversation {
    const id = stored.conversation.id;
    const cached = this.#conversations.get(id);
    if (cached !== undefined) {
      cached.deleted = stored.deleted;
      return cached;
    }
    if (this.#conversations.size >= CONVERSATION_CACHE) {
      const oldest = this.#conversations.keys().next();
      if (oldest.done !== true) this.#conversations.delete(oldest.value);
    }
    this.#conversations.set(id, stored);
    return stored;
  }

  // -------------------------------------------------------------------------------------------
  // Tasks

  /** A cached task record, without reading a row. */
  cachedTask(id: Id): Task | undefined {
    return this.#tasks.get(id);
  }

  /** A task record from the cache or one row by id (then cached). */
  task(id: Id): Task | undefined {
    const cached = this.#tasks.get(id);
    if (cached !== undefined) return cached;
    if (!Number.isSafeInteger(id)) return undefined;
    const row = this.#db.first(`SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id = ?`, id);
    if (row === undefined) return undefined;
    const task = decodeTask(row);
    this.cacheTask(task);
    return task;
  }

  cacheTask(task: Task): void {
    if (!this.#tasks.has(task.id) && this.#tasks.size >= TASK_CACHE) {
      const oldest = this.#tasks.keys().next();
      if (oldest.done !== true) this.#tasks.delete(oldest.value);
    }
    this.#tasks.set(task.id, task);
  }

  forgetTask(id: Id): void {
    this.#tasks.delete(id);
  }

  // -------------------------------------------------------------------------------------------
  // Kinds

  /** A kind's id if this object has seen it, without reading a row. */
  knownKindId(name: string): number | undefined {
    return this.#kindIds.get(name);
  }

  kindId(name: string): number | undefined {
    const known = this.#kindIds.get(name);
    if (known !== undefined) return known;
    const row = this.#db.first("SELECT id FROM kinds WHERE name = ?", name);
    if (row === undefined) return undefined;
    this.rememberKind(name, int(row, "id"));
    return int(row, "id");
  }

  kindName(id: number): string {
    const known = this.#kindNames.get(id);
    if (known !== undefined) return known;
    const row = this.#db.first("SELECT name FROM kinds WHERE id = ?", id);
    if (row === undefined) throw new StorageError("corrupt", `entry kind ${id} is missing from kinds`);
    this.rememberKind(text(row, "name"), id);
    return text(row, "name");
  }

  rememberKind(name: string, id: number): void {
    this.#kindIds.set(name, id);
    this.#kindNames.set(id, name);
  }
}
