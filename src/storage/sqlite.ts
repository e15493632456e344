/**
 * The SQLite backend (§7.5) over the synchronous SQL surface of a Durable Object's `ctx.storage`
 * (`SqlHost`, sql.ts). Used by the session Durable Object; the workerd tests and benchmarks run it there.
 *
 * One commit is one `transactionSync`: checkBatch first (nothing is written when it throws), then the
 * writes numbered from lastSeq + 1, then the new lastSeq (the commit boundary; see commit for the scratch
 * appends that carry it in their own row); anything thrown inside rolls the whole transaction back
 * (DESIGN §2). Reads are indexed LIMIT queries whose cost is fork depth plus the requested range;
 * "latest" is a descending indexed read with LIMIT 1. The object keeps no copy of history in memory:
 * only lastSeq, the small kinds table, and bounded write-through caches of conversations' fork links,
 * task records, current values and the newest entries it committed (the object is the only writer of its
 * database, so its own commits are the only changes; every open starts them empty; issue 15).
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
  MainWrite,
  Page,
  Task,
  TaskQuery,
  TaskRole,
  TaskStateBase,
  Value,
  ValueQuery,
  Version,
} from "./records.js";
import { addressKey, type BatchView, checkBatch, checkCursor, deepFreeze, forkSegments, keepsHistory, type Segment } from "./shared.js";
import { type Storage, StorageError } from "./storage.js";
import { migrate } from "./migrations.js";

export { migrate, SCHEMA_VERSION } from "./migrations.js";
import type { SqlHost, SqlRow, SqlValue } from "./sql.js";
import {
  checkPosition,
  chunks,
  CountedSql,
  int,
  optionalInt,
  optionalText,
  placeholders,
  type SqlStats,
  type StatementProfile,
  storableIds,
  text,
} from "./sqlite-db.js";
import { pageMerged, pageParts, type Part } from "./sqlite-paging.js";
import { decodeModel, decodeState, encodeModel, encodeState } from "./sqlite-codec.js";
import { compactElement, SqliteState } from "./sqlite-state.js";

/** Conversations kept in memory for fork-chain resolution; older ones are re-read (one row each). */
const CONVERSATION_CACHE = 4096;
/** Task records kept in memory (live and recent ones); older ones are re-read (one row each). */
const TASK_CACHE = 4096;
/** Entries this object committed kept in memory, newest ones (see EntryTail); older ones are re-read. */
const ENTRY_CACHE = 4096;
/** Conversations with an entry tail; the one touched longest ago is dropped first. */
const TAIL_CONVERSATIONS = 1024;

const ENTRY_COLUMNS = "id, conversation, kind, key, by_task, head, data, model, edits";
const TASK_COLUMNS = "id, conversation, kind, role, background, turn, abort, after, owns, state";
/** What a task read selects: the state text plus the status column it may have been stored without. */
const TASK_READ_COLUMNS = `${TASK_COLUMNS}, status`;
const CONVERSATION_COLUMNS = "id, parent, parent_at, owner, deleted";

interface StoredConversation {
  readonly conversation: Conversation;
  deleted: boolean;
}

interface SegmentPart extends Part {
  readonly conversationId: Id;
}

/** An entry of a tail: its row as SQLite returns it until first read, then the decoded record. */
interface TailEntry {
  readonly id: Id;
  readonly kind: number;
  readonly key: string | undefined;
  row: SqlRow | undefined;
  entry: Entry | undefined;
  readonly tail: EntryTail;
}

/**
 * Write-through cache of a conversation's own newest entries (issue 15): every entry of the conversation
 * with an id above `floor` is in `entries` (ascending), because this object committed all of them. A
 * tail starts at a commit that creates the conversation or appends its entries (floor: below that
 * commit); evicting its oldest entry raises the floor. Scans of ids above the floor read no rows.
 */
interface EntryTail {
  readonly conversationId: Id;
  floor: Id;
  readonly entries: TailEntry[];
}

