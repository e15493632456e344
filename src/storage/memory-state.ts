/**
 * The in-memory session state shared by `MemoryStorage` and `JsonlStorage` (§7.4): current maps of
 * conversations (with internal tombstones for deleted ones), entries and tasks, ordered per-conversation
 * entry arrays with head/kind/key indexes, a live-task index, parent and owner links, distinct entry kinds,
 * and the value/list store. Every index references the same frozen payloads.
 *
 * `apply` publishes an already-checked batch (`checkBatch`) and never throws; JSONL replays its logged
 * batches through the same path. Reads are synchronous and cost fork depth plus the requested range.
 */
import type {
  CommitBatch,
  Conversation,
  ConversationQuery,
  Entry,
  EntryQuery,
  Id,
  MainWrite,
  Page,
  Task,
  TaskQuery,
} from "./records.js";
import type { BatchView, CheckedBatch, Segment } from "./shared.js";
import { deepFreeze, forkSegments, frozenCopy, lowerBound } from "./shared.js";
import { StorageError } from "./storage.js";
import { identity, pageRuns, removeSorted, type Run } from "./memory-paging.js";
import { StateStore } from "./memory-state-store.js";

interface ConversationRecord {
  readonly conversation: Conversation;
  deleted: boolean;
  readonly entries: Entry[];
  /** Entries with a stored `head`, ascending: newestHead is one binary search per fork segment. */
  readonly heads: Entry[];
  readonly byKind: Map<string, Entry[]>;
  readonly byKey: Map<string, Entry[]>;
  readonly byKindKey: Map<string, Entry[]>;
  readonly tasks: Id[];
}

const entryId = (e: Entry): Id => e.id;

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

function checkPosition(name: string, value: Id | undefined): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    throw new StorageError("bad_query", `${name} must be a non-negative integer, got ${String(value)}`);
  }
}

export class MemoryState {
  #lastSeq = 0;
  readonly #conversations = new Map<Id, ConversationRecord>();
  /** Ids of conversations that are not deleted, ascending. */
  readonly #visible: Id[] = [];
  readonly #byParent = new Map<Id, Id[]>();
  readonly #byOwner = new Map<Id, Id[]>();
  readonly #entries = new Map<Id, Entry>();
  readonly #kinds = new Set<string>();
  readonly #tasks = new Map<Id, Task>();
  readonly #taskOrder: Id[] = [];
  /** Ids of tasks whose role is start or inflight, ascending (§7.2 live-task index). */
  readonly #live: Id[] = [];
  readonly state = new StateStore();

  get lastSeq(): Id {
    return this.#lastSeq;
  }

  /** What `checkBatch` sees: deleted conversations are absent, tasks of every role are present. */
  readonly view: BatchView;

  constructor() {
    const conversation = (id: Id): Conversation | undefined => {
      const record = this.#conversations.get(id);
      return record === undefined || record.deleted ? undefined : record.conversation;
    };
    const task = (id: Id): Task | undefined => this.#tasks.get(id);
    const lastSeq = (): Id => this.#lastSeq;
    this.view = {
      get lastSeq() {
        return lastSeq();
      },
      conversation,
      task,
    };
  }

  /** A view numbering from `lastSeq` (JSONL replay: per-file gaps move the start past discarded positions). */
  viewAt(lastSeq: Id): BatchView {
    return { lastSeq, conversation: this.view.conversation, task: this.view.task };
  }

