/**
 * The write path of `SqliteStorage` (§7.5): one commit is one `transactionSync`. checkBatch runs first
 * (in sqlite.ts; nothing is written when it throws), then the writes numbered from lastSeq + 1, then the
 * new lastSeq (the commit boundary; see writeBatch for the rows that carry it themselves); anything
 * thrown inside rolls the whole transaction back. The caches (sqlite-cache.ts,
 * sqlite-tails.ts, the state store's in sqlite-state.ts) change only after the transaction committed.
 * Also here: which writes a batch needs no statement for, and the high-water mark open reads back.
 */
import type { CommitBatch, Id, MainWrite, Task, TaskStateBase } from "./records.js";
import { addressKey, type CheckedBatch, deepFreeze, keepsHistory } from "./shared.js";
import { StorageError } from "./storage.js";
import type { SqlRow } from "./sql.js";
import { type CountedSql, int, optionalInt } from "./sqlite-db.js";
import { encodeModel, encodeState } from "./sqlite-codec.js";
import { compactElement, type SqliteState } from "./sqlite-state.js";
import { decodeConversation, decodeTask, ENTRY_COLUMNS, json, TASK_COLUMNS } from "./sqlite-rows.js";
import type { RecordCache } from "./sqlite-cache.js";
import type { EntryTails } from "./sqlite-tails.js";

/** What a commit writes through: the database, the state store and the caches it keeps current. */
export interface WriteTarget {
  readonly db: CountedSql;
  readonly state: SqliteState;
  readonly records: RecordCache;
  readonly tails: EntryTails;
}

/** In-memory changes of one commit, applied only after its transaction committed. */
interface Pending {
  readonly newKinds: Map<string, number>;
  readonly changes: (() => void)[];
  /** Task records as this batch leaves them (a batch may create and patch a task, or patch it twice). */
  readonly tasks: Map<Id, Task | undefined>;
}

/**
 * Which write of a batch carries the commit's last sequence in its row (migration 0006), and whether the
 * batch then needs no last_seq update. Main batch: the last write that inserts an entry, a task or a
 * list_elements row (not an elided write, not a compact session element, migration 0007) carries it (the newest row of
 * its table, read by highWaterMark); a patch leaves it on a
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
    const inserts =
      w.type === "entry" || w.type === "task" || (w.type === "list.append" && !compactElement(w.addr, payloads[i]));
    if (carrier === -1 && inserts) carrier = i;
    if (w.type === "settle") settled.add(w.id);
    if (w.type === "patch" && !settled.has(w.id)) patched = true;
  }
  return { carrier, carried: carrier !== -1 || patched };
}

/**
 * Writes of a batch whose effect on stored current contents a later write of the same batch undoes, so
 * they need no statement (fewer rows written): a sticky or scratch value set or delete followed by another set or
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
export function highWaterMark(db: CountedSql): Id {
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

/**
 * Write a checked, non-empty batch in one transaction and return what publishes its in-memory changes;
 * the caller publishes once it has taken `checked.last` as its lastSeq. When the transaction throws,
 * the state store's staged changes are discarded and nothing is published.
 */
