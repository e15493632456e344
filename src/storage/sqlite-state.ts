/**
 * Values and lists of `SqliteStorage` (§4, §7.5): writes of state batches and the value/list reads.
 * Session, sticky conversation and scratch state keep only current rows; rewindable conversation state
 * also keeps every version (value_versions, NULL = tombstone) and every append with clear/remove markers
 * (list_elements, list_markers), and reads walk the fork segments nearest first (§4.4), one indexed
 * LIMIT query per segment: cost is fork depth plus the page, never unrelated history.
 *
 * One concept over 400 lines: the SQLite state store. Its writes, reads and caches share one table
 * layout per scope (current rows, versions, markers), so they stay in one file.
 */
import type {
  Address,
  Element,
  Id,
  JsonValue,
  ListQuery,
  Page,
  Scope,
  StateWrite,
  ValueQuery,
  Version,
} from "./records.js";
import type { Segment } from "./shared.js";
import {
  addressKey,
  frozenCopy,
  historicalReadError,
  keepsHistory,
  MAX_PAGE_LIMIT,
  pageOf,
  scopeId,
} from "./shared.js";
import { StorageError } from "./storage.js";
import { checkPosition, type CountedSql, int, text } from "./sqlite-db.js";
import { pageMerged, pageParts, type Part } from "./sqlite-paging.js";
import type { SqlRow, SqlValue } from "./sql.js";

/**
 * A key as the BLOB of its UTF-16BE code units: bytewise BLOB order is then JavaScript's string order,
 * which BINARY-collated UTF-8 text is not outside the Basic Multilingual Plane (scanValues orders keys).
 */
function keyBlob(key: string): ArrayBuffer {
  const bytes = new Uint8Array(key.length * 2);
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i);
    bytes[2 * i] = unit >> 8;
    bytes[2 * i + 1] = unit & 0xff;
  }
  return bytes.buffer;
}

function keyText(blob: SqlValue | undefined): string {
  if (!(blob instanceof ArrayBuffer)) throw new StorageError("corrupt", "a state key is not a BLOB");
  const bytes = new Uint8Array(blob);
  const units: number[] = [];
  for (let i = 0; i + 1 < bytes.length; i += 2) units.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  let text = "";
  for (let i = 0; i < units.length; i += 4096) text += String.fromCharCode(...units.slice(i, i + 4096));
  return text;
}

/** The address columns (namespace, key, keyless) shared by every state table. */
function addressColumns(addr: Address): [string, ArrayBuffer, number] {
  return [addr.namespace, keyBlob(addr.key ?? ""), addr.key === undefined ? 1 : 0];
}

const ADDRESS = "namespace = ? AND key = ? AND keyless = ?";

function version(row: SqlRow): Version<JsonValue> {
  return Object.freeze({ seq: int(row, "seq"), value: frozenCopy<JsonValue>(text(row, "value")) });
}

function element(row: SqlRow): Element<JsonValue> {
  return Object.freeze({ id: int(row, "id"), value: frozenCopy<JsonValue>(text(row, "value")) });
}

const elementId = (e: Element<JsonValue>): Id => e.id;

interface SegmentPart extends Part {
  readonly conversationId: Id;
}

/**
 * The largest session-list element (UTF-8 bytes of namespace, key and JSON together) kept in the
 * clustered session_elements table (migration 0007). A WITHOUT ROWID row is a cell of an index b-tree,
 * whose cells keep at most ~1,000 bytes on a 4 KB page before spilling to overflow pages (docs/design.md);
 * this leaves room for the key BLOB's two bytes per code unit and the record header.
 */
const COMPACT_ELEMENT_BYTES = 768;

function utf8Length(s: string): number {
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i);
    // A surrogate half counts 2: a pair is one 4-byte code point, a lone half encodes as U+FFFD (3).
    bytes += unit < 0x80 ? 1 : unit < 0x800 ? 2 : unit >= 0xd800 && unit <= 0xdfff ? 2 : 3;
  }
  return bytes;
}

