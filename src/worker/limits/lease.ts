/**
 * Tenant-wide limits spread over shards (docs/users.md "Limits and usage"). A tenant's inputs are admitted by shards:
 * one object per user (its inputs are serialized there, so per-user limits stay exact) and a few for inputs no user
 * sent. A tenant-wide counted limit (inputsPerDay, requestsPerMinute, concurrentTurns) is leased to a shard in chunks
 * by the tenant's object (`Pool`): a shard admits against what it holds (`Held`) and asks for more only when that runs
 * out. A shard's chunk grows from 1 while it keeps asking (doubling up to MAX_CHUNK), so a user who sends one input a
 * day holds one; what a shard holds unused is given back once it was idle IDLE_MS. The pool never grants past the
 * limit: the tenant never exceeds it, and a shard may be refused while others hold unused units (at most one chunk
 * each, for at most IDLE_MS).
 */

/** A tenant-wide limit leased in units: inputs of a day, requests of a minute, turn slots (period ""). */
export type LeaseKind = "inputs" | "requests" | "slots";

export const MAX_CHUNK = 32;
/** A shard gives back what it holds unused after this long without taking from it. */
export const IDLE_MS = 10_000;
/** A shard's slots are the pool's for this long without a word from the shard (a shard lost with its storage). */
export const SLOT_LEASE_MS = 15 * 60_000;

export interface LeaseReturn {
  readonly kind: LeaseKind;
  readonly period: string;
  readonly count: number;
}

