/**
 * Pieces every backend shares so that they agree by construction: the canonical address key, fork
 * segments (§2.4, §4.4), paging over sorted ids (§7.2) and the structural batch check (§7.3).
 *
 * One concept over 400 lines: the rules all backends must agree on. Most of the length is checkBatch,
 * the single structural check of a batch.
 */
import type {
  Address,
  CommitBatch,
  Conversation,
  Cursor,
  Id,
  JsonValue,
  MainWrite,
  Page,
  Scope,
  StateWrite,
  TaskRole,
} from "./records.js";
import { StorageError } from "./storage.js";

/** Largest JSON payload (entry, task state, value, list element) any backend accepts, in UTF-8 bytes.
 * Durable Object SQLite refuses rows over 2 MB; the headroom covers the row's other columns. */
export const MAX_PAYLOAD_BYTES = 1_900_000;

/** Largest page any scan returns. */
export const MAX_PAGE_LIMIT = 1000;

// ---------------------------------------------------------------------------------------------
// Addresses

export type ScopeTag = "session" | "conversation" | "scratch";

export function scopeTag(scope: Scope): ScopeTag {
  if ("session" in scope) return "session";
  if ("conversation" in scope) return "conversation";
  return "scratch";
}

/** The scope's owner id: the conversation or task id, 0 for the session. */
export function scopeId(scope: Scope): Id {
  if ("conversation" in scope) return scope.conversation;
  if ("scratch" in scope) return scope.scratch;
  return 0;
}

/** One canonical string per (scope, namespace, key); the rewind policy is not part of identity. */
export function addressKey(addr: Address): string {
  return JSON.stringify([scopeTag(addr.scope), scopeId(addr.scope), addr.namespace, addr.key ?? null]);
}

/** Rewindable conversation state keeps history (§4.1); everything else exposes its current contents. */
export function keepsHistory(addr: Address): boolean {
  return "conversation" in addr.scope && addr.rewind;
}

export function historicalReadError(addr: Address): StorageError {
  return new StorageError(
    "historical_read",
    `historical read of ${scopeTag(addr.scope)} address ${addr.namespace}${addr.key === undefined ? "" : `/${addr.key}`}: only rewindable conversation state has history`,
  );
}

// ---------------------------------------------------------------------------------------------
// Forks

/** One conversation of a fork chain and the last sequence visible from the chain's start. */
export interface Segment {
  readonly conversationId: Id;
  readonly cap: Id;
}

/**
 * The fork chain of a conversation, nearest first: itself (capped at `cap`), then its parent capped at
 * the fork point, and so on. Visible objects of the logical conversation are each segment's own objects
 * with sequence <= the segment's cap; segments' visible ranges are disjoint and ordered (older segments
 * hold lower ids), because a conversation's own objects all follow its creation.
 */
export function forkSegments(
  id: Id,
  lookup: (id: Id) => Conversation | undefined,
  cap: Id = Number.MAX_SAFE_INTEGER,
): Segment[] {
  const segments: Segment[] = [];
  let current: Id | undefined = id;
  let limit = cap;
  while (current !== undefined) {
    const conversation = lookup(current);
    if (conversation === undefined) {
      if (segments.length === 0) throw new StorageError("bad_query", `unknown conversation ${id}`);
      throw new StorageError("corrupt", `conversation ${current} missing from the fork chain of ${id}`);
    }
    segments.push({ conversationId: current, cap: limit });
    if (conversation.parent === undefined) break;
    limit = Math.min(limit, conversation.parent.at);
    current = conversation.parent.conversationId;
  }
  return segments;
}

// ---------------------------------------------------------------------------------------------
// Paging

export function checkCursor(cursor: Cursor): void {
  const { limit, after, before } = cursor;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
    throw new StorageError("bad_query", `limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got ${String(limit)}`);
  }
  if (after !== undefined && !(Number.isSafeInteger(after) && after >= 0)) {
    throw new StorageError("bad_query", `after must be a non-negative integer, got ${String(after)}`);
  }
  if (before !== undefined && !(Number.isSafeInteger(before) && before >= 0)) {
    throw new StorageError("bad_query", `before must be a non-negative integer, got ${String(before)}`);
  }
}

/** True when the cursor asks for the newest items below `before` (see `Cursor`). */
export function pagesBackward(cursor: Cursor): boolean {
  return cursor.before !== undefined && cursor.after === undefined;
}

/**
 * Page over items already filtered and sorted ascending by id. `idOf` gives an item's cursor id.
 * Used by the in-memory backends; SQLite builds the same pages with indexed LIMIT queries.
 */
