/**
 * The preview hub (§5.2, §9.4): what UIs see of a task while it runs. A kind's preview is a Chord delta
 * tracker the kind mutates in place (`runtime.preview.state`); the harness flushes it after each
 * successful scratch commit and watchers receive the ops as `task_output { task, ops }`, folding them into
 * `view.previews`. The hub holds the current preview value of every live task that has one (so a new
 * watch captures it), fans ops out to conversation watchers in commit order, and drops a task's preview
 * when the task settles. One hub per harness; it lives in the watch hub (`watchHub(harness).previews`).
 *
 * How the runtime uses it (src/core/runtime.ts, to be wired):
 *
 *   // invocation start, when the kind declares `preview`:
 *   const tracker = track(kind.preview.init(scratchReader));
 *   hub.attach(taskId, tracker);        // the first flush is the base (an "r" op), published now
 *   runtime.preview = tracker;
 *   // nothing else: after every successful scratch commit of this task the hub flushes the tracker on
 *   // the line, inside that commit's publication, so the ops reach each watcher in the same message as
 *   // the scratch commit, after every earlier commit and before every later one.
 *   // when the invocation returns without settling (e.g. it parked in a waiting status):
 *   hub.detach(taskId, tracker);        // the preview value stays; the next attach re-bases it
 *
 * `publish(taskId, ops)` is the push form for hosts that flush themselves (ops are adopted: the caller
 * must not mutate them afterwards); its ops travel in their own message after the newest commit each
 * watcher has seen. Settlement (a `settle` write) drops the tracker and the value in the settling commit;
 * watchers drop it from their views on `task_end`.
 */
import { applyImmutable, type Tracker } from "@earendil-works/chord/delta";
import type { Id, JsonValue } from "../storage/records.js";
import type { CommittedBatch } from "./harness.js";
import type { PreviewOutput } from "./watch-channel.js";
import type { DeltaOp } from "./watch-types.js";

export interface PreviewHubOptions {
  /** Whether a task is live (the driver's live index); output for other tasks is dropped. */
  isLive(task: Id): boolean;
  /** Fan published ops out to watchers (between commits). */
  fanOut(output: PreviewOutput): void;
}

export class PreviewHub {
  readonly #current = new Map<Id, JsonValue>();
  readonly #trackers = new Map<Id, Tracker<object>>();
  readonly #options: PreviewHubOptions;

  constructor(options: PreviewHubOptions) {
    this.#options = options;
  }

  /**
   * Attach a live task's tracker (built with `track(kind.preview.init(scratch))`). Its next flush is
   * made a base, published at once, and it replaces any earlier tracker and value of the task.
   */
  attach(task: Id, tracker: Tracker<object>): void {
    if (!this.#options.isLive(task)) return;
    this.#trackers.set(task, tracker);
    tracker.rebase();
    this.publish(task, tracker.flush());
  }

  /** Stop flushing a tracker (its invocation ended without settling); the current value stays. */
  detach(task: Id, tracker: Tracker<object>): void {
    if (this.#trackers.get(task) === tracker) this.#trackers.delete(task);
  }

  /** Fold ops into the task's preview and fan them out. No-op for empty ops or a task that is not live. */
  publish(task: Id, ops: readonly DeltaOp[]): void {
    if (ops.length === 0 || !this.#options.isLive(task)) return;
    this.#current.set(task, applyImmutable<JsonValue>(this.#current.get(task), ops));
    this.#options.fanOut({ task, ops });
  }

  /** The current preview of a task, if it has one. */
  current(task: Id): JsonValue | undefined {
    return this.#current.get(task);
  }

  /** Tasks that currently have a preview (for tests and inspection). */
  tasks(): Id[] {
    return [...this.#current.keys()];
  }

  /**
   * On the line, from the commit listener, before watchers derive the commit: flush the tracker of a
   * scratch commit's task (its output is delivered with that commit) and drop settled tasks' previews.
   */
  onCommit(commit: CommittedBatch): PreviewOutput[] {
    const batch = commit.batch;
    if (batch.kind === "scratch") {
      const tracker = this.#trackers.get(batch.task);
      if (tracker === undefined) return [];
      const ops = tracker.flush();
      if (ops.length === 0) return [];
      this.#current.set(batch.task, applyImmutable<JsonValue>(this.#current.get(batch.task), ops));
      return [{ task: batch.task, ops }];
    }
    for (const write of batch.writes) if (write.type === "settle") this.drop(write.id);
    return [];
  }

  drop(task: Id): void {
    this.#trackers.delete(task);
    this.#current.delete(task);
  }
}
