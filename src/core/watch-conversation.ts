/**
 * Conversation watches (§9.4): capture a `ConversationView` on the line and derive typed events from
 * every durable batch, synchronously, inside the commit's publication. The derivation keeps a small
 * shadow of what it needs and nothing the view does not hold already:
 *
 * - the conversation's live tasks (patch and settle writes carry only the task id; the previous record
 *   gives `task_update.previous` and `task_end.task`),
 * - the watched addresses and their current values (settle retires watched scratch),
 * - the inbox element ids (to fold a commit's inbox ops: an idle same-commit append + remove cancels),
 * - a private `ContextFold` (§2.2) fed with this conversation's entries, so a head or edit yields the new
 *   context ids at once, without an asynchronous read that could reorder delivery, and the id list the
 *   reducer will hold, so a `context` event goes out only when the fold disagrees with it.
 *
 * Used by `watchConversation` in watch.ts; the delivery queue is WatchChannel's. `WatchedSession`, what
 * every watch and the hub (watch-hub.ts) read of the harness, is defined here.
 */
import type { Address, CommitBatch, Element, Entry, Id, JsonValue, List, Task } from "../storage/records.js";
import { addressKey } from "../storage/shared.js";
import type { Storage } from "../storage/storage.js";
import { loadFold } from "./context-derive.js";
import type { ContextFold } from "./context-fold.js";
import { PicoError } from "./errors.js";
import type { FaultReport } from "./host.js";
import type { CommitLine } from "./line.js";
import type { CommitListener, CommittedBatch, HarnessReport } from "./session-types.js";
import type { AnyTaskKind } from "./task-kind-types.js";
import { bindInbox, type QueuedInput } from "./inbox.js";
import type { PreviewHub } from "./preview.js";
import { bind, type ValueRef, type ValueSpec } from "./state.js";
import { WatchChannel, type ChannelHost, type PreviewOutput, type TerminalEvent } from "./watch-channel.js";
import { applyMessage, extendsContext } from "./watch-reduce.js";
import type { ConversationEvent, ConversationView, InboxOp, RawWatchEvent, WatchFault } from "./watch-types.js";

const PAGE = 1000;

/**
 * What the watches and their hub read of the harness (the Harness implements it): storage, the line,
 * the fault, the task kinds' declared config, which tasks are live, and the commit stream.
 */
export interface WatchedSession {
  readonly storage: Storage;
  readonly line: CommitLine;
  readonly fault: FaultReport | undefined;
  readonly taskKinds: { names(): string[]; get(name: string): AnyTaskKind | undefined };
  readonly driver: { liveTask(id: Id): Task | undefined };
  onCommit(listener: CommitListener): () => void;
  report(report: HarnessReport): void;
}

/** What a watch reads besides storage. */
export interface WatchSources {
  readonly harness: WatchedSession;
  readonly previews: PreviewHub;
}

abstract class ConversationWatchBase<Out> extends WatchChannel<ConversationView, ConversationEvent, Out> {
  readonly #sources: WatchSources;
  readonly #id: Id;
  readonly #tail: number;
  readonly #extra: readonly ValueRef<unknown>[];
  // shadow state, installed by each capture
  #tasks = new Map<Id, Task>();
  #watched = new Map<string, Address>();
  #values = new Map<string, JsonValue>();
  #inboxKey = "";
  #inbox = new Set<Id>();
  #fold: ContextFold | undefined;
  #context: Id[] = [];

  constructor(
    host: ChannelHost,
    sources: WatchSources,
    conversationId: Id,
    options: { tail: number; values?: readonly ValueRef<unknown>[]; maxBacklog: number },
  ) {
    super(host, options.maxBacklog);
    if (!Number.isSafeInteger(options.tail) || options.tail < 0)
      throw new RangeError(`tail must be a non-negative integer, got ${String(options.tail)}`);
    this.#sources = sources;
    this.#id = conversationId;
    this.#tail = options.tail;
    this.#extra = options.values ?? [];
  }

  /** What a listener receives for a commit's events (raw watches deliver the commit instead). */
  protected abstract deliverable(
    commit: CommittedBatch | undefined,
    events: readonly ConversationEvent[],
  ): readonly Out[];