  /** Publish a batch that `checkBatch` accepted; writes number from `checked.first`. */
  apply(batch: CommitBatch, checked: CheckedBatch): void {
    batch.writes.forEach((w: MainWrite, i) => this.#applyWrite(w, checked.first + i, checked.payloads[i]));
    this.#lastSeq = Math.max(this.#lastSeq, checked.last);
  }

  #applyWrite(w: MainWrite, seq: Id, payload: string | undefined): void {
    switch (w.type) {
      case "value.set":
      case "value.delete":
      case "list.append":
      case "list.remove":
      case "list.clear":
        this.state.apply(w, seq, payload);
        return;
      case "createConversation": {
        // Only the known fields, so memory and a replayed JSONL log hold the same record.
        const { parent, owner } = w.conversation;
        const conversation: Conversation = deepFreeze({
          id: seq,
          ...(parent === undefined ? {} : { parent: { conversationId: parent.conversationId, at: parent.at } }),
          ...(owner === undefined ? {} : { owner }),
        });
        this.#conversations.set(seq, {
          conversation,
          deleted: false,
          entries: [],
          heads: [],
          byKind: new Map(),
          byKey: new Map(),
          byKindKey: new Map(),
          tasks: [],
        });
        this.#visible.push(seq);
        if (conversation.parent !== undefined) push(this.#byParent, conversation.parent.conversationId, seq);
        if (conversation.owner !== undefined) push(this.#byOwner, conversation.owner, seq);
        return;
      }
      case "deleteConversation": {
        // A tombstone: hidden from lookups and scans, still resolvable as a fork ancestor.
        const record = this.#record(w.id);
        record.deleted = true;
        removeSorted(this.#visible, w.id);
        const { parent, owner } = record.conversation;
        if (parent !== undefined) removeSorted(this.#byParent.get(parent.conversationId) ?? [], w.id);
        if (owner !== undefined) removeSorted(this.#byOwner.get(owner) ?? [], w.id);
        return;
      }
      case "entry": {
        const entry = frozenCopy<Entry>(payload as string);
        const record = this.#record(entry.conversationId);
        record.entries.push(entry);
        if (entry.head !== undefined) record.heads.push(entry);
        push(record.byKind, entry.kind, entry);
        if (entry.key !== undefined) {
          push(record.byKey, entry.key, entry);
          push(record.byKindKey, JSON.stringify([entry.kind, entry.key]), entry);
        }
        this.#entries.set(seq, entry);
        this.#kinds.add(entry.kind);
        return;
      }
      case "task": {
        const task = frozenCopy<Task>(payload as string);
        this.#tasks.set(seq, task);
        this.#taskOrder.push(seq);
        this.#record(task.conversationId).tasks.push(seq);
        if (task.role !== "terminal") this.#live.push(seq);
        return;
      }
      case "patch":
      case "settle": {
        const old = this.#tasks.get(w.id) as Task;
        const owns = w.type === "patch" && w.owns !== undefined ? Object.freeze([...w.owns]) : old.owns;
        // The abort mark is never cleared by a later write (§6.3).
        const abort = old.abort === true || (w.type === "patch" && w.abort === true);
        const task: Task = Object.freeze({
          ...old,
          role: w.role,
          state: frozenCopy<Task["state"]>(payload as string),
          ...(owns === undefined ? {} : { owns }),
          ...(abort ? { abort: true as const } : {}),
        });
        this.#tasks.set(w.id, task);
        if (w.type === "settle") {
          removeSorted(this.#live, w.id);
          this.state.retireScratch(w.id);
        }
        return;
      }
      default: {
        const _: never = w;
        throw new Error(`unknown write ${String(_)}`);
      }
    }
  }

  #record(id: Id): ConversationRecord {
    const record = this.#conversations.get(id);
    if (record === undefined) throw new StorageError("corrupt", `conversation ${id} is missing`);
    return record;
  }

  /** Fork segments over every conversation record, tombstones included (a deleted source still resolves). */
  segments(conversationId: Id, cap?: Id): Segment[] {
    return forkSegments(conversationId, (id) => this.#conversations.get(id)?.conversation, cap);
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  getConversations(ids: readonly Id[]): Map<Id, Conversation> {
    const found = new Map<Id, Conversation>();
    for (const id of ids) {
      const conversation = this.view.conversation(id);
      if (conversation !== undefined) found.set(id, conversation);
    }
    return found;
  }

  scanConversations(q: ConversationQuery): Page<Conversation> {
    let ids: readonly Id[] = this.#visible;
    let keep: (id: Id) => boolean = () => true;
    if (q.parent !== undefined) {
      ids = this.#byParent.get(q.parent) ?? [];
      if (q.ownedFrom !== undefined) keep = (id) => this.#record(id).conversation.owner === q.ownedFrom;
    } else if (q.ownedFrom !== undefined) {
      ids = this.#byOwner.get(q.ownedFrom) ?? [];
    }
    const page = pageRuns(
      [{ items: ids, from: 0, through: Number.MAX_SAFE_INTEGER }],
      identity,
      q,
      this.#lastSeq,
      keep,
    );
    return { ...page, items: page.items.map((id) => this.#record(id).conversation) };
  }

  getEntries(ids: readonly Id[]): Map<Id, Entry> {
    const found = new Map<Id, Entry>();
    for (const id of ids) {
      const entry = this.#entries.get(id);
      if (entry !== undefined) found.set(id, entry);
    }
    return found;
  }

  scanEntries(q: EntryQuery): Page<Entry> {
    checkPosition("from", q.from);
    checkPosition("through", q.through);
    const from = q.from ?? 0;
    const through = q.through ?? Number.MAX_SAFE_INTEGER;
    const segments = this.segments(q.conversationId);
    const runs: Run<Entry>[] = [];
    // Oldest segment first: ancestors hold lower ids than their forks (forkSegments).
    for (let k = segments.length - 1; k >= 0; k--) {
      const segment = segments[k] as Segment;
      const record = this.#record(segment.conversationId);
      const items =
        q.kind !== undefined && q.key !== undefined
          ? record.byKindKey.get(JSON.stringify([q.kind, q.key]))
          : q.kind !== undefined
            ? record.byKind.get(q.kind)
            : q.key !== undefined
              ? record.byKey.get(q.key)
              : record.entries;
      if (items !== undefined) runs.push({ items, from, through: Math.min(through, segment.cap) });
    }
    return pageRuns(runs, entryId, q, this.#lastSeq);
  }

  newestHead(conversationId: Id, at: Id): Entry | undefined {
    checkPosition("at", at);
    for (const segment of this.segments(conversationId, at)) {
      const heads = this.#record(segment.conversationId).heads;
      const i = lowerBound(heads, entryId, segment.cap + 1) - 1;
      if (i >= 0) return heads[i];
    }
    return undefined;
  }

  entryKinds(): string[] {
    return [...this.#kinds].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  getTasks(ids: readonly Id[]): Map<Id, Task> {
    const found = new Map<Id, Task>();
    for (const id of ids) {
      const task = this.#tasks.get(id);
      if (task !== undefined) found.set(id, task);
    }
    return found;
  }

  /** Live queries walk the live-task index only; conversation queries walk those conversations' tasks. */
  scanTasks(q: TaskQuery): Page<Task> {
    const wantsLive = q.live === true || q.role === "start" || q.role === "inflight";
    let ids: readonly Id[];
    if (wantsLive) ids = this.#live;
    else if (q.conversationIds === undefined) ids = this.#taskOrder;
    else if (q.conversationIds.length === 1) ids = this.#conversations.get(q.conversationIds[0] as Id)?.tasks ?? [];
    else {
      const merged = new Set<Id>();
      for (const c of q.conversationIds) for (const id of this.#conversations.get(c)?.tasks ?? []) merged.add(id);
      ids = [...merged].sort((a, b) => a - b);
    }
    const conversations = q.conversationIds === undefined ? undefined : new Set(q.conversationIds);
    const keep = (id: Id): boolean => {
      const t = this.#tasks.get(id) as Task;
      if (conversations !== undefined && !conversations.has(t.conversationId)) return false;
      if (q.live !== undefined && (t.role !== "terminal") !== q.live) return false;
      if (q.role !== undefined && t.role !== q.role) return false;
      if (q.kind !== undefined && t.kind !== q.kind) return false;
      if (q.abort !== undefined && (t.abort === true) !== q.abort) return false;
      return true;
    };
    const page = pageRuns(
      [{ items: ids, from: 0, through: Number.MAX_SAFE_INTEGER }],
      identity,
      q,
      this.#lastSeq,
      keep,
    );
    return { ...page, items: page.items.map((id) => this.#tasks.get(id) as Task) };
  }
}
