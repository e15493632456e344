/**
 * ModelStorage: a deliberately naive, independent implementation of the `Storage` semantics (the shared
 * semantics in notes/common.md, §2.4, §4, §7), used by the contract suite as an oracle and by the stream
 * generator as its picture of committed state. It keeps one flat log of (seq, write) and recomputes every
 * read from it: no indexes, nothing shared with the backends except the structural batch check and the
 * address key. Derived results are memoized until the next write only because a dump asks the same
 * questions hundreds of times; it is still O(history) per question and only for small test histories.
 *
 * The memory backend is the reference of the suite; this model exists so that a bug the memory backend
 * shares with the others cannot hide: the suite compares both against it.
 */
import type {
  Address,
  CommitBatch,
  Conversation,
  ConversationQuery,
  Cursor,
  Element,
  Entry,
  EntryQuery,
  Id,
  JsonValue,
  List,
  ListQuery,
  MainWrite,
  Page,
  StateWrite,
  Task,
  TaskQuery,
  Value,
  ValueQuery,
  Version,
} from "../../src/storage/records.js";
import { addressKey, checkBatch, historicalReadError } from "../../src/storage/shared.js";
import { StorageError, type Storage } from "../../src/storage/storage.js";

interface Logged {
  readonly seq: Id;
  readonly write: MainWrite;
}

interface Segment {
  readonly conversationId: Id;
  readonly cap: Id;
}

const INFINITY = Number.MAX_SAFE_INTEGER;

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function isState(write: MainWrite): write is StateWrite {
  return write.type.startsWith("value.") || write.type.startsWith("list.");
}

function sameScopeAndNamespace(a: Address, b: { scope: Address["scope"]; namespace: string }): boolean {
  return (
    addressKey({ ...a, key: "" }) === addressKey({ scope: b.scope, namespace: b.namespace, key: "", rewind: false })
  );
}

/** Paging exactly as the `Cursor` doc in records.ts states it, over items sorted ascending by id. */
export function naivePage<T>(sorted: readonly T[], idOf: (item: T) => Id, cursor: Cursor, readAt: Id): Page<T> {
  if (!Number.isInteger(cursor.limit) || cursor.limit < 1 || cursor.limit > 1000) {
    throw new StorageError("bad_query", `bad limit ${cursor.limit}`);
  }
  const inRange = sorted.filter(
    (item) =>
      (cursor.after === undefined || idOf(item) > cursor.after) &&
      (cursor.before === undefined || idOf(item) < cursor.before),
  );
  if (cursor.before !== undefined && cursor.after === undefined) {
    const items = inRange.slice(Math.max(0, inRange.length - cursor.limit));
    const first = items[0];
    return inRange.length > items.length && first !== undefined
      ? { items, next: idOf(first), readAt }
      : { items, readAt };
  }
  const items = inRange.slice(0, cursor.limit);
  const last = items[items.length - 1];
  return inRange.length > items.length && last !== undefined ? { items, next: idOf(last), readAt } : { items, readAt };
}

export class ModelStorage implements Storage {
  #log: Logged[] = [];
  #lastSeq = 0;
  #closed = false;
  /** Derived results of the current log, dropped by every write. */
  #memo = new Map<string, unknown>();

  #remember<T>(key: string, derive: () => T): T {
    if (this.#memo.has(key)) return this.#memo.get(key) as T;
    const value = derive();
    this.#memo.set(key, value);
    return value;
  }

  get lastSeq(): Id {
    return this.#lastSeq;
  }

  // -------------------------------------------------------------------------------------------
  // Writing

  /** Commit synchronously after the shared structural check; the generator's validity check. */
  commitSync(batch: CommitBatch): { first: number; last: number } {
    this.#open();
    const checked = checkBatch(batch, {
      lastSeq: this.#lastSeq,
      conversation: (id) => this.conversation(id),
      task: (id) => this.task(id),
    });
    batch.writes.forEach((write, i) => this.stage(checked.first + i, write));
    return { first: checked.first, last: checked.last };
  }

  /** Append one write unchecked; the generator stages writes as it builds a batch it knows is valid. */
  stage(seq: Id, write: MainWrite): void {
    if (seq !== this.#lastSeq + 1) throw new Error(`model: staged seq ${seq} after ${this.#lastSeq}`);
    this.#log.push({ seq, write: clone(write) });
    this.#lastSeq = seq;
    this.#memo.clear();
  }

  // -------------------------------------------------------------------------------------------
  // Synchronous derived state (also used by the generator)

  /** A conversation that exists, deleted or not. */
  conversationRecord(id: Id): { conversation: Conversation; deleted: boolean } | undefined {
    return this.#remember(`conversation ${id}`, () => this.#conversationRecord(id));
  }

  #conversationRecord(id: Id): { conversation: Conversation; deleted: boolean } | undefined {
    let found: Conversation | undefined;
    let deleted = false;
    for (const { write } of this.#log) {
      if (write.type === "createConversation" && write.conversation.id === id) found = write.conversation;
      if (write.type === "deleteConversation" && write.id === id) deleted = true;
    }
    return found === undefined ? undefined : { conversation: found, deleted };
  }

