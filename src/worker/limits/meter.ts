/**
 * A session's side of its tenant's limits (docs/users.md "Limits and usage"): after each durable commit
 * it reports to a limits shard what the commit settled — the model usage rows it appended (tokens and cost, each
 * keyed by its element's seq so a repeated report counts once) to the shard of the user who pays, and the inputs whose
 * result became final (their turn slot is released) to the shard that reserved them.
 *
 * Reports are durable until acknowledged: each is kept in the session object's KV storage and deleted only when the
 * shard answers. They are batched: a report rides the session's next input reservation (`carry`: the
 * admission call settles them first, so a session that keeps receiving inputs settles its turns without a call of its
 * own), or is sent with every other pending report in one `settle` call once BATCH_MS passed without one. A report
 * that releases a turn slot a `concurrentTurns` limit counts is sent at once (a user waiting for a slot does not wait
 * for the batch). A send that fails is retried from the session's alarm (backing off up to RETRY_MAX_MS), and on the
 * next open. The shard de-duplicates usage by key, so a resend counts nothing twice.
 *
 * Metering always runs: a tenant without limits is reported to as well (its usage by user, day and model is what
 * `GET /v1/usage` reads once the shards forward it). A commit reports only when it settled something. A session created
 * over RPC (no tenant) and a commit with neither report nothing.
 */
import type { CommittedBatch } from "../../core/session-types.js";
import { INPUT_RESULT_NAMESPACE, type InputResult } from "../../core/inbox.js";
import { readUsageRow, usageList } from "../../kinds/usage.js";
import type { StoredUsageRow } from "../../kinds/states.js";
import type { Env } from "../env.js";
import { hostReport, meterBatchMs } from "../platform/host-config.js";
import { Problem } from "../problems.js";
import type { LimitsRpc, SettleReport } from "./object.js";
import { KeptShardStubs, limitsStub, shardOf, type ShardRef } from "./shards.js";

/**
 * Where the session stands: its tenant, its session key (`{session}:{incarnation}`) and the end user who owns it
 * (usage of a session no input reservation names is attributed to its owner).
 */
export type MeterWhere =
  | {
      readonly tenant: string;
      readonly session: string;
      readonly owner: () => string | undefined;
      /** An imported session's last imported sequence: inputs up to it were accepted (and metered) by its source. */
      readonly importedThrough?: number;
    }
  | undefined;

/**
 * What one commit settled (pure; exported for tests). An input whose id is at most `importedThrough` came with an
 * import: its source accepted it, so its end (an imported turn aborted on the copy) is no new input of the copy's.
 */
export function settledBy(commit: CommittedBatch, session: string, importedThrough = 0): SettleReport | undefined {
  if (!settles(commit)) return undefined;
  const usage: SettleReport["usage"][number][] = [];
  const finished: SettleReport["finished"][number][] = [];
  commit.batch.writes.forEach((write, index) => {
    if (write.type === "list.append" && write.addr.namespace === usageList.namespace) {
      const row = readUsageRow(write.value as unknown as StoredUsageRow);
      if (row.usage === null) return;
      usage.push({
        key: `${session}\n${commit.first + index}`,
        model: row.model,
        input: row.usage.input,
        output: row.usage.output,
        totalTokens: row.usage.totalTokens,
        cost: row.usage.cost.total,
      });
    } else if (write.type === "value.set" && write.addr.namespace === INPUT_RESULT_NAMESPACE) {
      const result = write.value as unknown as InputResult;
      if (Number(write.addr.key) <= importedThrough) return;
      if (result.status === "done" || result.status === "unanswered")
        finished.push({
          key: `${session}\n${commit.first + index}`,
          ...(result.requestId === undefined ? {} : { requestId: result.requestId }),
        });
    }
  });
  if (usage.length === 0 && finished.length === 0) return undefined;
  return { session, usage, finished };
}

/**
 * Whether a commit may settle something (a usage row appended, an input result written): most commits do not, and
 * they cost the meter this one look at their writes, nothing allocated.
 */
