/**
 * LimitsObject: one Durable Object per tenant holding its limits and the counts they are checked
 * against (docs/users.md "Limits and usage"). Every check-and-count is one synchronous run of SQL in
 * the object's single thread, so concurrent requests cannot both take the last unit of a quota.
 *
 *   admitRequest   requestsPerMinute: a fixed one-minute window per user and for the tenant
 *   admitInput     inputsPerDay, tokensPerDay, costPerMonthUsd, concurrentTurns: reserve one input and
 *                  one turn slot, keyed by the session's request key (a retried request with the same
 *                  Idempotency-Key finds its reservation and reserves nothing more)
 *   admitWork      tokensPerDay, costPerMonthUsd, concurrentTurns without taking anything: a model call
 *                  that is not a new input (collapse) is refused once over them, counts nothing
 *   cancel         the session did not accept the input after all: the reservation is undone
 *   settle         a session reports model usage (tokens and cost by model, each element once, keyed) and the
 *                  inputs whose turn ended (their turn slot is released; an input no reservation counted,
 *                  because nothing was limited when it came, is counted here: metering always runs)
 *   usage          the counts by user and day, and by model (GET /v1/usage, GET /v1/me/usage)
 *
 * A turn slot is a lease: it is released when the session reports the input's result, and expires on
 * its own after `leaseMs` if no report ever comes (a crash between the commit and the report), so a
 * reservation never holds a slot forever. Tokens and cost are attributed to the user who last sent
 * input to the session under a limit (a reservation names them), else to the session's owner.
 */
import { DurableObject } from "cloudflare:workers";
import type { LimitName, LimitSet, LimitsBody, LimitsResponse, UsageDay, UsageModelDay } from "../../api/limits.js";
import type { Env } from "../env.js";
import { hostClock, limitsCallSeam } from "../platform/host-config.js";

/** A refusal: which limit, and how many seconds until it may pass. */
export interface Refusal {
  readonly field: `${"user" | "tenant"}.${LimitName}`;
  readonly limit: number;
  readonly retryAfter: number;
}

/**
 * An admission's answer. `slot`: the reservation holds a turn slot some `concurrentTurns` limit counts (its release
 * should reach this object at once). `carried`: the usage reports the call carried were settled (admitInput).
 */
export type Admission = (
  | { readonly ok: true; readonly reserved: boolean; readonly slot?: boolean }
  | { readonly ok: false; readonly refusal: Refusal }
) & { readonly carried?: boolean };

export interface InputReservation {
  /**
   * `${session}\n${requestId}`: the session's request key when the request had one, else unique. `session` is the
   * session key `{name}:{incarnation}` (src/kinds/incarnation.ts), as in the session's reports.
   */
  readonly key: string;
  readonly session: string;
  /** The user (a user token's `sub`); undefined: tenant limits only. */
  readonly sub?: string;
  /** Whether the key is the session's request key (then the session's report releases it by key). */
  readonly keyed: boolean;
  readonly leaseMs: number;
}

/** What a session reports after a commit. */
export interface SettleReport {
  readonly session: string;
  /** The session's owner (an end user): usage of a session no reservation names counts for them. */
  readonly owner?: string;
  /** Usage elements, each keyed so a repeated report counts once. */
  readonly usage: readonly {
    readonly key: string;
    /** The model (absent in reports written before models were metered). */
    readonly model?: string;
    readonly input: number;
    readonly output: number;
    readonly totalTokens: number;
    readonly cost: number;
  }[];
  /**
   * Inputs whose result became final: by request id (absent: an input accepted without one), keyed like usage so a
   * repeated report counts and releases once (absent in reports written before the key).
   */
  readonly finished: readonly { readonly key?: string; readonly requestId?: string }[];
}

/** What `usage` answers: counts by user and day, and tokens and cost by user, day and model. */
export interface UsageCounts {
  readonly items: readonly UsageDay[];
  readonly models: readonly UsageModelDay[];
}

export interface UsageRange {
  readonly sub?: string;
  readonly from: string;
  readonly to: string;
}

export interface LimitsRpc {
  limits(): Promise<LimitsResponse>;
  setLimits(limits: LimitsBody): Promise<LimitsResponse>;
  admitRequest(sub: string | undefined): Promise<Admission>;
  admitInput(reservation: InputReservation, reports?: readonly SettleReport[]): Promise<Admission>;
  admitWork(sub: string | undefined): Promise<Admission>;
  cancel(key: string): Promise<{ readonly cancelled: boolean }>;
  settle(reports: readonly SettleReport[]): Promise<{ readonly settled: number; readonly released: number }>;
  usage(range: UsageRange): Promise<UsageCounts>;
  eraseUser(sub: string): Promise<{ readonly rows: number }>;
}

