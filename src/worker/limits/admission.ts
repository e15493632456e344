/**
 * Admission under a tenant's limits (docs/users.md "Limits and usage"): a per-isolate copy of each tenant's limits
 * (read at most every `LIMITS_TTL_MS`; the isolate that serves `PUT /v1/limits` updates its copy at once), the
 * admission checks the routes call, the refusal they throw, and the input reservations a session makes for the
 * inputs it accepts (the Worker passes the payer along; the session reserves inside the accept, carrying its pending
 * usage reports, so an accepted input costs one LimitsObject call with its settlement included).
 *
 * A tenant with no limits configured pays nothing here beyond that periodic read: no request is counted
 * and no input reserved. Metering still runs: the sessions' usage reports (meter.ts) count inputs, tokens
 * and cost after the fact. Operator tokens are never counted, so an operator can always change the limits.
 */
import type { LimitsResponse } from "../../api/limits.js";
import type { Env } from "../env.js";
import type { Admission, Refusal } from "./object.js";
import { limitsStub, shardOf, shardStub } from "./shards.js";
import { Problem } from "../problems.js";
import type { Claims } from "../schemas.js";
import type { ScheduleAdmission } from "../../kinds/schedule.js";
import { hostReport, limitsTtlMs } from "../platform/host-config.js";
import type { LimitsMeter } from "./meter.js";

/** How long an isolate uses its copy of a tenant's limits before it reads them again, ms. */
export const LIMITS_TTL_MS = 10_000;

/** How long a turn slot is held without a report from its session (a crash): then it expires. */
export const TURN_LEASE_MS = 15 * 60_000;

const copies = new Map<string, { readonly limits: LimitsResponse; readonly at: number }>();

/** Whether anything is limited (then requests and inputs are counted and reserved at admission). */
export function limited(limits: LimitsResponse): boolean {
  return Object.keys(limits.user).length > 0 || Object.keys(limits.tenant).length > 0;
}

/** After a failed read, how long the isolate uses the copy it has before it reads again, ms. */
const RETRY_READ_MS = 1_000;

/**
 * The tenant's limits as this isolate knows them. A read that fails is an outage, not "nothing limited": the isolate
 * keeps using the copy it has (reporting the failure, reading again after RETRY_READ_MS); only without any copy does
 * the request fail.
 *
 * The copy (plain data) is shared by the isolate; a read in flight is not. Each caller whose copy is stale reads for
 * itself: callers are requests and Durable Objects of one isolate, and a promise one of them started, awaited by
 * another, resumes the other under the first one's context, where its own storage is "I/O on behalf of a different
 * Durable Object" (bench:load's concurrent limits rounds answered 500s so). A stale copy costs one read per caller
 * in flight at that moment, once per LIMITS_TTL_MS.
 */
export async function limitsOf(env: Env, tenant: string): Promise<LimitsResponse> {
  const copy = copies.get(tenant);
  if (copy !== undefined && Date.now() - copy.at < limitsTtlMs(LIMITS_TTL_MS)) return copy.limits;
  try {
    const limits = await limitsStub(env, tenant).limits();
    remember(tenant, limits);
    return limits;
  } catch (error) {
    if (copy === undefined) throw error;
    hostReport({ type: "harness", report: error });
    copies.set(tenant, { limits: copy.limits, at: Date.now() - limitsTtlMs(LIMITS_TTL_MS) + RETRY_READ_MS });
    return copy.limits;
  }
}

/** Keep `limits` as this isolate's copy (after a PUT). */
export function remember(tenant: string, limits: LimitsResponse): void {
  copies.set(tenant, { limits, at: Date.now() });
}

/** The user a token's limits count against: a user token's `sub`. */
export function principal(claims: Claims): string | undefined {
  return claims.role === "user" ? claims.sub : undefined;
}

export function refused(refusal: Refusal): Problem {
  return new Problem(
    "rate_limited",
    `${refusal.field} (${refusal.limit}) is reached; retry after ${refusal.retryAfter} s`,
    refusal.field,
    { retryAfter: refusal.retryAfter },
  );
}

function admitted(admission: Admission): boolean {
  if (!admission.ok) throw refused(admission.refusal);
  return admission.reserved;
}

/** Count one API request against requestsPerMinute (user and tenant); throws 429 over it. */
export async function admitRequest(env: Env, claims: Claims): Promise<void> {
  if (claims.role === "operator") return;
  const limits = await limitsOf(env, claims.tenant);
  const sub = principal(claims);
  if (
    limits.tenant.requestsPerMinute === undefined &&
    (sub === undefined || limits.user.requestsPerMinute === undefined)
  )
    return;
  const at = shardOf(claims.tenant, sub, undefined);
  admitted(await shardStub(env, at).admitRequest(at, sub, limits));
}

/**
 * Admit work that calls the model without a new input (collapse): 429 over tokensPerDay,
 * costPerMonthUsd or a full concurrentTurns (user, then tenant); it counts no input and holds no slot.
 * Its requests were counted against requestsPerMinute by authentication, like every request.
 */