/**
 * Whether an append's element goes to session_elements (one billed row) rather than list_elements (row
 * and index, two): a session-list element small enough not to spill (migration 0007). Such a row never
 * carries the commit mark.
 */
export function compactElement(addr: Address, payload: string | undefined): boolean {
  if (!("session" in addr.scope) || payload === undefined) return false;
  return utf8Length(addr.namespace) + 2 * (addr.key ?? "").length + utf8Length(payload) <= COMPACT_ELEMENT_BYTES;
}

/** Current values kept in memory (write-through); older ones are re-read. */
const VALUE_CACHE = 4096;
/** Whole lists kept in memory (write-through) only while this short; a longer list is re-read. */
const LIST_CACHE_ELEMENTS = 64;
/** Whole lists kept in memory at once; the one touched longest ago is dropped first. */
const LIST_CACHE = 1024;

export class SqliteState {
  readonly #db: CountedSql;
  readonly #segments: (conversationId: Id, cap: Id) => Segment[];
  /**
   * Write-through cache of current value reads (`getValue` without `at`) of session and conversation
   * addresses, keyed like the rows they mirror: `s` + address for the current row ("values"), `h` +
   * address for the newest own version of a rewindable address (value_versions). null = known absent.
   * The object is the only writer of its database, so only its own commits change them; a fresh object
   * starts empty. Changes of a commit are staged and published after it commits.
   */
  readonly #values = new Map<string, Version<JsonValue> | null>();
  #staged: [string, Version<JsonValue> | null][] = [];
  /**
   * Write-through cache of whole short lists without history (sticky conversation state and session
   * state), by address key: every element, ascending. A list enters when a read returned all of it and
   * leaves when it outgrows LIST_CACHE_ELEMENTS. Staged like #values.
   */
  readonly #lists = new Map<string, Element<JsonValue>[]>();
  /**
   * The scratch lists of tasks this object created, by task and address key: all of their writes were
   * committed here, so a list not in a task's map is empty. A task leaves when it settles (its scratch
   * is retired) or when one of its lists outgrows LIST_CACHE_ELEMENTS (then its scratch is re-read).
   */
  readonly #scratch = new Map<Id, Map<string, Element<JsonValue>[]>>();
  /**
   * Tasks this object created that have had no scratch write since (bounded like #scratch): their
   * settlement has no scratch rows to retire and runs no DELETE (each one read a row). A scratch write
   * removes its task at once, before its commit is known to succeed, so a rollback errs toward deleting.
   */
  readonly #noScratch = new Set<Id>();
  #stagedLists: (() => void)[] = [];

  constructor(db: CountedSql, segments: (conversationId: Id, cap: Id) => Segment[]) {
    this.#db = db;
    this.#segments = segments;
  }