/** The scope of the tenant's own counts (a user's scope is `u:${sub}`). */
const TENANT = "t";
/** How long released reservations and settled keys are kept (a retry within this window is recognized). */
const KEEP_MS = 2 * 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
/** At most this many sessions' users are kept in memory (then the map starts again). */
const SESSION_USERS_KEPT = 10_000;

export function dayOf(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}

function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

function nextDay(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

function nextMonth(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export class LimitsObject extends DurableObject<Env> {
  #prunedAt = 0;
  /** session -> the user its usage counts for (null: none), as `session_users` holds it. */
  readonly #sessionUsers = new Map<string, string | null>();
  /** The limits as stored (limits()); undefined until read, and after setLimits writes them. */
  #config: LimitsResponse | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS limits_config (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL, updated_at INTEGER NOT NULL)",
    );
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
  }

  /**
   * The tenant's limits, read from storage once per instance: this object is their only writer (setLimits), so its
   * memory copy is exact and every admission reads no row and parses nothing for them.
   */
  limits(): LimitsResponse {
    if (this.#config !== undefined) return this.#config;
    const row = this.ctx.storage.sql.exec("SELECT body, updated_at FROM limits_config WHERE id = 1").toArray()[0];
    if (row === undefined) return (this.#config = { user: {}, tenant: {} });
    const body = JSON.parse(String(row["body"])) as LimitsBody;
    this.#config = { user: body.user ?? {}, tenant: body.tenant ?? {}, updatedAt: Number(row["updated_at"]) };
    return this.#config;
  }

  setLimits(limits: LimitsBody): LimitsResponse {
    const body = { user: limits.user ?? {}, tenant: limits.tenant ?? {} };
    this.ctx.storage.sql.exec(
      "INSERT INTO limits_config (id, body, updated_at) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
      JSON.stringify(body),
      hostClock().now(),
    );
    this.#config = undefined;
    return this.limits();
  }

  admitRequest(sub: string | undefined): Admission {
    const now = hostClock().now();
    const minute = Math.floor(now / 60_000);
    const { user, tenant } = this.limits();
    const scopes: { scope: string; set: LimitSet; who: "user" | "tenant" }[] = [];
    if (sub !== undefined) scopes.push({ scope: `u:${sub}`, set: user, who: "user" });
    scopes.push({ scope: TENANT, set: tenant, who: "tenant" });
    const counted = scopes.filter((s) => s.set.requestsPerMinute !== undefined);
    for (const { scope, set, who } of counted) {
      const limit = set.requestsPerMinute ?? 0;
      const count = Number(
        this.ctx.storage.sql
          .exec("SELECT count FROM minutes WHERE scope = ? AND minute = ?", scope, minute)
          .toArray()[0]?.["count"] ?? 0,
      );
      if (count >= limit)
        return {
          ok: false,
          refusal: { field: `${who}.requestsPerMinute`, limit, retryAfter: secondsUntil((minute + 1) * 60_000, now) },
        };
    }
    for (const { scope } of counted) {
      this.ctx.storage.sql.exec(
        "INSERT INTO minutes (scope, minute, count) VALUES (?, ?, 1) ON CONFLICT (scope, minute) DO UPDATE SET count = count + 1",
        scope,
        minute,
      );
    }
    this.#prune(now);
    return { ok: true, reserved: counted.length > 0 };
  }

  /**
   * Reserve one input. `reports`: the session's usage reports not yet acknowledged, carried by the call (settled first,
   * so the checks see them; `carried` says whether they were): a session that sends inputs settles its turns without a
   * call of its own (limits/meter.ts).
   */
  admitInput(reservation: InputReservation, reports: readonly SettleReport[] = []): Admission {
    const carried = reports.length > 0 && this.#carry(reports);
    const admission = this.#admitInput(reservation);
    return carried ? { ...admission, carried } : admission;
  }

  #carry(reports: readonly SettleReport[]): boolean {
    try {
      this.settle(reports);
      return true;
    } catch {
      return false;
    }
  }

  #admitInput(reservation: InputReservation): Admission {
    const sql = this.ctx.storage.sql;
    const now = hostClock().now();
    if (sql.exec("SELECT 1 AS found FROM reservations WHERE key = ?", reservation.key).toArray().length > 0)
      return { ok: true, reserved: false };
    const day = dayOf(now);
    const { user, tenant } = this.limits();
    const checks: { scope: string; set: LimitSet; who: "user" | "tenant" }[] = [];
    if (reservation.sub !== undefined) checks.push({ scope: `u:${reservation.sub}`, set: user, who: "user" });
    checks.push({ scope: TENANT, set: tenant, who: "tenant" });
    for (const check of checks) {
      const refusal = this.#check(check.scope, check.set, check.who, now, day);
      if (refusal !== undefined) return { ok: false, refusal };
    }
    const scope = reservation.sub === undefined ? "" : `u:${reservation.sub}`;
    sql.exec(
      "INSERT INTO reservations (key, scope, session, keyed, day, active, created_at, lease_until) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
      reservation.key,
      scope,
      reservation.session,
      reservation.keyed ? 1 : 0,
      day,
      now,
      now + reservation.leaseMs,
    );
    for (const s of scope === "" ? [TENANT] : [TENANT, scope]) this.#add(s, day, { inputs: 1 });
    if (reservation.sub !== undefined && this.#sessionUser(reservation.session) !== reservation.sub) {
      sql.exec(
        "INSERT INTO session_users (session, sub) VALUES (?, ?) ON CONFLICT (session) DO UPDATE SET sub = excluded.sub",
        reservation.session,
        reservation.sub,
      );
      this.#sessionUsers.set(reservation.session, reservation.sub);
    }
    this.#prune(now);
    const slot =
      reservation.leaseMs > 0 &&
      (tenant.concurrentTurns !== undefined || (reservation.sub !== undefined && user.concurrentTurns !== undefined));
    return slot ? { ok: true, reserved: true, slot } : { ok: true, reserved: true };
  }

  /**
   * The user a session's usage counts for (null: none named), from memory after one read: this object is the only
   * writer of `session_users` (bounded: the map is dropped when it grows past SESSION_USERS_KEPT).
   */
  #sessionUser(session: string): string | null {
    const known = this.#sessionUsers.get(session);
    if (known !== undefined) return known;
    const row = this.ctx.storage.sql.exec("SELECT sub FROM session_users WHERE session = ?", session).toArray()[0];
    const sub = row === undefined ? null : String(row["sub"]);
    if (this.#sessionUsers.size >= SESSION_USERS_KEPT) this.#sessionUsers.clear();
    this.#sessionUsers.set(session, sub);
    return sub;
  }

  /**
   * Work that calls the model without a new input (collapse): refused over tokensPerDay,
   * costPerMonthUsd or a full concurrentTurns, like an input, but it counts no input and takes no slot.
   */
  admitWork(sub: string | undefined): Admission {
    const now = hostClock().now();
    const day = dayOf(now);
    const { user, tenant } = this.limits();
    const checks: { scope: string; set: LimitSet; who: "user" | "tenant" }[] = [];
    if (sub !== undefined) checks.push({ scope: `u:${sub}`, set: user, who: "user" });
    checks.push({ scope: TENANT, set: tenant, who: "tenant" });
    for (const check of checks) {
      const { inputsPerDay: _notAnInput, ...set } = check.set;
      const refusal = this.#check(check.scope, set, check.who, now, day);
      if (refusal !== undefined) return { ok: false, refusal };
    }
    return { ok: true, reserved: false };
  }

  cancel(key: string): { readonly cancelled: boolean } {
    const sql = this.ctx.storage.sql;
    const row = sql.exec("SELECT scope, day FROM reservations WHERE key = ?", key).toArray()[0];
    if (row === undefined) return { cancelled: false };
    sql.exec("DELETE FROM reservations WHERE key = ?", key);
    const scope = String(row["scope"]);
    const day = String(row["day"]);
    for (const s of scope === "" ? [TENANT] : [TENANT, scope]) this.#add(s, day, { inputs: -1 });
    return { cancelled: true };
  }

  /** Settle a session's reports, in order (one call for every report the session had not sent: limits/meter.ts). */
  settle(reports: readonly SettleReport[]): { readonly settled: number; readonly released: number } {
    const now = hostClock().now();
    const day = dayOf(now);
    let settled = 0;
    let released = 0;
    for (const report of reports) {
      const one = this.#settleOne(report, now, day);
      settled += one.settled;
      released += one.released;
    }
    return { settled, released };
  }

  #settleOne(report: SettleReport, now: number, day: string): { readonly settled: number; readonly released: number } {
    const sql = this.ctx.storage.sql;
    const sub = this.#sessionUser(report.session) ?? report.owner;
    const scopes = sub === undefined ? [TENANT] : [TENANT, `u:${sub}`];
    let settled = 0;
    for (const item of report.usage) {
      if (this.#seen(item.key, now)) continue;
      for (const scope of scopes) {
        this.#add(scope, day, { input: item.input, output: item.output, total: item.totalTokens, cost: item.cost });
        this.#addModel(scope, day, item.model ?? "unknown", item);
      }
      settled += 1;
    }
    let released = 0;
    for (const input of report.finished) {
      if (input.key !== undefined && this.#seen(input.key, now)) continue;
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
      const reserved =
        freed > 0 ||
        (key !== undefined && sql.exec("SELECT 1 AS found FROM reservations WHERE key = ?", key).toArray().length > 0);
      if (!reserved && input.key !== undefined) for (const scope of scopes) this.#add(scope, day, { inputs: 1 });
    }
    return { settled, released };
  }

  /** Whether a report's element was counted before; if not, remember it now (kept KEEP_MS). */
  #seen(key: string, now: number): boolean {
    // One statement: the row is inserted (and returned) only when the key is new.
    return (
      this.ctx.storage.sql
        .exec("INSERT INTO settled (key, at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING RETURNING key", key, now)
        .toArray().length === 0
    );
  }

  usage(range: UsageRange): UsageCounts {
    const sql = this.ctx.storage.sql;
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
    const items = read("usage_days").map((row) => ({
      sub: subOf(row),
      day: String(row["day"]),
      inputs: Number(row["inputs"]),
      ...spent(row),
    }));
    const models = read("usage_models").map((row) => ({
      sub: subOf(row),
      day: String(row["day"]),
      model: String(row["model"]),
      calls: Number(row["calls"]),
      ...spent(row),
    }));
    return { items, models };
  }

  #addModel(
    scope: string,
    day: string,
    model: string,
    item: { readonly input: number; readonly output: number; readonly totalTokens: number; readonly cost: number },
  ): void {
    this.ctx.storage.sql.exec(
      `INSERT INTO usage_models (scope, day, model, calls, input_tokens, output_tokens, total_tokens, cost) VALUES (?, ?, ?, 1, ?, ?, ?, ?)
       ON CONFLICT (scope, day, model) DO UPDATE SET calls = calls + 1, input_tokens = input_tokens + excluded.input_tokens,
         output_tokens = output_tokens + excluded.output_tokens, total_tokens = total_tokens + excluded.total_tokens,
         cost = cost + excluded.cost`,
      scope,
      day,
      model,
      item.input,
      item.output,
      item.totalTokens,
      item.cost,
    );
  }

  /**
   * Erase a user (docs/operations.md "Deleting a user's data"): its usage days, per-model usage and request minutes, its
   * reservations, the sessions it was counted for and those sessions' settled keys. The tenant's own totals keep
   * their sums (they name no user). Idempotent: a second call finds nothing.
   */
  eraseUser(sub: string): { readonly rows: number } {
    const sql = this.ctx.storage.sql;
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
    rows += sql.exec("DELETE FROM usage_days WHERE scope = ? RETURNING day", scope).toArray().length;
    rows += sql.exec("DELETE FROM usage_models WHERE scope = ? RETURNING day", scope).toArray().length;
    rows += sql.exec("DELETE FROM minutes WHERE scope = ? RETURNING minute", scope).toArray().length;
    return { rows };
  }

  /** The first limit of `set` the scope has reached (user checks come before the tenant's). */
  #check(scope: string, set: LimitSet, who: "user" | "tenant", now: number, day: string): Refusal | undefined {
    if (
      set.inputsPerDay === undefined &&
      set.tokensPerDay === undefined &&
      set.costPerMonthUsd === undefined &&
      set.concurrentTurns === undefined
    )
      return undefined;
    const sql = this.ctx.storage.sql;
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
      if (spent >= set.costPerMonthUsd)
        return {
          field: `${who}.costPerMonthUsd`,
          limit: set.costPerMonthUsd,
          retryAfter: secondsUntil(nextMonth(now), now),
        };
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

  #add(
    scope: string,
    day: string,
    delta: { inputs?: number; input?: number; output?: number; total?: number; cost?: number },
  ): void {
    this.ctx.storage.sql.exec(
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
  }

  /** At most hourly: forget old minutes, released or expired reservations and settled keys past the retry window. */
  #prune(now: number): void {
    if (now - this.#prunedAt < PRUNE_EVERY_MS) return;
    this.#prunedAt = now;
    const sql = this.ctx.storage.sql;
    sql.exec("DELETE FROM minutes WHERE minute < ?", Math.floor(now / 60_000) - 1);
    sql.exec("DELETE FROM reservations WHERE created_at < ? AND (active = 0 OR lease_until <= ?)", now - KEEP_MS, now);
    sql.exec("DELETE FROM settled WHERE at < ?", now - KEEP_MS);
  }
}

/** The tenant's LimitsObject (each call seen by a test's `limitsCall` seam, when one is set). */
export function limitsStub(env: Env, tenant: string): LimitsRpc {
  const namespace = env.LIMITS;
  const stub = namespace.get(namespace.idFromName(tenant)) as unknown as LimitsRpc;
  const seen = limitsCallSeam();
  if (seen === undefined) return stub;
  return new Proxy(stub, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== "function" || typeof property !== "string") return value;
      return (...args: unknown[]) => {
        seen(tenant, property);
        // Reflect.apply: an RPC method's own `apply` would be another remote method.
        return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
      };
    },
  });
}
