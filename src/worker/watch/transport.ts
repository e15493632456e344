/**
 * Watch transports inside the session Durable Object (docs/api.md "Watch"): Server-Sent Events (Hono's
 * `streamSSE`) and hibernatable WebSockets carrying the same messages, fed by one `WatchFeed` per
 * watched conversation (and one for the session) of the open harness (`FeedBook`).
 *
 * SSE: `event: view` (data: the view) first, then `event: commit` (data: `{ seq, events }`) per commit,
 * each with `id:`; keep-alive comments every `keepAliveMs`; the stream ends when the client goes away or
 * the harness closes. WebSocket: JSON text frames `{ type: "view", id, view }` and
 * `{ type: "commit", id, seq, events }`. A socket's attachment records what it watches and the last id
 * sent, so after hibernation the object re-registers it (see SessionObject).
 */
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { Harness } from "../../core/harness.js";
import {
  watchConversation,
  watchSession,
  type ConversationEvent,
  type ConversationView,
  type SessionEvent,
  type SessionView,
} from "../../core/watch.js";
import type { Id, Task } from "../../storage/records.js";
import {
  presentEntry,
  presentEntryToUser,
  presentTask,
  presentTaskToUser,
  presentUsageEvent,
} from "../../kinds/stored.js";
import { pendingAll, pendingHere } from "../../kinds/pending-types.js";
import { waitingConversations, waitingInputs } from "../../kinds/waiting.js";
import { DEFAULT_FEED_BUFFER, WatchFeed, type FeedOut, type FeedPresenter, type FeedSubscriber } from "./feed.js";

export type ConversationFeed = WatchFeed<ConversationView, ConversationEvent>;
export type SessionFeed = WatchFeed<SessionView, SessionEvent>;
export type AnyFeed = ConversationFeed | SessionFeed;

/** What a watch transport watches: a conversation id or the session. */
export type WatchTarget = { readonly type: "conversation"; readonly id: Id } | { readonly type: "session" };

/**
 * Who holds a watch opened with a user's token: the user, the token's issue time and expiry (Unix seconds;
 * watch/guard.ts).
 */
export interface Watcher {
  readonly sub: string;
  readonly iat?: number;
  readonly exp: number;
}

export function watcherOf(value: unknown): Watcher | undefined {
  if (value === null || typeof value !== "object") return undefined;
  const { sub, iat, exp } = value as { sub?: unknown; iat?: unknown; exp?: unknown };
  if (typeof sub !== "string" || typeof exp !== "number" || (iat !== undefined && typeof iat !== "number"))
    return undefined;
  return { sub, exp, ...(iat === undefined ? {} : { iat }) };
}

/** A hibernatable socket's serialized attachment. */
export interface SocketAttachment {
  readonly target: WatchTarget;
  readonly lastEventId: string | undefined;
  /** A user's watch: closes at its token's expiry or on revocation (watch/guard.ts). */
  readonly watcher?: Watcher;
}

export interface WatchSeams {
  /** Messages a feed keeps for resumption. */
  readonly bufferSize?: number;
  readonly keepAliveMs?: number;
  /** Entries a conversation view keeps. */
  readonly tail?: number;
}

export const KEEP_ALIVE_MS = 15_000;
export const VIEW_TAIL = 100;
/** Feeds with no subscriber kept for resumption, per object. */
const IDLE_FEEDS = 16;
/** Messages an SSE subscriber may have unsent before its stream is ended (it reconnects and resumes). */
const MAX_UNSENT = 2_000;

let seams: WatchSeams = {};
/** SSE streams open in this isolate (tests check that a client's disconnect ends its stream). */
let openStreams = 0;

export function openSseStreams(): number {
  return openStreams;
}

/** Test only: buffer size, keep-alive interval, view tail for feeds opened from now on. */
export function setWatchSeams(next: WatchSeams): void {
  seams = next;
}

export function keepAliveMs(): number {
  return seams.keepAliveMs ?? KEEP_ALIVE_MS;
}

/**
 * What a conversation watcher sees: entries and tasks as the HTTP API serves them (`presentEntry`: a tool
 * result's data whole, §9.3; `presentTask`: a settled tool task's output whole), in the view and in
 * `entry` and `task_*` events alike, so folding the events gives a fresh view's entries and tasks. The
 * core watch keeps the stored records; a view is presented once per fold (memoized by identity).
 */
export function conversationPresenter(): FeedPresenter<ConversationView, ConversationEvent> {
  let last: { readonly raw: ConversationView; readonly shown: ConversationView } | undefined;
  return {
    view(raw) {
      if (last?.raw !== raw)
        last = { raw, shown: { ...raw, entries: raw.entries.map(presentEntry), tasks: raw.tasks.map(presentTask) } };
      return last.shown;
    },
    event(event) {
      return event.type === "entry" ? { ...event, entry: presentEntry(event.entry) } : withTasks(event, presentTask);
    },
  };
}

/** What a watch shows one subscriber of a feed (a user's watch sees less than the feed carries). */
export type OutPresenter = (out: FeedOut<unknown, unknown>) => FeedOut<unknown, unknown>;