export function settles(commit: CommittedBatch): boolean {
  if (commit.batch.kind !== "main") return false;
  for (const write of commit.batch.writes) {
    if (write.type === "list.append" && write.addr.namespace === usageList.namespace) return true;
    if (write.type === "value.set" && write.addr.namespace === INPUT_RESULT_NAMESPACE) return true;
  }
  return false;
}

/** Pending reports live in KV blocks `edge.limits.batch.{n}` of at most BLOCK_SIZE each (one put per report). */
const PREFIX = "edge.limits.batch.";
/** Reports written before the blocks, one per key: read once at construction, then kept in blocks like the rest. */
const OLD_PREFIX = "edge.limits.report.";
const BLOCK_SIZE = 64;

/** A block's key: numbered in order, padded so KV lists blocks in that order. */
function blockKey(n: number): string {
  return `${PREFIX}${String(n).padStart(10, "0")}`;
}
export const RETRY_FIRST_MS = 1_000;
export const RETRY_MAX_MS = 60_000;
/** How long a report waits for an input reservation to carry it before it is sent on its own, ms. */
export const BATCH_MS = 1_000;
/**
 * The batch is sent by a timer; the alarm is only its backstop (an instance that ends before its timer fires), armed
 * this long ahead when reports start waiting and left armed while they keep coming: at most one alarm write and one
 * wake a minute, not two writes a batch.
 */
export const BACKSTOP_MS = 60_000;

/**
 * A report kept until its LimitsObject acknowledges it: the shard that reserved the inputs it names, or that its usage
 * counts for (limits/shards.ts); absent in reports kept from before shards (they go to the tenant's object).
 */
interface PendingReport {
  readonly tenant: string;
  readonly shard?: string;
  readonly report: SettleReport;
}

/**
 * Where a session's reports go besides its home shard (its owner's, or its own anonymous one): the user its usage
 * counts for when that is not the owner (the last user who sent input under a limit), and the shards that reserved
 * inputs not reserved at home (a granted user's), by request id, or in order for inputs without one. Kept in KV only
 * while something is away from home: a session only its owner (or no user) sends to writes nothing for it.
 */
interface Route {
  readonly payer?: string;
  readonly keyed: Readonly<Record<string, string>>;
  readonly unkeyed: readonly string[];
}

const ROUTE_KEY = "edge.limits.route";
const HOME: Route = { keyed: {}, unkeyed: [] };

/** Reports an admission call carries: acknowledge them with `carried` once the LimitsObject settled them. */
export interface Carried {
  readonly reports: readonly SettleReport[];
  /** The pending reports carried (acknowledged by identity). */
  readonly pending: readonly PendingReport[];
}

export interface MeterDeps {
  readonly env: Env;
  /** The session object's synchronous KV storage: pending reports live there. */
  readonly kv: SyncKvStorage;
  readonly now: () => number;
  /** When pending reports are next due (undefined: none pending): arm the alarm for it. */
  readonly due: (at: number | undefined) => void;
}

/** The session's usage reports to its tenant's limits, durable until acknowledged. */
export class LimitsMeter {
  readonly #deps: MeterDeps;
  #sending: Promise<void> | undefined;
  #attempt = 0;
  #dueAt: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Reservations of this instance that hold a counted turn slot and were not released yet. */
  #slots = 0;
  /**
   * The pending reports, in commit order, by block: the object's memory copy of its KV blocks (the meter is their only
   * writer, so they are listed from storage once per instance, not per send).
   */
  #blocks: Map<number, PendingReport[]> | undefined;
  #nextBlock = 0;
  readonly #stubs: KeptShardStubs;

  constructor(deps: MeterDeps) {
    this.#deps = deps;
    this.#stubs = new KeptShardStubs(deps.env);
  }

