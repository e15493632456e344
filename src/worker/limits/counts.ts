/**
 * The counts a LimitsObject keeps in its own SQLite storage (docs/users.md "Limits and usage"): usage by scope and
 * day (`t` the tenant's, `u:{sub}` a user's) and by model, request minutes, input reservations (a turn slot is a
 * lease), the keys of settled report elements, and which user a session's usage counts for.
 *
 * A user's shard keeps that user's counts exactly (their inputs all pass through it); what a shard adds is also kept
 * in its outbox, forwarded in batches to the tenant's object, which adds it to the tenant's totals (limits/object.ts).
 */
import type { LimitSet, UsageDay, UsageModelDay } from "../../api/limits.js";
import type { Refusal, SettleReport, UsageCounts, UsageRange } from "./object.js";

/** The scope of the tenant's own counts (a user's scope is `u:${sub}`). */
export const TENANT = "t";
/** How long released reservations and settled keys are kept (a retry within this window is recognized). */
const KEEP_MS = 2 * 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
/** At most this many sessions' users are kept in memory (then the map starts again). */
const SESSION_USERS_KEPT = 10_000;

/** The last day asked for (a settle asks for the same day again and again): its number and its ISO date. */
let lastDay: { readonly n: number; readonly text: string } | undefined;

export function dayOf(at: number): string {
  const n = Math.floor(at / 86_400_000);
  if (lastDay?.n !== n) lastDay = { n, text: new Date(at).toISOString().slice(0, 10) };
  return lastDay.text;
}

export function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

