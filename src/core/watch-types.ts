/**
 * Watch types (§9.4): the views a watcher renders, the typed events derived from the commit stream, the
 * per-commit messages transports send, and the handle. Everything a view or event holds is plain JSON
 * (objects, arrays, numbers, strings), so a host sends views and events over SSE/WebSocket as they are
 * and a UI in another process folds them with the same reducer (`applyEvent`, watch-reduce.ts).
 *
 * Where the spec writes `ReadonlyMap<Address, JsonValue>`, views hold a plain object keyed by the
 * address's canonical string (`addressKey`, src/storage/shared.ts: one key per address). Previews are
 * keyed by the task id as a decimal string (`String(id)`), for the same reason.
 */
import type { Op } from "@earendil-works/chord/delta";
import type { Address, Conversation, Element, Entry, Id, JsonObject, JsonValue, Task } from "../storage/records.js";
import type { Call } from "./call.js";
import type { CommittedBatch } from "./session-types.js";
import type { QueuedInput } from "./inbox.js";
import type { ValueRef } from "./state.js";

/** A Chord delta op on a task's preview (r replace, s set, d delete, a append, t truncate, p splice, m move). */
export type DeltaOp = Op;

/** One conversation as a watcher sees it (§9.4). */
export interface ConversationView {
  readonly conversation: Conversation;
  /** How many entries `entries` keeps (the reducer trims to it; not in the spec's field list, but a
   * kind-free reducer cannot trim without it). */
  readonly tail: number;
  /** The last `tail` entries of the fork-aware transcript, ascending ids; older ones via `entries(id, { before })`. */
  readonly entries: readonly Entry[];
  /** The derived context (§2.2), as entry ids. */
  readonly context: readonly Id[];
  /** Live tasks of this conversation, ascending ids. */
  readonly tasks: readonly Task[];
  /** The queued inputs (pi.inbox, §8.1), in admission order. */
  readonly inbox: readonly Element<QueuedInput>[];
  /** addressKey(addr) -> current value, for every value the registered kinds declare in config (bound to
   * this conversation) plus those asked for; absent keys have no value. */
  readonly values: Readonly<Record<string, JsonValue>>;
  /** String(taskId) -> the kind's tracked preview (§5.2), per live task that has one. */
  readonly previews: Readonly<Record<string, JsonValue>>;
  readonly faulted: boolean;
  /** The last commit this view includes (commits in between had nothing for this watch). */
  readonly readAt: Id;
}

/** What a session watch sees that is not one conversation's (§9.4). */
export interface SessionView {
  /**
   * The first page of conversations at capture (ascending ids, at most `conversations` of them, default
   * 100), plus every conversation created since; deleted ones leave. Further pages: `harness.conversations`.
   */
  readonly conversations: readonly Conversation[];
  /** addressKey(addr) -> value for the watched session values (pi.usage.totals, pi.session.name,
   * session-scoped config of registered kinds, and those asked for). */
  readonly values: Readonly<Record<string, JsonValue>>;
  readonly faulted: boolean;
  readonly readAt: Id;
}

export type InboxOp =
  | { readonly type: "append"; readonly item: Element<QueuedInput> }
  | { readonly type: "remove"; readonly id: Id }
  | { readonly type: "clear" };

/**
 * What a fault event carries: plain JSON so it crosses the wire. `lagged`: this watcher's backlog
 * exceeded its bound (call resnapshot). `faulted`: the session fail-stopped (§6.1). `context`: stored
 * heads broke the boundary rule and the watch cannot follow the context incrementally (resnapshot).
 */
export interface WatchFault {
  readonly code: "lagged" | "faulted" | "context";
  readonly message: string;
  /** For `faulted`: the task, kind and method of the fail-stop report (§6.1), when known. */
  readonly taskId?: Id;
  readonly kind?: string;
  readonly method?: string;
}

export type ConversationEvent =
  | { readonly type: "entry"; readonly entry: Entry }
  | { readonly type: "task_start"; readonly task: Task }
  | { readonly type: "task_update"; readonly task: Task; readonly previous: Task }
  | { readonly type: "task_end"; readonly task: Task }
  /** Ops on the task's preview; the folded preview lives in view.previews, never in the event. */
  | { readonly type: "task_output"; readonly task: Id; readonly ops: readonly DeltaOp[] }
  | { readonly type: "value"; readonly addr: Address; readonly value: JsonValue | undefined }
  | { readonly type: "inbox"; readonly ops: readonly InboxOp[] }
  /** A head or edit changed the derived context: the complete new id list. */
  | { readonly type: "context"; readonly ids: readonly Id[] }
  | { readonly type: "fault"; readonly error: unknown }
  | { readonly type: "closed" };

/** A usage report (§8.2): one element of the session list pi.usage and the totals after it. */
export type SessionEvent =
  | { readonly type: "conversation"; readonly conversation: Conversation; readonly change: "created" | "deleted" }
  | { readonly type: "value"; readonly addr: Address; readonly value: JsonValue | undefined }
  | { readonly type: "usage"; readonly row: JsonObject; readonly totals: JsonValue | undefined }
  | {
      readonly type: "report";
      readonly task?: Id;
      readonly kind?: string;
      readonly method?: string;
      readonly error: unknown;
    }
  | { readonly type: "fault"; readonly error: unknown }
  | { readonly type: "closed" };

/** A raw watch (`raw: true`) delivers the commits themselves, plus fault/closed. */
export type RawWatchEvent = CommittedBatch | Extract<ConversationEvent, { readonly type: "fault" | "closed" }>;

/**
 * One message per commit, for transports (SSE sends it with `id: seq`). `seq` is the commit's last
 * sequence; fold it with `applyMessage`, which sets `readAt = seq`. Preview output published between
 * commits travels in a message whose `seq` is the newest commit the watch has processed.
 */
export interface WatchMessage<Event> {
  readonly seq: Id;
  readonly events: readonly Event[];
}

export interface WatchHandle<View, Event> {
  /** Captured on the line at watch(); folded with each message before its events are delivered. */
  readonly view: View;
  /** Deliver everything since the capture, then live; one listener per handle (start or startCommits). */
  start(listener: (event: Event) => void): void;
  /** The same stream grouped per commit, for transports. */
  startCommits(listener: (message: WatchMessage<Event>) => void): void;
  /**
   * A fresh capture on the line; the subscription continues from it (after a lag fault, or any time).
   * Delivery pauses from this call until the reactions of the returned promise have run, so a transport
   * that sends the new view in its `then`/after its `await` sends it before any later event. Safe to
   * call from inside a listener.
   */
  resnapshot(call: Call): Promise<View>;
  /** Stop delivery now; pending events are dropped. Idempotent. */
  unsubscribe(): void;
}

export interface ConversationWatchOptions {
  /** How many of the newest entries the view keeps. */
  readonly tail: number;
  /** Extra values to watch; conversation specs bind to the watched conversation. */
  readonly values?: readonly ValueRef<unknown>[];
  /** Deliver the CommittedBatch objects themselves (for a receiver that has a harness). */
  readonly raw?: boolean;
  /** Undelivered events allowed before the watcher gets a lag fault (default 1,000). */
  readonly maxBacklog?: number;
}

export interface SessionWatchOptions {
  /** Extra session values to watch. */
  readonly values?: readonly ValueRef<unknown>[];
  /** Size of the captured first page of conversations (default 100, at most 1,000). */
  readonly conversations?: number;
  readonly maxBacklog?: number;
}

export const DEFAULT_MAX_BACKLOG = 1000;
