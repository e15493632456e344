/**
 * A small batch builder for the contract suite, numbering writes the way the harness's Tx does (§3.1):
 * write i of a batch built on `lastSeq` gets `lastSeq + 1 + i`, and creations return that id. Used by the
 * explicit cases (readable scenarios) and by the stream generator (which observes every write).
 */
import type {
  Address,
  CommitBatch,
  Conversation,
  Entry,
  Id,
  JsonValue,
  MainWrite,
  StateWrite,
  Task,
  TaskRole,
  TaskStateBase,
} from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";

export type EntryFields = Omit<Entry, "id" | "conversationId" | "kind">;
export type TaskFields = Partial<Omit<Task, "id" | "conversationId" | "kind">>;

/** The state-write methods both builders share (main batches and scratch batches). */
export type StateTx = Pick<MainBuilder, "set" | "delete" | "append" | "remove" | "clear">;

abstract class StateBuilder<W extends MainWrite> {
  protected readonly writes: W[] = [];

  constructor(
    readonly lastSeq: Id,
    private readonly observe?: (seq: Id, write: W) => void,
  ) {}

  /** The sequence the next write will get. */
  get nextSeq(): Id {
    return this.lastSeq + 1 + this.writes.length;
  }

  get size(): number {
    return this.writes.length;
  }

  protected push(write: W): Id {
    const seq = this.nextSeq;
    this.writes.push(write);
    this.observe?.(seq, write);
    return seq;
  }

  set(addr: Address, value: JsonValue): Id {
    return this.push({ type: "value.set", addr, value } as W);
  }
  delete(addr: Address): Id {
    return this.push({ type: "value.delete", addr } as W);
  }
  append(addr: Address, value: JsonValue): Id {
    return this.push({ type: "list.append", addr, value } as W);
  }
  remove(addr: Address, element: Id): Id {
    return this.push({ type: "list.remove", addr, element } as W);
  }
  clear(addr: Address): Id {
    return this.push({ type: "list.clear", addr } as W);
  }
}

export class MainBuilder extends StateBuilder<MainWrite> {
  conversation(init: Omit<Conversation, "id"> = {}): Id {
    return this.push({ type: "createConversation", conversation: { id: this.nextSeq, ...init } });
  }
  deleteConversation(id: Id): Id {
    return this.push({ type: "deleteConversation", id });
  }
  entry(conversationId: Id, kind: string, fields: EntryFields = {}): Id {
    return this.push({ type: "entry", entry: { id: this.nextSeq, conversationId, kind, ...fields } });
  }
  task(conversationId: Id, kind: string, fields: TaskFields = {}): Id {
    const task: Task = {
      id: this.nextSeq,
      conversationId,
      kind,
      role: "start",
      state: { status: "pending" },
      after: [],
      ...fields,
    };
    return this.push({ type: "task", task });
  }
  patch(
    id: Id,
    role: Exclude<TaskRole, "terminal">,
    state: TaskStateBase,
    extra: { abort?: true; owns?: readonly Id[] } = {},
  ): Id {
    return this.push({ type: "patch", id, role, state, ...extra });
  }
  settle(id: Id, state: TaskStateBase): Id {
    return this.push({ type: "settle", id, role: "terminal", state });
  }
  batch(): CommitBatch {
    return { kind: "main", writes: [...this.writes] };
  }
}

export class ScratchBuilder extends StateBuilder<StateWrite> {
  constructor(
    lastSeq: Id,
    readonly task: Id,
    observe?: (seq: Id, write: StateWrite) => void,
  ) {
    super(lastSeq, observe);
  }
  batch(): CommitBatch {
    return { kind: "scratch", task: this.task, writes: [...this.writes] };
  }
}

/** Build a main batch on the storage's lastSeq, commit it, check the returned range, return `build`'s result. */
export async function commitMain<T>(storage: Storage, build: (tx: MainBuilder) => T): Promise<T> {
  const tx = new MainBuilder(storage.lastSeq);
  const result = build(tx);
  await commitChecked(storage, tx.batch(), tx.lastSeq);
  return result;
}

/** Build and commit a scratch batch for `task`. */
export async function commitScratch<T>(storage: Storage, task: Id, build: (tx: ScratchBuilder) => T): Promise<T> {
  const tx = new ScratchBuilder(storage.lastSeq, task);
  const result = build(tx);
  await commitChecked(storage, tx.batch(), tx.lastSeq);
  return result;
}

async function commitChecked(storage: Storage, batch: CommitBatch, lastSeq: Id): Promise<void> {
  const range = await storage.commit(batch);
  const expected = { first: lastSeq + 1, last: lastSeq + batch.writes.length };
  if (range.first !== expected.first || range.last !== expected.last || storage.lastSeq !== expected.last) {
    throw new Error(
      `commit returned ${JSON.stringify(range)} with lastSeq ${storage.lastSeq}; expected ${JSON.stringify(expected)}`,
    );
  }
}
