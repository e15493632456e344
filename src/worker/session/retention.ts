/**
 * A session's retention (docs/operations.md "Retention"): `deleteAfterDays`, captured at create from its template
 * (kept in the object's KV, so no directory is read later), makes the session expire that many days after its last
 * activity (its last commit). The expiry is one more reason on the session's own alarm (session/alarm-plan.ts);
 * there is no global sweep.
 *
 * Commits do not move the alarm: a commit only arms it when retention has no time armed yet, and an alarm that
 * fires before the expiry (activity came since) re-arms for the expiry it computes then. So the cost of activity is
 * at most one extra alarm per retention period, never a write per commit.
 *
 * When the expiry is due the SessionObject checks for live work (`liveWork`): any live task keeps the session
 * (a running or parked turn, a tool waiting on a pending item, a sleeping task, the rig's witness, an unpaused
 * schedule) except a paused schedule. Kept, it is looked at again `deleteAfterDays` later (a commit that ends the
 * work moves the expiry anyway). Idle, it commits its expiry (`expiryMark`), which reports `session.expired`
 * (outbox/events.ts), and is deleted as DELETE deletes it once its outbox holds nothing undelivered.
 *
 * Nothing here knows Durable Objects beyond their KV; the SessionObject wires it to its alarm and commits.
 */
import type { Clock } from "../../core/host.js";
import type { Harness } from "../../core/harness.js";
import { bind } from "../../core/state.js";
import { schedulePaused } from "../../kinds/schedule.js";
import type { Retention } from "../../api/schemas.js";

/** Where a session keeps the retention it was created with (its object's KV). */
export const RETENTION_KEY = "edge.session.retention";
export const DAY_MS = 86_400_000;
/** While an expired session waits for its events to be delivered, the alarm looks again this often. */
export const EXPIRY_POLL_MS = 60_000;

/** What GET /v1/sessions/{session} shows. */
export interface RetentionView {
  readonly deleteAfterDays: number;
  /** Epoch ms: last activity + deleteAfterDays (the session is deleted then unless it has live work). */
  readonly expiresAt: number;
}

export interface RetentionDeps {
  readonly kv: SyncKvStorage;
  readonly clock: Clock;
  /** The last activity durably known (the directory row's lastActivityAt); undefined: no row. */
  readonly lastActivity: () => number | undefined;
  /** Retention's time on the alarm plan changed (undefined: none). */
  readonly due: (at: number | undefined) => void;
}

export class SessionRetention {
  readonly #deps: RetentionDeps;
  /** The latest commit's time in this instance. */
  #last: number | undefined;
  /** The time retention gave the alarm plan (undefined: none). */
  #armed: number | undefined;
  /** Memory copy of the KV setting (null: not read yet). */
  #setting: Retention | undefined | null = null;

  constructor(deps: RetentionDeps) {
    this.#deps = deps;
  }

  /** The retention this session was created with (undefined: none, it never expires). */
  get setting(): Retention | undefined {
    if (this.#setting === null) this.#setting = this.#deps.kv.get<Retention>(RETENTION_KEY);
    return this.#setting;
  }

  /** At create (or a retried one): keep the retention unless it is already kept, and arm for it. */
  capture(retention: Retention | undefined): void {
    if (retention !== undefined && this.#deps.kv.get(RETENTION_KEY) === undefined) {
      this.#deps.kv.put(RETENTION_KEY, { deleteAfterDays: retention.deleteAfterDays });
      this.#setting = null;
    }
    this.#arm(this.expiresAt);
  }

  get lastActivityAt(): number | undefined {
    const durable = this.#deps.lastActivity();
    if (durable === undefined) return this.#last;
    return Math.max(durable, this.#last ?? 0);
  }

  /** Last activity + deleteAfterDays (undefined: no retention, or no activity known). */
  get expiresAt(): number | undefined {
    const setting = this.setting;
    const last = this.lastActivityAt;
    return setting === undefined || last === undefined ? undefined : last + setting.deleteAfterDays * DAY_MS;
  }

  view(): RetentionView | undefined {
    const setting = this.setting;
    const expiresAt = this.expiresAt;
    return setting === undefined || expiresAt === undefined
      ? undefined
      : { deleteAfterDays: setting.deleteAfterDays, expiresAt };
  }

  /** The session opened: arm for its expiry. */
  opened(): void {
    this.#arm(this.expiresAt);
  }

  /** A commit: remembered in memory; it arms the alarm only when retention has nothing armed. */
  committed(): void {
    this.#last = this.#deps.clock.now();
    if (this.#armed === undefined) this.#arm(this.expiresAt);
  }

  /** On the alarm: whether the expiry has passed; if not, retention is armed for it. */
  due(now: number): boolean {
    const at = this.expiresAt;
    if (at !== undefined && at <= now) return true;
    this.#arm(at);
    return false;
  }

  /** Live work kept the session: look again deleteAfterDays from now. */
  keep(now: number): void {
    const setting = this.setting;
    this.#arm(setting === undefined ? undefined : now + setting.deleteAfterDays * DAY_MS);
  }

  /** The expiry is committed; its events are not all delivered yet. */
  waiting(now: number): void {
    this.#arm(now + EXPIRY_POLL_MS);
  }

  /** The session was deleted. */
  cleared(): void {
    this.#last = undefined;
    this.#armed = undefined;
    this.#setting = null;
  }

  #arm(at: number | undefined): void {
    this.#armed = at;
    this.#deps.due(at);
  }
}

/**
 * Whether the session has live work that keeps it from expiring: any live task but a paused schedule (a paused
 * schedule's task sleeps with no wake time; its pause flag is read too, for a pause not yet applied by the task).
 * A tool task waiting on a pending item is live until the item is answered or its deadline times it out.
 */
export async function liveWork(harness: Harness): Promise<boolean> {
  const live = await harness.storage.scanTasks({ live: true, limit: 1000 });
  for (const task of live.items) {
    if (task.kind === "schedule") {
      if (task.state.status === "paused") continue;
      if ((await harness.storage.getValue(bind(schedulePaused(task.id), {}))) !== undefined) continue;
    }
    return true;
  }
  return false;
}
