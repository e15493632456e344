/**
 * One alarm, many reasons to wake (docs/design.md "Alarms and restarts"). A Durable Object has a single alarm; the plan
 * keeps the
 * reasons present so far — the earliest sleeping task's wake time and, while invocations are in flight,
 * a heartbeat — and writes the alarm only when their minimum changes, because every `setAlarm` and
 * `deleteAlarm` is a billed storage write. Used by SessionHost (driver notifications) and the
 * SessionObject's alarm handler. It knows nothing of Durable Objects: the sink does the writes.
 *
 * More reasons (the rig's witness patrol) join as further inputs of `#desired`. The tenant directory's
 * pending update (session/directory-link.ts) is one: it is retried from the alarm until acknowledged; the
 * earliest expiry of a user's open watch (watch/guard.ts) is another, and the oldest expiry of a recorded GitHub
 * signature (session/replays.ts) one more, and the session's retention expiry (session/retention.ts) another.
 */

export interface AlarmSink {
  set(atMs: number): void;
  clear(): void;
}

/** Counters for tests and benchmarks: alarm writes and changes of the earliest wake. */
export interface AlarmStats {
  readonly sets: number;
  readonly clears: number;
  /** How often the earliest wake (the alarm the object should have) changed. */
  readonly changes: number;
  /** The alarm the plan last wrote (undefined: none). */
  readonly armed: number | undefined;
  /** A usage report's backstop is a reason to wake, or the armed alarm was written for one. */
  readonly usageBackstop: boolean;
}

/** An alarm is never set closer than this to now: a wake already due must not spin the handler. */
export const MIN_ALARM_DELAY_MS = 1_000;

export class AlarmPlan {
  readonly #sink: AlarmSink;
  readonly #heartbeatMs: number;
  #wake: number | undefined;
  #heartbeat: number | undefined;
  #directory: number | undefined;
  /** The outbox sender's next round (outbox/outbox.ts). */
  #outbox: number | undefined;
  /** The earliest expiry of a user's open watch (watch/guard.ts). */
  #watches: number | undefined;
  /** A usage report to the tenant's limits not yet acknowledged (limits/meter.ts). */
  #limits: number | undefined;
  /** The oldest expiry of a recorded GitHub signature (session/replays.ts). */
  #replays: number | undefined;
  /** When the session's retention is next looked at (session/retention.ts). */
  #retention: number | undefined;
  #busy = false;
  /** Live work committed but neither dispatched (busy) nor asleep (wake) yet: a kill in that gap must still wake it. */
  #guard: number | undefined;
  /** What the runtime has scheduled: null until known (a fresh instance reads it once). */
  #armed: number | undefined | null = null;
  /** The unclamped minimum the armed alarm was written for. */
  #target: number | undefined | null = null;
  /** The armed alarm was written for the usage backstop alone (no other reason was as early). */
  #armedForLimits = false;
  #sets = 0;
  #clears = 0;
  #changes = 0;

  constructor(sink: AlarmSink, heartbeatMs: number) {
    this.#sink = sink;
    this.#heartbeatMs = heartbeatMs;
  }

  /** A fresh instance learns what is scheduled (`ctx.storage.getAlarm()`), so it rewrites nothing. */
  known(armed: number | undefined, now: number): void {
    if (this.#armed === null) {
      this.#armed = armed;
      this.#target = armed;
    }
    this.#apply(now);
  }

  /** The earliest wake time of sleeping tasks (undefined: nobody sleeps). */
  wake(earliest: number | undefined, now: number): void {
    this.#wake = earliest;
    if (earliest !== undefined) this.#guard = undefined;
    this.#apply(now);
  }

  /**
   * After each commit: whether live tasks exist. A commit that creates work is durable before the driver
   * dispatches it; if the object is killed in between, nothing else would wake it (reopen only happens
   * on a request or an alarm), so live work with no other reason to wake arms a guard alarm. `wake` is
   * the driver's earliest wake as of this commit (its notification follows): work the commit dispatched
   * straight into a sleep with a durable wake time is woken by that alarm, so it needs no guard.
   */
  live(hasLive: boolean, now: number, wake?: number): void {
    if (wake !== undefined) this.#wake = wake;
    if (!hasLive) this.#guard = undefined;
    else if (this.desired === undefined) this.#guard = now + this.#heartbeatMs;
    this.#apply(now);
  }

