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
import { BACKGROUND_CONTEXT } from "../../core/call.js";
import { expiryMark } from "../outbox/types.js";
import { schedulePaused } from "../../kinds/schedule.js";
import type { Retention } from "../../api/schemas.js";
import type { RetentionSource } from "../directory/templates.js";

/** Where a session keeps the retention it was created with (its object's KV). */
export const RETENTION_KEY = "edge.session.retention";

/**
 * What the KV holds: a retention, none, or the tenant's default not known yet (a create without a template, until
 * the directory acknowledges the session's first row; meanwhile the session does not expire).
 */
type StoredRetention =
  { readonly type: "set"; readonly deleteAfterDays: number } | { readonly type: "none" } | { readonly type: "tenant" };
export const DAY_MS = 86_400_000;
/** The commit sequence that recorded the expiry (the object's KV): a later commit is activity that cancels it. */
export const EXPIRY_SEQ_KEY = "edge.session.retention.expiredSeq";
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
  #stored: StoredRetention | undefined | null = null;

  constructor(deps: RetentionDeps) {
    this.#deps = deps;
  }

  /** The retention this session was created with (undefined: none, or the tenant's default not known yet). */
  get setting(): Retention | undefined {
    const stored = this.#read();
    if (stored === undefined) return undefined;
    switch (stored.type) {
      case "set":
        return { deleteAfterDays: stored.deleteAfterDays };
      case "none":
      case "tenant":
        return undefined;
      default: {
        const never: never = stored;
        throw new Error(`unknown stored retention ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * At create (or a retried one), before the directory link is written: keep where the retention comes from unless
   * it is already kept. Nothing is armed yet (the link gives the last activity); `arm` after it.
   */
  capture(source: RetentionSource | undefined): void {
    if (source === undefined || this.#read() !== undefined) return;
    switch (source.type) {
      case "set":
        this.#write({ type: "set", deleteAfterDays: source.retention.deleteAfterDays });
        return;
      case "tenant":
        this.#write({ type: "tenant" });
        return;
      default: {
        const never: never = source;
        throw new Error(`unknown retention source ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * The directory acknowledged a row and said the tenant's default (undefined: none): a session waiting for it
   * keeps it, and arms for its expiry. Every later acknowledgment changes nothing.
   */
  tenantDefault(retention: Retention | undefined): void {
    if (this.#read()?.type !== "tenant") return;
    this.#write(
      retention === undefined ? { type: "none" } : { type: "set", deleteAfterDays: retention.deleteAfterDays },
    );
    this.#arm(this.expiresAt);
  }

  /** After create: arm for the expiry. */
  arm(): void {
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

  /** The expiry was committed at `seq`. */
  expired(seq: number): void {
    this.#deps.kv.put(EXPIRY_SEQ_KEY, seq);
  }

  /**
   * Whether the session committed anything after its expiry (`lastSeq`: its latest commit). Unknown (the object died
   * between the expiry's commit and this record) counts as activity: the session is kept, never deleted on a guess.
   */
  activeSinceExpiry(lastSeq: number): boolean {
    const seq = this.#deps.kv.get<number>(EXPIRY_SEQ_KEY);
    return seq === undefined || lastSeq > seq;
  }

  /** The expiry was cancelled (activity or live work came after it): arm for the next one. */
  revived(): void {
    this.#deps.kv.delete(EXPIRY_SEQ_KEY);
    this.#arm(this.expiresAt);
  }

  /** The expiry is committed; its events are not all delivered yet. */
  waiting(now: number): void {
    this.#arm(now + EXPIRY_POLL_MS);
  }

  /** The session was deleted. */
  cleared(): void {
    this.#last = undefined;
    this.#armed = undefined;
    this.#stored = null;
  }

  #read(): StoredRetention | undefined {
    if (this.#stored === null) this.#stored = this.#deps.kv.get<StoredRetention>(RETENTION_KEY);
    return this.#stored;
  }

  #write(stored: StoredRetention): void {
    this.#deps.kv.put(RETENTION_KEY, stored);
    this.#stored = stored;
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

/** What `expireIdle` needs of the session object. */
export interface ExpiryDeps {
  readonly harness: Harness;
  readonly retention: SessionRetention;
  readonly now: number;
  readonly outbox: { undelivered(): boolean; settled(): Promise<void> };
  /**
   * Delete the session as DELETE deletes it, if `stillExpired` (asked in the delete's own step, on `harness`: no
   * activity since the expiry committed and no live work) holds then and no commit lands after it: "kept" (on this
   * harness, still open), "closed" (kept, but the harness closed: it is revived once reopened), "failed" (reported).
   */
  readonly destroy: (
    stillExpired: (harness: Harness) => Promise<boolean>,
  ) => Promise<"deleted" | "kept" | "closed" | "failed">;
}

/** Whether the session is still expired and idle: nothing committed since its expiry, and no live work. */
async function stillExpired(harness: Harness, retention: SessionRetention): Promise<boolean> {
  return !retention.activeSinceExpiry(harness.storage.lastSeq) && !(await liveWork(harness));
}

/**
 * Retention on the alarm: an idle session past its expiry commits its expiry (reported as `session.expired`),
 * then is deleted (`destroy`) once its outbox holds nothing undelivered. Live work keeps it; live work, or any
 * commit, that came after the expiry was committed cancels the expiry (the mark is deleted and the alarm armed
 * for the next expiry).
 */
export async function expireIdle(deps: ExpiryDeps): Promise<void> {
  const { harness, retention, now } = deps;
  // A mark is only ever committed under a retention, so a session without one reads nothing here.
  if (retention.setting === undefined) return;
  const marked = (await harness.storage.getValue(bind(expiryMark, {}))) !== undefined;
  if (!marked && !retention.due(now)) return;
  if (await liveWork(harness)) {
    if (marked) {
      await harness.commit((tx) => tx.value(expiryMark).delete(), BACKGROUND_CONTEXT);
      retention.revived();
    }
    retention.keep(now);
    return;
  }
  // Activity after the expiry was committed (an input answered while its event waited for delivery) cancels it.
  if (marked && retention.activeSinceExpiry(harness.storage.lastSeq)) {
    await harness.commit((tx) => tx.value(expiryMark).delete(), BACKGROUND_CONTEXT);
    retention.revived();
    return;
  }
  if (!marked) {
    const setting = retention.setting;
    const lastActivityAt = retention.lastActivityAt;
    if (lastActivityAt === undefined) return;
    await harness.commit((tx) => {
      tx.value(expiryMark).set({ deleteAfterDays: setting.deleteAfterDays, lastActivityAt, expiredAt: now });
    }, BACKGROUND_CONTEXT);
    retention.expired(harness.storage.lastSeq);
    // The commit kicked a send round: its event may be out at once.
    await deps.outbox.settled();
  }
  if (deps.outbox.undelivered()) {
    retention.waiting(now);
    return;
  }
  // The delete decides again in its own step (an input may have been accepted while the event was delivered), and a
  // commit after that decision cancels it: the expiry is revived.
  const outcome = await deps.destroy((open) => stillExpired(open, retention));
  switch (outcome) {
    case "deleted":
    case "failed":
      return;
    case "kept":
      await harness.commit((tx) => tx.value(expiryMark).delete(), BACKGROUND_CONTEXT);
      retention.revived();
      return;
    case "closed":
      // The mark stays with the activity after it: the next alarm reopens the session and revives it.
      retention.waiting(now);
      return;
    default: {
      const never: never = outcome;
      throw new Error(`unknown delete outcome ${String(never)}`);
    }
  }
}