  /**
   * Persist one checked state write at `seq`; `payload` is its JSON text from checkBatch. `last`: the
   * commit's last sequence when an appended list element carries it (migration 0006), else null.
   */
  write(w: StateWrite, seq: Id, payload: string | undefined, last: Id | null): void {
    const db = this.#db;
    const address = addressColumns(w.addr);
    const scope = w.addr.scope;
    if ("scratch" in scope) {
      const task = scope.scratch;
      this.#noScratch.delete(task);
      switch (w.type) {
        case "value.set":
          db.run(
            `INSERT INTO scratch (task, namespace, key, keyless, element, seq, value) VALUES (?, ?, ?, ?, 0, ?, ?)
             ON CONFLICT (task, namespace, key, keyless, element) DO UPDATE SET seq = excluded.seq, value = excluded.value`,
            task,
            ...address,
            seq,
            payload as string,
          );
          return;
        case "value.delete":
          db.run(`DELETE FROM scratch WHERE task = ? AND ${ADDRESS} AND element = 0`, task, ...address);
          return;
        case "list.append":
          db.run(
            "INSERT INTO scratch (task, namespace, key, keyless, element, seq, value) VALUES (?, ?, ?, ?, ?, ?, ?)",
            task,
            ...address,
            seq,
            seq,
            payload as string,
          );
          this.#stageList(w.addr, seq, payload);
          return;
        case "list.remove":
          db.run(`DELETE FROM scratch WHERE task = ? AND ${ADDRESS} AND element = ?`, task, ...address, w.element);
          this.#stageList(w.addr, w.element, undefined);
          return;
        case "list.clear":
          db.run(`DELETE FROM scratch WHERE task = ? AND ${ADDRESS} AND element > 0`, task, ...address);
          this.#stageList(w.addr, undefined, undefined);
          return;
        default: {
          const _: never = w;
          throw new StorageError("malformed_batch", `unknown state write ${String(_)}`);
        }
      }
    }
    const owner = scopeId(scope);
    const history = keepsHistory(w.addr);
    switch (w.type) {
      case "value.set": {
        const current = Object.freeze({ seq, value: frozenCopy<JsonValue>(payload as string) });
        const key = addressKey(w.addr);
        this.#staged.push([`s${key}`, current]);
        if (history) this.#staged.push([`h${key}`, current]);
        db.run(
          `INSERT INTO "values" (scope, namespace, key, keyless, seq, value) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (scope, namespace, key, keyless) DO UPDATE SET seq = excluded.seq, value = excluded.value`,
          owner,
          ...address,
          seq,
          payload as string,
        );
        if (history) {
          db.run(
            "INSERT INTO value_versions (seq, conversation, namespace, key, keyless, value) VALUES (?, ?, ?, ?, ?, ?)",
            seq,
            owner,
            ...address,
            payload as string,
          );
        }
        return;
      }
      case "value.delete": {
        const key = addressKey(w.addr);
        this.#staged.push([`s${key}`, null]);
        if (history) this.#staged.push([`h${key}`, null]);
        db.run(`DELETE FROM "values" WHERE scope = ? AND ${ADDRESS}`, owner, ...address);
        // Deleting a rewindable value records absence (§4.2): a fork at an earlier entry still sees it.
        if (history) {
          db.run(
            "INSERT INTO value_versions (seq, conversation, namespace, key, keyless, value) VALUES (?, ?, ?, ?, ?, NULL)",
            seq,
            owner,
            ...address,
          );
        }
        return;
      }
      case "list.append":
        if (!history) this.#stageList(w.addr, seq, payload);
        if (compactElement(w.addr, payload)) {
          db.run(
            "INSERT INTO session_elements (namespace, key, keyless, id, value) VALUES (?, ?, ?, ?, ?)",
            ...address,
            seq,
            payload as string,
          );
          return;
        }
        db.run(
          "INSERT INTO list_elements (id, scope, namespace, key, keyless, rewind, value, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          seq,
          owner,
          ...address,
          history ? 1 : 0,
          payload as string,
          last,
        );
        return;
      case "list.remove":
        if (history) {
          db.run(
            "INSERT INTO list_markers (seq, conversation, namespace, key, keyless, element) VALUES (?, ?, ?, ?, ?, ?)",
            seq,
            owner,
            ...address,
            w.element,
          );
        } else {
          // Sticky state exposes only current contents, so the element is discarded physically (§4.2).
          // A session-list element is in one of two tables (migration 0007): the compact one first.
          this.#stageList(w.addr, w.element, undefined);
          if (
            "session" in scope &&
            db.run(`DELETE FROM session_elements WHERE ${ADDRESS} AND id = ?`, ...address, w.element) > 0
          )
            return;
          db.run(
            `DELETE FROM list_elements WHERE id = ? AND scope = ? AND ${ADDRESS} AND rewind = 0`,
            w.element,
            owner,
            ...address,
          );
        }
        return;
      case "list.clear":
        if (history) {
          db.run(
            "INSERT INTO list_markers (seq, conversation, namespace, key, keyless, element) VALUES (?, ?, ?, ?, ?, NULL)",
            seq,
            owner,
            ...address,
          );
        } else {
          if ("session" in scope) db.run(`DELETE FROM session_elements WHERE ${ADDRESS}`, ...address);
          db.run(`DELETE FROM list_elements WHERE scope = ? AND ${ADDRESS} AND rewind = 0`, owner, ...address);
          this.#stageList(w.addr, undefined, undefined);
        }
        return;
      default: {
        const _: never = w;
        throw new StorageError("malformed_batch", `unknown state write ${String(_)}`);
      }
    }
  }

