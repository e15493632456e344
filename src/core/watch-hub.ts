/**
 * The watch hub (§9.4): one per harness, created on first use. It feeds every watch from one commit
 * listener, owns the `PreviewHub` (preview.ts) that task runtimes attach their trackers to, and fans a
 * session fault, close or report out to every watcher. It reads its harness through `WatchedSession`
 * (watch-conversation.ts), so the runtime and the harness's driver wiring reach it without the public
 * watch functions (watch.ts) above them.
 */
import type { CommitLine } from "./line.js";
import type { FaultReport } from "./host.js";
import { PreviewHub } from "./preview.js";
import type { CommittedBatch } from "./session-types.js";
import type { ChannelHost, HubMember } from "./watch-channel.js";
import type { WatchedSession } from "./watch-conversation.js";
import type { SessionReport } from "./watch-session.js";
import type { WatchFault } from "./watch-types.js";

/** Feeds every watch of one harness: one commit listener, the preview hub, fault/close/report fan-out. */
export class WatchHub implements ChannelHost {
  readonly previews: PreviewHub;
  readonly #harness: WatchedSession;
  readonly #members = new Set<HubMember>();
  #closed = false;

  constructor(harness: WatchedSession) {
    this.#harness = harness;
    this.previews = new PreviewHub({
      isLive: (task) => harness.driver.liveTask(task) !== undefined,
      fanOut: (output) => {
        for (const member of [...this.#members]) member.onOutput(output);
      },
    });
    harness.onCommit((commit) => this.#onCommit(commit));
  }

  get line(): CommitLine {
    return this.#harness.line;
  }

  /** Active subscriptions (tests, inspection). */
  get size(): number {
    return this.#members.size;
  }

  register(member: HubMember): void {
    if (this.#closed) {
      member.close();
      return;
    }
    this.#members.add(member);
  }

  unregister(member: HubMember): void {
    this.#members.delete(member);
  }

  listenerError(error: unknown): void {
    this.#harness.report({ type: "listener_error", error });
  }

  /** The session fail-stopped (§6.1): every watcher gets a fault event; views turn `faulted`. */
  fault(report: FaultReport): void {
    const error: WatchFault = {
      code: "faulted",
      message: report.message,
      ...(report.taskId === undefined ? {} : { taskId: report.taskId }),
      ...(report.kind === undefined ? {} : { kind: report.kind }),
      ...(report.method === undefined ? {} : { method: report.method }),
    };
    for (const member of [...this.#members]) member.fault(error);
  }

  /** The harness closed: every watcher gets `closed` last; later watches end at once. */
  close(): void {
    this.#closed = true;
    for (const member of [...this.#members]) member.close();
    this.#members.clear();
  }

  /** A hook or task error, for session watchers. */
  report(report: SessionReport): void {
    for (const member of [...this.#members]) member.onReport?.(report);
  }

  #onCommit(commit: CommittedBatch): void {
    const outputs = this.previews.onCommit(commit);
    for (const member of [...this.#members]) member.onCommit(commit, outputs);
  }
}

const hubs = new WeakMap<WatchedSession, WatchHub>();

/** The harness's watch hub, created on first use. */
export function watchHub(harness: WatchedSession): WatchHub {
  let hub = hubs.get(harness);
  if (hub === undefined) {
    hub = new WatchHub(harness);
    hubs.set(harness, hub);
  }
  return hub;
}