/** What a shard holds of the tenant's leased limits (its own storage; the shard's single thread takes from it). */
export class Held {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS held (
      kind TEXT NOT NULL, period TEXT NOT NULL, granted INTEGER NOT NULL, used INTEGER NOT NULL, chunk INTEGER NOT NULL,
      touched INTEGER NOT NULL, PRIMARY KEY (kind, period))`);
  }

  #row(kind: LeaseKind, period: string): { granted: number; used: number; chunk: number } | undefined {
    const row = this.#sql
      .exec("SELECT granted, used, chunk FROM held WHERE kind = ? AND period = ?", kind, period)
      .toArray()[0];
    return row === undefined
      ? undefined
      : { granted: Number(row["granted"]), used: Number(row["used"]), chunk: Number(row["chunk"]) };
  }

  /** Units held and not used (slots: the slots held; the live turns are counted by the caller). */
  available(kind: LeaseKind, period: string): number {
    const row = this.#row(kind, period);
    return row === undefined ? 0 : row.granted - row.used;
  }

  /** Take one unit (slots: only mark the time: a slot is used by a live reservation). */
  take(kind: LeaseKind, period: string, now: number): void {
    this.#sql.exec(
      `UPDATE held SET used = used + ?, touched = ? WHERE kind = ? AND period = ?`,
      kind === "slots" ? 0 : 1,
      now,
      kind,
      period,
    );
  }

  /** A unit taken for an input that was not accepted after all is held again. */
  untake(kind: LeaseKind, period: string): void {
    this.#sql.exec("UPDATE held SET used = max(0, used - 1) WHERE kind = ? AND period = ?", kind, period);
  }

  /**
   * A grant the tenant's object took back (never acknowledged in time, limits/grants.ts): its units this shard still
   * holds unused go (units already used stay counted).
   */
  revoke(kind: LeaseKind, period: string, count: number): void {
    this.#sql.exec(
      `UPDATE held SET granted = max(${kind === "slots" ? "0" : "used"}, granted - ?) WHERE kind = ? AND period = ?`,
      count,
      kind,
      period,
    );
  }

  /** How many units to ask for next: double the last chunk, up to MAX_CHUNK (at least `need`). */
  want(kind: LeaseKind, period: string, need: number): number {
    const row = this.#row(kind, period);
    return Math.max(need, Math.min(MAX_CHUNK, row === undefined ? 1 : row.chunk * 2));
  }

  granted(kind: LeaseKind, period: string, count: number, now: number): void {
    this.#sql.exec(
      `INSERT INTO held (kind, period, granted, used, chunk, touched) VALUES (?, ?, ?, 0, ?, ?)
       ON CONFLICT (kind, period) DO UPDATE SET granted = granted + excluded.granted, chunk = excluded.chunk, touched = excluded.touched`,
      kind,
      period,
      count,
      Math.max(1, count),
      now,
    );
  }

  /**
   * What to give back now, taken off what is held: units of the current periods not touched for IDLE_MS, and slots
   * beyond the live turns. Rows of past periods are dropped (their units count for nothing any more).
   */
  idle(now: number, periods: { readonly day: string; readonly minute: string }, live: number): LeaseReturn[] {
    const sql = this.#sql;
    sql.exec(
      "DELETE FROM held WHERE (kind = 'inputs' AND period <> ?) OR (kind = 'requests' AND period <> ?)",
      periods.day,
      periods.minute,
    );
    const back: LeaseReturn[] = [];
    for (const row of sql.exec("SELECT * FROM held WHERE touched <= ?", now - IDLE_MS).toArray()) {
      const kind = String(row["kind"]) as LeaseKind;
      const period = String(row["period"]);
      const keep = kind === "slots" ? live : Number(row["used"]);
      const count = Number(row["granted"]) - keep;
      if (count <= 0) continue;
      back.push({ kind, period, count });
      sql.exec("UPDATE held SET granted = ?, chunk = 1 WHERE kind = ? AND period = ?", keep, kind, period);
    }
    return back;
  }

  /** Whether anything is held that may be given back later (the shard's alarm stays armed for it). */
  holding(): boolean {
    return (
      this.#sql.exec("SELECT 1 AS found FROM held WHERE granted > used OR kind = 'slots' AND granted > 0").toArray()
        .length > 0
    );
  }
}

/** A shard asks for up to `want` units of `kind` in `period`, under `limit` in all. */
export interface LeaseAsk {
  readonly kind: LeaseKind;
  readonly period: string;
  readonly want: number;
  readonly limit: number;
}

/**
 * What the tenant's object answers a shard: what it granted of each ask, and the tenant's totals for tokens and cost;
 * of the grants the call acknowledged, those it still knew (`acked`) and those it had taken back (`lost`).
 */
export interface LeaseAnswer {
  readonly granted: readonly number[];
  readonly totals: TenantTotals;
  readonly acked?: readonly string[];
  readonly lost?: readonly string[];
}

/** A grant's units, as the shard keeps them until its acknowledgment is answered. */
export interface GrantPart {
  readonly kind: LeaseKind;
  readonly period: string;
  readonly count: number;
}

/**
 * How long a grant may go unacknowledged before the tenant's object takes its units back: the shard that asked was
 * killed before it recorded them (its acknowledgment follows the grant at once, and rides its next lease call).
 */
export const GRANT_ACK_MS = 10_000;
/** How long the tenant's object remembers a grant by its call's key (a retry within it is answered the same). */
const GRANT_KEPT_MS = 86_400_000;

/** The tenant's tokens today and cost this month (every shard's forwarded share included). */
export interface TenantTotals {
  readonly day: string;
  readonly tokens: number;
  readonly cost: number;
}

/** The tenant's side: how much of each limit is leased out, and to whom the slots are. */
export class Pool {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS pool (kind TEXT NOT NULL, period TEXT NOT NULL, leased INTEGER NOT NULL, PRIMARY KEY (kind, period))",
    );
    sql.exec(
      "CREATE TABLE IF NOT EXISTS pool_slots (shard TEXT PRIMARY KEY, slots INTEGER NOT NULL, until INTEGER NOT NULL)",
    );
    // Grants by the key of the lease call that made them: state 0 unacknowledged, 1 acknowledged, 2 taken back.
    sql.exec(`CREATE TABLE IF NOT EXISTS pool_grants (
      shard TEXT NOT NULL, id TEXT NOT NULL, parts TEXT NOT NULL, granted TEXT NOT NULL, at INTEGER NOT NULL,
      state INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (shard, id))`);
  }

  /** A lease call under key `id` made before: what it granted (its retry is answered the same, granting nothing more). */
  granted(shard: string, id: string): number[] | undefined {
    const row = this.#sql
      .exec("SELECT granted FROM pool_grants WHERE shard = ? AND id = ? AND state <> 2", shard, id)
      .toArray()[0];
    return row === undefined ? undefined : (JSON.parse(String(row["granted"])) as number[]);
  }

  /** Remember what the call `id` granted (nothing granted: nothing to remember), unacknowledged. */
  remember(shard: string, id: string, parts: readonly GrantPart[], granted: readonly number[], now: number): void {
    if (parts.length === 0) return;
    this.#sql.exec(
      "INSERT INTO pool_grants (shard, id, parts, granted, at, state) VALUES (?, ?, ?, ?, ?, 0) ON CONFLICT (shard, id) DO NOTHING",
      shard,
      id,
      JSON.stringify(parts),
      JSON.stringify(granted),
      now,
    );
  }

  /** The shard recorded the grants `ids`: which were still its (acked), and which had been taken back (lost). */
  acknowledge(shard: string, ids: readonly string[]): { acked: string[]; lost: string[] } {
    const acked: string[] = [];
    const lost: string[] = [];
    for (const id of ids) {
      const row = this.#sql.exec("SELECT state FROM pool_grants WHERE shard = ? AND id = ?", shard, id).toArray()[0];
      if (row !== undefined && Number(row["state"]) === 2) lost.push(id);
      else {
        acked.push(id);
        this.#sql.exec("UPDATE pool_grants SET state = 1 WHERE shard = ? AND id = ?", shard, id);
      }
    }
    return { acked, lost };
  }

  /**
   * Take back the units of grants no shard acknowledged within GRANT_ACK_MS (the shard was killed between the grant and
   * its record of it), and forget grants older than GRANT_KEPT_MS.
   */
  reclaim(now: number): void {
    const sql = this.#sql;
    for (const row of sql
      .exec("SELECT shard, id, parts FROM pool_grants WHERE state = 0 AND at <= ?", now - GRANT_ACK_MS)
      .toArray()) {
      const shard = String(row["shard"]);
      const parts = JSON.parse(String(row["parts"])) as GrantPart[];
      this.returned(shard, parts, now, false);
      sql.exec("UPDATE pool_grants SET state = 2 WHERE shard = ? AND id = ?", shard, row["id"]);
    }
    sql.exec("DELETE FROM pool_grants WHERE at <= ?", now - GRANT_KEPT_MS);
  }

  /** Grant up to `want` units of `kind` in `period` to `shard`, never past `limit` in all. */
  lease(shard: string, kind: LeaseKind, period: string, want: number, limit: number, now: number): number {
    const sql = this.#sql;
    if (kind === "slots") {
      const others = Number(
        sql
          .exec("SELECT coalesce(sum(slots), 0) AS n FROM pool_slots WHERE shard <> ? AND until > ?", shard, now)
          .one()["n"],
      );
      const mine = Number(sql.exec("SELECT slots FROM pool_slots WHERE shard = ?", shard).toArray()[0]?.["slots"] ?? 0);
      const grant = Math.max(0, Math.min(want, limit - others - mine));
      sql.exec(
        "INSERT INTO pool_slots (shard, slots, until) VALUES (?, ?, ?) ON CONFLICT (shard) DO UPDATE SET slots = excluded.slots, until = excluded.until",
        shard,
        mine + grant,
        now + SLOT_LEASE_MS,
      );
      return grant;
    }
    const leased = Number(
      sql.exec("SELECT leased FROM pool WHERE kind = ? AND period = ?", kind, period).toArray()[0]?.["leased"] ?? 0,
    );
    const grant = Math.max(0, Math.min(want, limit - leased));
    if (grant > 0)
      sql.exec(
        "INSERT INTO pool (kind, period, leased) VALUES (?, ?, ?) ON CONFLICT (kind, period) DO UPDATE SET leased = leased + excluded.leased",
        kind,
        period,
        grant,
      );
    return grant;
  }

  /**
   * A shard gave units back (or they were taken back from it: `heard` false); a word from it keeps its slots its own for
   * SLOT_LEASE_MS more.
   */
  returned(shard: string, back: readonly LeaseReturn[], now: number, heard = true): void {
    const sql = this.#sql;
    for (const item of back) {
      if (item.kind === "slots")
        sql.exec("UPDATE pool_slots SET slots = max(0, slots - ?) WHERE shard = ?", item.count, shard);
      else
        sql.exec(
          "UPDATE pool SET leased = max(0, leased - ?) WHERE kind = ? AND period = ?",
          item.count,
          item.kind,
          item.period,
        );
    }
    if (heard) sql.exec("UPDATE pool_slots SET until = ? WHERE shard = ?", now + SLOT_LEASE_MS, shard);
    sql.exec("DELETE FROM pool_slots WHERE slots = 0 OR until <= ?", now);
  }

  /** Forget leases of past periods (at most hourly, with the counts' own pruning). */
  prune(day: string, minute: number): void {
    this.#sql.exec(
      "DELETE FROM pool WHERE (kind = 'inputs' AND period < ?) OR (kind = 'requests' AND CAST(period AS INTEGER) < ?)",
      day,
      minute - 1,
    );
  }
}
