/**
 * One watch subscription's delivery machinery (§9.4), shared by conversation and session watches: the
 * capture on the line, a bounded per-watch queue of per-commit messages, in-order delivery outside the
 * line, the lag fault, the resnapshot barrier and unsubscribe. Subclasses say how to capture a view and
 * how to derive events from a durable batch (watch-conversation.ts, watch-session.ts).
 *
 * Ordering: the hub calls `commit` synchronously from the harness's commit listener, on the line, in
 * commit order; derived events are queued there, so queue order is commit order. Delivery drains the
 * queue from a microtask, never on the line's own stack and never awaiting it, one message at a time:
 * the message's events are folded into the view first (so the view a listener sees already includes
 * the whole commit: a settling task and the successor created in the same batch never show an idle
 * gap), then its events are delivered in order before the next message starts.
 */
import type { Id } from "../storage/records.js";
import type { Call } from "./call.js";
import { PicoError } from "./errors.js";
import type { CommittedBatch } from "./session-types.js";
import type { CommitLine } from "./line.js";
import type { DeltaOp, WatchFault, WatchHandle, WatchMessage } from "./watch-types.js";

export type TerminalEvent = { readonly type: "fault"; readonly error: unknown } | { readonly type: "closed" };

/** A queued message: the events folded into the view and the events delivered (they differ for raw watches). */
interface Pending<Fold, Out> {
  readonly seq: Id;
  readonly fold: readonly Fold[];
  readonly out: readonly Out[];
  /** The closed message: the subscription ends once it is delivered. */
  readonly last?: true;
}

/** Preview ops flushed for one task (§5.2). */
export interface PreviewOutput {
  readonly task: Id;
  readonly ops: readonly DeltaOp[];
}

/** What the hub feeds: every durable batch (on the line, in order), preview output, fault and close. */
export interface HubMember {
  /**
   * `outputs`: preview ops the harness flushed for this commit (a scratch commit's task, a settled task), delivered
   * with it.
   */
  onCommit(commit: CommittedBatch, outputs: readonly PreviewOutput[]): void;
  /** Preview ops published between commits. */
  onOutput(output: PreviewOutput): void;
  fault(error: WatchFault): void;
  close(): void;
  /** Session watches: a hook or task error report. */
  onReport?(report: {
    readonly task?: Id;
    readonly kind?: string;
    readonly method?: string;
    readonly error: unknown;
  }): void;
}

type Listener<Out> =
  | { readonly kind: "events"; readonly fn: (event: Out) => void }
  | { readonly kind: "commits"; readonly fn: (message: WatchMessage<Out>) => void };

export interface ChannelHost {
  readonly line: CommitLine;
  /** Registration with the hub that feeds commits; called when the first capture is installed. */
  register(member: HubMember): void;
  unregister(member: HubMember): void;
  /** A listener threw: reported, delivery continues. */
  listenerError(error: unknown): void;
}

