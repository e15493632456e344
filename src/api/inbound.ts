/**
 * Wire schemas of inbound endpoints (docs/integrations.md "Events in"; part of the wire-schema module, so
 * the OpenAPI document covers them): the `{name}` path parameter and the body of
 * `PUT /v1/sessions/{session}/inbound/{name}`, which points a sender that speaks its own format at a
 * conversation of the session.
 */
import { z } from "zod";
import { templateName } from "./schemas.js";
import { inboundDeliveryShape } from "./responses.js";

/** The formats an inbound endpoint verifies (the same list as src/worker/inbound/verify.ts). */
export const INBOUND_FORMAT_NAMES = ["standard", "github", "slack", "stripe"] as const;
export type InboundFormatName = (typeof INBOUND_FORMAT_NAMES)[number];

/** The longest template, bytes of UTF-8. */
export const INBOUND_TEMPLATE_MAX_BYTES = 4096;

const encoder = new TextEncoder();

export const inboundName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9_-]{0,63}$/,
    "an inbound endpoint's name is 1-64 characters of a-z 0-9 _ - starting with a letter or digit",
  );

/** A payload path: dot-separated names, a number indexes an array (`issue.number`, `commits.0.id`). */
const payloadPath = z
  .string()
  .regex(/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+){0,15}$/, "a path is dot-separated names (issue.number, commits.0.id)");

/** One condition of `when`: the payload's value at `path` equals a value, is one of a list, or exists (or not). */
export const inboundCondition = z.union([
  z.strictObject({ path: payloadPath, equals: z.union([z.string(), z.number(), z.boolean(), z.null()]) }),
  z.strictObject({
    path: payloadPath,
    in: z
      .array(z.union([z.string(), z.number(), z.boolean()]))
      .min(1)
      .max(50),
  }),
  z.strictObject({ path: payloadPath, exists: z.boolean() }),
]);
export type InboundCondition = z.infer<typeof inboundCondition>;

/** What a delivery's filters may name (each list at most this long). */
export const INBOUND_FILTER_MAX = 50;

/**
 * PUT an inbound endpoint: its sender's `format`, where deliveries go (`conversation`, default the root),
 * what a delivery does when the conversation is busy (`mode`, default followUp), an optional `template`
 * for the input text, and for github, slack and stripe the signing `secret` the platform shows (required:
 * those platforms choose it; write-only). A standard endpoint's secret is generated, never given.
 */
const templateText = z
  .string()
  .min(1, "a template is not empty (leave it out for the pretty-printed payload)")
  .refine(
    (template) => encoder.encode(template).length <= INBOUND_TEMPLATE_MAX_BYTES,
    `a template is at most ${INBOUND_TEMPLATE_MAX_BYTES} bytes`,
  );

/** What a session's and a tenant's endpoints share: format, mode, template, secret, filters and fields. */
const endpointFields = {
  format: z.enum(INBOUND_FORMAT_NAMES, { error: `format is one of ${INBOUND_FORMAT_NAMES.join(", ")}` }),
  mode: z.enum(["followUp", "steer", "nextRun"], { error: 'mode is "followUp", "steer" or "nextRun"' }).optional(),
  template: templateText.optional(),
  secret: z.string().min(1, "secret must not be empty").max(1000).optional(),
  /** Only these event types (GitHub's X-GitHub-Event, Slack's event.type, Stripe's and Standard's type). */
  events: z.array(z.string().min(1).max(100)).min(1).max(INBOUND_FILTER_MAX).optional(),
  /** Conditions on the payload that must all hold. */
  when: z.array(inboundCondition).min(1).max(INBOUND_FILTER_MAX).optional(),
  /** Senders whose deliveries are ignored (GitHub sender.login, Slack event.user or event.bot_id). */
  ignore: z.array(z.string().min(1).max(200)).min(1).max(INBOUND_FILTER_MAX).optional(),
  /** The integration's own user (its bot): its deliveries are always ignored, so its replies never loop. */
  self: z.string().min(1).max(200).optional(),
  /** Payload values `input.completed` and `turn.failed` carry in `source.fields` (issue.number, ...). */
  fields: z.array(payloadPath).min(1).max(20).optional(),
};

/** A github, slack or stripe endpoint is given its platform's secret; a standard one's is generated. */
function secretRules<T extends { readonly format: InboundFormatName; readonly secret?: string | undefined }>(
  schema: z.ZodType<T>,
): z.ZodType<T> {
  return schema
    .refine((body) => body.format === "standard" || body.secret !== undefined, {
      message: "a github, slack or stripe endpoint needs the signing secret its platform shows (secret)",
      path: ["secret"],
    })
    .refine((body) => body.format !== "standard" || body.secret === undefined, {
      message: "a standard endpoint's secret is generated and answered once; leave secret out",
      path: ["secret"],
    });
}

export const inboundBody = secretRules(
  z.strictObject({
    ...endpointFields,
    conversation: z.union([z.literal("root"), z.number().int().positive()]).optional(),
  }),
);
export type InboundBody = z.input<typeof inboundBody>;

/** The longest route or session template, bytes of UTF-8. */
export const ROUTE_TEMPLATE_MAX_BYTES = 512;

const routeTemplate = (field: string): z.ZodString =>
  z
    .string()
    .min(1, `${field} is not empty`)
    .max(ROUTE_TEMPLATE_MAX_BYTES, `${field} is at most ${ROUTE_TEMPLATE_MAX_BYTES} characters`)
    .regex(/\{\{[^{}]*\}\}/, `${field} names at least one payload path ({{repository.full_name}})`);

/**
 * PUT a tenant's inbound endpoint (docs/integrations.md "Routing"): the endpoint's fields, `session` (a template
 * over the payload rendering the session's name; the session is created on first use from `sessionTemplate`, a
 * session template of the tenant's) and `route` (a template rendering the thread's key: each key is a chat of its
 * own; absent: the root conversation).
 */
export const tenantInboundBody = secretRules(
  z.strictObject({
    ...endpointFields,
    session: routeTemplate("session"),
    route: routeTemplate("route").optional(),
    sessionTemplate: templateName.optional(),
  }),
);
export type TenantInboundBody = z.input<typeof tenantInboundBody>;

/** `POST /v1/inbound-endpoints/{name}/rotate-secret`: a github, slack or stripe endpoint's new secret. */
export const rotateInboundBody = z.strictObject({
  secret: z.string().min(1, "secret must not be empty").max(1000).optional(),
});

/** A tenant's inbound endpoint (docs/integrations.md "Routing"); `secret` only when it was just generated. */
export const tenantInboundOut = z.strictObject({
  name: z.string(),
  url: z.string().describe("Where the sender posts: POST /v1/inbound/{tenant}/{name}"),
  format: z.enum(["standard", "github", "slack", "stripe"]),
  session: z.string().describe("The template rendering a delivery's session name"),
  route: z.string().optional().describe("The template rendering a delivery's thread (its chat); absent: the root"),
  sessionTemplate: z.string().optional().describe("The session template a new session is created from"),
  ...inboundDeliveryShape,
  createdAt: z.string(),
  updatedAt: z.string(),
  previousSecretExpiresAt: z
    .string()
    .optional()
    .describe("After a rotation: until when deliveries signed with the previous secret still verify"),
  secret: z.string().optional().describe("A standard endpoint's generated whsec_ secret: answered once"),
});
export const tenantInboundListResponse = z.strictObject({ items: z.array(tenantInboundOut) });
export type TenantInboundResponse = z.infer<typeof tenantInboundOut>;