/**
 * What a user's watch of `target` sees: a conversation's tasks (in its view and its `task_*` events) as
 * `presentTaskToUser` shows them, no remote call's URL, and its entries as `presentEntryToUser` shows them, no
 * inbound delivery's payload; the session view and events hold no task or entry.
 */
export function userPresenter(target: WatchTarget): OutPresenter {
  if (target.type === "session") return (out) => out;
  return (raw) => {
    const out = raw as FeedOut<ConversationView, ConversationEvent>;
    switch (out.type) {
      case "view":
        return {
          ...out,
          view: {
            ...out.view,
            entries: out.view.entries.map(presentEntryToUser),
            tasks: out.view.tasks.map(presentTaskToUser),
          },
        };
      case "commit":
        return {
          ...out,
          events: out.events.map((event) =>
            event.type === "entry"
              ? { ...event, entry: presentEntryToUser(event.entry) }
              : withTasks(event, presentTaskToUser),
          ),
        };
      case "nudge":
        return out;
      default: {
        const never: never = out;
        return never;
      }
    }
  };
}

/** `event` with the tasks it carries shown by `present` (every other event as it is). */
function withTasks(event: ConversationEvent, present: (task: Task) => Task): ConversationEvent {
  switch (event.type) {
    case "task_start":
    case "task_end":
      return { ...event, task: present(event.task) };
    case "task_update":
      return { ...event, task: present(event.task), previous: present(event.previous) };
    case "entry":
    case "task_output":
    case "value":
    case "inbox":
    case "context":
    case "fault":
    case "closed":
      return event;
    default: {
      const never: never = event;
      return never;
    }
  }
}

/**
 * What a session watcher sees: a `usage` event's row whole, as `GET /usage` serves it (`presentUsageEvent`).
 * The session view holds no usage rows (the `pi.usage.totals` value is whole as stored), so it is shown as is.
 */
export function sessionPresenter(): FeedPresenter<SessionView, SessionEvent> {
  return { view: (view) => view, event: presentUsageEvent };
}

/** The feeds of one open harness. */
export class FeedBook {
  readonly #harness: Harness;
  readonly #feeds = new Map<string, Promise<AnyFeed>>();
  /** Feeds that finished opening (a live nudge goes only to watchers that exist now). */
  readonly #ready = new Map<string, AnyFeed>();
  #closed = false;

  constructor(harness: Harness) {
    this.#harness = harness;
  }

