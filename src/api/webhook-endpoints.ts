/**
 * Wire schemas of events out (docs/integrations.md "Events out"; part of the wire-schema module, so the
 * OpenAPI document covers them): the bodies of `/v1/webhook-endpoints`, the deliveries query, and what
 * those routes answer.
 */
import { z } from "zod";

/** The event types an endpoint can subscribe to (the same list as src/worker/directory/endpoints.ts, checked at compile time). */
export const EVENT_TYPE_NAMES = [
  "input.completed",
  "turn.failed",
  "session.idle",
  "schedule.fired",
  "job.finished",
  "rig.escalation",
  "pending.created",
  "pending.resolved",
  "session.expired",
  "delivery.disabled",
  "user.erased",
] as const;

export const MAX_ENDPOINT_SESSIONS = 100;
export const MAX_URL_LENGTH = 2048;

const url = z
  .string()
  .max(MAX_URL_LENGTH, `url is at most ${MAX_URL_LENGTH} characters`)
  .refine((text) => URL.canParse(text), "url is not a URL")
  .refine(
    (text) => !URL.canParse(text) || (new URL(text).username === "" && new URL(text).password === ""),
    "url carries no credentials",
  )
  .refine(
    (text) => !URL.canParse(text) || ["https:", "http:"].includes(new URL(text).protocol),
    "url is https: (http: only in development)",
  );
const events = z
  .array(z.enum(EVENT_TYPE_NAMES, { error: `events are some of ${EVENT_TYPE_NAMES.join(", ")}` }))
  .min(1, "events names at least one event type")
  .refine((list) => new Set(list).size === list.length, "events names each type once");
const sessions = z
  .array(
    z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\*?$|^\*$/,
        'a session pattern is a session name, or a prefix followed by "*"',
      ),
  )
  .min(1, "sessions names at least one session or pattern (leave it out for every session)")
  .max(MAX_ENDPOINT_SESSIONS, `sessions has at most ${MAX_ENDPOINT_SESSIONS} names or patterns`);
const description = z.string().max(500, "description is at most 500 characters");

/** POST /v1/webhook-endpoints. */
export const endpointBody = z.strictObject({
  url,
  events,
  sessions: sessions.optional(),
  description: description.optional(),
});
export type EndpointBody = z.output<typeof endpointBody>;

/**
 * PATCH /v1/webhook-endpoints/{id}: absent fields are kept; `null` clears `sessions` (every session) or `description`.
 */
export const endpointPatchBody = z.strictObject({
  url: url.optional(),
  events: events.optional(),
  sessions: sessions.nullable().optional(),
  description: description.nullable().optional(),
  enabled: z.boolean({ error: "enabled is true or false" }).optional(),
});
export type EndpointPatchBody = z.output<typeof endpointPatchBody>;

export const endpointId = z.string().regex(/^we_[a-z0-9]{16}$/, "an endpoint id is we_ and 16 characters of a-z 0-9");

export const deliveriesQuery = z.strictObject({
  status: z.enum(["pending", "dead", "done"], { error: 'status is "pending", "dead" or "done"' }).optional(),
  endpoint: endpointId.optional(),
  limit: z.coerce.number().int().min(1).max(200).optional(),
});

const time = z.string().describe("ISO 8601");

/** An endpoint as an operator sees it (never a secret, except `secret` when it is created or rotated). */
export const endpointOut = z.strictObject({
  id: z.string(),
  url: z.string(),
  events: z.array(z.enum(EVENT_TYPE_NAMES)),
  sessions: z.array(z.string()).optional(),
  description: z.string().optional(),
  enabled: z.boolean(),
  disabledAt: time.optional(),
  disabledReason: z.string().optional(),
  createdAt: time,
  updatedAt: time,
  previousSecretExpiresAt: time
    .optional()
    .describe("Until then deliveries carry a signature with the previous secret too"),
  secret: z
    .string()
    .optional()
    .describe("The whsec_ signing secret: answered once, by the create and rotate-secret routes"),
});
export const endpointList = z.strictObject({ items: z.array(endpointOut) });
export const endpointDeleted = z.strictObject({ id: z.string(), deleted: z.literal(true) });

export const deliveryOut = z.strictObject({
  id: z.string().describe("{event element}.{endpoint id}"),
  eventId: z.string(),
  endpointId: z.string(),
  type: z.enum(EVENT_TYPE_NAMES),
  status: z.enum(["pending", "done", "dead"]),
  attempts: z.number().int(),
  lastStatusCode: z.number().int().nullable(),
  nextAttemptAt: time.nullable(),
  lastError: z.string().optional(),
});
export const deliveryList = z.strictObject({ items: z.array(deliveryOut) });

/** The event envelope every delivery posts (Standard Webhooks). */
export const eventEnvelope = z.strictObject({
  id: z.string().describe("evt_...: the webhook-id header, the same on every retry"),
  type: z.enum(EVENT_TYPE_NAMES),
  timestamp: time,
  data: z
    .record(z.string(), z.unknown())
    .describe("Always session and seq (the commit the event belongs to), then the type's fields"),
});

export type EndpointResponse = z.infer<typeof endpointOut>;
export type EndpointListResponse = z.infer<typeof endpointList>;
export type DeliveryResponse = z.infer<typeof deliveryOut>;
export type DeliveryListResponse = z.infer<typeof deliveryList>;
export type EventEnvelope = z.infer<typeof eventEnvelope>;