export function writeBatch(target: WriteTarget, batch: CommitBatch, checked: CheckedBatch): () => void {
  const { first, last } = checked;
  const pending: Pending = { newKinds: new Map(), changes: [], tasks: new Map() };
  const elided = elidedWrites(batch, first);
  const marks = markCarriers(batch, elided, checked.payloads);
  try {
    target.db.host.transactionSync(() => {
      batch.writes.forEach((w: MainWrite, i) => {
        if (elided.has(i)) return;
        write(target, w, first + i, checked.payloads[i], pending, i === marks.carrier ? last : undefined, last, first);
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
      const advanced = target.db.run(
        "UPDATE session_metadata SET value = ? WHERE name = 'last_seq' AND value < ?",
        last,
        first,
      );
      if (advanced !== 1)
        throw new StorageError("corrupt", `lastSeq moved under this storage object (expected at most ${first - 1})`);
    });
  } catch (error) {
    target.state.discard();
    throw error;
  }
  return () => {
    for (const [name, id] of pending.newKinds) target.records.rememberKind(name, id);
    for (const change of pending.changes) change();
    for (const [id, task] of pending.tasks) {
      if (task === undefined) target.records.forgetTask(id);
      else target.records.cacheTask(task);
    }
    target.state.publish();
  };
}

/** One write of a batch at `seq`, inside the commit's transaction; its cache changes go to `pending`. */
function write(
  target: WriteTarget,
  w: MainWrite,
  seq: Id,
  payload: string | undefined,
  pending: Pending,
  mark: Id | undefined,
  last: Id,
  first: Id,
): void {
  const { db, state, records, tails } = target;
  const { newKinds, changes, tasks } = pending;
  // `mark` is this commit's last sequence when this write's row carries it (see markCarriers); stored
  // NULL when it equals the row's own id.
  const carried = mark === undefined || mark === seq ? null : mark;
  switch (w.type) {
    case "value.set":
    case "value.delete":
    case "list.append":
    case "list.remove":
    case "list.clear":
      state.write(w, seq, payload, carried);
      return;
    case "createConversation": {
      const c = w.conversation;
      db.run(
        "INSERT INTO conversations (id, parent, parent_at, owner, deleted) VALUES (?, ?, ?, ?, NULL)",
        seq,
        c.parent?.conversationId ?? null,
        c.parent?.at ?? null,
        c.owner ?? null,
      );
      // Its own entries all follow its creation: every one will be committed here.
      const row: SqlRow = {
        id: seq,
        parent: c.parent?.conversationId ?? null,
        parent_at: c.parent?.at ?? null,
        owner: c.owner ?? null,
        deleted: null,
      };
      changes.push(() => {
        records.cacheConversation(decodeConversation(row));
        tails.tail(seq, seq);
      });
      return;
    }
    case "deleteConversation":
      // A tombstone: hidden from lookups and scans, still resolvable as a fork ancestor.
      db.run("UPDATE conversations SET deleted = ? WHERE id = ?", seq, w.id);
      changes.push(() => {
        const cached = records.cachedConversation(w.id);
        if (cached !== undefined) cached.deleted = true;
      });
      return;
    case "entry": {
      const e = w.entry;
      let kind = records.knownKindId(e.kind) ?? newKinds.get(e.kind);
      if (kind === undefined) {
        const row = db.first("INSERT INTO kinds (name) VALUES (?) RETURNING id", e.kind);
        if (row === undefined) throw new StorageError("corrupt", `kind ${e.kind} was not stored`);
        kind = int(row, "id");
        newKinds.set(e.kind, kind);
      }
      const row: SqlRow = {
        id: seq,
        conversation: e.conversationId,
        kind,
        key: e.key ?? null,
        by_task: e.byTaskId ?? null,
        head: e.head ?? null,
        data: json(e.data),
        model: e.model === undefined ? null : encodeModel(e.model, JSON.stringify(e.model)),
        edits: json(e.edits),
      };
      db.run(
        `INSERT INTO entries (${ENTRY_COLUMNS}, last) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        row["id"] as Id,
        row["conversation"] as Id,
        kind,
        row["key"] as string | null,
        row["by_task"] as Id | null,
        row["head"] as Id | null,
        row["data"] as string | null,
        row["model"] as string | null,
        row["edits"] as string | null,
        carried,
      );
      // Every earlier entry of this batch was published before it; none of the conversation's entries
      // at or above the batch's first sequence was committed before this batch.
      const kindId = kind;
      changes.push(() => tails.append(tails.tail(e.conversationId, first - 1), seq, kindId, e.key, row));
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
        seq,
        t.conversationId,
        t.kind,
        t.role,
        t.background === true ? 1 : 0,
        t.turn === true ? 1 : 0,
        t.abort === true ? 1 : 0,
        after,
        owns,
        stored,
        t.state.status,
        t.role === "terminal" ? seq : null,
        carried,
      );
      const record = decodeTask({
        id: seq,
        conversation: t.conversationId,
        kind: t.kind,
        role: t.role,
        background: t.background === true ? 1 : 0,
        turn: t.turn === true ? 1 : 0,
        abort: t.abort === true ? 1 : 0,
        after,
        owns,
        state,
      });
      tasks.set(seq, record);
      // Every scratch write of a task this object created is committed here (the list cache).
      if (t.role !== "terminal") changes.push(() => target.state.createdTask(seq));
      return;
    }
    case "patch": {
      // The abort mark is never cleared by a later write (§6.3); `owns`, when present, replaces.
      // No indexed column changes (a patch never settles), so this writes the one row. `last` is the
      // commit's last sequence: the task stays live, so open finds it through tasks_live.
      const cached = tasks.has(w.id) ? tasks.get(w.id) : records.cachedTask(w.id);
      db.run(
        "UPDATE tasks SET role = ?, status = ?, state = ?, abort = max(abort, ?), owns = coalesce(?, owns), last = ? WHERE id = ?",
        w.role,
        w.state.status,
        encodeState(payload as string, w.state.status),
        w.abort === true ? 1 : 0,
        json(w.owns),
        last,
        w.id,
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
      db.run(
        "UPDATE tasks SET role = 'terminal', status = ?, state = ?, settled = ? WHERE id = ?",
        w.state.status,
        encodeState(payload as string, w.state.status),
        seq,
        w.id,
      );
      state.retireScratch(w.id);
      changes.push(() => state.settledTask(w.id));
      const cached = tasks.has(w.id) ? tasks.get(w.id) : records.cachedTask(w.id);
      if (cached === undefined) {
        tasks.set(w.id, undefined);
        return;
      }
      const record: Task = deepFreeze({
        ...cached,
        role: "terminal",
        state: JSON.parse(payload as string) as TaskStateBase,
      });
      tasks.set(w.id, record);
      return;
    }
    default: {
      const _: never = w;
      throw new StorageError("malformed_batch", `unknown write ${String(_)}`);
    }
  }
}
