/**
 * LimitsObject (docs/users.md "Limits and usage"): a tenant's limits and the counts they are checked against, spread
 * over objects of one class in two roles.
 *
 * The tenant's object (named by the tenant) holds the limits (`limits`, `setLimits`), the tenant-wide totals every
 * shard forwards to it (`forward`, read by `usage`), and the leases of the tenant-wide counted limits (`lease`,
 * limits/lease.ts). A shard (limits/shards.ts: one per user, a few for inputs no user sent) admits: every
 * check-and-count is one synchronous run of SQL in its single thread, so concurrent requests cannot both take the last
 * unit of a quota; a user's counts are exact because all of that user's inputs pass through that user's shard.
 *
 *   admitRequest   requestsPerMinute: a fixed one-minute window per user, and the tenant's leased to shards
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
 * input to the session under a limit (a reservation names them), else to the session's owner. The
 * tenant-wide tokensPerDay and costPerMonthUsd are checked against the tenant's totals as the shard last heard them
 * (at most TOTALS_MS old) plus what the shard added since.
 */
import { DurableObject } from "cloudflare:workers";
import type { LimitName, LimitSet, LimitsBody, LimitsResponse, UsageDay, UsageModelDay } from "../../api/limits.js";
import type { Env } from "../env.js";
import { hostClock, hostReport } from "../platform/host-config.js";
import { costRefusal, Counts, dayOf, dayRefusal, nextDay, secondsUntil, TENANT, type CountRow } from "./counts.js";
import {
  Held,
  IDLE_MS,
  Pool,
  type LeaseAnswer,
  type LeaseAsk,
  type LeaseKind,
  type LeaseReturn,
  type TenantTotals,
} from "./lease.js";
import { answerForward, answerLease, GrantAcks, grantParts, type ForwardAcked } from "./grants.js";
import { limitsStub, shardOf, shardStub, type ShardRef } from "./shards.js";

export { dayOf } from "./counts.js";
export type { ForwardAcked } from "./grants.js";

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

/** What a shard forwards to its tenant's object: counts added since the last batch, and leased units given back. */
export interface ForwardBatch {
  readonly seq: number;
  readonly rows: readonly CountRow[];
  readonly back: readonly LeaseReturn[];
  /** The shard checks the tenant's tokensPerDay or costPerMonthUsd: answer with the tenant's totals. */
  readonly totals?: true;
  /** A user's row counts for the tenant too (the shard wrote no tenant row for it); absent in older batches. */
  readonly implied?: true;
  /** The keys of lease grants the shard recorded (limits/lease.ts GRANT_ACK_MS); absent in older batches. */
  readonly acks?: readonly string[];
}

export interface LimitsRpc {
  limits(): Promise<LimitsResponse>;
  setLimits(limits: LimitsBody): Promise<LimitsResponse>;
  admitRequest(at: ShardRef, sub: string | undefined, limits: LimitsResponse): Promise<Admission>;
  admitInput(
    at: ShardRef,
    reservation: InputReservation,
    limits: LimitsResponse,
    reports?: readonly SettleReport[],
  ): Promise<Admission>;
  admitWork(at: ShardRef, sub: string | undefined, limits: LimitsResponse): Promise<Admission>;
  cancel(key: string): Promise<{ readonly cancelled: boolean }>;
  /** `at`: the shard's own reports; absent on the tenant's object (reports kept from before shards). */
  settle(
    reports: readonly SettleReport[],
    at?: ShardRef,
  ): Promise<{ readonly settled: number; readonly released: number }>;
  usage(range: UsageRange): Promise<UsageCounts>;
  eraseUser(sub: string, tenant?: string): Promise<{ readonly rows: number }>;
  /** A shard forwards what it counted now (a read of one user's usage waits for it). */
  flush(): Promise<void>;
  /**
   * Lease units of the tenant's limits to `shard` (none asked: the tenant's totals only). `id`: the call's key (a retry
   * under it is answered what it granted, and nothing more); `acks`: the keys of grants the shard recorded since. A
   * grant not acknowledged within GRANT_ACK_MS goes back to the pool (limits/lease.ts).
   */
  lease(shard: string, asks: readonly LeaseAsk[], id?: string, acks?: readonly string[]): Promise<LeaseAnswer>;
  forward(shard: string, batch: ForwardBatch): Promise<TenantTotals | ForwardAcked | undefined>;
}