  /** Invocations in flight: a heartbeat keeps the object alive while busy, none when idle. */
  busy(busy: boolean, now: number): void {
    this.#busy = busy;
    if (!busy) this.#heartbeat = undefined;
    else {
      // The guard armed by the commit that created this work (just before its dispatch) serves as the first
      // heartbeat: the same purpose a few ms earlier, and no second alarm write at the start of every turn.
      const guard = this.#guard;
      this.#heartbeat ??= guard !== undefined && guard - now >= this.#heartbeatMs / 2 ? guard : now + this.#heartbeatMs;
      this.#guard = undefined;
    }
    this.#apply(now);
  }

  /** When the directory's pending update is due (undefined: nothing pending). */
  directory(at: number | undefined, now: number): void {
    this.#directory = at;
    this.#apply(now);
  }

  /** When the outbox sender next has something to do (undefined: nothing). */
  outbox(at: number | undefined, now: number): void {
    this.#outbox = at;
    this.#apply(now);
  }

  /** When the earliest open user watch expires (undefined: none). */
  watches(at: number | undefined, now: number): void {
    this.#watches = at;
    this.#apply(now);
  }

  /**
   * When an unacknowledged usage report is resent (undefined: none pending). The backstop behind a report whose
   * acknowledgment is about to come costs no write of its own: while the armed alarm wakes no later than it, that
   * alarm stands in for it (a write it would cause is left to the acknowledgment, which then writes what is left);
   * and an alarm written for the backstop alone is left armed when the reports are acknowledged (its wake finds
   * nothing to send; a wake costs less than the delete that would avoid it: docs/performance.md).
   */
  limits(at: number | undefined, now: number): void {
    this.#limits = at;
    this.#apply(now);
  }

  /** When the oldest recorded GitHub signature expires (undefined: none recorded). */
  replays(at: number | undefined, now: number): void {
    this.#replays = at;
    this.#apply(now);
  }

  /** When the session's retention is next looked at (undefined: it has none). */
  retention(at: number | undefined, now: number): void {
    this.#retention = at;
    this.#apply(now);
  }

  /** The storage was wiped (session deleted): nothing is scheduled and no task reason remains. */
  cleared(now: number): void {
    this.#armed = undefined;
    this.#target = undefined;
    this.#armedForLimits = false;
    this.#wake = undefined;
    this.#heartbeat = undefined;
    this.#busy = false;
    this.#guard = undefined;
    this.#outbox = undefined;
    this.#watches = undefined;
    this.#limits = undefined;
    this.#replays = undefined;
    this.#retention = undefined;
    this.#apply(now);
  }

  /**
   * The alarm fired: the runtime has consumed it (nothing is scheduled now), and a heartbeat moves on.
   * Re-arms at once when a reason remains.
   */
  fired(now: number): void {
    this.#armed = undefined;
    this.#target = undefined;
    this.#armedForLimits = false;
    if (this.#busy) this.#heartbeat = now + this.#heartbeatMs;
    this.#apply(now);
  }

  get stats(): AlarmStats {
    return {
      sets: this.#sets,
      clears: this.#clears,
      changes: this.#changes,
      armed: this.#armed ?? undefined,
      usageBackstop: this.#limits !== undefined || this.#armedForLimits,
    };
  }

  /** The earliest reason to wake, or undefined. */
  get desired(): number | undefined {
    return minimum(this.#hard(), this.#limits);
  }

  #apply(now: number): void {
    if (this.#armed === null) return; // not known yet: `known` applies
    const target = this.desired;
    if (target === this.#target) return;
    const armed = this.#armed;
    // Only the usage backstop is left, and the armed alarm wakes before it anyway: it stands in for the backstop.
    if (this.#limits !== undefined && target === this.#limits && armed !== undefined && armed <= target) return;
    // Nothing is left but an alarm written for the backstop alone: its wake costs less than deleting it.
    if (target === undefined && this.#armedForLimits && armed !== undefined) return;
    this.#changes += 1;
    this.#target = target;
    this.#armedForLimits = target !== undefined && target === this.#limits && this.#hard() !== target;
    if (target === undefined) {
      this.#armed = undefined;
      this.#clears += 1;
      this.#sink.clear();
      return;
    }
    const at = Math.max(target, now + MIN_ALARM_DELAY_MS);
    this.#armed = at;
    this.#sets += 1;
    this.#sink.set(at);
  }

  /** The earliest reason to wake other than the usage backstop. */
  #hard(): number | undefined {
    return [
      this.#heartbeat,
      this.#guard,
      this.#directory,
      this.#outbox,
      this.#watches,
      this.#replays,
      this.#retention,
    ].reduce(minimum, this.#wake);
  }
}

function minimum(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}
