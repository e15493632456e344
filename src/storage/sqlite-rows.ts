/**
 * Rows of the conversations, entries and tasks tables of `SqliteStorage` (§7.5): the column lists its
 * statements select and insert, and the decoders that turn a row into a frozen record. Used by the
 * storage's reads, its caches (sqlite-cache.ts, sqlite-tails.ts) and its write path (sqlite-write.ts).
 */
import type { Conversation, Entry, Id, JsonValue, Task, TaskRole } from "./records.js";
import { deepFreeze } from "./shared.js";
import { StorageError } from "./storage.js";
import type { SqlRow } from "./sql.js";
import { int, optionalInt, optionalText, text } from "./sqlite-db.js";
import { decodeModel, decodeState } from "./sqlite-codec.js";

export const ENTRY_COLUMNS = "id, conversation, kind, key, by_task, head, data, model, edits";
export const TASK_COLUMNS = "id, conversation, kind, role, background, turn, abort, after, owns, state";
/** What a task read selects: the state text plus the status column it may have been stored without. */
export const TASK_READ_COLUMNS = `${TASK_COLUMNS}, status`;
export const CONVERSATION_COLUMNS = "id, parent, parent_at, owner, deleted";

/** A conversation as stored: deleted ones stay as tombstones that still resolve as fork ancestors. */
export interface StoredConversation {
  readonly conversation: Conversation;
  deleted: boolean;
}

export const byId = (item: { readonly id: Id }): Id => item.id;

export function json(value: unknown): string | null {
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

export function decodeTask(row: SqlRow): Task {
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

export function decodeConversation(row: SqlRow): StoredConversation {
  const parent = optionalInt(row, "parent");
  const owner = optionalInt(row, "owner");
  const conversation: Conversation = {
    id: int(row, "id"),
    ...(parent === undefined ? {} : { parent: { conversationId: parent, at: int(row, "parent_at") } }),
    ...(owner === undefined ? {} : { owner }),
  };
  return { conversation: deepFreeze(conversation), deleted: row["deleted"] !== null };
}

/** An entry row; `kindName` turns the stored kind id into its name (the kinds table). */
export function decodeEntry(row: SqlRow, kindName: (id: number) => string): Entry {
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
    kind: kindName(int(row, "kind")),
    ...(byTaskId === undefined ? {} : { byTaskId }),
    ...(key === undefined ? {} : { key }),
    ...(data === undefined ? {} : { data }),
    ...(model === undefined ? {} : { model }),
    ...(head === undefined ? {} : { head }),
    ...(edits === undefined ? {} : { edits }),
  };
  return deepFreeze(entry);
}
