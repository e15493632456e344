/**
 * Wire schemas of the rig's routes (docs/rig.md; part of the wire-schema module, so the OpenAPI document
 * covers them): agent registration, hook transitions, mail, witness settings, the long-poll `?wait=`.
 */
import { z } from "zod";
import { MIN_SETTING_MS, RESERVED_NAMES } from "../rig/types.js";
import { acceptQuery, cursorQuery } from "./schemas.js";

export const agentId = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9-]{0,63}$/,
    "an agent id is 1-64 characters of a-z 0-9 and -, starting with a letter or digit",
  )
  .refine((id) => !RESERVED_NAMES.includes(id), `${RESERVED_NAMES.join(", ")} are reserved names, not agent ids`);

export const registerBody = z.strictObject({
  role: z.enum(["polecat", "refinery", "crew"]),
  conversation: z.union([z.literal("new"), z.number().int().positive()]).optional(),
});

export const setHookBody = z.strictObject({
  bead_id: z.string().regex(/^[\x21-\x7e]{1,200}$/, "a bead id is 1-200 visible ASCII characters"),
  title: z.string().min(1, "a title is required").max(1000),
});

/** The assignment the agent works on (its hook's Hook-Attempt): required, so a stale worker is always refused. */
const attempt = z
  .number({
    error: (issue) =>
      issue.input === undefined
        ? "attempt is required: the Hook-Attempt of the assignment this transition is for"
        : "attempt is a positive integer",
  })
  .int()
  .positive();
export const attemptBody = z.strictObject({ attempt });
export const completeBody = z.strictObject({ attempt, summary: z.string().max(100_000).optional() });

const payloadValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(payloadValue), z.record(z.string(), payloadValue)]),
);
export const mailBody = z.strictObject({
  to: z
    .string()
    .regex(/^(mayor|witness|[a-z0-9][a-z0-9-]{0,63})$/, "to is an agent id, mayor or witness")
    .refine(
      (to) => to !== "operator",
      "to is an agent id, mayor or witness (operator is a reserved name with no mailbox)",
    ),
  payload: z.union([z.string().min(1).max(100_000), z.record(z.string(), payloadValue)]),
});

const setting = z
  .number()
  .int()
  .min(MIN_SETTING_MS, `at least ${MIN_SETTING_MS} ms`)
  .max(7 * 24 * 3_600_000);
export const witnessPatch = z
  .strictObject({
    patrolIntervalMs: setting.optional(),
    stallThresholdMs: setting.optional(),
    alertAfterMs: setting.optional(),
    spawnGraceMs: setting.optional(),
    touchThrottleMs: setting.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "a witness patch sets at least one field");

/** `GET .../rig/mail?after=&limit=`: a mailbox page by cursor (default and largest limit 1,000). */
export const mailQuery = cursorQuery;

/** `?wait=SECONDS` (<= 60) long-polls: the same parameter as an accept's wait. */
export const waitQuery = acceptQuery;