export function pageOf<T>(sorted: readonly T[], idOf: (item: T) => Id, cursor: Cursor, readAt: Id): Page<T> {
  checkCursor(cursor);
  const lo = cursor.after ?? -1;
  const hi = cursor.before ?? Number.MAX_SAFE_INTEGER;
  const start = lowerBound(sorted, idOf, lo + 1);
  const end = lowerBound(sorted, idOf, hi);
  if (pagesBackward(cursor)) {
    const first = Math.max(start, end - cursor.limit);
    const items = sorted.slice(first, end);
    const head = items[0];
    return first > start && head !== undefined ? { items, next: idOf(head), readAt } : { items, readAt };
  }
  const last = Math.min(end, start + cursor.limit);
  const items = sorted.slice(start, last);
  const tail = items[items.length - 1];
  return last < end && tail !== undefined ? { items, next: idOf(tail), readAt } : { items, readAt };
}

/** First index whose id is >= `id` in an ascending array. */
export function lowerBound<T>(sorted: readonly T[], idOf: (item: T) => Id, id: Id): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const item = sorted[mid] as T;
    if (idOf(item) < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// JSON payloads

const encoder = new TextEncoder();

/** Serialize a payload once, refusing values that are not JSON or exceed `MAX_PAYLOAD_BYTES`. */
export function encodePayload(value: unknown, what: string): string {
  const text = JSON.stringify(value);
  if (typeof text !== "string") throw new StorageError("malformed_batch", `${what} is not JSON`);
  // UTF-8 is at most 3 bytes per UTF-16 unit; count exactly only near the limit.
  if (text.length * 3 > MAX_PAYLOAD_BYTES) {
    const bytes = encoder.encode(text).length;
    if (bytes > MAX_PAYLOAD_BYTES) {
      throw new StorageError("too_large", `${what} is ${bytes} bytes; the limit is ${MAX_PAYLOAD_BYTES}`);
    }
  }
  return text;
}

/** Deep-freeze a freshly parsed JSON value so shared references cannot be mutated. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value as object)) deepFreeze(child);
  }
  return value;
}

/** A frozen deep copy, via the JSON text already produced by `encodePayload`. */
export function frozenCopy<T extends JsonValue | object>(text: string): T {
  return deepFreeze(JSON.parse(text) as T);
}

// ---------------------------------------------------------------------------------------------
// The structural batch check (§7.3)

/** What the check needs to know of committed state; every backend answers it synchronously. */
export interface BatchView {
  readonly lastSeq: Id;
  /** A conversation that exists and is not deleted. */
  conversation(id: Id): Conversation | undefined;
  task(id: Id): { readonly role: TaskRole; readonly conversationId: Id } | undefined;
}

/** The encoded payloads of a checked batch, so a backend serializes each write once. */
export interface CheckedBatch {
  readonly first: Id;
  readonly last: Id;
  /** JSON text per write index for entries, tasks, patches, settlements and state payloads. */
  readonly payloads: readonly (string | undefined)[];
}

const ROLES: ReadonlySet<string> = new Set(["start", "inflight", "terminal"]);

function malformed(i: number, message: string): StorageError {
  return new StorageError("malformed_batch", `write ${i}: ${message}`);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Names and keys are stored as text columns: they must be well-formed UTF-16 (no lone surrogates). */
function wellFormed(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

function isPositiveId(value: unknown): value is Id {
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0;
}

/**
 * Check scope, sequences, references and structure of a batch against committed state plus earlier
 * writes of the same batch. Throws `StorageError` ("malformed_batch" or "too_large") and leaves no trace;
 * the backend persists only after this returns.
 */
export function checkBatch(batch: CommitBatch, view: BatchView): CheckedBatch {
  if (batch === null || typeof batch !== "object" || !Array.isArray(batch.writes)) {
    throw new StorageError("malformed_batch", "a batch is { kind, writes: [...] }");
  }
  const first = view.lastSeq + 1;
  const payloads: (string | undefined)[] = [];
  const conversations = new Map<Id, boolean>(); // created (true) or deleted (false) in this batch
  const tasks = new Map<Id, { role: TaskRole; conversationId: Id }>();
  const pendingOwns: { i: number; id: Id }[] = [];

  const conversationExists = (id: Id): boolean => {
    const local = conversations.get(id);
    return local ?? view.conversation(id) !== undefined;
  };
  const taskOf = (id: Id) => tasks.get(id) ?? view.task(id);

  const checkAddress = (i: number, addr: Address): void => {
    if (addr === null || typeof addr !== "object" || typeof addr.namespace !== "string" || addr.namespace === "") {
      throw malformed(i, "address needs a non-empty namespace");
    }
    if (addr.key !== undefined && typeof addr.key !== "string") throw malformed(i, "address key must be a string");
    if (!wellFormed(addr.namespace) || (addr.key !== undefined && !wellFormed(addr.key))) {
      throw malformed(i, "address namespace and key must be well-formed UTF-16 (no lone surrogates)");
    }
    if (typeof addr.rewind !== "boolean") throw malformed(i, "address rewind must be a boolean");
    const scope = addr.scope as Scope | null;
    if (scope === null || typeof scope !== "object") throw malformed(i, "address needs a scope");
    if ("session" in scope) {
      if (scope.session !== true) throw malformed(i, "session scope is { session: true }");
      if (addr.rewind) throw malformed(i, "session state is sticky; rewind must be false");
    } else if ("conversation" in scope) {
      if (!conversationExists(scope.conversation)) throw malformed(i, `unknown conversation ${scope.conversation}`);
    } else if ("scratch" in scope) {
      if (batch.kind !== "scratch") throw malformed(i, "a main batch never writes scratch (§4.6)");
      if (scope.scratch !== batch.task)
        throw malformed(i, `scratch write for task ${scope.scratch} in task ${batch.task}'s batch`);
      if (addr.rewind) throw malformed(i, "scratch is never rewound; rewind must be false");
    } else {
      throw malformed(i, "unknown scope");
    }
  };

  const checkState = (i: number, seq: Id, w: StateWrite): string | undefined => {
    checkAddress(i, w.addr);
    switch (w.type) {
      case "value.set":
        if (w.value === undefined) throw malformed(i, "value.set needs a JSON value");
        return encodePayload(w.value, `write ${i} (value ${w.addr.namespace})`);
      case "list.append":
        if (w.value === undefined) throw malformed(i, "list.append needs a JSON value");
        return encodePayload(w.value, `write ${i} (list ${w.addr.namespace})`);
      case "list.remove":
        if (!isPositiveId(w.element) || w.element >= seq) throw malformed(i, "list.remove needs an earlier element id");
        return undefined;
      case "value.delete":
      case "list.clear":
        return undefined;
      default:
        throw malformed(i, `unknown state write ${(w as { type: string }).type}`);
    }
  };

  if (batch.kind === "scratch") {
    const task = view.task(batch.task);
    if (task === undefined) throw new StorageError("malformed_batch", `scratch batch for unknown task ${batch.task}`);
    if (task.role === "terminal") {
      throw new StorageError("malformed_batch", `scratch batch for settled task ${batch.task}: its scratch is retired`);
    }
    batch.writes.forEach((w, i) => {
      if (
        !w ||
        !(["value.set", "value.delete", "list.append", "list.remove", "list.clear"] as const).includes(w.type as never)
      ) {
        throw malformed(i, "a scratch batch carries only state writes");
      }
      if (!("scratch" in (w.addr?.scope ?? {})))
        throw malformed(i, "a scratch batch writes only its task's scratch (§4.6)");
      payloads.push(checkState(i, first + i, w));
    });
    return { first, last: first + batch.writes.length - 1, payloads };
  }
  if (batch.kind !== "main") throw new StorageError("malformed_batch", "batch kind is main or scratch");

  batch.writes.forEach((w: MainWrite, i) => {
    const seq = first + i;
    if (w === null || typeof w !== "object") throw malformed(i, "not a write");
    switch (w.type) {
      case "value.set":
      case "value.delete":
      case "list.append":
      case "list.remove":
      case "list.clear":
        payloads.push(checkState(i, seq, w));
        return;
      case "createConversation": {
        const c = w.conversation;
        if (c?.id !== seq) throw malformed(i, `conversation id must be its sequence ${seq}`);
        if (c.parent !== undefined) {
          if (!conversationExists(c.parent.conversationId))
            throw malformed(i, `unknown parent ${c.parent.conversationId}`);
          if (!Number.isSafeInteger(c.parent.at) || c.parent.at < 0 || c.parent.at >= seq) {
            throw malformed(i, "fork point must be an earlier entry id or 0 (start)");
          }
        }
        if (c.owner !== undefined && taskOf(c.owner) === undefined) throw malformed(i, `unknown owner task ${c.owner}`);
        conversations.set(seq, true);
        payloads.push(undefined);
        return;
      }
      case "deleteConversation":
        if (!conversationExists(w.id)) throw malformed(i, `unknown conversation ${w.id}`);
        conversations.set(w.id, false);
        payloads.push(undefined);
        return;
      case "entry": {
        const e = w.entry;
        if (e?.id !== seq) throw malformed(i, `entry id must be its sequence ${seq}`);
        if (!conversationExists(e.conversationId)) throw malformed(i, `unknown conversation ${e.conversationId}`);
        if (typeof e.kind !== "string" || e.kind === "") throw malformed(i, "entry kind must be a non-empty string");
        if (e.key !== undefined && typeof e.key !== "string") throw malformed(i, "entry key must be a string");
        if (!wellFormed(e.kind) || (e.key !== undefined && !wellFormed(e.key))) {
          throw malformed(i, "entry kind and key must be well-formed UTF-16 (no lone surrogates)");
        }
        if (e.head !== undefined && (!isPositiveId(e.head) || e.head > seq))
          throw malformed(i, "head must be an id at or before the entry");
        if (e.model !== undefined && !Array.isArray(e.model)) throw malformed(i, "model must be an array of messages");
        if (e.edits !== undefined) {
          if (!Array.isArray(e.edits)) throw malformed(i, "edits must be an array");
          for (const edit of e.edits) {
            if (!isPositiveId(edit?.target) || edit.target >= seq)
              throw malformed(i, "edit targets must be earlier entries");
            if (edit.action !== "omit" && edit.action !== "replace")
              throw malformed(i, "edit action is omit or replace");
          }
        }
        if (e.byTaskId !== undefined && !isPositiveId(e.byTaskId)) throw malformed(i, "byTaskId must be a task id");
        payloads.push(encodePayload(e, `write ${i} (entry ${seq})`));
        return;
      }
      case "task": {
        const t = w.task;
        if (t?.id !== seq) throw malformed(i, `task id must be its sequence ${seq}`);
        if (!conversationExists(t.conversationId)) throw malformed(i, `unknown conversation ${t.conversationId}`);
        if (typeof t.kind !== "string" || t.kind === "") throw malformed(i, "task kind must be a non-empty string");
        if (!wellFormed(t.kind)) throw malformed(i, "task kind must be well-formed UTF-16 (no lone surrogates)");
        if (!ROLES.has(t.role)) throw malformed(i, `unknown role ${String(t.role)}`);
        if (typeof t.state?.status !== "string") throw malformed(i, "task state needs a string status");
        if (!Array.isArray(t.after)) throw malformed(i, "after must be an array");
        for (const dep of t.after) {
          if (!isPositiveId(dep) || dep >= seq || taskOf(dep) === undefined)
            throw malformed(i, `unknown dependency ${String(dep)}`);
        }
        if (t.background !== undefined && t.background !== true) throw malformed(i, "background is true or absent");
        if (t.turn !== undefined && t.turn !== true) throw malformed(i, "turn is true or absent");
        if (t.abort !== undefined && t.abort !== true) throw malformed(i, "abort is true or absent");
        for (const owned of t.owns ?? []) pendingOwns.push({ i, id: owned });
        tasks.set(seq, { role: t.role, conversationId: t.conversationId });
        payloads.push(encodePayload(t, `write ${i} (task ${seq})`));
        return;
      }
      case "patch":
      case "settle": {
        const current = taskOf(w.id);
        if (current === undefined) throw malformed(i, `unknown task ${w.id}`);
        if (current.role === "terminal") throw malformed(i, `task ${w.id} is terminal and never changes again`);
        if (w.type === "patch" ? !(w.role === "start" || w.role === "inflight") : w.role !== "terminal") {
          throw malformed(i, `${w.type} cannot write role ${String(w.role)}`);
        }
        if (typeof w.state?.status !== "string") throw malformed(i, "task state needs a string status");
        if (w.type === "patch" && w.abort !== undefined && w.abort !== true)
          throw malformed(i, "abort is true or absent");
        if (w.type === "patch" && w.owns !== undefined) {
          if (!Array.isArray(w.owns)) throw malformed(i, "owns must be an array of conversation ids");
          for (const owned of w.owns) pendingOwns.push({ i, id: owned });
        }
        tasks.set(w.id, { role: w.role, conversationId: current.conversationId });
        payloads.push(encodePayload(w.state, `write ${i} (task ${w.id} state)`));
        return;
      }
      default:
        throw malformed(i, `unknown write ${(w as { type: string }).type}`);
    }
  });
  for (const { i, id } of pendingOwns) {
    if (!conversationExists(id)) throw malformed(i, `owned conversation ${id} does not exist`);
  }
  return { first, last: first + batch.writes.length - 1, payloads };
}