  /** Publish the cache changes of the commit that just committed. */
  publish(): void {
    for (const [key, version] of this.#staged) this.#remember(key, version);
    this.#staged = [];
    for (const change of this.#stagedLists) change();
    this.#stagedLists = [];
  }

  /** Drop the cache changes of a commit that rolled back. */
  discard(): void {
    this.#staged = [];
    this.#stagedLists = [];
  }

  /**
   * Stage a list write for the list caches: an append of `element` (its JSON text `payload`), a remove
   * of `element` (no payload), or a clear (neither). Applied only to lists the caches hold.
   */
  #stageList(addr: Address, element: Id | undefined, payload: string | undefined): void {
    const key = addressKey(addr);
    const scope = addr.scope;
    this.#stagedLists.push(() => {
      const lists = "scratch" in scope ? this.#scratch.get(scope.scratch) : this.#lists;
      if (lists === undefined) return;
      let list = lists.get(key) ?? ("scratch" in scope ? [] : undefined);
      if (list === undefined) return;
      if (element === undefined) list = [];
      else if (payload === undefined) list = list.filter((e) => e.id !== element);
      else list = [...list, Object.freeze({ id: element, value: frozenCopy<JsonValue>(payload) })];
      if (list.length <= LIST_CACHE_ELEMENTS) this.#rememberList(lists, key, list);
      else if ("scratch" in scope) this.#scratch.delete(scope.scratch);
      else this.#lists.delete(key);
    });
  }

  #rememberList(lists: Map<string, Element<JsonValue>[]>, key: string, list: Element<JsonValue>[]): void {
    lists.delete(key);
    if (lists === this.#lists && lists.size >= LIST_CACHE) {
      const oldest = lists.keys().next();
      if (oldest.done !== true) lists.delete(oldest.value);
    }
    lists.set(key, list);
  }

  /** A task this object just created (published with its commit): its scratch is empty. */
  createdTask(task: Id): void {
    if (this.#scratch.size >= LIST_CACHE) {
      const oldest = this.#scratch.keys().next();
      if (oldest.done !== true) this.#scratch.delete(oldest.value);
    }
    this.#scratch.set(task, new Map());
    if (this.#noScratch.size >= LIST_CACHE) {
      const oldest = this.#noScratch.values().next();
      if (oldest.done !== true) this.#noScratch.delete(oldest.value);
    }
    this.#noScratch.add(task);
  }

  /** A settled task's scratch is gone (published with the settling commit). */
  settledTask(task: Id): void {
    this.#scratch.delete(task);
    this.#noScratch.delete(task);
  }

  #remember(key: string, version: Version<JsonValue> | null): void {
    if (!this.#values.has(key) && this.#values.size >= VALUE_CACHE) {
      const oldest = this.#values.keys().next();
      if (oldest.done !== true) this.#values.delete(oldest.value);
    }
    this.#values.set(key, version);
  }

  /**
   * Settlement retires the task's scratch in the same transaction (§4.6, §7.5); a task this object
   * created and that never wrote scratch has none, so nothing runs.
   */
  retireScratch(task: Id): void {
    if (this.#noScratch.has(task)) return;
    this.#db.run("DELETE FROM scratch WHERE task = ?", task);
  }

  getValue(addr: Address, at: Id | undefined): Version<JsonValue> | undefined {
    checkPosition("at", at);
    const address = addressColumns(addr);
    const scope = addr.scope;
    if (!keepsHistory(addr)) {
      if (at !== undefined) throw historicalReadError(addr);
      if ("scratch" in scope) {
        const row = this.#db.first(
          `SELECT seq, value FROM scratch WHERE task = ? AND ${ADDRESS} AND element = 0`,
          scope.scratch,
          ...address,
        );
        return row === undefined ? undefined : version(row);
      }
      const key = `s${addressKey(addr)}`;
      const cached = this.#values.get(key);
      if (cached !== undefined) return cached ?? undefined;
      const row = this.#db.first(
        `SELECT seq, value FROM "values" WHERE scope = ? AND ${ADDRESS}`,
        scopeId(scope),
        ...address,
      );
      const found = row === undefined ? null : version(row);
      this.#remember(key, found);
      return found ?? undefined;
    }
    if (at === undefined) {
      const key = `h${addressKey(addr)}`;
      const cached = this.#values.get(key);
      if (cached !== undefined) return cached ?? undefined;
      const found = this.#versionAt(addr, address, Number.MAX_SAFE_INTEGER);
      this.#remember(key, found ?? null);
      return found;
    }
    return this.#versionAt(addr, address, at);
  }

  #versionAt(addr: Address, address: [string, ArrayBuffer, number], at: Id): Version<JsonValue> | undefined {
    const scope = addr.scope;
    // §4.4: nearest segment first; the newest local version (set or tombstone) at or below the cap wins.
    for (const segment of this.#segments(scopeId(scope), at)) {
      if (segment.cap <= segment.conversationId) continue; // its own versions all follow its creation
      const row = this.#db.first(
        `SELECT seq, value FROM value_versions WHERE conversation = ? AND ${ADDRESS} AND seq <= ? ORDER BY seq DESC LIMIT 1`,
        segment.conversationId,
        ...address,
        segment.cap,
      );
      if (row !== undefined) return row["value"] === null ? undefined : version(row);
    }
    return undefined;
  }

  scanValues(q: ValueQuery, readAt: Id): Page<{ key: string; version: Version<JsonValue> }> {
    if (!Number.isSafeInteger(q.limit) || q.limit < 1 || q.limit > MAX_PAGE_LIMIT) {
      throw new StorageError(
        "bad_query",
        `limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got ${String(q.limit)}`,
      );
    }
    if (q.after !== undefined && typeof q.after !== "string")
      throw new StorageError("bad_query", "after must be a key string");
    const scope: Scope = q.scope;
    const after = q.after === undefined ? "" : "AND key > ?";
    const tail: SqlValue[] = q.after === undefined ? [q.limit] : [keyBlob(q.after), q.limit];
    const rows =
      "scratch" in scope
        ? this.#db.rows(
            `SELECT key, seq, value FROM scratch WHERE task = ? AND namespace = ? AND element = 0 ${after} ORDER BY key, keyless LIMIT ?`,
            scope.scratch,
            q.namespace,
            ...tail,
          )
        : this.#db.rows(
            `SELECT key, seq, value FROM "values" WHERE scope = ? AND namespace = ? ${after} ORDER BY key, keyless LIMIT ?`,
            scopeId(scope),
            q.namespace,
            ...tail,
          );
    return { items: rows.map((row) => ({ key: keyText(row["key"]), version: version(row) })), readAt };
  }

  readList(addr: Address, q: ListQuery, readAt: Id): Page<Element<JsonValue>> {
    checkPosition("at", q.at);
    const cursor = { after: q.after, before: q.before, limit: q.limit };
    const address = addressColumns(addr);
    const scope = addr.scope;
    const whole: Part[] = [{ from: 1, through: Number.MAX_SAFE_INTEGER }];
    if (!keepsHistory(addr)) {
      if (q.at !== undefined) throw historicalReadError(addr);
      const key = addressKey(addr);
      const lists = "scratch" in scope ? this.#scratch.get(scope.scratch) : this.#lists;
      const cached = lists === undefined ? undefined : (lists.get(key) ?? ("scratch" in scope ? [] : undefined));
      if (cached !== undefined) return pageOf(cached, elementId, cursor, readAt);
      if ("scratch" in scope) {
        const fetch = (_: Part, from: Id, through: Id, descending: boolean, limit: number) =>
          this.#db
            .rows(
              `SELECT element AS id, value FROM scratch WHERE task = ? AND ${ADDRESS} AND element BETWEEN ? AND ?
               ORDER BY element ${descending ? "DESC" : "ASC"} LIMIT ?`,
              scope.scratch,
              ...address,
              from,
              through,
              limit,
            )
            .map(element);
        return pageParts(whole, fetch, elementId, cursor, readAt);
      }
      const rows = (from: Id, through: Id, descending: boolean, limit: number) =>
        this.#db
          .rows(
            `SELECT id, value FROM list_elements WHERE scope = ? AND ${ADDRESS} AND rewind = 0 AND id BETWEEN ? AND ?
             ORDER BY id ${descending ? "DESC" : "ASC"} LIMIT ?`,
            scopeId(scope),
            ...address,
            from,
            through,
            limit,
          )
          .map(element);
      const compact = (from: Id, through: Id, descending: boolean, limit: number) =>
        this.#db
          .rows(
            `SELECT id, value FROM session_elements WHERE ${ADDRESS} AND id BETWEEN ? AND ?
             ORDER BY id ${descending ? "DESC" : "ASC"} LIMIT ?`,
            ...address,
            from,
            through,
            limit,
          )
          .map(element);
      // A session list's elements are in two tables (migration 0007): two ordered ranges merged by id.
      const page =
        "session" in scope
          ? pageMerged([compact, rows], elementId, cursor, readAt)
          : pageParts(
              whole,
              (_: Part, from, through, descending, limit) => rows(from, through, descending, limit),
              elementId,
              cursor,
              readAt,
            );
      // A first page that holds the whole list: the list is known, and later reads come from memory.
      if (
        q.after === undefined &&
        q.before === undefined &&
        page.next === undefined &&
        page.items.length <= LIST_CACHE_ELEMENTS
      ) {
        this.#rememberList(this.#lists, key, [...page.items]);
      }
      return page;
    }

    const segments = this.#segments(scopeId(scope), q.at ?? Number.MAX_SAFE_INTEGER);
    // The newest visible clear hides every element below it, inherited ones included. Segments' visible
    // ranges are disjoint and descending, so the first clear found (nearest segment first) is the newest.
    let cleared = 0;
    for (const segment of segments) {
      if (segment.cap <= segment.conversationId) continue;
      const row = this.#db.first(
        `SELECT seq FROM list_markers INDEXED BY list_clears
         WHERE conversation = ? AND ${ADDRESS} AND element IS NULL AND seq <= ? ORDER BY seq DESC LIMIT 1`,
        segment.conversationId,
        ...address,
        segment.cap,
      );
      if (row !== undefined) {
        cleared = int(row, "seq");
        break;
      }
    }
    // A remove marker hides its element when the marker is visible in its own segment (seq <= that
    // segment's cap). The caps are inlined as integer literals (validated safe integers from storage or
    // checkPosition), so a deep fork chain never runs into the bound-parameter limit.
    const caps = segments.map((s) => `WHEN ${s.conversationId} THEN ${s.cap}`).join(" ");
    const parts: SegmentPart[] = segments
      .map((s) => ({ conversationId: s.conversationId, from: Math.max(s.conversationId, cleared) + 1, through: s.cap }))
      .reverse();
    const fetch = (part: SegmentPart, from: Id, through: Id, descending: boolean, limit: number) =>
      this.#db
        .rows(
          `SELECT e.id, e.value FROM list_elements e
           WHERE e.scope = ? AND e.namespace = ? AND e.key = ? AND e.keyless = ? AND e.rewind = 1 AND e.id BETWEEN ? AND ?
             AND NOT EXISTS (
               SELECT 1 FROM list_markers m INDEXED BY list_removes
               WHERE m.namespace = e.namespace AND m.key = e.key AND m.keyless = e.keyless AND m.element = e.id
                 AND m.seq <= CASE m.conversation ${caps} ELSE 0 END)
           ORDER BY e.id ${descending ? "DESC" : "ASC"} LIMIT ?`,
          part.conversationId,
          ...address,
          from,
          through,
          limit,
        )
        .map(element);
    return pageParts(parts, fetch, elementId, cursor, readAt);
  }
}
