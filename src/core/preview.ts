/**
 * The preview hub (§5.2, §9.4): what UIs see of a task while it runs. A kind's preview is a Chord delta
 * tracker the kind mutates in place (`runtime.preview.state`); the harness flushes it after each
 * successful scratch commit of the task and with its settlement commit, and watchers receive the ops as
 * `task_output { task, ops }` in that commit's message, folding them into `view.previews`. The hub holds
 * the current preview value of every live task that has one (so a new watch captures it), fans ops out to
 * conversation watchers in commit order, and drops a task's preview when the task settles. One hub per
 * harness; it lives in the watch hub (`watchHub(harness).previews`).
 *
 * Nothing shown is lost (§7.4 "write all bytes, then publish in-memory changes, never before"): ops
 * reach watchers only after the commit they ride on is durable, so a kind mutates its preview only with
 * output that commit holds: inside a scratch commit's plan, the output that commit writes; inside the
 * settlement's plan, the output the settlement records and no scratch commit wrote (a stream's last
 * frames, a tool's last output). A kill before a commit then loses nothing a watcher saw: what recovery
 * rebuilds from scratch is at least what was shown.
 *
 * How the runtime uses it (src/core/runtime.ts, to be wired):
 *
 *   // invocation start, when the kind declares `preview`:
 *   const tracker = track(kind.preview.init(scratchReader));
 *   hub.attach(taskId, tracker);        // the first flush is the base (an "r" op), published now
 *   runtime.preview = tracker;
 *   // nothing else: after every successful scratch commit of this task, and with its settlement, the
 *   // hub flushes the tracker on the line, inside that commit's publication, so the ops reach each
 *   // watcher in the same message as the commit (a settlement's before its task_end), after every
 *   // earlier commit and before every later one.
 *   // when the invocation returns without settling (e.g. it parked in a waiting status):
 *   hub.detach(taskId, tracker);        // the preview value stays; the next attach re-bases it
 *
 * `publish(taskId, ops)` is the push form (the base an attach publishes; ops are adopted: the caller
 * must not mutate them afterwards); its ops travel in their own message after the newest commit each
 * watcher has seen. Settlement (a `settle` write) flushes the tracker one last time into the settling
 * commit's message, then drops the tracker and the value; watchers drop it from their views on
 * `task_end`, which follows those ops in the same message.
 */
import { applyImmutable, type Tracker } from "@earendil-works/chord/delta";
import type { Id, JsonValue } from "../storage/records.js";
import type { CommittedBatch } from "./session-types.js";
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
   * On the line, from the commit listener, after the commit is durable and before watchers derive it:
   * flush the tracker of a scratch commit's task (its output is delivered with that commit), and the
   * tracker of each task the commit settles (the last output, which the settlement records, is delivered
   * with it), then drop settled tasks' previews.
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
    const outputs: PreviewOutput[] = [];
    for (const write of batch.writes) {
      if (write.type !== "settle") continue;
      const ops = this.#trackers.get(write.id)?.flush() ?? [];
      if (ops.length > 0) outputs.push({ task: write.id, ops });
      this.drop(write.id);
    }
    return outputs;
  }

  drop(task: Id): void {
    this.#trackers.delete(task);
    this.#current.delete(task);
  }
}
