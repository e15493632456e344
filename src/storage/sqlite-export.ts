/**
 * A session's SQLite storage (§7.5) rebuilt as §7.3 `CommitBatch` lines in the JSONL main-file format of
 * §7.4 (`{"first":N,"writes":[...]}`), in sequence order with every id kept, so `JsonlStorage.open` opens
 * the lines and a fresh `SqliteStorage` committing them in order assigns the same ids. Used by the session
 * export (src/worker/session/transfer.ts).
 *
 * SQLite keeps current records and rewindable history, not every transition: a patch of a task, an
 * overwritten sticky value, a removed sticky list element and retired scratch leave no row. Their
 * sequences are filled with a harmless write (`value.delete` of the session address `GAP_NAMESPACE`, which
 * no backend stores) so that the lines stay gap-free and every id lands where it was. A task is written
 * at its id with its current state (role `start` when it settled later) and settled at its `settled`
 * sequence; a live task's scratch (an in-flight preview) is not exported.
 *
 * Streaming: rows are read in windows of sequences (`WINDOW`), each by its primary key, so memory holds
 * one window plus one small locator per row of the tables that have no sequence index (current values,
 * compact session-list elements, settlements and conversation deletions), never the records themselves.
 */
import type { Address, Id, JsonValue, MainWrite, Scope } from "./records.js";
import type { SqlHost, SqlRow, SqlValue } from "./sql.js";
import { int, optionalInt, text } from "./sqlite-db.js";
import {
  CONVERSATION_COLUMNS,
  decodeConversation,
  decodeEntry,
  decodeTask,
  ENTRY_COLUMNS,
  TASK_READ_COLUMNS,
} from "./sqlite-rows.js";
import { StorageError } from "./storage.js";
import { highWaterMark } from "./sqlite-write.js";
import { CountedSql } from "./sqlite-db.js";

/** The session address whose deletion fills a sequence SQLite kept no row for. */
export const GAP_NAMESPACE = "pico.export.gap";

/** Sequences read per window. */
const WINDOW = 512;
/** A line closes at a gap-free boundary once it holds this many writes... */
const LINE_WRITES = 256;
/**
 * ...or before a write that would take its writes past this many bytes (UTF-8): a line holds at most 1 MiB of writes,
 * or one write alone when that write is larger, so an importer never parses a line much larger than a row.
 */
export const LINE_BYTES = 1024 * 1024;

const GAP: MainWrite = {
  type: "value.delete",
  addr: { scope: { session: true }, namespace: GAP_NAMESPACE, rewind: false },
};

/** The UTF-8 length of `text` (one pass, no copy). */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code <= 0xdbff) {
      bytes += 2; // a surrogate pair: 4 bytes for 2 UTF-16 units
      i += 1;
    } else bytes += 2;
  }
  return bytes;
}