  /** A conversation that exists and is not deleted. */
  conversation(id: Id): Conversation | undefined {
    const record = this.conversationRecord(id);
    return record === undefined || record.deleted ? undefined : record.conversation;
  }

  conversations(): Conversation[] {
    const out: Conversation[] = [];
    for (const { write } of this.#log) {
      if (write.type === "createConversation" && this.conversation(write.conversation.id) !== undefined)
        out.push(write.conversation);
    }
    return out;
  }

  task(id: Id): Task | undefined {
    return this.#remember(`task ${id}`, () => this.#task(id));
  }

  #task(id: Id): Task | undefined {
    let task: Task | undefined;
    for (const { write } of this.#log) {
      if (write.type === "task" && write.task.id === id) task = write.task;
      if (task === undefined) continue;
      if (write.type === "patch" && write.id === id) {
        const abort = task.abort === true || write.abort === true;
        const { abort: _a, owns: _o, ...rest } = task;
        const owns = write.owns ?? task.owns;
        task = {
          ...rest,
          role: write.role,
          state: write.state,
          ...(owns === undefined ? {} : { owns }),
          ...(abort ? { abort: true } : {}),
        };
      }
      if (write.type === "settle" && write.id === id) task = { ...task, role: "terminal", state: write.state };
    }
    return task;
  }

  tasks(): Task[] {
    const out: Task[] = [];
    for (const { write } of this.#log) {
      if (write.type === "task") out.push(this.task(write.task.id) as Task);
    }
    return out;
  }

  entry(id: Id): Entry | undefined {
    for (const { write } of this.#log) if (write.type === "entry" && write.entry.id === id) return write.entry;
    return undefined;
  }

  /** Fork chain nearest first, each conversation with the last sequence visible from the start. */
  segments(id: Id, cap: Id = INFINITY): Segment[] {
    const record = this.conversationRecord(id);
    if (record === undefined) throw new StorageError("bad_query", `unknown conversation ${id}`);
    const here = { conversationId: id, cap };
    const parent = record.conversation.parent;
    return parent === undefined ? [here] : [here, ...this.segments(parent.conversationId, Math.min(cap, parent.at))];
  }

  /** The logical transcript: every segment's own entries up to its cap, ascending. */
  transcript(id: Id): Entry[] {
    return this.#remember(`transcript ${id}`, () => this.#transcript(id));
  }

  #transcript(id: Id): Entry[] {
    const out: Entry[] = [];
    for (const segment of this.segments(id)) {
      for (const { write } of this.#log) {
        if (
          write.type === "entry" &&
          write.entry.conversationId === segment.conversationId &&
          write.entry.id <= segment.cap
        ) {
          out.push(write.entry);
        }
      }
    }
    return out.sort((a, b) => a.id - b.id);
  }

  #scratchRetired(addr: Address): boolean {
    return "scratch" in addr.scope && this.task(addr.scope.scratch)?.role === "terminal";
  }

  /** Value writes (`value.`) or list writes (`list.`) to exactly this address (scope, namespace, key). */
  #stateWrites(addr: Address, family: "value." | "list."): { seq: Id; write: StateWrite }[] {
    return this.#remember(`${family} ${addressKey(addr)}`, () => this.#stateWritesOf(addr, family));
  }

  #stateWritesOf(addr: Address, family: "value." | "list."): { seq: Id; write: StateWrite }[] {
    const key = addressKey(addr);
    const out: { seq: Id; write: StateWrite }[] = [];
    for (const { seq, write } of this.#log) {
      if (isState(write) && write.type.startsWith(family) && addressKey(write.addr) === key) out.push({ seq, write });
    }
    return out;
  }

  #historyAddress(addr: Address, conversation: Id): Address {
    return { ...addr, scope: { conversation } };
  }

  valueSync(addr: Address, at?: Id): Version<JsonValue> | undefined {
    const rewindable = "conversation" in addr.scope && addr.rewind;
    if (at !== undefined && !rewindable) throw historicalReadError(addr);
    if (!rewindable || !("conversation" in addr.scope)) {
      if (this.#scratchRetired(addr)) return undefined;
      const last = this.#stateWrites(addr, "value.").at(-1);
      return last?.write.type === "value.set" ? { seq: last.seq, value: last.write.value } : undefined;
    }
    for (const segment of this.segments(addr.scope.conversation, at ?? INFINITY)) {
      const own = this.#stateWrites(this.#historyAddress(addr, segment.conversationId), "value.").filter(
        (w) => w.seq <= segment.cap,
      );
      const newest = own.at(-1);
      if (newest === undefined) continue;
      return newest.write.type === "value.set" ? { seq: newest.seq, value: newest.write.value } : undefined;
    }
    return undefined;
  }

  listSync(addr: Address, at?: Id): Element<JsonValue>[] {
    const rewindable = "conversation" in addr.scope && addr.rewind;
    if (at !== undefined && !rewindable) throw historicalReadError(addr);
    let ops: { seq: Id; write: StateWrite }[];
    if (rewindable && "conversation" in addr.scope) {
      ops = this.segments(addr.scope.conversation, at ?? INFINITY).flatMap((segment) =>
        this.#stateWrites(this.#historyAddress(addr, segment.conversationId), "list.").filter(
          (w) => w.seq <= segment.cap,
        ),
      );
    } else {
      ops = this.#scratchRetired(addr) ? [] : this.#stateWrites(addr, "list.");
    }
    let clearedBelow = 0;
    const removed = new Set<Id>();
    for (const { seq, write } of ops) {
      if (write.type === "list.clear") clearedBelow = Math.max(clearedBelow, seq);
      if (write.type === "list.remove") removed.add(write.element);
    }
    const out: Element<JsonValue>[] = [];
    for (const { seq, write } of ops) {
      if (write.type === "list.append" && seq > clearedBelow && !removed.has(seq))
        out.push({ id: seq, value: write.value });
    }
    return out.sort((a, b) => a.id - b.id);
  }

  /** Distinct entry kinds ever stored, sorted. */
  kinds(): string[] {
    const kinds = new Set<string>();
    for (const { write } of this.#log) if (write.type === "entry") kinds.add(write.entry.kind);
    return [...kinds].sort();
  }

  // -------------------------------------------------------------------------------------------
  // Storage

  async commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    return this.commitSync(batch);
  }

  async getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    this.#open();
    const out = new Map<Id, Conversation>();
    for (const id of ids) {
      const c = this.conversation(id);
      if (c !== undefined) out.set(id, clone(c));
    }
    return out;
  }

  async scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    this.#open();
    const matching = this.conversations().filter(
      (c) =>
        (q.parent === undefined || c.parent?.conversationId === q.parent) &&
        (q.ownedFrom === undefined || c.owner === q.ownedFrom),
    );
    return naivePage(clone(matching), (c) => c.id, q, this.#lastSeq);
  }

  async getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    this.#open();
    const out = new Map<Id, Entry>();
    for (const id of ids) {
      const e = this.entry(id);
      if (e !== undefined) out.set(id, clone(e));
    }
    return out;
  }

  async scanEntries(q: EntryQuery): Promise<Page<Entry>> {
    this.#open();
    const visible = this.transcript(q.conversationId).filter(
      (e) =>
        (q.from === undefined || e.id >= q.from) &&
        (q.through === undefined || e.id <= q.through) &&
        (q.kind === undefined || e.kind === q.kind) &&
        (q.key === undefined || e.key === q.key),
    );
    return naivePage(clone(visible), (e) => e.id, q, this.#lastSeq);
  }

  async newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
    this.#open();
    const heads = this.transcript(conversationId).filter((e) => e.head !== undefined && e.id <= at);
    const newest = heads.at(-1);
    return newest === undefined ? undefined : clone(newest);
  }

  async entryKinds(): Promise<readonly string[]> {
    this.#open();
    return this.kinds();
  }

  async getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    this.#open();
    const out = new Map<Id, Task>();
    for (const id of ids) {
      const t = this.task(id);
      if (t !== undefined) out.set(id, clone(t));
    }
    return out;
  }

  async scanTasks(q: TaskQuery): Promise<Page<Task>> {
    this.#open();
    const matching = this.tasks().filter(
      (t) =>
        (q.conversationIds === undefined || q.conversationIds.includes(t.conversationId)) &&
        (q.live === undefined || q.live === (t.role !== "terminal")) &&
        (q.role === undefined || q.role === t.role) &&
        (q.kind === undefined || q.kind === t.kind) &&
        (q.abort === undefined || q.abort === (t.abort === true)),
    );
    return naivePage(clone(matching), (t) => t.id, q, this.#lastSeq);
  }

  async getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined> {
    this.#open();
    const v = this.valueSync(addr, at);
    return v === undefined ? undefined : (clone(v) as Version<T>);
  }

  async scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    this.#open();
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new StorageError("bad_query", `bad limit ${q.limit}`);
    const addresses = new Map<string, Address>();
    for (const { write } of this.#log) {
      if (isState(write) && write.type.startsWith("value.") && sameScopeAndNamespace(write.addr, q)) {
        addresses.set(addressKey(write.addr), write.addr);
      }
    }
    const items: { key: string; version: Version<JsonValue> }[] = [];
    for (const addr of addresses.values()) {
      // The scope's own current value: a rewindable address's newest own version, not an inherited one.
      const own = this.#stateWrites(addr, "value.").at(-1);
      if (own?.write.type !== "value.set" || this.#scratchRetired(addr)) continue;
      const key = addr.key ?? "";
      if (q.after !== undefined && !(key > q.after)) continue;
      items.push({ key, version: { seq: own.seq, value: own.write.value } });
    }
    items.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return { items: clone(items.slice(0, q.limit)), readAt: this.#lastSeq };
  }

  async readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>> {
    this.#open();
    const elements = this.listSync(addr, q.at) as Element<T>[];
    return naivePage(clone(elements), (e) => e.id, q, this.#lastSeq);
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  #open(): void {
    if (this.#closed) throw new StorageError("closed", "model storage is closed");
  }
}