/**
 * How long a shard's counts wait to be forwarded to the tenant's object, ms: a busy shard sends one batch per window,
 * so the tenant's object hears from each active shard at most once per window, not once per input.
 */
export const FORWARD_MS = 5_000;
/** How old the tenant's totals a shard checks tokensPerDay and costPerMonthUsd against may be, ms. */
export const TOTALS_MS = 10_000;
/** How long a shard refuses without asking again after the tenant granted nothing, ms. */
const DRY_MS = 1_000;
const RETRY_MAX_MS = 60_000;
/**
 * How often one admission may wait for a lease before it is refused: every wait that ends in a grant serves some
 * admission of this shard (concurrent ones share each lease call), so only a shard under heavy contention gets here.
 */
const MAX_ROUNDS = 32;

/** A leased limit a shard holds too little of to decide. */
type Ask = { readonly kind: LeaseKind; readonly period: string; readonly limit: number };

type Step =
  | { readonly type: "pass"; readonly take: readonly { readonly kind: LeaseKind; readonly period: string }[] }
  | { readonly type: "refuse"; readonly refusal: Refusal }
  /** Lease `asks` (none: only the tenant's totals are too old), in one call to the tenant's object, then decide again. */
  | { readonly type: "need"; readonly asks: readonly Ask[] };

/** What is being admitted: a request, an input (with or without a turn slot), or model work that counts nothing. */
type Asked = "request" | "input" | "work";

