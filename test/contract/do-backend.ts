/**
 * The SQLite backend harness for the storage contract suite, workerd only (imports "cloudflare:test";
 * test/node/tsconfig.json excludes this file). The test talks to a `Storage` proxy whose every method
 * runs inside a real SQLite-backed Durable Object through `runInDurableObject`, against a
 * `SqliteStorage` opened once per `DurableObjectState` on `state.storage`.
 *
 * Reopen closes that storage and evicts the object (`evictDurableObject`): the next call constructs a
 * fresh instance with a fresh state, so the storage is reopened from SQLite alone. A crash evicts
 * without closing. Each test gets its own object name, so no data leaks between tests.
 *
 * A dump of hundreds of reads costs one round trip per read through the proxy, so the harness also
 * offers `inside`, which runs a whole function of reads in the object at once.
 *
 * Errors cross the boundary as data: a `StorageError` thrown inside the object is returned as its code
 * and message and rethrown here, so the suite sees the same error class and code as in-process.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
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
} from "../../src/storage/records.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { StorageError, type Storage, type StorageErrorCode } from "../../src/storage/storage.js";
import type { HarnessFactory } from "./backends.js";

/** The storage opened on each object state; a new state (after eviction) opens again. */
const opened = new WeakMap<DurableObjectState, Promise<SqliteStorage>>();

type Outcome<R> =
  | { readonly ok: true; readonly value: R; readonly lastSeq: Id; readonly fresh: boolean }
  | {
      readonly ok: false;
      readonly code: StorageErrorCode;
      readonly message: string;
      readonly lastSeq: Id;
      readonly fresh: boolean;
    };

function isStorageError(error: unknown): error is StorageError {
  return (
    error instanceof StorageError ||
    (error instanceof Error && error.name === "StorageError" && typeof (error as StorageError).code === "string")
  );
}

/** Run `op` on the object's storage, inside the object, returning errors as data. */
function inObject<R>(stub: DurableObjectStub, op: (storage: SqliteStorage) => Promise<R> | R): Promise<Outcome<R>> {
  return runInDurableObject(stub, async (_instance, state): Promise<Outcome<R>> => {
    let storage = opened.get(state);
    const fresh = storage === undefined;
    if (storage === undefined) {
      // open may return the storage or a Promise of it.
      storage = (async () => await SqliteStorage.open(state.storage))();
      opened.set(state, storage);
    }
    const s = await storage;
    try {
      const value = await op(s);
      return { ok: true, value, lastSeq: s.lastSeq, fresh };
    } catch (error) {
      if (isStorageError(error))
        return { ok: false, code: error.code, message: error.message, lastSeq: s.lastSeq, fresh };
      throw error;
    }
  });
}

class DurableObjectStorageProxy implements Storage {
  #lastSeq: Id;

  constructor(
    private readonly stub: DurableObjectStub,
    lastSeq: Id,
  ) {
    this.#lastSeq = lastSeq;
  }

  get lastSeq(): Id {
    return this.#lastSeq;
  }

  async #run<R>(op: (storage: SqliteStorage) => Promise<R> | R): Promise<R> {
    const outcome = await inObject(this.stub, op);
    this.#lastSeq = outcome.lastSeq;
    if (!outcome.ok) throw new StorageError(outcome.code, outcome.message);
    return outcome.value;
  }

  commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    return this.#run((s) => s.commit(batch));
  }
  getConversations(ids: readonly Id[]): Promise<ReadonlyMap<Id, Conversation>> {
    return this.#run((s) => s.getConversations(ids));
  }
  scanConversations(q: ConversationQuery): Promise<Page<Conversation>> {
    return this.#run((s) => s.scanConversations(q));
  }
  getEntries(ids: readonly Id[]): Promise<ReadonlyMap<Id, Entry>> {
    return this.#run((s) => s.getEntries(ids));
  }
  scanEntries(q: EntryQuery): Promise<Page<Entry>> {
    return this.#run((s) => s.scanEntries(q));
  }
  newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
    return this.#run((s) => s.newestHead(conversationId, at));
  }
  entryKinds(): Promise<readonly string[]> {
    return this.#run((s) => s.entryKinds());
  }
  getTasks(ids: readonly Id[]): Promise<ReadonlyMap<Id, Task>> {
    return this.#run((s) => s.getTasks(ids));
  }
  scanTasks(q: TaskQuery): Promise<Page<Task>> {
    return this.#run((s) => s.scanTasks(q));
  }
  getValue<T>(addr: Value<T>, at?: Id): Promise<Version<T> | undefined> {
    return this.#run((s) => (at === undefined ? s.getValue(addr) : s.getValue(addr, at)));
  }
  scanValues(q: ValueQuery): Promise<Page<{ key: string; version: Version<JsonValue> }>> {
    return this.#run((s) => s.scanValues(q));
  }
  readList<T>(addr: List<T>, q: ListQuery): Promise<Page<Element<T>>> {
    return this.#run((s) => s.readList(addr, q));
  }
  close(): Promise<void> {
    return this.#run((s) => s.close());
  }

  /** Run a whole function of storage calls inside the object (one round trip instead of one per call). */
  inside<R>(fn: (storage: Storage) => Promise<R>): Promise<R> {
    return this.#run((s) => fn(s));
  }
}

let objects = 0;

export const sqliteDurableObjectBackend: HarnessFactory = () => {
  let stub: DurableObjectStub | undefined;
  let current: DurableObjectStorageProxy | undefined;

  const need = (): { stub: DurableObjectStub; current: DurableObjectStorageProxy } => {
    if (stub === undefined || current === undefined) throw new Error("sqlite (durable object): open() first");
    return { stub, current };
  };

  /** Evict the object, then prove the next call opened a fresh storage on a fresh state. */
  const evictAndReopen = async (target: DurableObjectStub): Promise<DurableObjectStorageProxy> => {
    await evictDurableObject(target);
    const probe = await inObject(target, (s) => s.lastSeq);
    if (!probe.fresh)
      throw new Error("evictDurableObject did not construct a fresh object: the storage was not reopened");
    current = new DurableObjectStorageProxy(target, probe.lastSeq);
    return current;
  };

  return {
    name: "sqlite (durable object)",
    async open() {
      objects += 1;
      stub = env.SESSIONS.get(env.SESSIONS.idFromName(`storage-contract:${objects}:${crypto.randomUUID()}`));
      const probe = await inObject(stub, (s) => s.lastSeq);
      if (!probe.fresh || probe.lastSeq !== 0)
        throw new Error("sqlite (durable object): a new object name must start empty");
      current = new DurableObjectStorageProxy(stub, probe.lastSeq);
      return current;
    },
    async reopen() {
      const { stub: target, current: storage } = need();
      await storage.close();
      return evictAndReopen(target);
    },
    crash: async () => evictAndReopen(need().stub),
    inside: async (fn) => need().current.inside(fn),
  };
};