export function nextDay(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

function nextMonth(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** Settled keys told per statement (two bound parameters each; SQLite binds at most 100). */
const KEYS_PER_STATEMENT = 50;

/** What a call's new elements add to a scope's day, or to a scope's model. */
interface Sum {
  calls: number;
  inputs: number;
  input: number;
  output: number;
  total: number;
  cost: number;
}

function zero(): Sum {
  return { calls: 0, inputs: 0, input: 0, output: 0, total: 0, cost: 0 };
}

/** What one usage element or input adds to a scope's day. */
export interface Delta {
  readonly inputs?: number;
  readonly input?: number;
  readonly output?: number;
  readonly total?: number;
  readonly cost?: number;
}

/**
 * One forwarded row: a scope's day (`model` "") or a scope's day for one model, as amounts to add. The tenant adds it
 * to its own rows (limits/object.ts `forward`).
 */
export interface CountRow {
  readonly scope: string;
  readonly day: string;
  readonly model: string;
  readonly calls: number;
  readonly inputs: number;
  readonly input: number;
  readonly output: number;
  readonly total: number;
  readonly cost: number;
}

export interface Reservation {
  readonly key: string;
  readonly scope: string;
  readonly session: string;
  readonly keyed: boolean;
  readonly leaseMs: number;
}

export class Counts {
  readonly #sql: SqlStorage;
  #prunedAt = 0;
  /** session -> the user its usage counts for (null: none), as `session_users` holds it. */
  readonly #sessionUsers = new Map<string, string | null>();
  /** Whether what is added is also kept in the outbox (a shard: the tenant's object receives it forwarded). */
  forwarding = false;
  /** Tokens and cost the tenant scope gained here since `taken()` (a shard's share not yet in the tenant's totals). */
  #gained = { tokens: 0, cost: 0 };

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS usage_days (
      scope TEXT NOT NULL, day TEXT NOT NULL, inputs INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
      output_tokens INTEGER NOT NULL DEFAULT 0, total_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,
      PRIMARY KEY (scope, day))`);
    sql.exec(
      "CREATE TABLE IF NOT EXISTS minutes (scope TEXT NOT NULL, minute INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (scope, minute))",
    );
    sql.exec(`CREATE TABLE IF NOT EXISTS reservations (
      key TEXT PRIMARY KEY, scope TEXT NOT NULL, session TEXT NOT NULL, keyed INTEGER NOT NULL, day TEXT NOT NULL,
      active INTEGER NOT NULL, created_at INTEGER NOT NULL, lease_until INTEGER NOT NULL)`);
    sql.exec("CREATE INDEX IF NOT EXISTS reservations_live ON reservations (active, lease_until)");
    sql.exec("CREATE INDEX IF NOT EXISTS reservations_session ON reservations (session, keyed, active, created_at)");
    sql.exec("CREATE TABLE IF NOT EXISTS settled (key TEXT PRIMARY KEY, at INTEGER NOT NULL)");
    sql.exec("CREATE TABLE IF NOT EXISTS session_users (session TEXT PRIMARY KEY, sub TEXT NOT NULL)");
    sql.exec(`CREATE TABLE IF NOT EXISTS usage_models (
      scope TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL, calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL,
      output_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL, cost REAL NOT NULL, PRIMARY KEY (scope, day, model))`);
    sql.exec(`CREATE TABLE IF NOT EXISTS outbox (
      scope TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL, calls INTEGER NOT NULL, inputs INTEGER NOT NULL,
      input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL, cost REAL NOT NULL,
      PRIMARY KEY (scope, day, model))`);
  }

  /**
   * The scopes what `scope` (a user's; "": none) counts in. In a shard, a user's rows stand for the tenant's too (the
   * tenant's object adds a forwarded user row to both: `apply`), so a shard writes the tenant's rows only for what no
   * user counts; the tenant's object (legacy reports) writes both.
   */
  #scopes(scope: string): readonly string[] {
    if (scope === "") return [TENANT];
    return this.forwarding ? [scope] : [TENANT, scope];
  }

  /** Whether the reservation `key` exists (a retried request finds it and reserves nothing more). */
  reserved(key: string): boolean {
    return this.#sql.exec("SELECT 1 AS found FROM reservations WHERE key = ?", key).toArray().length > 0;
  }

  /** Reserve one input: counted for the day in its scope and the tenant's; the session's usage now counts for sub. */
  reserve(reservation: Reservation, sub: string | undefined, now: number): void {
    const day = dayOf(now);
    this.#sql.exec(
      "INSERT INTO reservations (key, scope, session, keyed, day, active, created_at, lease_until) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
      reservation.key,
      reservation.scope,
      reservation.session,
      reservation.keyed ? 1 : 0,
      day,
      now,
      now + reservation.leaseMs,
    );
    for (const s of this.#scopes(reservation.scope)) this.add(s, day, { inputs: 1 });
    if (sub !== undefined && this.#sessionUser(reservation.session) !== sub) {
      this.#sql.exec(
        "INSERT INTO session_users (session, sub) VALUES (?, ?) ON CONFLICT (session) DO UPDATE SET sub = excluded.sub",
        reservation.session,
        sub,
      );
      this.#sessionUsers.set(reservation.session, sub);
    }
    this.prune(now);
  }

  /** Undo a reservation (the session did not accept the input after all): the day it counted for, if it existed. */
  cancel(key: string): string | undefined {
    const row = this.#sql.exec("DELETE FROM reservations WHERE key = ? RETURNING scope, day", key).toArray()[0];
    if (row === undefined) return undefined;
    const scope = String(row["scope"]);
    const day = String(row["day"]);
    for (const s of this.#scopes(scope)) this.add(s, day, { inputs: -1 });
    return day;
  }

  /** The turn slots held here now (reservations whose lease runs and whose turn did not end). */
  liveSlots(now: number): number {
    return Number(
      this.#sql.exec("SELECT count(*) AS n FROM reservations WHERE active = 1 AND lease_until > ?", now).one()["n"],
    );
  }

  /**
   * The user a session's usage counts for (null: none named), from memory after one read: this object is the only
   * writer of `session_users` (bounded: the map is dropped when it grows past SESSION_USERS_KEPT).
   */
  #sessionUser(session: string): string | null {
    const known = this.#sessionUsers.get(session);
    if (known !== undefined) return known;
    const row = this.#sql.exec("SELECT sub FROM session_users WHERE session = ?", session).toArray()[0];
    const sub = row === undefined ? null : String(row["sub"]);
    if (this.#sessionUsers.size >= SESSION_USERS_KEPT) this.#sessionUsers.clear();
    this.#sessionUsers.set(session, sub);
    return sub;
  }

  /** The requests counted in the scope's current minute. */
  requests(scope: string, now: number): number {
    const minute = Math.floor(now / 60_000);
    return Number(
      this.#sql.exec("SELECT count FROM minutes WHERE scope = ? AND minute = ?", scope, minute).toArray()[0]?.[
        "count"
      ] ?? 0,
    );
  }

  /** Count one request in the scope's current minute. */
  countRequest(scope: string, now: number): void {
    this.#sql.exec(
      "INSERT INTO minutes (scope, minute, count) VALUES (?, ?, 1) ON CONFLICT (scope, minute) DO UPDATE SET count = count + 1",
      scope,
      Math.floor(now / 60_000),
    );
  }

  /**
   * Settle sessions' reports: usage once per key, finished inputs release their reservation. The keys are told in one
   * statement (per KEYS_PER_STATEMENT), and what the new elements add is summed first, so a call writes each scope's
   * day, and each scope's model, once however many reports it carries.
   */
  settle(
    reports: readonly SettleReport[],
    now: number,
    day: string,
  ): { readonly settled: number; readonly released: number } {
    const sql = this.#sql;
    const fresh = this.#fresh(
      reports.flatMap((r) => [...r.usage.map((u) => u.key), ...r.finished.flatMap((f) => f.key ?? [])]),
      now,
    );
    const days = new Map<string, Sum>();
    const models = new Map<string, Sum & { readonly scope: string; readonly model: string }>();
    const sum = <T extends Sum>(map: Map<string, T>, key: string, start: () => T): T => {
      let one = map.get(key);
      if (one === undefined) map.set(key, (one = start()));
      return one;
    };
    let settled = 0;
    let released = 0;
    for (const report of reports) {
      const sub = this.#sessionUser(report.session) ?? report.owner;
      const scopes = this.#scopes(sub === undefined ? "" : `u:${sub}`);
      for (const item of report.usage) {
        if (!fresh.delete(item.key)) continue;
        const model = item.model ?? "unknown";
        for (const scope of scopes) {
          for (const one of [
            sum(days, scope, zero),
            sum(models, `${scope}\n${model}`, () => ({ ...zero(), scope, model })),
          ]) {
            one.calls += 1;
            one.input += item.input;
            one.output += item.output;
            one.total += item.totalTokens;
            one.cost += item.cost;
          }
        }
        settled += 1;
      }
      for (const input of report.finished) {
        if (input.key !== undefined && !fresh.delete(input.key)) continue;
        const key = input.requestId === undefined ? undefined : `${report.session}\n${input.requestId}`;
        const freed =
          key !== undefined
            ? sql.exec("UPDATE reservations SET active = 0 WHERE key = ? AND active = 1 RETURNING key", key).toArray()
                .length
            : sql
                .exec(
                  "UPDATE reservations SET active = 0 WHERE key = (SELECT key FROM reservations WHERE session = ? AND keyed = 0 AND active = 1 ORDER BY created_at LIMIT 1) RETURNING key",
                  report.session,
                )
                .toArray().length;
        released += freed;
        // An input no reservation counted (nothing was limited when it came) is metered now, once (by its key).
        const reserved = freed > 0 || (key !== undefined && this.reserved(key));
        if (!reserved && input.key !== undefined) for (const scope of scopes) sum(days, scope, zero).inputs += 1;
      }
    }
    for (const [scope, one] of days) this.add(scope, day, one);
    for (const one of models.values()) this.addModel(one.scope, day, one.model, { ...one, totalTokens: one.total });
    return { settled, released };
  }

  /** Which of `keys` were not counted before (each then remembered, kept KEEP_MS). */
  #fresh(keys: readonly string[], now: number): Set<string> {
    const fresh = new Set<string>();
    for (let i = 0; i < keys.length; i += KEYS_PER_STATEMENT) {
      const chunk = keys.slice(i, i + KEYS_PER_STATEMENT);
      // A row is inserted (and returned) only when its key is new.
      const rows = this.#sql
        .exec(
          `INSERT INTO settled (key, at) VALUES ${chunk.map(() => "(?, ?)").join(", ")} ON CONFLICT (key) DO NOTHING RETURNING key`,
          ...chunk.flatMap((key) => [key, now]),
        )
        .toArray();
      for (const row of rows) fresh.add(String(row["key"]));
    }
    return fresh;
  }

  usage(range: UsageRange): UsageCounts {
    const sql = this.#sql;
    const read = (table: "usage_days" | "usage_models"): Record<string, SqlStorageValue>[] =>
      range.sub === undefined
        ? sql
            .exec(`SELECT * FROM ${table} WHERE day >= ? AND day <= ? ORDER BY day, scope`, range.from, range.to)
            .toArray()
        : sql
            .exec(
              `SELECT * FROM ${table} WHERE scope = ? AND day >= ? AND day <= ? ORDER BY day`,
              `u:${range.sub}`,
              range.from,
              range.to,
            )
            .toArray();
    const subOf = (row: Record<string, SqlStorageValue>): string | null => {
      const scope = String(row["scope"]);
      return scope === TENANT ? null : scope.slice(2);
    };
    // What a day's row and a model's row share after their own fields: tokens and cost (fields keep their order).
    const spent = (row: Record<string, SqlStorageValue>) => ({
      inputTokens: Number(row["input_tokens"]),
      outputTokens: Number(row["output_tokens"]),
      totalTokens: Number(row["total_tokens"]),
      costUsd: Number(row["cost"]),
    });
    const items: UsageDay[] = read("usage_days").map((row) => ({
      sub: subOf(row),
      day: String(row["day"]),
      inputs: Number(row["inputs"]),
      ...spent(row),
    }));
    const models: UsageModelDay[] = read("usage_models").map((row) => ({
      sub: subOf(row),
      day: String(row["day"]),
      model: String(row["model"]),
      calls: Number(row["calls"]),
      ...spent(row),
    }));
    return { items, models };
  }

  /** The tenant scope's tokens today and cost this month, as counted here. */
  spent(now: number): { readonly day: string; readonly tokens: number; readonly cost: number } {
    const day = dayOf(now);
    const row = this.#sql
      .exec(
        "SELECT coalesce(sum(CASE WHEN day = ? THEN total_tokens ELSE 0 END), 0) AS tokens, coalesce(sum(cost), 0) AS cost FROM usage_days WHERE scope = ? AND day > ? AND day <= ?",
        day,
        TENANT,
        `${day.slice(0, 7)}-00`,
        day,
      )
      .one();
    return { day, tokens: Number(row["tokens"]), cost: Number(row["cost"]) };
  }

  addModel(
    scope: string,
    day: string,
    model: string,
    item: {
      readonly calls: number;
      readonly input: number;
      readonly output: number;
      readonly totalTokens: number;
      readonly cost: number;
    },
  ): void {
    const values = [scope, day, model, item.calls, item.input, item.output, item.totalTokens, item.cost] as const;
    this.#sql.exec(
      `INSERT INTO usage_models (scope, day, model, calls, input_tokens, output_tokens, total_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (scope, day, model) DO UPDATE SET calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens,
         output_tokens = output_tokens + excluded.output_tokens, total_tokens = total_tokens + excluded.total_tokens,
         cost = cost + excluded.cost`,
      ...values,
    );
    if (this.forwarding) this.#keep(scope, day, model, { ...item, total: item.totalTokens });
  }

  add(scope: string, day: string, delta: Delta): void {
    this.#sql.exec(
      `INSERT INTO usage_days (scope, day, inputs, input_tokens, output_tokens, total_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (scope, day) DO UPDATE SET inputs = inputs + excluded.inputs, input_tokens = input_tokens + excluded.input_tokens,
         output_tokens = output_tokens + excluded.output_tokens, total_tokens = total_tokens + excluded.total_tokens, cost = cost + excluded.cost`,
      scope,
      day,
      delta.inputs ?? 0,
      delta.input ?? 0,
      delta.output ?? 0,
      delta.total ?? 0,
      delta.cost ?? 0,
    );
    if (!this.forwarding) return;
    this.#keep(scope, day, "", { ...delta, calls: 0 });
    // Every row a shard writes is also the tenant's (#scopes).
    this.#gained.tokens += delta.total ?? 0;
    this.#gained.cost += delta.cost ?? 0;
  }

  /**
   * Add what a forwarded row carries (the tenant's object: limits/object.ts `forward`); `implied`: a user's row counts
   * for the tenant too (batches forwarded before shards wrote no tenant rows for users carry their own).
   */
  apply(row: CountRow, implied: boolean): void {
    for (const scope of implied && row.scope !== TENANT ? [row.scope, TENANT] : [row.scope]) {
      if (row.model === "") this.add(scope, row.day, row);
      else this.addModel(scope, row.day, row.model, { ...row, totalTokens: row.total });
    }
  }

  /** Keep what was added for the next forward. */
  #keep(scope: string, day: string, model: string, delta: Delta & { readonly calls: number }): void {
    this.#sql.exec(
      `INSERT INTO outbox (scope, day, model, calls, inputs, input_tokens, output_tokens, total_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (scope, day, model) DO UPDATE SET calls = calls + excluded.calls, inputs = inputs + excluded.inputs,
         input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         total_tokens = total_tokens + excluded.total_tokens, cost = cost + excluded.cost`,
      scope,
      day,
      model,
      delta.calls,
      delta.inputs ?? 0,
      delta.input ?? 0,
      delta.output ?? 0,
      delta.total ?? 0,
      delta.cost ?? 0,
    );
  }

  /** The outbox's rows, taken out of it (they go into one forwarded batch). */
  takeOutbox(): CountRow[] {
    const rows = this.#sql.exec("DELETE FROM outbox RETURNING *").toArray();
    return rows.map((row) => ({
      scope: String(row["scope"]),
      day: String(row["day"]),
      model: String(row["model"]),
      calls: Number(row["calls"]),
      inputs: Number(row["inputs"]),
      input: Number(row["input_tokens"]),
      output: Number(row["output_tokens"]),
      total: Number(row["total_tokens"]),
      cost: Number(row["cost"]),
    }));
  }

  /** The tenant scope's tokens and cost added here since the last call (then counting starts again). */
  taken(): { readonly tokens: number; readonly cost: number } {
    const gained = this.#gained;
    this.#gained = { tokens: 0, cost: 0 };
    return gained;
  }

  /** What the tenant scope gained here since `taken()`. */
  get gained(): { readonly tokens: number; readonly cost: number } {
    return this.#gained;
  }

  /**
   * Erase a user's rows (docs/operations.md "Deleting a user's data"): usage days, per-model usage, request minutes,
   * reservations, the sessions it was counted for and their settled keys, and its rows waiting to be forwarded.
   */
  erase(sub: string): number {
    const sql = this.#sql;
    const scope = `u:${sub}`;
    let rows = 0;
    const sessions = sql
      .exec("SELECT session FROM session_users WHERE sub = ?", sub)
      .toArray()
      .map((row) => String(row["session"]));
    for (const session of sessions) {
      // Settled keys are `${session}\n${seq}`: the range of keys that start with the session key and a newline.
      rows += sql
        .exec("DELETE FROM settled WHERE key >= ? AND key < ? RETURNING key", `${session}\n`, `${session}\u000b`)
        .toArray().length;
      rows += sql.exec("DELETE FROM reservations WHERE session = ? RETURNING key", session).toArray().length;
    }
    rows += sql.exec("DELETE FROM reservations WHERE scope = ? RETURNING key", scope).toArray().length;
    rows += sql.exec("DELETE FROM session_users WHERE sub = ? RETURNING session", sub).toArray().length;
    this.#sessionUsers.clear();
    // What the user counted here and was not forwarded yet stays the tenant's (its sums name no user).
    sql.exec(
      `INSERT INTO outbox SELECT ?, day, model, calls, inputs, input_tokens, output_tokens, total_tokens, cost FROM outbox WHERE scope = ?
       ON CONFLICT (scope, day, model) DO UPDATE SET calls = calls + excluded.calls, inputs = inputs + excluded.inputs,
         input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
         total_tokens = total_tokens + excluded.total_tokens, cost = cost + excluded.cost`,
      TENANT,
      scope,
    );
    for (const table of ["usage_days", "usage_models", "minutes", "outbox"])
      rows += sql.exec(`DELETE FROM ${table} WHERE scope = ? RETURNING scope`, scope).toArray().length;
    return rows;
  }

  /** The first limit of `set` the scope has reached. */
  check(scope: string, set: LimitSet, who: "user" | "tenant", now: number, day: string): Refusal | undefined {
    if (
      set.inputsPerDay === undefined &&
      set.tokensPerDay === undefined &&
      set.costPerMonthUsd === undefined &&
      set.concurrentTurns === undefined
    )
      return undefined;
    const sql = this.#sql;
    const today = sql
      .exec("SELECT inputs, total_tokens FROM usage_days WHERE scope = ? AND day = ?", scope, day)
      .toArray()[0];
    if (set.inputsPerDay !== undefined && Number(today?.["inputs"] ?? 0) >= set.inputsPerDay) {
      return { field: `${who}.inputsPerDay`, limit: set.inputsPerDay, retryAfter: secondsUntil(nextDay(now), now) };
    }
    if (set.tokensPerDay !== undefined && Number(today?.["total_tokens"] ?? 0) >= set.tokensPerDay) {
      return { field: `${who}.tokensPerDay`, limit: set.tokensPerDay, retryAfter: secondsUntil(nextDay(now), now) };
    }
    if (set.costPerMonthUsd !== undefined) {
      const month = `${day.slice(0, 7)}-00`;
      const spent = Number(
        sql
          .exec(
            "SELECT coalesce(sum(cost), 0) AS spent FROM usage_days WHERE scope = ? AND day > ? AND day <= ?",
            scope,
            month,
            day,
          )
          .one()["spent"],
      );
      if (spent >= set.costPerMonthUsd) return costRefusal(who, set.costPerMonthUsd, now);
    }
    if (set.concurrentTurns !== undefined) {
      const live = sql
        .exec(
          `SELECT count(*) AS n, min(lease_until) AS first FROM reservations WHERE active = 1 AND lease_until > ?${scope === TENANT ? "" : " AND scope = ?"}`,
          ...(scope === TENANT ? [now] : [now, scope]),
        )
        .one();
      if (Number(live["n"]) >= set.concurrentTurns) {
        // A slot frees when a turn ends (unknown) or at the latest when the oldest lease expires.
        const first = live["first"] === null ? now + 1000 : Number(live["first"]);
        return {
          field: `${who}.concurrentTurns`,
          limit: set.concurrentTurns,
          retryAfter: Math.min(30, secondsUntil(first, now)),
        };
      }
    }
    return undefined;
  }

  /** At most hourly: forget old minutes, released or expired reservations and settled keys past the retry window. */
  prune(now: number): void {
    if (now - this.#prunedAt < PRUNE_EVERY_MS) return;
    this.#prunedAt = now;
    const sql = this.#sql;
    sql.exec("DELETE FROM minutes WHERE minute < ?", Math.floor(now / 60_000) - 1);
    sql.exec("DELETE FROM reservations WHERE created_at < ? AND (active = 0 OR lease_until <= ?)", now - KEEP_MS, now);
    sql.exec("DELETE FROM settled WHERE at < ?", now - KEEP_MS);
  }
}

export function costRefusal(who: "user" | "tenant", limit: number, now: number): Refusal {
  return { field: `${who}.costPerMonthUsd`, limit, retryAfter: secondsUntil(nextMonth(now), now) };
}

export function dayRefusal(
  who: "user" | "tenant",
  name: "inputsPerDay" | "tokensPerDay",
  limit: number,
  now: number,
): Refusal {
  return { field: `${who}.${name}`, limit, retryAfter: secondsUntil(nextDay(now), now) };
}