export class LimitsObject extends DurableObject<Env> {
  readonly #counts: Counts;
  readonly #held: Held;
  readonly #pool: Pool;
  readonly #acks: GrantAcks;
  /** The limits as stored (limits()); undefined until read, and after setLimits writes them. */
  #config: LimitsResponse | undefined;
  /** A shard: which one (read from storage; written by the first call that names it). */
  #self: ShardRef | undefined;
  #totals: (TenantTotals & { readonly at: number }) | undefined;
  /** The tenant scope's tokens and cost in the batch being forwarded (not yet in `#totals`). */
  #inFlight = { tokens: 0, cost: 0 };
  readonly #dry = new Map<string, { readonly until: number; readonly refusal: Refusal }>();
  #leasing: Promise<void> | undefined;
  #forwarding: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #alarmAt: number | undefined;
  #attempt = 0;
  #poolPrunedAt = 0;
  /** Whether this shard checks the tenant's tokensPerDay or costPerMonthUsd (its forwards then ask for the totals). */
  #checksTotals = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS limits_config (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL, updated_at INTEGER NOT NULL)",
    );
    sql.exec(
      "CREATE TABLE IF NOT EXISTS shard (id INTEGER PRIMARY KEY CHECK (id = 1), tenant TEXT NOT NULL, key TEXT NOT NULL)",
    );
    sql.exec("CREATE TABLE IF NOT EXISTS forward_sent (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    sql.exec("CREATE TABLE IF NOT EXISTS forwarded (shard TEXT PRIMARY KEY, seq INTEGER NOT NULL)");
    this.#counts = new Counts(sql);
    this.#held = new Held(sql);
    this.#pool = new Pool(sql);
    this.#acks = new GrantAcks(sql, this.#held);
    const self = sql.exec("SELECT tenant, key FROM shard WHERE id = 1").toArray()[0];
    if (self !== undefined) {
      this.#self = { tenant: String(self["tenant"]), key: String(self["key"]) };
      this.#counts.forwarding = true;
    }
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

  // ---------------------------------------------------------------------------------------------
  // A shard's admissions.

  async admitRequest(at: ShardRef, sub: string | undefined, limits: LimitsResponse): Promise<Admission> {
    this.#bind(at);
    return this.#gate(limits, "request", sub, (now) => {
      if (sub !== undefined && limits.user.requestsPerMinute !== undefined) this.#counts.countRequest(`u:${sub}`, now);
      this.#counts.prune(now);
      return { ok: true, reserved: true };
    });
  }

  /**
   * Reserve one input. `reports`: the session's usage reports not yet acknowledged, carried by the call (settled first,
   * so the checks see them; `carried` says whether they were): a session that sends inputs settles its turns without a
   * call of its own (limits/meter.ts).
   */
  async admitInput(
    at: ShardRef,
    reservation: InputReservation,
    limits: LimitsResponse,
    reports: readonly SettleReport[] = [],
  ): Promise<Admission> {
    this.#bind(at);
    const carried = reports.length > 0 && this.#carry(reports);
    const admission = this.#counts.reserved(reservation.key)
      ? ({ ok: true, reserved: false } as const)
      : await this.#gate(limits, "input", reservation.sub, (now) => {
          // Checked again after every wait: a concurrent admission may have reserved the same key meanwhile.
          if (this.#counts.reserved(reservation.key)) return { ok: true, reserved: false };
          const scope = reservation.sub === undefined ? "" : `u:${reservation.sub}`;
          this.#counts.reserve({ ...reservation, scope }, reservation.sub, now);
          const slot =
            reservation.leaseMs > 0 &&
            (limits.tenant.concurrentTurns !== undefined ||
              (reservation.sub !== undefined && limits.user.concurrentTurns !== undefined));
          return slot ? { ok: true, reserved: true, slot } : { ok: true, reserved: true };
        });
    this.#changed();
    return carried ? { ...admission, carried } : admission;
  }

  #carry(reports: readonly SettleReport[]): boolean {
    try {
      this.#settle(reports);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Work that calls the model without a new input (collapse): refused over tokensPerDay,
   * costPerMonthUsd or a full concurrentTurns, like an input, but it counts no input and takes no slot.
   */
  async admitWork(at: ShardRef, sub: string | undefined, limits: LimitsResponse): Promise<Admission> {
    this.#bind(at);
    return this.#gate(limits, "work", sub, () => ({ ok: true, reserved: false }));
  }

  /**
   * Decide with what this shard holds, asking the tenant's object for a lease or its totals when that is not enough,
   * then decide again (nothing is taken across a wait). `admit` runs in the same synchronous step as the last checks.
   */
  async #gate(
    limits: LimitsResponse,
    asked: Asked,
    sub: string | undefined,
    admit: (now: number) => Admission,
  ): Promise<Admission> {
    for (let round = 0; ; round += 1) {
      const now = hostClock().now();
      const step = this.#step(limits, asked, sub, now);
      switch (step.type) {
        case "refuse":
          return { ok: false, refusal: step.refusal };
        case "pass": {
          const admission = admit(now);
          if (admission.ok && admission.reserved) for (const t of step.take) this.#held.take(t.kind, t.period, now);
          if (step.take.length > 0) this.#arm(now + IDLE_MS);
          return admission;
        }
        case "need":
          if (round >= MAX_ROUNDS) return { ok: false, refusal: this.#refusal(step.asks[0], limits, now) };
          await this.#lease(step.asks, now);
          break;
        default: {
          const never: never = step;
          return never;
        }
      }
    }
  }

  #step(limits: LimitsResponse, asked: Asked, sub: string | undefined, now: number): Step {
    const day = dayOf(now);
    const minute = String(Math.floor(now / 60_000));
    const { user, tenant } = limits;
    if (sub !== undefined) {
      const scope = `u:${sub}`;
      if (asked === "request") {
        const limit = user.requestsPerMinute;
        if (limit !== undefined && this.#counts.requests(scope, now) >= limit)
          return { type: "refuse", refusal: minuteRefusal("user", limit, now) };
      } else {
        const { inputsPerDay: _notAnInput, ...work } = user;
        const set: LimitSet = asked === "input" ? user : work;
        const refusal = this.#counts.check(scope, set, "user", now, day);
        if (refusal !== undefined) return { type: "refuse", refusal };
      }
    }
    const take: { kind: LeaseKind; period: string }[] = [];
    const asks: Ask[] = [];
    let dry: Refusal | undefined;
    const leased = (kind: LeaseKind, period: string, limit: number): void => {
      const held = this.#held.available(kind, period);
      const live = kind === "slots" ? this.#counts.liveSlots(now) : 0;
      if (held - live > 0) take.push({ kind, period });
      else {
        const refused = this.#dry.get(`${kind}\n${period}`);
        if (refused !== undefined && refused.until > now) dry ??= refused.refusal;
        asks.push({ kind, period, limit });
      }
    };
    if (asked === "request") {
      if (tenant.requestsPerMinute !== undefined) leased("requests", minute, tenant.requestsPerMinute);
      if (dry !== undefined) return { type: "refuse", refusal: dry };
      return asks.length > 0 ? { type: "need", asks } : { type: "pass", take };
    }
    if (tenant.concurrentTurns !== undefined) leased("slots", "", tenant.concurrentTurns);
    if (asked === "input" && tenant.inputsPerDay !== undefined) leased("inputs", day, tenant.inputsPerDay);
    if (dry !== undefined) return { type: "refuse", refusal: dry };
    this.#checksTotals = tenant.tokensPerDay !== undefined || tenant.costPerMonthUsd !== undefined;
    if (this.#checksTotals) {
      const totals = this.#totals;
      if (totals === undefined || totals.day !== day || now - totals.at >= TOTALS_MS) return { type: "need", asks };
      const gained = this.#counts.gained;
      const tokens = totals.tokens + this.#inFlight.tokens + gained.tokens;
      const cost = totals.cost + this.#inFlight.cost + gained.cost;
      if (tenant.tokensPerDay !== undefined && tokens >= tenant.tokensPerDay)
        return { type: "refuse", refusal: dayRefusal("tenant", "tokensPerDay", tenant.tokensPerDay, now) };
      if (tenant.costPerMonthUsd !== undefined && cost >= tenant.costPerMonthUsd)
        return { type: "refuse", refusal: costRefusal("tenant", tenant.costPerMonthUsd, now) };
    }
    return asks.length > 0 ? { type: "need", asks } : { type: "pass", take };
  }

  /**
   * Lease what `asks` names, and hear the tenant's totals, in one call to the tenant's object (one at a time: an
   * admission that finds one under way waits for it and decides again).
   */
  #lease(asks: readonly Ask[], now: number): Promise<void> {
    if (this.#leasing !== undefined) return this.#leasing;
    const self = this.#self;
    if (self === undefined) return Promise.resolve();
    const run = async (): Promise<void> => {
      const live = this.#counts.liveSlots(now);
      const wants = asks.map((ask) => {
        const lack = ask.kind === "slots" ? live + 1 - this.#held.available("slots", "") : 1;
        return { ...ask, want: this.#held.want(ask.kind, ask.period, lack) };
      });
      // Keyed: a retry is answered what the call granted. The grants recorded since ride along as acknowledgments.
      const id = crypto.randomUUID();
      const acks = this.#acks.ids();
      const ask = (): Promise<LeaseAnswer> => limitsStub(this.env, self.tenant).lease(self.key, wants, id, acks);
      const answer = await ask().catch(ask);
      const at = hostClock().now();
      this.#heard(answer.totals, now);
      this.#acks.answered(answer);
      asks.forEach((ask, i) => {
        const granted = answer.granted[i] ?? 0;
        if (granted > 0) this.#held.granted(ask.kind, ask.period, granted, at);
        else
          this.#dry.set(`${ask.kind}\n${ask.period}`, {
            until: at + DRY_MS,
            refusal: this.#refusal(ask, undefined, at),
          });
      });
      // Recorded with the grant, in the same step, and acknowledged by the next forward (within FORWARD_MS, well
      // inside GRANT_ACK_MS) or the next lease call, whichever comes first, until answered: the tenant's object does
      // not take back what this shard holds, and acknowledging costs no call of its own.
      if (this.#acks.record(id, grantParts(asks, answer.granted))) this.#changed();
    };
    const promise = run().finally(() => {
      if (this.#leasing === promise) this.#leasing = undefined;
    });
    this.#leasing = promise;
    return promise;
  }

  /** The refusal of an admission `ask` could not be leased for (undefined: the tenant's totals could not be heard). */
  #refusal(ask: Ask | undefined, limits: LimitsResponse | undefined, now: number): Refusal {
    const need = ask ?? { kind: "totals" as const };
    switch (need.kind) {
      case "totals":
        return { field: "tenant.tokensPerDay", limit: limits?.tenant.tokensPerDay ?? 0, retryAfter: 1 };
      case "inputs":
        // Other shards may give back what they hold unused (after IDLE_MS): worth a try before the day ends.
        return {
          field: "tenant.inputsPerDay",
          limit: need.limit,
          retryAfter: Math.min(secondsUntil(nextDay(now), now), Math.ceil(IDLE_MS / 1000) + 1),
        };
      case "requests":
        return minuteRefusal("tenant", need.limit, now);
      case "slots":
        return { field: "tenant.concurrentTurns", limit: need.limit, retryAfter: 2 };
      default: {
        const never: never = need;
        return never;
      }
    }
  }

  #heard(totals: TenantTotals, now: number): void {
    this.#totals = { ...totals, at: now };
  }

  cancel(key: string): { readonly cancelled: boolean } {
    const day = this.#counts.cancel(key);
    if (day === undefined) return { cancelled: false };
    // The tenant's unit it took (when inputsPerDay was leased) is this shard's again.
    this.#held.untake("inputs", day);
    this.#changed();
    return { cancelled: true };
  }

  /** Settle a session's reports, in order (one call for every report the session had not sent: limits/meter.ts). */
  settle(reports: readonly SettleReport[], at?: ShardRef): { readonly settled: number; readonly released: number } {
    if (at !== undefined) this.#bind(at);
    const result = this.#settle(reports);
    this.#changed();
    return result;
  }

  #settle(reports: readonly SettleReport[]): { readonly settled: number; readonly released: number } {
    const now = hostClock().now();
    return this.#counts.settle(reports, now, dayOf(now));
  }

  usage(range: UsageRange): UsageCounts {
    return this.#counts.usage(range);
  }

  /**
   * Erase a user (docs/operations.md "Deleting a user's data"): its usage days, per-model usage and request minutes,
   * its reservations, the sessions it was counted for and those sessions' settled keys. The tenant's own totals keep
   * their sums (they name no user). Idempotent: a second call finds nothing. On the tenant's object (`tenant` given), the
   * user's shard is erased first; on a shard, a forward under way ends first, and a batch waiting to be resent loses
   * the user's rows (so none reaches the tenant's object after it).
   */
  async eraseUser(sub: string, tenant?: string): Promise<{ readonly rows: number }> {
    let rows = 0;
    if (tenant !== undefined) rows += (await shardStub(this.env, shardOf(tenant, sub, undefined)).eraseUser(sub)).rows;
    await this.#forwarding?.catch(() => undefined);
    rows += this.#counts.erase(sub);
    const sql = this.ctx.storage.sql;
    for (const row of sql.exec("SELECT seq, body FROM forward_sent").toArray()) {
      const batch = JSON.parse(String(row["body"])) as ForwardBatch;
      // The user's rows go; in a batch whose user rows count for the tenant too, they stay the tenant's.
      const gone = batch.rows.filter((r) => r.scope === `u:${sub}`).length;
      if (gone === 0) continue;
      rows += gone;
      const kept = batch.rows.flatMap((r) =>
        r.scope !== `u:${sub}` ? [r] : batch.implied === true ? [{ ...r, scope: TENANT }] : [],
      );
      sql.exec("UPDATE forward_sent SET body = ? WHERE seq = ?", JSON.stringify({ ...batch, rows: kept }), row["seq"]);
    }
    return { rows };
  }

  // ---------------------------------------------------------------------------------------------
  // The tenant's object: leases and forwarded counts.

  /** Lease units to `shard` (limits/grants.ts: a keyed call's retry is answered the same; `acks` acknowledge grants). */
  lease(shard: string, asks: readonly LeaseAsk[], id?: string, acks: readonly string[] = []): LeaseAnswer {
    return answerLease(this.#pool, { shard, asks, id, acks }, () => this.#totalsNow(), hostClock().now());
  }

  /** Add a shard's batch (once: batches are numbered); the tenant's totals when the shard checks against them. */
  forward(shard: string, batch: ForwardBatch): TenantTotals | ForwardAcked | undefined {
    const sql = this.ctx.storage.sql;
    const now = hostClock().now();
    // Acknowledgments are answered whether or not the batch was counted before (answering one again changes nothing).
    const acks = batch.acks === undefined ? undefined : this.#pool.acknowledge(shard, batch.acks);
    const last = Number(sql.exec("SELECT seq FROM forwarded WHERE shard = ?", shard).toArray()[0]?.["seq"] ?? -1);
    if (batch.seq > last) {
      for (const row of batch.rows) this.#counts.apply(row, batch.implied === true);
      this.#pool.returned(shard, batch.back, now);
      sql.exec(
        "INSERT INTO forwarded (shard, seq) VALUES (?, ?) ON CONFLICT (shard) DO UPDATE SET seq = excluded.seq",
        shard,
        batch.seq,
      );
    }
    if (now - this.#poolPrunedAt >= 3_600_000) {
      this.#poolPrunedAt = now;
      this.#counts.prune(now);
      this.#pool.prune(dayOf(now), Math.floor(now / 60_000));
    }
    return answerForward(batch.totals === true ? this.#totalsNow() : undefined, acks);
  }

  #totalsNow(): TenantTotals {
    return this.#counts.spent(hostClock().now());
  }

  // ---------------------------------------------------------------------------------------------
  // A shard's forwarding.

  #bind(at: ShardRef): void {
    if (this.#self !== undefined) return;
    this.ctx.storage.sql.exec("INSERT INTO shard (id, tenant, key) VALUES (1, ?, ?)", at.tenant, at.key);
    this.#self = at;
    this.#counts.forwarding = true;
  }

  /** Counts changed: forward them within the batch window (the alarm is the backstop). */
  #changed(): void {
    if (this.#self === undefined || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, FORWARD_MS);
    this.#arm(hostClock().now() + IDLE_MS);
  }

  /** Arm the alarm for `at` unless it fires before then (one write while it stays armed). */
  #arm(at: number): void {
    if (this.#alarmAt !== undefined && this.#alarmAt <= at) return;
    this.#alarmAt = at;
    void this.ctx.storage.setAlarm(at);
  }

  override async alarm(): Promise<void> {
    this.#alarmAt = undefined;
    await this.flush();
    const sql = this.ctx.storage.sql;
    const pending =
      sql.exec("SELECT 1 AS found FROM outbox LIMIT 1").toArray().length > 0 ||
      sql.exec("SELECT 1 AS found FROM forward_sent LIMIT 1").toArray().length > 0 ||
      this.#acks.pending();
    if (pending || this.#held.holding()) this.#arm(hostClock().now() + (pending ? this.#retryMs() : IDLE_MS));
  }

  #retryMs(): number {
    return Math.min(1_000 * 2 ** Math.max(0, this.#attempt - 1), RETRY_MAX_MS);
  }

  /** Forward what this shard counted, and give back what it holds idle: one batch at a time, resent until answered. */
  flush(): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#forwarding !== undefined) await this.#forwarding.catch(() => undefined);
      const self = this.#self;
      if (self === undefined) return;
      const sql = this.ctx.storage.sql;
      const now = hostClock().now();
      let row = sql.exec("SELECT seq, body FROM forward_sent ORDER BY seq LIMIT 1").toArray()[0];
      if (row === undefined) {
        const rows = this.#counts.takeOutbox();
        const periods = { day: dayOf(now), minute: String(Math.floor(now / 60_000)) };
        const back = this.#held.idle(now, periods, this.#counts.liveSlots(now));
        const acks = this.#acks.ids();
        if (rows.length === 0 && back.length === 0 && acks.length === 0) return;
        const seq = Number(
          sql.exec("SELECT coalesce(max(seq), 0) + 1 AS seq FROM forwarded WHERE shard = ''").one()["seq"],
        );
        const body = JSON.stringify({
          seq,
          rows,
          back,
          implied: true,
          ...(this.#checksTotals ? { totals: true } : {}),
          ...(acks.length === 0 ? {} : { acks }),
        } satisfies ForwardBatch);
        sql.exec("INSERT INTO forward_sent (seq, body) VALUES (?, ?)", seq, body);
        sql.exec(
          "INSERT INTO forwarded (shard, seq) VALUES ('', ?) ON CONFLICT (shard) DO UPDATE SET seq = excluded.seq",
          seq,
        );
        this.#inFlight = this.#counts.taken();
        row = { seq, body };
      }
      const batch = JSON.parse(String(row["body"])) as ForwardBatch;
      try {
        const answer = await limitsStub(this.env, self.tenant).forward(self.key, batch);
        sql.exec("DELETE FROM forward_sent WHERE seq = ?", batch.seq);
        this.#inFlight = { tokens: 0, cost: 0 };
        const totals = this.#acks.forwarded(answer);
        if (totals !== undefined) this.#heard(totals, hostClock().now());
        this.#attempt = 0;
      } catch (error) {
        hostReport({ type: "harness", report: error });
        this.#attempt += 1;
        this.#arm(hostClock().now() + this.#retryMs());
        return;
      }
      // Counted while the batch was under way: the next batch.
      if (sql.exec("SELECT 1 AS found FROM outbox LIMIT 1").toArray().length > 0) this.#changed();
    };
    const sending = run().finally(() => {
      if (this.#forwarding === sending) this.#forwarding = undefined;
    });
    this.#forwarding = sending;
    return sending;
  }
}

function minuteRefusal(who: "user" | "tenant", limit: number, now: number): Refusal {
  const minute = Math.floor(now / 60_000);
  return { field: `${who}.requestsPerMinute`, limit, retryAfter: secondsUntil((minute + 1) * 60_000, now) };
}

export { TENANT };