export abstract class WatchChannel<View extends { readonly readAt: Id }, Fold, Out>
  implements WatchHandle<View, Out>, HubMember
{
  readonly #host: ChannelHost;
  readonly #maxBacklog: number;
  #view: View | undefined;
  #queue: Pending<Fold, Out>[] = [];
  #backlog = 0;
  #listener: Listener<Out> | undefined;
  /** Newest commit this channel has processed (seq of preview-only messages). */
  #lastSeq: Id = 0;
  #lagged = false;
  /** A closed event is queued: nothing more is queued after it. */
  #ending = false;
  /** Unsubscribed, or the closed event was delivered. */
  #finished = false;
  #registered = false;
  /** Open resnapshot barriers: delivery pauses while any is open. */
  #holds = 0;
  #scheduled = false;
  #draining = false;
  /** Bumped by every installed capture, so a delivery loop notices it is stale. */
  #epoch = 0;

  constructor(host: ChannelHost, maxBacklog: number) {
    if (!Number.isSafeInteger(maxBacklog) || maxBacklog < 1)
      throw new RangeError(`maxBacklog must be a positive integer, got ${String(maxBacklog)}`);
    this.#host = host;
    this.#maxBacklog = maxBacklog;
  }

  /**
   * Read what the view needs from storage (on the line, so no commit lands meanwhile) and return a
   * synchronous finisher that installs the derivation state and returns the view. The finisher runs in
   * the same line operation, right after the reads.
   */
  protected abstract capture(): Promise<() => View>;
  abstract onCommit(commit: CommittedBatch, outputs: readonly PreviewOutput[]): void;
  abstract onOutput(output: PreviewOutput): void;
  /** The reducer: fold one message's events and set readAt. */
  protected abstract foldMessage(view: View, seq: Id, events: readonly Fold[]): View;
  protected abstract terminal(event: TerminalEvent): { readonly fold: Fold; readonly out: Out };

  get view(): View {
    if (this.#view === undefined) throw new PicoError("contract", "the watch has no view before its first capture");
    return this.#view;
  }

  /** The newest commit processed (for messages that carry no commit of their own). */
  protected get lastSeq(): Id {
    return this.#lastSeq;
  }

  /** Whether commits should be derived: not lagging, not ending, not finished. */
  protected get accepting(): boolean {
    return !this.#lagged && !this.#ending && !this.#finished;
  }

  /** First capture: on the line, registering the subscription in the same step. */
  async open(): Promise<this> {
    await this.#host.line.run(async () => {
      const finish = await this.capture();
      this.#install(finish());
    });
    return this;
  }

  start(listener: (event: Out) => void): void {
    this.#setListener({ kind: "events", fn: listener });
  }

  startCommits(listener: (message: WatchMessage<Out>) => void): void {
    this.#setListener({ kind: "commits", fn: listener });
  }

  resnapshot(_call: Call): Promise<View> {
    if (this.#finished || this.#ending) return Promise.reject(new PicoError("closed", "the watch has ended"));
    this.#holds += 1;
    return new Promise<View>((resolve, reject) => {
      const release = (): void => {
        this.#holds -= 1;
        this.#schedule();
      };
      this.#host.line
        .run(async () => {
          const finish = await this.capture();
          const view = finish();
          this.#install(view);
          return view;
        })
        .then(
          (view) => {
            resolve(view);
            // Queued after the promise's reactions, so the caller sends the view before later events.
            queueMicrotask(release);
          },
          (error: unknown) => {
            reject(error);
            queueMicrotask(release);
          },
        );
    });
  }

  unsubscribe(): void {
    if (this.#finished) return;
    this.#finish();
  }

  // ------------------------------------------------------------------------------------------------
  // Called by the hub, on the line

  /** Advance the processed position (every commit, whether or not it had events for this watch). */
  protected advance(seq: Id): void {
    if (seq > this.#lastSeq) this.#lastSeq = seq;
  }

  /** Stop deriving until the next capture (the watch cannot follow; it has queued a fault saying so). */
  protected suspend(): void {
    this.#lagged = true;
  }

  /** Queue one message; enforces the backlog bound. */
  protected enqueue(seq: Id, fold: readonly Fold[], out: readonly Out[]): void {
    if (!this.accepting || (fold.length === 0 && out.length === 0)) return;
    this.#queue.push({ seq, fold, out });
    this.#backlog += out.length;
    if (this.#backlog > this.#maxBacklog) {
      this.#queue = [];
      this.#backlog = 0;
      const error: WatchFault = {
        code: "lagged",
        message: `the watcher fell more than ${this.#maxBacklog} events behind; call resnapshot`,
      };
      const t = this.terminal({ type: "fault", error });
      this.#queue.push({ seq: this.#lastSeq, fold: [t.fold], out: [t.out] });
      this.#lagged = true;
    }
    this.#schedule();
  }

  /** The session fail-stopped: deliver a fault (the stream continues; the harness admits nothing more). */
  fault(error: WatchFault): void {
    if (this.#ending || this.#finished) return;
    const t = this.terminal({ type: "fault", error });
    this.#queue.push({ seq: this.#lastSeq, fold: [t.fold], out: [t.out] });
    this.#schedule();
  }

  /** End the stream: a closed event is delivered last; the subscription ends after it. */
  close(): void {
    if (this.#ending || this.#finished) return;
    const t = this.terminal({ type: "closed" });
    this.#queue.push({ seq: this.#lastSeq, fold: [t.fold], out: [t.out], last: true });
    this.#ending = true;
    this.#schedule();
  }

  // ------------------------------------------------------------------------------------------------

  #install(view: View): void {
    this.#view = view;
    this.#lastSeq = view.readAt;
    // Everything queued is older than the capture, except a closed message, which still ends the stream.
    this.#queue = this.#ending ? this.#queue.filter((m) => m.last === true) : [];
    this.#backlog = 0;
    this.#lagged = false;
    this.#epoch += 1;
    if (this.#finished) return;
    if (!this.#registered) {
      this.#registered = true;
      this.#host.register(this);
    }
  }

  #setListener(listener: Listener<Out>): void {
    if (this.#listener !== undefined) throw new PicoError("contract", "this watch already has a listener");
    this.#listener = listener;
    this.#schedule();
  }

  #finish(): void {
    this.#finished = true;
    this.#queue = [];
    this.#backlog = 0;
    if (this.#registered) {
      this.#registered = false;
      this.#host.unregister(this);
    }
  }

  #schedule(): void {
    if (
      this.#scheduled ||
      this.#draining ||
      this.#listener === undefined ||
      this.#holds > 0 ||
      this.#queue.length === 0
    )
      return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#drain();
    });
  }

  #drain(): void {
    const listener = this.#listener;
    if (listener === undefined || this.#draining) return;
    this.#draining = true;
    try {
      while (this.#queue.length > 0 && this.#holds === 0 && !this.#finished) {
        const message = this.#queue.shift() as Pending<Fold, Out>;
        this.#backlog -= message.out.length;
        this.#view = this.foldMessage(this.view, message.seq, message.fold);
        const epoch = this.#epoch;
        if (listener.kind === "commits") {
          this.#call(() => listener.fn({ seq: message.seq, events: message.out }));
        } else {
          for (const event of message.out) {
            if (this.#finished || this.#holds > 0 || this.#epoch !== epoch) break;
            this.#call(() => listener.fn(event));
          }
        }
        if (message.last === true) this.#finish();
      }
    } finally {
      this.#draining = false;
    }
    this.#schedule();
  }

  #call(deliver: () => void): void {
    try {
      deliver();
    } catch (error) {
      this.#host.listenerError(error);
    }
  }
}
