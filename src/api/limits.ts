/**
 * Wire schemas of a tenant's limits and metering (docs/users.md "Limits and usage"; part of the
 * wire-schema module, so the OpenAPI document and the typed client take them from here): the body of
 * `PUT /v1/limits`, the query of `GET /v1/usage` and `GET /v1/me/usage`, and what they answer.
 */
import { z } from "zod";

/** The names of the limits one principal (a user, or the tenant) may have. */
export const LIMIT_NAMES = [
  "requestsPerMinute",
  "concurrentTurns",
  "inputsPerDay",
  "tokensPerDay",
  "costPerMonthUsd",
] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

const whole = (what: string, max: number): z.ZodNumber =>
  z
    .number({ error: `${what} is a number` })
    .int(`${what} is a whole number`)
    .min(0, `${what} is at least 0`)
    .max(max, `${what} is at most ${max}`);

/** One principal's limits; an absent limit is no limit. 0 refuses everything it counts. */
export const limitSet = z.strictObject({
  requestsPerMinute: whole("requestsPerMinute", 1_000_000).optional(),
  concurrentTurns: whole("concurrentTurns", 100_000).optional(),
  inputsPerDay: whole("inputsPerDay", 100_000_000).optional(),
  tokensPerDay: whole("tokensPerDay", 1_000_000_000_000).optional(),
  costPerMonthUsd: z
    .number({ error: "costPerMonthUsd is a number" })
    .min(0, "costPerMonthUsd is at least 0")
    .max(1_000_000_000, "costPerMonthUsd is at most 1,000,000,000")
    .optional(),
});
export type LimitSet = z.infer<typeof limitSet>;

/** `PUT /v1/limits`: every user's limits (each user counted apart) and the tenant's (all its traffic). */
export const limitsBody = z.strictObject({
  user: limitSet.optional(),
  tenant: limitSet.optional(),
});
export type LimitsBody = z.infer<typeof limitsBody>;

/** What `GET`/`PUT /v1/limits` answer: both sets, empty when nothing is limited. */
export const limitsResponse = z.strictObject({
  user: limitSet,
  tenant: limitSet,
  /** When the limits were last set (ms since the epoch); absent: never set. */
  updatedAt: z.number().int().optional(),
});
export type LimitsResponse = z.infer<typeof limitsResponse>;

/** A UTC day, `YYYY-MM-DD`. */
export const utcDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "a UTC day, YYYY-MM-DD")
  .refine(
    (day) =>
      !Number.isNaN(Date.parse(`${day}T00:00:00Z`)) && new Date(`${day}T00:00:00Z`).toISOString().startsWith(day),
    "not a calendar day",
  );

/**
 * `GET /v1/usage` (operator): one user (`sub`) or every user, over `from`..`to` (UTC days, inclusive; default the last
 * 30 days).
 */
export const usageQuery = z.strictObject({
  sub: z.string().min(1).max(128).optional(),
  from: utcDay.optional(),
  to: utcDay.optional(),
});
/** `GET /v1/me/usage`: the token's own user. */
export const meUsageQuery = usageQuery.omit({ sub: true });

/** One user's (or, with `sub: null`, the whole tenant's) counts on one UTC day. */
export const usageDay = z.strictObject({
  sub: z.string().nullable(),
  day: z.string(),
  inputs: z.number().int(),
  inputTokens: z.number().int(),
  outputTokens: z.number().int(),
  totalTokens: z.number().int(),
  costUsd: z.number(),
});
export type UsageDay = z.infer<typeof usageDay>;

/** One user's (or, with `sub: null`, the whole tenant's) model calls, tokens and cost with one model on one UTC day. */
export const usageModelDay = z.strictObject({
  sub: z.string().nullable(),
  day: z.string(),
  /** The model as the session's profile names it (`unknown` for usage metered before models were). */
  model: z.string(),
  /** Model calls whose usage was reported (attempts with no report are not counted: unknown cost, not zero). */
  calls: z.number().int(),
  inputTokens: z.number().int(),
  outputTokens: z.number().int(),
  totalTokens: z.number().int(),
  costUsd: z.number(),
});
export type UsageModelDay = z.infer<typeof usageModelDay>;

export const usageResponse = z.strictObject({
  from: z.string(),
  to: z.string(),
  /** By day, then user; `sub: null` rows are the tenant's totals (every user, and requests without one). */
  items: z.array(usageDay),
  /** Tokens and cost by day, user and model; `sub: null` rows are the tenant's totals per model. */
  models: z.array(usageModelDay),
});
export type UsageResponse = z.infer<typeof usageResponse>;

/** The longest range one usage request covers, days. */
export const USAGE_MAX_DAYS = 366;