function keyText(blob: SqlValue | undefined): string {
  if (!(blob instanceof ArrayBuffer)) throw new StorageError("corrupt", "a state key is not a BLOB");
  const bytes = new Uint8Array(blob);
  let out = "";
  for (let i = 0; i + 1 < bytes.length; i += 2)
    out += String.fromCharCode(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  return out;
}

function address(row: SqlRow, scope: Scope, rewind: boolean): Address {
  const keyless = int(row, "keyless") === 1;
  return {
    scope,
    namespace: text(row, "namespace"),
    ...(keyless ? {} : { key: keyText(row["key"]) }),
    rewind,
  };
}

function scopeOf(owner: number): Scope {
  return owner === 0 ? { session: true } : { conversation: owner };
}

function parsed(row: SqlRow, column: string): JsonValue {
  return JSON.parse(text(row, column)) as JsonValue;
}

/**
 * The export's lines (each ending in "\n"), lazily: the caller pulls one at a time. They hold sequences
 * 1..`through` (default: the last committed one); commits after `through` are left out, so a session may
 * keep committing while its export streams (a row a later commit changed is exported as it was at
 * `through`, or as a gap when it no longer says what it was then). A write whose address `omit` names is exported as
 * a gap (what an export does not carry). Lines close at LINE_WRITES writes or LINE_BYTES bytes of writes.
 */
export function* exportLines(
  host: SqlHost,
  through?: Id,
  omit?: (addr: Address) => boolean,
): Generator<string, void, undefined> {
  const db = new CountedSql(host);
  const lastSeq = through ?? highWaterMark(db);
  const kinds = new Map<number, string>();
  for (const row of db.rows("SELECT id, name FROM kinds")) kinds.set(int(row, "id"), text(row, "name"));
  const kindName = (id: number): string => {
    const name = kinds.get(id);
    if (name === undefined) throw new StorageError("corrupt", `unknown entry kind id ${id}`);
    return name;
  };

  // Locators of rows without a sequence index, by sequence.
  const valueRows = new Map<Id, number>(); // seq -> rowid of "values"
  for (const row of db.rows(`SELECT rowid AS r, seq FROM "values"`)) valueRows.set(int(row, "seq"), int(row, "r"));
  const settlements = new Map<Id, Id>(); // settled seq -> task id
  const settledRows = "SELECT id, settled FROM tasks WHERE settled IS NOT NULL AND settled <> id AND settled <= ?";
  for (const row of db.rows(settledRows, lastSeq)) settlements.set(int(row, "settled"), int(row, "id"));
  const deletions = new Map<Id, Id>(); // deleted seq -> conversation id
  for (const row of db.rows(
    "SELECT id, deleted FROM conversations WHERE deleted IS NOT NULL AND deleted <= ?",
    lastSeq,
  ))
    deletions.set(int(row, "deleted"), int(row, "id"));
  const compact = new Map<Id, SqlValue[]>(); // id -> primary key of session_elements
  for (const row of db.rows("SELECT namespace, key, keyless, id FROM session_elements"))
    compact.set(int(row, "id"), [row["namespace"] ?? null, row["key"] ?? null, row["keyless"] ?? null, int(row, "id")]);

  let line: string[] = [];
  let lineBytes = 0;
  let lineFirst = 1;
  /** The line must reach this sequence: a task write's owned conversations are checked at its batch's end. */
  let mustReach = 0;

  for (let lo = 1; lo <= lastSeq; lo += WINDOW) {
    const hi = Math.min(lastSeq, lo + WINDOW - 1);
    const writes = new Map<Id, MainWrite>();
    for (const row of db.rows(`SELECT ${CONVERSATION_COLUMNS} FROM conversations WHERE id BETWEEN ? AND ?`, lo, hi)) {
      const { conversation } = decodeConversation(row);
      writes.set(conversation.id, { type: "createConversation", conversation });
    }
    for (const row of db.rows(`SELECT ${ENTRY_COLUMNS} FROM entries WHERE id BETWEEN ? AND ?`, lo, hi)) {
      const entry = decodeEntry(row, kindName);
      writes.set(entry.id, { type: "entry", entry });
    }
    for (const row of db.rows(`SELECT ${TASK_READ_COLUMNS}, settled FROM tasks WHERE id BETWEEN ? AND ?`, lo, hi)) {
      const task = decodeTask(row);
      const settled = optionalInt(row, "settled");
      // Settled later: created live (its settle is written at `settled`); settled after `through`: live then.
      const written =
        settled === task.id
          ? task
          : settled !== undefined && settled <= lastSeq
            ? { ...task, role: "start" as const }
            : { ...task, role: task.role === "terminal" ? ("inflight" as const) : task.role };
      writes.set(task.id, { type: "task", task: written });
    }
    for (let seq = lo; seq <= hi; seq++) {
      const id = settlements.get(seq);
      if (id === undefined) continue;
      const row = db.first(`SELECT ${TASK_READ_COLUMNS} FROM tasks WHERE id = ?`, id);
      if (row === undefined) throw new StorageError("corrupt", `settled task ${id} has no row`);
      writes.set(seq, { type: "settle", id, role: "terminal", state: decodeTask(row).state });
    }
    for (let seq = lo; seq <= hi; seq++) {
      const id = deletions.get(seq);
      if (id !== undefined) writes.set(seq, { type: "deleteConversation", id });
    }
    const versions = new Set<Id>();
    for (const row of db.rows("SELECT * FROM value_versions WHERE seq BETWEEN ? AND ?", lo, hi)) {
      const seq = int(row, "seq");
      versions.add(seq);
      const addr = address(row, { conversation: int(row, "conversation") }, true);
      writes.set(
        seq,
        row["value"] === null
          ? { type: "value.delete", addr }
          : { type: "value.set", addr, value: parsed(row, "value") },
      );
    }
    for (let seq = lo; seq <= hi; seq++) {
      const rowid = valueRows.get(seq);
      if (rowid === undefined || versions.has(seq)) continue;
      const row = db.first(`SELECT * FROM "values" WHERE rowid = ? AND seq = ?`, rowid, seq);
      if (row === undefined) continue; // set again or deleted since `through`: this version is gone
      writes.set(seq, {
        type: "value.set",
        addr: address(row, scopeOf(int(row, "scope")), false),
        value: parsed(row, "value"),
      });
    }
    for (const row of db.rows("SELECT * FROM list_elements WHERE id BETWEEN ? AND ?", lo, hi)) {
      const addr = address(row, scopeOf(int(row, "scope")), int(row, "rewind") === 1);
      writes.set(int(row, "id"), { type: "list.append", addr, value: parsed(row, "value") });
    }
    for (let seq = lo; seq <= hi; seq++) {
      const key = compact.get(seq);
      if (key === undefined) continue;
      const where = "namespace = ? AND key = ? AND keyless = ? AND id = ?";
      for (const row of db.rows(`SELECT * FROM session_elements WHERE ${where}`, ...key)) {
        writes.set(seq, {
          type: "list.append",
          addr: address(row, { session: true }, false),
          value: parsed(row, "value"),
        });
      }
    }
    for (const row of db.rows("SELECT * FROM list_markers WHERE seq BETWEEN ? AND ?", lo, hi)) {
      const addr = address(row, { conversation: int(row, "conversation") }, true);
      const element = optionalInt(row, "element");
      writes.set(
        int(row, "seq"),
        element === undefined ? { type: "list.clear", addr } : { type: "list.remove", addr, element },
      );
    }

    for (let seq = lo; seq <= hi; seq++) {
      const found = writes.get(seq) ?? GAP;
      const w = omit !== undefined && "addr" in found && omit(found.addr) ? GAP : found;
      const text = JSON.stringify(w);
      const bytes = utf8Length(text);
      // Closed before a write that would take it past LINE_BYTES (unless the line must reach further).
      if (line.length > 0 && lineBytes + bytes > LINE_BYTES && seq - 1 >= mustReach) {
        yield `{"first":${lineFirst},"writes":[${line.join(",")}]}\n`;
        line = [];
        lineBytes = 0;
        lineFirst = seq;
      }
      if (w.type === "task") for (const owned of w.task.owns ?? []) mustReach = Math.max(mustReach, owned);
      line.push(text);
      lineBytes += bytes;
      if (line.length >= LINE_WRITES && seq >= mustReach) {
        yield `{"first":${lineFirst},"writes":[${line.join(",")}]}\n`;
        line = [];
        lineBytes = 0;
        lineFirst = seq + 1;
      }
    }
  }
  if (line.length > 0) yield `{"first":${lineFirst},"writes":[${line.join(",")}]}\n`;
}