export async function admitWork(env: Env, claims: Claims): Promise<void> {
  if (claims.role === "operator") return;
  const limits = await limitsOf(env, claims.tenant);
  if (!limited(limits)) return;
  const sub = principal(claims);
  const at = shardOf(claims.tenant, sub, undefined);
  admitted(await shardStub(env, at).admitWork(at, sub, limits));
}

/** A reserved input: `cancel` undoes it when the session does not accept the input after all. */
export interface Reserved {
  cancel(): Promise<void>;
}

/** Whose limits an input counts against: the tenant's, and a user's when a user token sent it. */
export interface Payer {
  readonly tenant: string;
  readonly sub?: string;
}

/** The payer of a request made with `claims` (signed deliveries have no token: `{ tenant }` only). */
export function payerOf(claims: Claims): Payer {
  const sub = principal(claims);
  return sub === undefined ? { tenant: claims.tenant } : { tenant: claims.tenant, sub };
}

/**
 * Reserve one input (and one turn slot) for the session whose key (`{session}:{incarnation}`,
 * src/kinds/incarnation.ts) is `session`, so an Idempotency-Key of a deleted incarnation is a new key; throws 429
 * over a limit.
 * Undefined when the tenant limits nothing, or when the request key was reserved before (a retry). With `slot:
 * false` the input is admitted by every limit (a full `concurrentTurns` included) and counted for the day, but holds
 * no turn slot: `continue` starts a turn the session reports under no request key.
 */
export type ReserveInput = (
  session: string,
  payer: Payer,
  requestId: string | undefined,
  options?: { readonly slot?: boolean },
) => Promise<Reserved | undefined>;

/**
 * The session's reservations (it reserves its own inputs, so the call carries its pending usage reports: one call to
 * a LimitsObject per accepted input settles the session's turns too, limits/meter.ts). An input goes to its user's
 * shard (limits/shards.ts), else to the shard of the session's owner, else to the session's own anonymous shard.
 */
export function sessionReservations(env: Env, meter: LimitsMeter, owner: () => string | undefined): ReserveInput {
  return async (at, payer, requestId, options = {}) => {
    const limits = await limitsOf(env, payer.tenant);
    if (!limited(limits)) return undefined;
    const home = owner();
    const shard = { tenant: payer.tenant, key: meter.shardFor(payer.tenant, payer.sub, at, home) };
    const key = `${at}\n${requestId ?? `~${crypto.randomUUID()}`}`;
    const carried = meter.carry(payer.tenant, shard.key);
    const admission = await meter.call(shard, (stub) =>
      stub.admitInput(
        shard,
        {
          key,
          session: at,
          keyed: requestId !== undefined,
          leaseMs: options.slot === false ? 0 : TURN_LEASE_MS,
          ...(payer.sub === undefined ? {} : { sub: payer.sub }),
        },
        limits,
        carried.reports,
      ),
    );
    if (admission.carried === true) meter.carried(carried);
    if (!admitted(admission)) return undefined;
    meter.reserved({ tenant: payer.tenant, session: at, owner: home }, shard.key, requestId, payer.sub);
    if (admission.ok && admission.slot === true) meter.heldSlot();
    return {
      cancel: async () => {
        await meter.call(shard, (stub) => stub.cancel(key));
        meter.unreserved(shard.key, requestId);
      },
    };
  };
}

/**
 * Give back a reservation the session never used: its key in this incarnation, when limits are set (the Worker asks
 * for it when the request failed before the session answered, and the session confirms it never accepted the input).
 */
export async function releaseReservation(
  env: Env,
  meter: LimitsMeter,
  payer: Payer,
  session: string,
  requestId: string,
  owner: string | undefined,
): Promise<boolean> {
  if (!limited(await limitsOf(env, payer.tenant))) return false;
  const shard = meter.shardFor(payer.tenant, payer.sub, session, owner);
  const { cancelled } = await meter.call({ tenant: payer.tenant, key: shard }, (stub) =>
    stub.cancel(`${session}\n${requestId}`),
  );
  if (cancelled) meter.unreserved(shard, requestId);
  return cancelled;
}

/**
 * The admission of a schedule's occurrences (docs/users.md "Limits and usage"): an input of the session's
 * owner (tenant limits only for a session without one), reserved under the occurrence's request key in this
 * incarnation (`where().session`: the session key). Unreachable limits do not cost the occurrence: it runs unadmitted and the outage is reported
 * (its tokens are still metered by the session's durable reports).
 */
export function scheduleAdmission(
  reserve: ReserveInput,
  where: () => { readonly tenant: string; readonly session: string } | undefined,
  owner: () => string | undefined,
): (requestId: string) => Promise<ScheduleAdmission> {
  return async (requestId) => {
    const at = where();
    if (at === undefined) return { type: "admitted" };
    const sub = owner();
    try {
      const payer = sub === undefined ? { tenant: at.tenant } : { tenant: at.tenant, sub };
      const reserved = await reserve(at.session, payer, requestId);
      return reserved === undefined ? { type: "admitted" } : { type: "admitted", release: () => reserved.cancel() };
    } catch (error) {
      if (error instanceof Problem && error.code === "rate_limited")
        return { type: "refused", limit: error.field ?? "" };
      hostReport({ type: "admission_failed", error });
      return { type: "admitted" };
    }
  };
}