  /** Call a shard of this session's tenant through the stub this object keeps for it (limits/admission.ts too). */
  call<T>(shard: ShardRef, use: (stub: LimitsRpc) => Promise<T>): Promise<T> {
    return this.#stubs.call(shard, use);
  }

  /** When pending reports are next sent (undefined: nothing waits). */
  get dueAt(): number | undefined {
    return this.#dueAt;
  }

  /**
   * The commit listener (`harness.onCommit`): keep what the commit settled, then send it (now or batched). Where the
   * session stands is asked only of a commit that settles something.
   */
  committed(commit: CommittedBatch, where: () => MeterWhere): void {
    if (!settles(commit)) return;
    const at = where();
    if (at === undefined) return;
    const settled = settledBy(commit, at.session, at.importedThrough);
    if (settled === undefined) return;
    // The owner is read only for a commit that reports (a KV read, not one per commit).
    const owner = at.owner();
    for (const pending of this.#routed(at.tenant, owner === undefined ? settled : { ...settled, owner }))
      this.#add(pending);
    if (this.#slots > 0 && settled.finished.length > 0) {
      this.#slots = Math.max(0, this.#slots - settled.finished.length);
      void this.flush();
    } else this.#batch();
  }

  /** The shard a reservation of `sub` (absent: no user) goes to: the user's, else the session's home shard. */
  shardFor(tenant: string, sub: string | undefined, session: string, owner: string | undefined): string {
    return shardOf(tenant, sub ?? owner, session).key;
  }

  /**
   * `shard` reserved an input of `sub` (request id `requestId`; absent: none): remember where its report goes when
   * that is not home, and whom the session's usage counts for now.
   */
  reserved(
    at: { readonly tenant: string; readonly session: string; readonly owner: string | undefined },
    shard: string,
    requestId: string | undefined,
    sub: string | undefined,
  ): void {
    const route = this.#route();
    const home = this.shardFor(at.tenant, undefined, at.session, at.owner);
    let keyed = route.keyed;
    let unkeyed = route.unkeyed;
    if (requestId !== undefined && shard !== home) keyed = { ...keyed, [requestId]: shard };
    if (requestId === undefined && (shard !== home || unkeyed.length > 0)) unkeyed = [...unkeyed, shard];
    const payer = sub === undefined ? route.payer : sub === at.owner ? undefined : sub;
    if (keyed === route.keyed && unkeyed === route.unkeyed && payer === route.payer) return;
    this.#keepRoute({ ...(payer === undefined ? {} : { payer }), keyed, unkeyed });
  }

  /** A reservation was given back: its input never reaches a report (forget where it would have gone). */
  unreserved(shard: string, requestId: string | undefined): void {
    const route = this.#route();
    if (requestId !== undefined) {
      if (route.keyed[requestId] === undefined) return;
      const { [requestId]: _gone, ...keyed } = route.keyed;
      this.#keepRoute({ ...route, keyed });
      return;
    }
    const last = route.unkeyed.lastIndexOf(shard);
    if (last >= 0) this.#keepRoute({ ...route, unkeyed: route.unkeyed.filter((_, i) => i !== last) });
  }

  #routeCache: Route | undefined;

  #route(): Route {
    return (this.#routeCache ??= this.#deps.kv.get<Route>(ROUTE_KEY) ?? HOME);
  }

  #keepRoute(route: Route): void {
    this.#routeCache = route;
    if (route.payer === undefined && Object.keys(route.keyed).length === 0 && route.unkeyed.length === 0)
      this.#deps.kv.delete(ROUTE_KEY);
    else this.#deps.kv.put(ROUTE_KEY, route);
  }