  protected foldMessage(view: ConversationView, seq: Id, events: readonly ConversationEvent[]): ConversationView {
    return applyMessage(view, { seq, events });
  }

  protected async capture(): Promise<() => ConversationView> {
    const { harness, previews } = this.#sources;
    const storage = harness.storage;
    const id = this.#id;
    const conversation = (await storage.getConversations([id])).get(id);
    if (conversation === undefined) throw new PicoError("not_found", `conversation ${id} does not exist`);
    const readAt = storage.lastSeq;
    const watched = watchedAddresses(harness, { conversationId: id }, this.#extra);
    const inboxAddr = bindInbox(id);
    const [entries, tasks, inbox, versions, fold] = await Promise.all([
      tailEntries(storage, id, readAt, this.#tail),
      liveTasks(storage, id),
      readWholeList(storage, inboxAddr),
      Promise.all(watched.map((addr) => storage.getValue<JsonValue>(addr))),
      loadFold(storage, id, readAt),
    ]);
    return () => {
      // Synchronous, at the end of the line operation: nothing commits between the reads and this.
      this.#tasks = new Map(tasks.map((t) => [t.id, t]));
      this.#watched = new Map(watched.map((addr) => [addressKey(addr), addr]));
      this.#values = new Map();
      const values: Record<string, JsonValue> = {};
      watched.forEach((addr, i) => {
        const version = versions[i];
        if (version === undefined) return;
        const key = addressKey(addr);
        this.#values.set(key, version.value);
        values[key] = version.value;
      });
      this.#inboxKey = addressKey(inboxAddr);
      this.#inbox = new Set(inbox.map((e) => e.id));
      this.#fold = fold;
      this.#context = [...fold.snapshot(id, readAt).ids];
      const previewMap: Record<string, JsonValue> = {};
      for (const task of tasks) {
        const preview = previews.current(task.id);
        if (preview !== undefined) previewMap[String(task.id)] = preview;
      }
      return {
        conversation,
        tail: this.#tail,
        entries,
        context: [...this.#context],
        tasks,
        inbox,
        values,
        previews: previewMap,
        faulted: harness.fault !== undefined,
        readAt,
      };
    };
  }

  onCommit(commit: CommittedBatch, outputs: readonly PreviewOutput[]): void {
    if (!this.accepting) return;
    const { events, deleted, broken } = this.#derive(commit, outputs);
    this.advance(commit.last);
    this.enqueue(commit.last, events, this.deliverable(commit, events));
    if (broken) {
      const error: WatchFault = {
        code: "context",
        message: `a head in conversation ${this.#id} moved the context boundary backwards; call resnapshot`,
      };
      this.enqueue(commit.last, [{ type: "fault", error }], this.deliverable(undefined, [{ type: "fault", error }]));
      this.suspend();
    }
    if (deleted) this.close();
  }

  onOutput(output: PreviewOutput): void {
    if (!this.accepting || !this.#tasks.has(output.task)) return;
    const event: ConversationEvent = { type: "task_output", task: output.task, ops: output.ops };
    this.enqueue(this.lastSeq, [event], this.deliverable(undefined, [event]));
  }

  #derive(
    commit: CommittedBatch,
    outputs: readonly PreviewOutput[],
  ): { events: ConversationEvent[]; deleted: boolean; broken: boolean } {
    const events: ConversationEvent[] = [];
    const values = new Map<string, JsonValue | undefined>();
    let inboxOps: InboxOp[] = [];
    let contextTouched = false;
    let deleted = false;
    let broken = false;
    const writes: CommitBatch["writes"] = commit.batch.writes;
    writes.forEach((write, i) => {
      const seq = commit.first + i;
      switch (write.type) {
        case "entry": {
          const entry = write.entry;
          if (entry.conversationId !== this.#id) break;
          events.push({ type: "entry", entry });
          if (this.#fold?.add(entry) === "rewind") broken = true;
          if (extendsContext(entry)) this.#context.push(entry.id);
          else contextTouched = true;
          break;
        }
        case "task": {
          const task = write.task;
          if (task.conversationId !== this.#id) break;
          events.push({ type: "task_start", task });
          if (task.role === "terminal") events.push({ type: "task_end", task });
          else this.#tasks.set(task.id, task);
          break;
        }
        case "patch": {
          const previous = this.#tasks.get(write.id);
          if (previous === undefined) break;
          const marked = previous.abort === true || write.abort === true;
          const task: Task = {
            ...previous,
            role: write.role,
            state: write.state,
            ...(marked ? { abort: true as const } : {}),
            ...(write.owns === undefined ? {} : { owns: write.owns }),
          };
          this.#tasks.set(task.id, task);
          events.push({ type: "task_update", task, previous });
          break;
        }
        case "settle": {
          const previous = this.#tasks.get(write.id);
          if (previous === undefined) break;
          this.#tasks.delete(write.id);
          // The settlement's last preview ops (the output it records and no scratch commit wrote) come
          // before its task_end, which drops the preview (preview.ts).
          const last = outputs.find((output) => output.task === write.id);
          if (last !== undefined) events.push({ type: "task_output", task: write.id, ops: last.ops });
          events.push({ type: "task_end", task: { ...previous, role: "terminal", state: write.state } });
          // Settlement retires the task's scratch in the same commit (§4.6).
          for (const [key, addr] of this.#watched) {
            if ("scratch" in addr.scope && addr.scope.scratch === write.id && this.#values.has(key))
              values.set(key, undefined);
          }
          break;
        }
        case "value.set":
        case "value.delete": {
          const key = addressKey(write.addr);
          if (this.#watched.has(key)) values.set(key, write.type === "value.set" ? write.value : undefined);
          break;
        }
        case "list.append":
        case "list.remove":
        case "list.clear":
          if (addressKey(write.addr) === this.#inboxKey) inboxOps = this.#inboxOp(inboxOps, write, seq);
          break;
        case "deleteConversation":
          if (write.id === this.#id) deleted = true;
          break;
        case "createConversation":
          break;
        default: {
          const never: never = write;
          throw new TypeError(`unknown write ${String((never as { type?: unknown }).type)}`);
        }
      }
    });
    for (const [key, value] of values) {
      const addr = this.#watched.get(key) as Address;
      if (value === undefined) this.#values.delete(key);
      else this.#values.set(key, value);
      events.push({ type: "value", addr, value });
    }
    if (inboxOps.length > 0) events.push({ type: "inbox", ops: inboxOps });
    if (contextTouched && !broken && this.#fold !== undefined) {
      const ids = this.#fold.snapshot(this.#id, commit.last).ids;
      if (!sameIds(ids, this.#context)) {
        this.#context = [...ids];
        events.push({ type: "context", ids: [...ids] });
      }
    }
    // A scratch commit's ops (a settled task's went out before its task_end above).
    for (const output of outputs) {
      if (this.#tasks.has(output.task)) events.push({ type: "task_output", task: output.task, ops: output.ops });
    }
    return { events, deleted, broken };
  }

  /** Fold one inbox write into this commit's ops (§8.1: an idle same-commit append + remove emits none). */
  #inboxOp(
    ops: InboxOp[],
    write: Extract<CommitBatch["writes"][number], { type: "list.append" | "list.remove" | "list.clear" }>,
    seq: Id,
  ): InboxOp[] {
    switch (write.type) {
      case "list.append": {
        const item: Element<QueuedInput> = { id: seq, value: write.value as unknown as QueuedInput };
        this.#inbox.add(seq);
        return [...ops, { type: "append", item }];
      }
      case "list.remove": {
        const id = write.element;
        const present = this.#inbox.delete(id);
        const appended = ops.findIndex((op) => op.type === "append" && op.item.id === id);
        if (appended !== -1) return ops.filter((_, i) => i !== appended);
        return present ? [...ops, { type: "remove", id }] : ops;
      }
      case "list.clear": {
        // Appends of this commit vanish with the clear; a clear is needed only if the view may hold
        // elements: older ones still present, or earlier removes/clears in this commit.
        const thisCommit = new Set(ops.flatMap((op) => (op.type === "append" ? [op.item.id] : [])));
        const older = [...this.#inbox].some((id) => !thisCommit.has(id));
        const needed = older || ops.some((op) => op.type !== "append");
        this.#inbox.clear();
        return needed ? [{ type: "clear" }] : [];
      }
      default: {
        const never: never = write;
        throw new TypeError(`unknown list write ${String((never as { type?: unknown }).type)}`);
      }
    }
  }
}

/** A conversation watch delivering typed events. */
export class ConversationWatch extends ConversationWatchBase<ConversationEvent> {
  protected deliverable(
    _commit: CommittedBatch | undefined,
    events: readonly ConversationEvent[],
  ): readonly ConversationEvent[] {
    return events;
  }

  protected terminal(event: TerminalEvent): { fold: ConversationEvent; out: ConversationEvent } {
    return { fold: event, out: event };
  }
}

/** A conversation watch delivering every CommittedBatch itself (`raw: true`); its view is still maintained. */
export class RawConversationWatch extends ConversationWatchBase<RawWatchEvent> {
  protected deliverable(
    commit: CommittedBatch | undefined,
    events: readonly ConversationEvent[],
  ): readonly RawWatchEvent[] {
    if (commit !== undefined) return [commit];
    return events.flatMap((e): RawWatchEvent[] => (e.type === "fault" || e.type === "closed" ? [e] : []));
  }

  protected terminal(event: TerminalEvent): { fold: ConversationEvent; out: RawWatchEvent } {
    return { fold: event, out: event };
  }
}

// ---------------------------------------------------------------------------------------------------
// Capture helpers

/**
 * The values a watch follows: every value the registered task kinds declare in `config` (scratch specs
 * skipped: they belong to one running task), bound by `binding`, plus `extra`, deduplicated by key.
 * `scopes` limits which declared specs count (a session watch takes only session-scoped ones).
 */
export function watchedAddresses(
  harness: WatchedSession,
  binding: { readonly conversationId?: Id },
  extra: readonly ValueRef<unknown>[],
  scopes: readonly ("session" | "conversation")[] = ["session", "conversation"],
): Address[] {
  const out = new Map<string, Address>();
  for (const name of harness.taskKinds.names()) {
    const config = harness.taskKinds.get(name)?.config ?? {};
    for (const spec of Object.values(config) as ValueSpec<unknown>[]) {
      if (spec.scopeKind === "scratch" || !scopes.includes(spec.scopeKind)) continue;
      const addr = bind(spec, binding);
      out.set(addressKey(addr), addr);
    }
  }
  for (const ref of extra) {
    const addr = bind(ref, binding);
    out.set(addressKey(addr), addr);
  }
  return [...out.values()];
}

/** The newest `tail` entries of the fork-aware transcript through `readAt`, ascending. */
async function tailEntries(storage: Storage, conversationId: Id, readAt: Id, tail: number): Promise<Entry[]> {
  const pages: (readonly Entry[])[] = [];
  let remaining = tail;
  let before = readAt + 1;
  while (remaining > 0) {
    const page = await storage.scanEntries({ conversationId, before, limit: Math.min(remaining, PAGE) });
    pages.unshift(page.items);
    remaining -= page.items.length;
    if (page.next === undefined || page.items.length === 0) break;
    before = page.next;
  }
  return pages.flat();
}

async function liveTasks(storage: Storage, conversationId: Id): Promise<Task[]> {
  const tasks: Task[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await storage.scanTasks({
      conversationIds: [conversationId],
      live: true,
      limit: PAGE,
      ...(after === undefined ? {} : { after }),
    });
    tasks.push(...page.items);
    if (page.next === undefined) return tasks;
    after = page.next;
  }
}

async function readWholeList<T>(storage: Storage, addr: List<T>): Promise<Element<T>[]> {
  const items: Element<T>[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await storage.readList<T>(addr, { limit: PAGE, ...(after === undefined ? {} : { after }) });
    items.push(...page.items);
    if (page.next === undefined) return items;
    after = page.next;
  }
}

function sameIds(a: readonly Id[], b: readonly Id[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
