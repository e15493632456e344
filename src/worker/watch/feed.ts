/**
 * A watch feed: one core watch (src/core/watch.ts) per watched conversation (or the session) of an open
 * harness, fanned out to every SSE and WebSocket subscriber, with a bounded buffer of recent per-commit
 * messages so a reconnecting client resumes gap-free (§9.4; docs/api.md "Watch"). Used by the watch transport
 * (src/worker/watch/transport.ts) inside the session Durable Object.
 *
 * Event ids: a per-commit message has `id` = the commit's last sequence. Preview-only messages (task
 * output published between commits) carry the newest processed commit's sequence; the second and later
 * messages with the same sequence get `seq.n`, so every id names exactly one position in the stream.
 *
 * Resume: a subscriber that names an id this feed issued and still buffers gets the messages after it
 * and no view; any other id (outside the buffer, from before a restart, or unknown) gets a fresh view
 * (the core watch's current view, which is folded exactly through the last message sent).
 *
 * Presentation: a feed may be given a `FeedPresenter` that maps the view and each event to what clients
 * see (a tool result entry's data whole, §9.3, while storage keeps it compact); it maps every view sent
 * and every message as it is buffered, so a replay, a fresh view and a live message agree.
 */
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import type { WatchHandle, WatchMessage } from "../../core/watch.js";
import type { Id } from "../../storage/records.js";

/**
 * What a transport sends: a view, one per-commit message, or a live rig nudge (never a
 * commit, never stored; its id is `seq.n` like preview-only messages', so a resume stays gap-free).
 */
export type FeedOut<View, Event> =
  | { readonly type: "view"; readonly id: string; readonly view: View }
  | { readonly type: "commit"; readonly id: string; readonly seq: Id; readonly events: readonly Event[] }
  | { readonly type: "nudge"; readonly id: string; readonly seq: Id; readonly nudge: unknown };

export interface FeedSubscriber<View, Event> {
  send(out: FeedOut<View, Event>): void;
  /** The feed ended (the harness closed): the transport ends its stream. */
  end(): void;
}

type Buffered<Event> =
  | { readonly type: "commit"; readonly id: string; readonly seq: Id; readonly events: readonly Event[] }
  | { readonly type: "nudge"; readonly id: string; readonly seq: Id; readonly nudge: unknown };

type FeedEvent = { readonly type: string; readonly error?: unknown };

/** What a feed's clients see of a view and of an event (identity when absent). */
export interface FeedPresenter<View, Event> {
  view(view: View): View;
  event(event: Event): Event;
}

/** How many recent messages a feed keeps for resumption. */
export const DEFAULT_FEED_BUFFER = 512;

export class WatchFeed<View extends { readonly readAt: Id }, Event extends FeedEvent> {
  readonly #handle: WatchHandle<View, Event>;
  readonly #capacity: number;
  readonly #subscribers = new Set<FeedSubscriber<View, Event>>();
  readonly #onEnd: () => void;
  readonly #present: FeedPresenter<View, Event> | undefined;
  #buffer: Buffered<Event>[] = [];
  /** The position just before the first buffered message, and whether a client can hold its id. */
  #floor: { id: string; issued: boolean };
  /** Id of the newest position (last message, or the floor). */
  #lastId: string;
  #idSeq: Id;
  #idSub = 0;
  #ended = false;
  #resyncing = false;

  constructor(
    handle: WatchHandle<View, Event>,
    capacity: number,
    onEnd: () => void,
    present?: FeedPresenter<View, Event>,
  ) {
    this.#handle = handle;
    this.#capacity = capacity;
    this.#onEnd = onEnd;
    this.#present = present;
    this.#idSeq = handle.view.readAt;
    this.#lastId = String(handle.view.readAt);
    this.#floor = { id: this.#lastId, issued: false };
    handle.startCommits((message) => this.#onMessage(message));
  }

  get subscribers(): number {
    return this.#subscribers.size;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Subscribe; with `lastEventId` inside the buffer, replay after it, otherwise start with a view. */
  subscribe(subscriber: FeedSubscriber<View, Event>, lastEventId: string | undefined): void {
    if (this.#ended) {
      subscriber.end();
      return;
    }
    const replay = lastEventId === undefined || this.#resyncing ? undefined : this.#after(lastEventId);
    if (replay === undefined) {
      if (!this.#resyncing) subscriber.send(this.#view());
    } else {
      for (const message of replay) subscriber.send(message);
    }
    this.#subscribers.add(subscriber);
  }

  unsubscribe(subscriber: FeedSubscriber<View, Event>): void {
    this.#subscribers.delete(subscriber);
  }

  /** Stop the core watch (the feed is dropped while idle). */
  close(): void {
    this.#end();
  }

  #view(): FeedOut<View, Event> {
    if (this.#lastId === this.#floor.id) this.#floor.issued = true;
    const view = this.#handle.view;
    return { type: "view", id: this.#lastId, view: this.#present === undefined ? view : this.#present.view(view) };
  }

  #after(id: string): readonly Buffered<Event>[] | undefined {
    if (id === this.#floor.id && this.#floor.issued) return [...this.#buffer];
    const index = this.#buffer.findIndex((message) => message.id === id);
    return index < 0 ? undefined : this.#buffer.slice(index + 1);
  }

  #allocate(seq: Id): string {
    if (seq > this.#idSeq) {
      this.#idSeq = seq;
      this.#idSub = 0;
      return String(seq);
    }
    this.#idSub += 1;
    return `${this.#idSeq}.${this.#idSub}`;
  }

  #onMessage(message: WatchMessage<Event>): void {
    if (this.#ended) return;
    if (message.events.some((event) => event.type === "fault" && lagged(event.error))) {
      this.#resync();
      return;
    }
    const id = this.#allocate(message.seq);
    const present = this.#present;
    const events = present === undefined ? message.events : message.events.map((event) => present.event(event));
    this.#push({ type: "commit", id, seq: message.seq, events });
    if (message.events.some((event) => event.type === "closed")) this.#end();
  }

  /** Send a live rig nudge to every subscriber (not a commit); false when nobody is subscribed. */
  announce(nudge: unknown): boolean {
    if (this.#ended || this.#resyncing) return false;
    this.#push({ type: "nudge", id: this.#allocate(this.#idSeq), seq: this.#idSeq, nudge });
    return this.#subscribers.size > 0;
  }

  #push(buffered: Buffered<Event>): void {
    this.#buffer.push(buffered);
    if (this.#buffer.length > this.#capacity) {
      const dropped = this.#buffer.shift() as Buffered<Event>;
      this.#floor = { id: dropped.id, issued: true };
    }
    this.#lastId = buffered.id;
    for (const subscriber of [...this.#subscribers]) subscriber.send(buffered);
  }

  /** The feed's own watch fell behind: a fresh capture, sent to every subscriber as a view. */
  #resync(): void {
    this.#resyncing = true;
    this.#handle.resnapshot(BACKGROUND_CONTEXT).then(
      (view) => {
        this.#resyncing = false;
        this.#buffer = [];
        this.#lastId = this.#allocate(view.readAt);
        this.#floor = { id: this.#lastId, issued: false };
        for (const subscriber of [...this.#subscribers]) subscriber.send(this.#view());
      },
      () => this.#end(),
    );
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#handle.unsubscribe();
    for (const subscriber of [...this.#subscribers]) subscriber.end();
    this.#subscribers.clear();
    this.#onEnd();
  }
}

function lagged(error: unknown): boolean {
  return error !== null && typeof error === "object" && (error as { code?: unknown }).code === "lagged";
}