export interface SqliteStorageOptions {
  /** Entries kept in the write-through entry cache (default 4,096; tests make it small). */
  readonly entryCache?: number;
}

const byId = (item: { readonly id: Id }): Id => item.id;

/** The index of the first item with an id at or above `id` in an ascending list. */
function lowerIndex(items: readonly { readonly id: Id }[], id: Id): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((items[mid] as { readonly id: Id }).id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function json(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

function parsed<T>(row: SqlRow, column: string): T | undefined {
  const value = optionalText(row, column);
  return value === undefined ? undefined : (JSON.parse(value) as T);
}

function role(row: SqlRow): TaskRole {
  const value = text(row, "role");
  if (value === "start" || value === "inflight" || value === "terminal") return value;
  throw new StorageError("corrupt", `task ${String(row["id"])} has unknown role ${value}`);
}

function decodeTask(row: SqlRow): Task {
  const owns = parsed<Id[]>(row, "owns");
  const task: Task = {
    id: int(row, "id"),
    conversationId: int(row, "conversation"),
    kind: text(row, "kind"),
    role: role(row),
    state: decodeState(text(row, "state"), () => text(row, "status")),
    after: JSON.parse(text(row, "after")) as Id[],
    ...(int(row, "background") === 1 ? { background: true as const } : {}),
    ...(int(row, "turn") === 1 ? { turn: true as const } : {}),
    ...(owns === undefined ? {} : { owns }),
    ...(int(row, "abort") === 1 ? { abort: true as const } : {}),
  };
  return deepFreeze(task);
}

function decodeConversation(row: SqlRow): StoredConversation {
  const parent = optionalInt(row, "parent");
  const owner = optionalInt(row, "owner");
  const conversation: Conversation = {
    id: int(row, "id"),
    ...(parent === undefined ? {} : { parent: { conversationId: parent, at: int(row, "parent_at") } }),
    ...(owner === undefined ? {} : { owner }),
  };
  return { conversation: deepFreeze(conversation), deleted: row["deleted"] !== null };
}

/**
 * Which write of a batch carries the commit's last sequence in its row (migration 0006), and whether the
 * batch then needs no last_seq update. Main batch: the last write that inserts an entry, a task or a
 * list_elements row (not an elided write, not a compact session element, migration 0007) carries it (the newest row of its table, read by highWaterMark); a patch leaves it on a
 * task that stays live unless the same batch settles that task later. Scratch batch: its last write
 * leaves a scratch row carrying its own sequence when it is an append or a set.
 */
function markCarriers(
  batch: CommitBatch,
  elided: ReadonlySet<number>,
  payloads: readonly (string | undefined)[],
): { readonly carrier: number; readonly carried: boolean } {
  const writes = batch.writes;
  if (batch.kind === "scratch") {
    // The last write is never elided (only a later write of the same address elides an earlier one).
    const tail = writes[writes.length - 1];
    return { carrier: -1, carried: tail?.type === "list.append" || tail?.type === "value.set" };
  }
  let carrier = -1;
  let patched = false;
  const settled = new Set<Id>();
  for (let i = writes.length - 1; i >= 0; i--) {
    const w = writes[i] as MainWrite;
    if (elided.has(i)) continue;
    const inserts = w.type === "entry" || w.type === "task" || (w.type === "list.append" && !compactElement(w.addr, payloads[i]));
    if (carrier === -1 && inserts) carrier = i;
    if (w.type === "settle") settled.add(w.id);
    if (w.type === "patch" && !settled.has(w.id)) patched = true;
  }
  return { carrier, carried: carrier !== -1 || patched };
}

/**
 * Writes of a batch whose effect on stored current contents a later write of the same batch undoes, so
 * they need no statement (issue 15): a sticky or scratch value set or delete followed by another set or
 * delete of the same address (only the last one's value and sequence are current, and such state has no
 * history, §4.2), and a sticky or scratch list append that a later remove of that element or a clear of
 * that list discards (the element id stays consumed; §8.1 "Memory and SQLite may discard a removed sticky
 * element"); the remove of such an element is elided with it. Rewindable conversation state keeps every
 * version and marker, so none of its writes are elided.
 */
function elidedWrites(batch: CommitBatch, first: Id): Set<number> {
  const elided = new Set<number>();
  const values = new Map<string, number>();
  const appends = new Map<Id, { readonly index: number; readonly address: string }>();
  batch.writes.forEach((w: MainWrite, i) => {
    switch (w.type) {
      case "value.set":
      case "value.delete": {
        if (keepsHistory(w.addr)) return;
        const address = addressKey(w.addr);
        const earlier = values.get(address);
        if (earlier !== undefined) elided.add(earlier);
        values.set(address, i);
        return;
      }
      case "list.append":
        if (!keepsHistory(w.addr)) appends.set(first + i, { index: i, address: addressKey(w.addr) });
        return;
      case "list.remove": {
        if (keepsHistory(w.addr)) return;
        const appended = appends.get(w.element);
        if (appended === undefined || appended.address !== addressKey(w.addr)) return;
        elided.add(appended.index);
        elided.add(i);
        appends.delete(w.element);
        return;
      }
      case "list.clear": {
        if (keepsHistory(w.addr)) return;
        const address = addressKey(w.addr);
        for (const [id, appended] of appends) {
          if (appended.address !== address) continue;
          elided.add(appended.index);
          appends.delete(id);
        }
        return;
      }
      case "createConversation":
      case "deleteConversation":
      case "entry":
      case "task":
      case "patch":
      case "settle":
        return;
      default: {
        const _: never = w;
        throw new StorageError("malformed_batch", `unknown write ${String(_)}`);
      }
    }
  });
  return elided;
}

/**
 * The committed sequence high-water mark of a database at the current schema (§3.3, §7.4 rule 4): the
 * largest of last_seq, the newest entry, task and list element (id or the `last` it carries), the live
 * tasks' `last` and the newest scratch seq. A few rows: three by rowid, the live tasks, the live scratch.
 */
function highWaterMark(db: CountedSql): Id {
  const mark = db.first("SELECT value FROM session_metadata WHERE name = 'last_seq'");
  if (mark === undefined) throw new StorageError("corrupt", "session_metadata has no last_seq");
  let high = int(mark, "value");
  for (const table of ["entries", "tasks", "list_elements"]) {
    const row = db.first(`SELECT id, last FROM ${table} ORDER BY id DESC LIMIT 1`);
    if (row !== undefined) high = Math.max(high, int(row, "id"), optionalInt(row, "last") ?? 0);
  }
  const live = db.first("SELECT max(last) AS last FROM tasks INDEXED BY tasks_live WHERE settled IS NULL");
  high = Math.max(high, live === undefined ? 0 : (optionalInt(live, "last") ?? 0));
  // Scratch appends and sets carry their sequence; the newest may be above every other mark.
  const scratch = db.first("SELECT max(seq) AS seq FROM scratch");
  return Math.max(high, scratch === undefined ? 0 : (optionalInt(scratch, "seq") ?? 0));
}

export class SqliteStorage implements Storage {
  readonly #db: CountedSql;
  readonly #state: SqliteState;
  #lastSeq: Id;
  #closed = false;
  readonly #conversations = new Map<Id, StoredConversation>();
  /**
   * Write-through cache of task records (§5.1): filled by this object's commits (published after the
   * transaction commits) and by reads. The object is the only writer of its database, so a cached record
   * is the stored one; a fresh object starts empty (DESIGN §2). Bounded; older records are re-read.
   */
  readonly #tasks = new Map<Id, Task>();
  /** Entry tails by conversation (least recently appended first) and their entries by id (oldest first). */
  readonly #tails = new Map<Id, EntryTail>();
  readonly #tailEntries = new Map<Id, TailEntry>();
  readonly #entryCache: number;
  readonly #kindIds = new Map<string, number>();
  readonly #kindNames = new Map<number, string>();
  readonly #view: BatchView;

  /** Rows read and written by this object's statements so far (monotonically increasing). */
  readonly stats: Readonly<SqlStats>;

  /**
   * Open a session's storage (synchronous): apply pending migrations, then read lastSeq and the kinds
   * table. Throws StorageError("version") when the stored schema is newer than this code.
   */
  static open(host: SqlHost, options: SqliteStorageOptions = {}): SqliteStorage {
    const entryCache = options.entryCache ?? ENTRY_CACHE;
    if (!(Number.isSafeInteger(entryCache) && entryCache >= 0)) throw new StorageError("bad_query", `entryCache must be a non-negative integer, got ${String(entryCache)}`);
    migrate(host);
    return new SqliteStorage(host, entryCache);
  }

  private constructor(host: SqlHost, entryCache: number) {
    this.#entryCache = entryCache;
    this.#db = new CountedSql(host);
    this.stats = this.#db.stats;
    this.#state = new SqliteState(this.#db, (id, cap) => this.#segments(id, cap));
    this.#lastSeq = highWaterMark(this.#db);
    for (const row of this.#db.rows("SELECT id, name FROM kinds")) this.#rememberKind(text(row, "name"), int(row, "id"));
    const conversation = (id: Id): Conversation | undefined => {
      const stored = this.#conversation(id);
      return stored === undefined || stored.deleted ? undefined : stored.conversation;
    };
    const task = (id: Id) => this.#task(id);
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
    const newKinds = new Map<string, number>();
    const changes: (() => void)[] = [];
    // Task records as this batch leaves them (a batch may create and patch a task, or patch it twice).
    const tasks = new Map<Id, Task | undefined>();
    const elided = elidedWrites(batch, first);
    const marks = markCarriers(batch, elided, checked.payloads);
    try {
      this.#db.host.transactionSync(() => {
        batch.writes.forEach((w: MainWrite, i) => {
          if (elided.has(i)) return;
          this.#write(w, first + i, checked.payloads[i], newKinds, changes, tasks, i === marks.carrier ? last : undefined, last, first);
        });
        // The high-water mark (§7.5's commit boundary; the transaction makes the batch all-or-nothing).
        // A commit that leaves a row carrying `last` needs no second row (migration 0006): the newest
        // entry, task or list element it inserted, a live task it patched, or (a scratch batch whose
        // last write is an append or a set) its newest scratch row. Open takes the largest of last_seq
        // and those (highWaterMark). Any later commit that deletes such a row or settles such a task is
        // newer and covers its own sequence the same way or records last_seq (§7.4 recovery rule 4).
        if (marks.carried) return;
        // Compare-and-set: a second storage object over the same database must not move the mark past
        // this one's view (rows of skipped scratch marks may leave it below first - 1).
        const advanced = this.#db.run("UPDATE session_metadata SET value = ? WHERE name = 'last_seq' AND value < ?", last, first);
        if (advanced !== 1) throw new StorageError("corrupt", `lastSeq moved under this storage object (expected at most ${first - 1})`);
      });
    } catch (error) {
      this.#state.discard();
      throw error;
    }
    // Publish in-memory changes only after the transaction committed.
    this.#lastSeq = last;
    for (const [name, id] of newKinds) this.#rememberKind(name, id);
    for (const change of changes) change();
    for (const [id, task] of tasks) {
      if (task === undefined) this.#tasks.delete(id);
      else this.#cacheTask(task);
    }
    this.#state.publish();
    return { first, last };
  }

  #cacheTask(task: Task): void {
    if (!this.#tasks.has(task.id) && this.#tasks.size >= TASK_CACHE) {
      const oldest = this.#tasks.keys().next();
      if (oldest.done !== true) this.#tasks.delete(oldest.value);
    }
    this.#tasks.set(task.id, task);
  }

  /** A task record from the cache or one row by id (then cached). */
  #task(id: Id): Task | undefined {
    const cached = this.#tasks.get(id);
    if (cached !== undefined) return cached;
    if (!Number.isSafeInteger(id)) return undefined;
    const row = this.#db.first(`SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id = ?`, id);
    if (row === undefined) return undefined;
    const task = decodeTask(row);
    this.#cacheTask(task);
    return task;
  }

  #write(
    w: MainWrite,
    seq: Id,
    payload: string | undefined,
    newKinds: Map<string, number>,
    changes: (() => void)[],
    tasks: Map<Id, Task | undefined>,
    mark: Id | undefined,
    last: Id,
    first: Id,
  ): void {
    const db = this.#db;
    // `mark` is this commit's last sequence when this write's row carries it (see markCarriers); stored
    // NULL when it equals the row's own id.
    const carried = mark === undefined || mark === seq ? null : mark;
    switch (w.type) {
      case "value.set":
      case "value.delete":
      case "list.append":
      case "list.remove":
      case "list.clear":
        this.#state.write(w, seq, payload, carried);
        return;
      case "createConversation": {
        const c = w.conversation;
        db.run(
          "INSERT INTO conversations (id, parent, parent_at, owner, deleted) VALUES (?, ?, ?, ?, NULL)",
          seq, c.parent?.conversationId ?? null, c.parent?.at ?? null, c.owner ?? null,
        );
        // Its own entries all follow its creation: every one will be committed here.
        const row: SqlRow = { id: seq, parent: c.parent?.conversationId ?? null, parent_at: c.parent?.at ?? null, owner: c.owner ?? null, deleted: null };
        changes.push(() => {
          this.#cacheConversation(decodeConversation(row));
          this.#tail(seq, seq);
        });
        return;
      }
      case "deleteConversation":
        // A tombstone: hidden from lookups and scans, still resolvable as a fork ancestor.
        db.run("UPDATE conversations SET deleted = ? WHERE id = ?", seq, w.id);
        changes.push(() => {
          const cached = this.#conversations.get(w.id);
          if (cached !== undefined) cached.deleted = true;
        });
        return;
      case "entry": {
        const e = w.entry;
        let kind = this.#kindIds.get(e.kind) ?? newKinds.get(e.kind);
        if (kind === undefined) {
          const row = db.first("INSERT INTO kinds (name) VALUES (?) RETURNING id", e.kind);
          if (row === undefined) throw new StorageError("corrupt", `kind ${e.kind} was not stored`);
          kind = int(row, "id");
          newKinds.set(e.kind, kind);
        }
        const row: SqlRow = {
          id: seq, conversation: e.conversationId, kind, key: e.key ?? null, by_task: e.byTaskId ?? null, head: e.head ?? null,
          data: json(e.data), model: e.model === undefined ? null : encodeModel(e.model, JSON.stringify(e.model)), edits: json(e.edits),
        };
        db.run(
          `INSERT INTO entries (${ENTRY_COLUMNS}, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          row["id"] as Id, row["conversation"] as Id, kind, row["key"] as string | null, row["by_task"] as Id | null, row["head"] as Id | null,
          row["data"] as string | null, row["model"] as string | null, row["edits"] as string | null, carried,
        );
        // Every earlier entry of this batch was published before it; none of the conversation's entries
        // at or above the batch's first sequence was committed before this batch.
        const kindId = kind;
        changes.push(() => this.#appendTail(this.#tail(e.conversationId, first - 1), seq, kindId, e.key, row));
        return;
      }
      case "task": {
        const t = w.task;
        const state = JSON.stringify(t.state);
        const stored = encodeState(state, t.state.status);
        const after = JSON.stringify(t.after);
        const owns = json(t.owns);
        db.run(
          `INSERT INTO tasks (${TASK_COLUMNS}, status, settled, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          seq, t.conversationId, t.kind, t.role, t.background === true ? 1 : 0, t.turn === true ? 1 : 0, t.abort === true ? 1 : 0,
          after, owns, stored, t.state.status, t.role === "terminal" ? seq : null, carried,
        );
        const record = decodeTask({
          id: seq, conversation: t.conversationId, kind: t.kind, role: t.role, background: t.background === true ? 1 : 0,
          turn: t.turn === true ? 1 : 0, abort: t.abort === true ? 1 : 0, after, owns, state,
        });
        tasks.set(seq, record);
        // Every scratch write of a task this object created is committed here (the list cache).
        if (t.role !== "terminal") changes.push(() => this.#state.createdTask(seq));
        return;
      }
      case "patch": {
        // The abort mark is never cleared by a later write (§6.3); `owns`, when present, replaces.
        // No indexed column changes (a patch never settles), so this writes the one row. `last` is the
        // commit's last sequence: the task stays live, so open finds it through tasks_live.
        const cached = tasks.has(w.id) ? tasks.get(w.id) : this.#tasks.get(w.id);
        db.run(
          "UPDATE tasks SET role = ?, status = ?, state = ?, abort = max(abort, ?), owns = coalesce(?, owns), last = ? WHERE id = ?",
          w.role, w.state.status, encodeState(payload as string, w.state.status), w.abort === true ? 1 : 0, json(w.owns), last, w.id,
        );
        if (cached === undefined) {
          tasks.set(w.id, undefined);
          return;
        }
        const { abort: _abort, owns: _owns, ...rest } = cached;
        const owns = w.owns ?? cached.owns;
        const record: Task = deepFreeze({
          ...rest,
          role: w.role,
          state: JSON.parse(payload as string) as TaskStateBase,
          ...(owns === undefined ? {} : { owns: JSON.parse(JSON.stringify(owns)) as Id[] }),
          ...(cached.abort === true || w.abort === true ? { abort: true as const } : {}),
        });
        tasks.set(w.id, record);
        return;
      }
      case "settle": {
        // Leaves the live-task index (settled is its WHERE column); removing index entries is not billed.
        db.run("UPDATE tasks SET role = 'terminal', status = ?, state = ?, settled = ? WHERE id = ?",
          w.state.status, encodeState(payload as string, w.state.status), seq, w.id,
        );
        this.#state.retireScratch(w.id);
        changes.push(() => this.#state.settledTask(w.id));
        const cached = tasks.has(w.id) ? tasks.get(w.id) : this.#tasks.get(w.id);
        if (cached === undefined) {
          tasks.set(w.id, undefined);
          return;
        }
        const record: Task = deepFreeze({ ...cached, role: "terminal", state: JSON.parse(payload as string) as TaskStateBase });
        tasks.set(w.id, record);
        return;
      }
      default: {
        const _: never = w;
        throw new StorageError("malformed_batch", `unknown write ${String(_)}`);
      }
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  // -------------------------------------------------------------------------------------------
  // Entry tails (write-through; published after the commit's transaction)

  /** The conversation's tail, started at `floor` when it has none; now the most recently touched. */
  #tail(conversationId: Id, floor: Id): EntryTail {
    let tail = this.#tails.get(conversationId);
    if (tail === undefined) {
      tail = { conversationId, floor, entries: [] };
      if (this.#tails.size >= TAIL_CONVERSATIONS) {
        const oldest = this.#tails.values().next();
        if (oldest.done !== true) this.#dropTail(oldest.value);
      }
    } else {
      this.#tails.delete(conversationId);
    }
    this.#tails.set(conversationId, tail);
    return tail;
  }

  #dropTail(tail: EntryTail): void {
    this.#tails.delete(tail.conversationId);
    for (const cached of tail.entries) this.#tailEntries.delete(cached.id);
  }

  #appendTail(tail: EntryTail, id: Id, kind: number, key: string | undefined, row: SqlRow): void {
    const cached: TailEntry = { id, kind, key, row, entry: undefined, tail };
    tail.entries.push(cached);
    this.#tailEntries.set(id, cached);
    // Entries are published in sequence order, so the oldest cached entry heads its own tail.
    while (this.#tailEntries.size > this.#entryCache) {
      const oldest = this.#tailEntries.values().next();
      if (oldest.done === true) break;
      const evicted = oldest.value;
      this.#tailEntries.delete(evicted.id);
      evicted.tail.entries.shift();
      evicted.tail.floor = evicted.id;
    }
  }

  #tailEntry(cached: TailEntry): Entry {
    if (cached.entry === undefined) {
      cached.entry = this.#decodeEntry(cached.row as SqlRow);
      cached.row = undefined;
    }
    return cached.entry;
  }

  /**
   * Up to `limit` entries of `tail` with ids in [from, through] (all above its floor) matching kind and
   * key, ascending or descending: what the indexed range query would return.
   */
  #fromTail(tail: EntryTail, from: Id, through: Id, kind: number | undefined, key: string | undefined, descending: boolean, limit: number): Entry[] {
    const out: Entry[] = [];
    const entries = tail.entries;
    const match = (c: TailEntry): boolean => (kind === undefined || c.kind === kind) && (key === undefined || c.key === key);
    if (descending) {
      for (let i = entries.length - 1; i >= 0 && out.length < limit; i--) {
        const c = entries[i] as TailEntry;
        if (c.id < from) break;
        if (c.id <= through && match(c)) out.push(this.#tailEntry(c));
      }
    } else {
      for (let i = lowerIndex(entries, from); i < entries.length && out.length < limit; i++) {
        const c = entries[i] as TailEntry;
        if (c.id > through) break;
        if (match(c)) out.push(this.#tailEntry(c));
      }
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Conversations

  async getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    this.#assertOpen();
    // Cached conversations (tombstones included) answer without a row; only the rest are read.
    const wanted = storableIds(ids);
    const missing = wanted.filter((id) => !this.#conversations.has(id));
    const read = this.#byIds(missing, `SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE deleted IS NULL AND id IN`, (row) => this.#cacheConversation(decodeConversation(row)).conversation);
    if (missing.length === wanted.length) return read;
    const found = new Map<Id, Conversation>();
    for (const id of wanted) {
      const cached = this.#conversations.get(id);
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
          ...params, from, through, limit,
        )
        .map((row) => this.#cacheConversation(decodeConversation(row)).conversation);
    return pageParts([{ from: 1, through: Number.MAX_SAFE_INTEGER }], fetch, byId, q, this.#lastSeq);
  }

  /** A conversation including tombstones, from the cache or one indexed row. */
  #conversation(id: Id): StoredConversation | undefined {
    const cached = this.#conversations.get(id);
    if (cached !== undefined) return cached;
    if (!Number.isSafeInteger(id)) return undefined;
    const row = this.#db.first(`SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE id = ?`, id);
    return row === undefined ? undefined : this.#cacheConversation(decodeConversation(row));
  }

  #cacheConversation(stored: StoredConversation): StoredConversation {
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

  /** Fork segments (§2.4) over conversations including tombstones: a deleted source still resolves. */
  #segments(conversationId: Id, cap: Id = Number.MAX_SAFE_INTEGER): Segment[] {
    return forkSegments(conversationId, (id) => this.#conversation(id)?.conversation, cap);
  }

  // -------------------------------------------------------------------------------------------
  // Entries

  async getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    this.#assertOpen();
    const wanted = storableIds(ids);
    const missing = wanted.filter((id) => !this.#tailEntries.has(id));
    const read = this.#byIds(missing, `SELECT ${ENTRY_COLUMNS} FROM entries WHERE id IN`, (row) => this.#decodeEntry(row));
    if (missing.length === wanted.length) return read;
    const found = new Map<Id, Entry>();
    for (const id of wanted) {
      const cached = this.#tailEntries.get(id);
      const entry = cached === undefined ? read.get(id) : this.#tailEntry(cached);
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
      const kind = this.#kindId(q.kind);
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
          part.conversationId, ...params, lo, hi, limit,
        )
        .map((row) => this.#decodeEntry(row));
    // Ids above a segment's tail floor come from the tail; only the range below it is read.
    const fetch = (part: SegmentPart, lo: Id, hi: Id, descending: boolean, limit: number): Entry[] => {
      const tail = this.#tails.get(part.conversationId);
      if (tail === undefined || hi <= tail.floor) return stored(part, lo, hi, descending, limit);
      const cachedFrom = Math.max(lo, tail.floor + 1);
      if (descending) {
        const rows = this.#fromTail(tail, cachedFrom, hi, kindId, q.key, true, limit);
        return rows.length < limit && lo <= tail.floor ? [...rows, ...stored(part, lo, tail.floor, true, limit - rows.length)] : rows;
      }
      const rows = lo <= tail.floor ? stored(part, lo, tail.floor, false, limit) : [];
      return rows.length < limit ? [...rows, ...this.#fromTail(tail, cachedFrom, hi, kindId, q.key, false, limit - rows.length)] : rows;
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
        segment.conversationId, segment.cap,
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
    const key = optionalText(row, "key");
    const byTaskId = optionalInt(row, "by_task");
    const head = optionalInt(row, "head");
    const data = parsed<JsonValue>(row, "data");
    const modelText = optionalText(row, "model");
    const model = modelText === undefined ? undefined : (decodeModel(modelText) as unknown as Entry["model"]);
    const edits = parsed<Entry["edits"]>(row, "edits");
    const entry: Entry = {
      id: int(row, "id"),
      conversationId: int(row, "conversation"),
      kind: this.#kindName(int(row, "kind")),
      ...(byTaskId === undefined ? {} : { byTaskId }),
      ...(key === undefined ? {} : { key }),
      ...(data === undefined ? {} : { data }),
      ...(model === undefined ? {} : { model }),
      ...(head === undefined ? {} : { head }),
      ...(edits === undefined ? {} : { edits }),
    };
    return deepFreeze(entry);
  }

  #kindId(name: string): number | undefined {
    const known = this.#kindIds.get(name);
    if (known !== undefined) return known;
    const row = this.#db.first("SELECT id FROM kinds WHERE name = ?", name);
    if (row === undefined) return undefined;
    this.#rememberKind(name, int(row, "id"));
    return int(row, "id");
  }

  #kindName(id: number): string {
    const known = this.#kindNames.get(id);
    if (known !== undefined) return known;
    const row = this.#db.first("SELECT name FROM kinds WHERE id = ?", id);
    if (row === undefined) throw new StorageError("corrupt", `entry kind ${id} is missing from kinds`);
    this.#rememberKind(text(row, "name"), id);
    return text(row, "name");
  }

  #rememberKind(name: string, id: number): void {
    this.#kindIds.set(name, id);
    this.#kindNames.set(id, name);
  }

  // -------------------------------------------------------------------------------------------
  // Tasks

  async getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    this.#assertOpen();
    const found = new Map<Id, Task>();
    const missing = storableIds(ids).filter((id) => !this.#tasks.has(id));
    const read = this.#byIds(missing, `SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id IN`, decodeTask);
    for (const task of read.values()) this.#cacheTask(task);
    for (const id of storableIds(ids)) {
      const task = this.#tasks.get(id) ?? read.get(id);
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
            ...bound, from, through, limit,
          )
          .map(decodeTask);
      };
    const sources = q.conversationIds === undefined ? [source(undefined)] : storableIds(q.conversationIds).map((conversation) => source(conversation));
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