  conversation(id: Id): Promise<ConversationFeed> {
    return this.#get(`c${id}`, async (onEnd) => {
      const handle = await watchConversation(
        this.#harness,
        id,
        { tail: seams.tail ?? VIEW_TAIL, values: [waitingInputs, pendingHere] },
        BACKGROUND_CONTEXT,
      );
      return new WatchFeed<ConversationView, ConversationEvent>(
        handle,
        seams.bufferSize ?? DEFAULT_FEED_BUFFER,
        onEnd,
        conversationPresenter(),
      );
    }) as Promise<ConversationFeed>;
  }

  session(): Promise<SessionFeed> {
    return this.#get("s", async (onEnd) => {
      const handle = await watchSession(this.#harness, BACKGROUND_CONTEXT, {
        values: [waitingConversations, pendingAll],
      });
      return new WatchFeed<SessionView, SessionEvent>(
        handle,
        seams.bufferSize ?? DEFAULT_FEED_BUFFER,
        onEnd,
        sessionPresenter(),
      );
    }) as Promise<SessionFeed>;
  }

  target(target: WatchTarget): Promise<AnyFeed> {
    return target.type === "session" ? this.session() : this.conversation(target.id);
  }

  /** A live rig nudge to the watchers of a conversation (docs/rig.md); false when nobody watches it. */
  announce(conversationId: Id, nudge: unknown): boolean {
    const feed = this.#ready.get(`c${conversationId}`);
    if (feed === undefined || this.#closed) return false;
    return (feed as WatchFeed<{ readAt: Id }, { type: string }>).announce(nudge);
  }

  /** End every feed (the harness is being replaced). */
  close(): void {
    this.#closed = true;
    for (const feed of this.#feeds.values())
      void feed.then(
        (f) => f.close(),
        () => undefined,
      );
    this.#feeds.clear();
    this.#ready.clear();
  }

  #get(key: string, open: (onEnd: () => void) => Promise<AnyFeed>): Promise<AnyFeed> {
    const existing = this.#feeds.get(key);
    if (existing !== undefined && !this.#closed) return existing;
    const created = open(() => {
      if (this.#feeds.get(key) === created) {
        this.#feeds.delete(key);
        this.#ready.delete(key);
      }
    });
    this.#feeds.set(key, created);
    void created.then(
      (feed) => {
        if (this.#feeds.get(key) === created) this.#ready.set(key, feed);
      },
      () => undefined,
    );
    created.catch(() => this.#feeds.delete(key));
    void created.then(
      () => this.#trim(key),
      () => undefined,
    );
    return created;
  }

  /** Keep at most IDLE_FEEDS feeds without subscribers (oldest first go), never the one just used. */
  async #trim(keep: string): Promise<void> {
    const idle: [string, AnyFeed][] = [];
    for (const [key, pending] of this.#feeds) {
      if (key === keep) continue;
      const feed = await pending.catch(() => undefined);
      if (feed !== undefined && feed.subscribers === 0) idle.push([key, feed]);
    }
    for (const [, feed] of idle.slice(0, Math.max(0, idle.length - IDLE_FEEDS))) feed.close();
  }
}

function payload<V, E>(out: FeedOut<V, E>): string {
  switch (out.type) {
    case "view":
      return JSON.stringify(out.view);
    case "commit":
      return JSON.stringify({ seq: out.seq, events: out.events });
    case "nudge":
      return JSON.stringify(out.nudge);
    default: {
      const never: never = out;
      return never;
    }
  }
}

/**
 * An SSE response for one subscriber of `feed`; `track` registers how to end it early (a user's watch at expiry or
 * revocation).
 */
export function sseResponse(
  c: Context,
  feed: AnyFeed,
  lastEventId: string | undefined,
  track?: (end: () => void) => () => void,
  present: OutPresenter = (out) => out,
): Response {
  return streamSSE(c, async (stream) => {
    const queue: (FeedOut<unknown, unknown> | "keep-alive")[] = [];
    let ended = false;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      const resume = wake;
      wake = undefined;
      resume?.();
    };
    const subscriber: FeedSubscriber<unknown, unknown> = {
      send(out) {
        if (ended) return;
        queue.push(out);
        // A client that does not read: drop what it has not read and end its stream; it reconnects
        // and resumes from its last id, or gets a fresh view.
        if (queue.length > MAX_UNSENT) {
          queue.length = 0;
          ended = true;
        }
        notify();
      },
      end() {
        ended = true;
        notify();
      },
    };
    (feed as WatchFeed<{ readAt: Id }, { type: string }>).subscribe(
      subscriber as FeedSubscriber<{ readAt: Id }, { type: string }>,
      lastEventId,
    );
    openStreams += 1;
    const untrack = track?.(() => subscriber.end());
    stream.onAbort(() => {
      ended = true;
      notify();
    });
    const timer = setInterval(() => {
      queue.push("keep-alive");
      notify();
    }, keepAliveMs());
    try {
      for (;;) {
        while (queue.length > 0 && !stream.aborted) {
          const out = queue.shift() as FeedOut<unknown, unknown> | "keep-alive";
          if (out === "keep-alive") await stream.write(": keep-alive\n\n");
          else await stream.writeSSE({ event: out.type, id: out.id, data: payload(present(out)) });
        }
        if (ended || stream.aborted) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    } finally {
      openStreams -= 1;
      untrack?.();
      clearInterval(timer);
      (feed as WatchFeed<{ readAt: Id }, { type: string }>).unsubscribe(
        subscriber as FeedSubscriber<{ readAt: Id }, { type: string }>,
      );
    }
  });
}

/** A close code a server may send back (1005, 1006 and 1015 are reserved for reporting, never sent). */
export function sendableCloseCode(code: number): number {
  return code === 1000 ||
    (code >= 1001 && code <= 1003) ||
    (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999)
    ? code
    : 1000;
}

/**
 * A feed subscriber that writes to a (hibernatable) WebSocket and records the last id sent; a user's socket
 * gets the user's view (`userPresenter`).
 */
export function socketSubscriber(
  ws: WebSocket,
  target: WatchTarget,
  watcher?: Watcher,
): FeedSubscriber<unknown, unknown> {
  const present = watcher === undefined ? undefined : userPresenter(target);
  return {
    send(out) {
      try {
        ws.send(JSON.stringify(present === undefined ? out : present(out)));
        ws.serializeAttachment({
          target,
          lastEventId: out.id,
          ...(watcher === undefined ? {} : { watcher }),
        } satisfies SocketAttachment);
      } catch {
        // The socket is gone; its close handler unsubscribes.
      }
    },
    end() {
      try {
        ws.close(1000, "the session closed");
      } catch {
        // already closed
      }
    },
  };
}

export function readAttachment(ws: WebSocket): SocketAttachment | undefined {
  const value: unknown = ws.deserializeAttachment();
  if (value === null || typeof value !== "object") return undefined;
  const target = (value as { target?: unknown }).target;
  if (target === null || typeof target !== "object") return undefined;
  const lastEventId = (value as { lastEventId?: unknown }).lastEventId;
  const type = (target as { type?: unknown }).type;
  const id = (target as { id?: unknown }).id;
  const parsed: WatchTarget | undefined =
    type === "session"
      ? { type: "session" }
      : type === "conversation" && typeof id === "number"
        ? { type: "conversation", id }
        : undefined;
  if (parsed === undefined) return undefined;
  const watcher = watcherOf((value as { watcher?: unknown }).watcher);
  return {
    target: parsed,
    lastEventId: typeof lastEventId === "string" ? lastEventId : undefined,
    ...(watcher === undefined ? {} : { watcher }),
  };
}
