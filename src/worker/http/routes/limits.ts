/**
 * A tenant's limits and metering (docs/users.md "Limits and usage"), kept by its LimitsObject:
 *
 *   PUT /v1/limits     (operator) `{ user?, tenant? }` replaces the limits; 422 invalid_limits naming the field
 *   GET /v1/limits     (operator) the limits (`{ user: {}, tenant: {} }` when none)
 *   GET /v1/usage      (operator) `?sub=&from=&to=`: inputs, tokens and cost by user and UTC day, and by model
 *   GET /v1/me/usage   (a token with `sub`) the same for the token's own user
 */
import { Hono } from "hono";
import { z } from "zod";
import { limitsBody, meUsageQuery, USAGE_MAX_DAYS, usageQuery } from "../../../api/limits.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { dayOf, type UsageCounts, type UsageRange } from "../../limits/object.js";
import { limitsStub, shardOf, shardStub } from "../../limits/shards.js";
import type { Env } from "../../env.js";
import { remember } from "../../limits/admission.js";
import { Problem } from "../../problems.js";
import { noQuery, parse } from "../../schemas.js";
import { body, query, type AppContext } from "./shared.js";

export const limitRoutes = new Hono<AppEnv>();

limitRoutes.get("/limits", requires("limits"), async (c) => {
  query(c, noQuery);
  const limits = await limitsStub(c.env, c.get("claims").tenant).limits();
  remember(c.get("claims").tenant, limits);
  return c.json(limits);
});

limitRoutes.put("/limits", requires("limits"), async (c) => {
  query(c, noQuery);
  // A body that is not JSON is 400/415 like every route; a JSON body that is not valid limits is 422.
  const limits = parse(limitsBody, await body(c, z.unknown()), "invalid_limits");
  const saved = await limitsStub(c.env, c.get("claims").tenant).setLimits(limits);
  remember(c.get("claims").tenant, saved);
  return c.json(saved);
});

/** The days asked for: `to` defaults to today, `from` to 29 days before `to`. */
function range(from: string | undefined, to: string | undefined): { from: string; to: string } {
  const end = to ?? dayOf(Date.now());
  const start = from ?? dayOf(Date.parse(`${end}T00:00:00Z`) - 29 * 86_400_000);
  if (start > end) throw new Problem("invalid_query", "from is after to", "from");
  const days = (Date.parse(`${end}T00:00:00Z`) - Date.parse(`${start}T00:00:00Z`)) / 86_400_000 + 1;
  if (days > USAGE_MAX_DAYS)
    throw new Problem("invalid_query", `a range covers at most ${USAGE_MAX_DAYS} days`, "from");
  return { from: start, to: end };
}

limitRoutes.get("/usage", requires("limits"), async (c) => {
  const q = query(c, usageQuery);
  const days = range(q.from, q.to);
  const counts = await usageOf(c.env, c.get("claims").tenant, {
    ...days,
    ...(q.sub === undefined ? {} : { sub: q.sub }),
  });
  return c.json({ ...days, items: counts.items, models: counts.models });
});

limitRoutes.get("/me/usage", requires("usage"), async (c) => usageOfMe(c));

async function usageOfMe(c: AppContext): Promise<Response> {
  const q = query(c, meUsageQuery);
  const claims = c.get("claims");
  // Only a user token is a user: a sub on another role's token names nobody whose usage it may read.
  const sub = claims.role === "user" ? claims.sub : undefined;
  if (sub === undefined)
    throw new Problem("forbidden", "only a user token has usage of its own (its sub); operators read GET /v1/usage");
  const days = range(q.from, q.to);
  const counts = await usageOf(c.env, c.get("claims").tenant, { ...days, sub });
  return c.json({ ...days, items: counts.items, models: counts.models });
}

/**
 * The tenant's counts, as its object holds them (every shard forwards within about a second); one user's include what
 * that user's shard counted up to now (it forwards first).
 */
async function usageOf(env: Env, tenant: string, range: UsageRange): Promise<UsageCounts> {
  if (range.sub !== undefined) await shardStub(env, shardOf(tenant, range.sub, undefined)).flush();
  return limitsStub(env, tenant).usage(range);
}