  /**
   * A commit's report, split by where it goes: usage to the shard of the user it counts for, each finished input to
   * the shard that reserved it (home unless the route says otherwise).
   */
  #routed(tenant: string, report: SettleReport): PendingReport[] {
    const route = this.#route();
    const home = this.shardFor(tenant, undefined, report.session, report.owner);
    const byShard = new Map<
      string,
      { usage: SettleReport["usage"][number][]; finished: SettleReport["finished"][number][] }
    >();
    const part = (shard: string) => {
      let one = byShard.get(shard);
      if (one === undefined) byShard.set(shard, (one = { usage: [], finished: [] }));
      return one;
    };
    const payer = route.payer === undefined ? home : this.shardFor(tenant, route.payer, report.session, undefined);
    if (report.usage.length > 0) part(payer).usage.push(...report.usage);
    let keyed = route.keyed;
    const unkeyed = [...route.unkeyed];
    for (const input of report.finished) {
      let shard = home;
      if (input.requestId !== undefined && keyed[input.requestId] !== undefined) {
        shard = keyed[input.requestId] ?? home;
        const { [input.requestId]: _done, ...rest } = keyed;
        keyed = rest;
      } else if (input.requestId === undefined && unkeyed.length > 0) shard = unkeyed.shift() ?? home;
      part(shard).finished.push(input);
    }
    if (keyed !== route.keyed || unkeyed.length !== route.unkeyed.length) this.#keepRoute({ ...route, keyed, unkeyed });
    return [...byShard].map(([shard, one]) => ({
      tenant,
      shard,
      report: { ...report, usage: one.usage, finished: one.finished },
    }));
  }

  /** An admission of this session reserved a turn slot a `concurrentTurns` limit counts: its release goes at once. */
  heldSlot(): void {
    this.#slots += 1;
  }

  /** The pending reports to `shard` of `tenant` an admission call may carry (none while a send is under way). */
  carry(tenant: string, shard: string): Carried {
    if (this.#sending !== undefined) return { reports: [], pending: [] };
    const pending = this.#pending().filter((p) => p.tenant === tenant && p.shard === shard);
    return { reports: pending.map((p) => p.report), pending };
  }

  /** The LimitsObject settled what an admission carried: forget those reports. */
  carried(carried: Carried): void {
    this.#acknowledge(new Set(carried.pending));
  }

  /** The session opened: resend what a failure or a restart left unacknowledged. */
  opened(): void {
    if (this.#pending().length > 0) void this.flush();
  }

  /** The alarm fired: send pending reports once due (the backstop, or a failed send's retry). */
  async alarm(): Promise<void> {
    if (this.#dueAt === undefined || this.#dueAt > this.#deps.now()) return;
    this.#dueAt = undefined;
    this.#deps.due(undefined);
    if (this.#pending().length > 0) await this.flush();
  }

  /** Send every pending report, one call per shard; a failure is retried later. One send at a time. */
  flush(): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#sending !== undefined) await this.#sending.catch(() => undefined);
      const byShard = new Map<string, PendingReport[]>();
      for (const pending of this.#pending()) {
        const to = `${pending.tenant}\n${pending.shard ?? ""}`;
        const batch = byShard.get(to) ?? [];
        batch.push(pending);
        byShard.set(to, batch);
      }
      for (const batch of byShard.values()) {
        const first = batch[0];
        if (first === undefined) continue;
        const reports = batch.map((p) => p.report);
        try {
          if (first.shard === undefined) await limitsStub(this.#deps.env, first.tenant).settle(reports);
          else {
            const at = { tenant: first.tenant, key: first.shard };
            await this.#stubs.call(at, (stub) => stub.settle(reports, at));
          }
        } catch (error) {
          hostReport({ type: "harness", report: error });
          const delay = Math.min(RETRY_FIRST_MS * 2 ** this.#attempt, RETRY_MAX_MS);
          this.#attempt += 1;
          this.#due(this.#deps.now() + delay);
          return;
        }
        this.#acknowledge(new Set(batch));
      }
      this.#attempt = 0;
    };
    this.#clearTimer();
    const sending = run().finally(() => {
      if (this.#sending === sending) this.#sending = undefined;
    });
    this.#sending = sending;
    return sending;
  }

  /**
   * Before the session's storage is wiped (a delete, an erasure, an expiry): send every pending report and answer
   * whether each was acknowledged (false: some are still pending, and the delete must not wipe them).
   */
  async handOver(): Promise<boolean> {
    if (this.#pending().length === 0) return true;
    await this.flush();
    return this.#pending().length === 0;
  }

  /** `handOver`, refusing the wipe when a report was not acknowledged: 503 `metering_unavailable`, nothing deleted. */
  async handOverOrRefuse(): Promise<void> {
    if (await this.handOver()) return;
    throw new Problem(
      "metering_unavailable",
      "the tenant's limits did not acknowledge this session's usage reports; nothing was deleted, try again",
    );
  }

  /** Send within BATCH_MS unless an admission carries the reports first; the alarm is the backstop. */
  #batch(): void {
    if (this.#timer !== undefined) return;
    const wait = meterBatchMs(BATCH_MS);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, wait);
    if (this.#dueAt === undefined) this.#due(this.#deps.now() + Math.max(wait, BACKSTOP_MS));
  }

  #due(at: number): void {
    this.#dueAt = at;
    this.#deps.due(at);
  }

  /**
   * Nothing is pending: the timer stops and the backstop is no longer a reason to wake. The alarm plan writes nothing
   * for that alone (session/alarm-plan.ts): an alarm written for the backstop stays armed and finds nothing when it
   * fires, and one that stood in for it (a turn's heartbeat, whose rewrite waited for this) is rewritten without it.
   */
  #settledAll(): void {
    this.#clearTimer();
    if (this.#dueAt === undefined) return;
    this.#dueAt = undefined;
    this.#deps.due(undefined);
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Keep a report: appended to the newest block (a new block when it is full), one KV put. */
  #add(pending: PendingReport): void {
    const blocks = this.#loaded();
    let block = blocks.get(this.#nextBlock - 1);
    if (block === undefined || block.length >= BLOCK_SIZE) {
      block = [];
      blocks.set(this.#nextBlock, block);
      this.#nextBlock += 1;
    }
    block.push(pending);
    this.#deps.kv.put(blockKey(this.#nextBlock - 1), block);
  }

  /** Forget acknowledged reports: a block left empty is deleted, one that shrank is written again. */
  #acknowledge(done: ReadonlySet<PendingReport>): void {
    const blocks = this.#loaded();
    for (const [n, block] of blocks) {
      const kept = block.filter((p) => !done.has(p));
      if (kept.length === block.length) continue;
      if (kept.length === 0) {
        blocks.delete(n);
        this.#deps.kv.delete(blockKey(n));
      } else {
        blocks.set(n, kept);
        this.#deps.kv.put(blockKey(n), kept);
      }
    }
    if (blocks.size === 0) {
      this.#nextBlock = 0;
      this.#settledAll();
    }
  }

  /** The session's storage was wiped (deleted): nothing is pending any more. */
  cleared(): void {
    this.#blocks = new Map();
    this.#nextBlock = 0;
    this.#slots = 0;
    this.#attempt = 0;
    this.#routeCache = HOME;
    this.#clearTimer();
    this.#dueAt = undefined;
  }

  #pending(): PendingReport[] {
    return [...this.#loaded().values()].flat();
  }

  /** The blocks, listed from KV on first use in this instance (reports of one key each are moved into a block). */
  #loaded(): Map<number, PendingReport[]> {
    if (this.#blocks !== undefined) return this.#blocks;
    const blocks = new Map<number, PendingReport[]>();
    for (const [key, block] of this.#deps.kv.list<PendingReport[]>({ prefix: PREFIX })) {
      const n = Number(key.slice(PREFIX.length));
      blocks.set(n, block);
      this.#nextBlock = Math.max(this.#nextBlock, n + 1);
    }
    this.#blocks = blocks;
    const old = [...this.#deps.kv.list<PendingReport>({ prefix: OLD_PREFIX })];
    for (const [key, pending] of old) {
      this.#add(pending);
      this.#deps.kv.delete(key);
    }
    return blocks;
  }
}
