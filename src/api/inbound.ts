/**
 * Wire schemas of inbound endpoints (docs/integrations.md "Events in"; part of the wire-schema module, so
 * the OpenAPI document covers them): the `{name}` path parameter and the body of
 * `PUT /v1/sessions/{session}/inbound/{name}`, which points a sender that speaks its own format at a
 * conversation of the session.
 */
import { z } from "zod";

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

/**
 * PUT an inbound endpoint: its sender's `format`, where deliveries go (`conversation`, default the root),
 * what a delivery does when the conversation is busy (`mode`, default followUp), an optional `template`
 * for the input text, and for github, slack and stripe the signing `secret` the platform shows (required:
 * those platforms choose it; write-only). A standard endpoint's secret is generated, never given.
 */
export const inboundBody = z
  .strictObject({
    format: z.enum(INBOUND_FORMAT_NAMES, { error: `format is one of ${INBOUND_FORMAT_NAMES.join(", ")}` }),
    conversation: z.union([z.literal("root"), z.number().int().positive()]).optional(),
    mode: z.enum(["followUp", "steer", "nextRun"], { error: 'mode is "followUp", "steer" or "nextRun"' }).optional(),
    template: z
      .string()
      .min(1, "a template is not empty (leave it out for the pretty-printed payload)")
      .refine(
        (template) => encoder.encode(template).length <= INBOUND_TEMPLATE_MAX_BYTES,
        `a template is at most ${INBOUND_TEMPLATE_MAX_BYTES} bytes`,
      )
      .optional(),
    secret: z.string().min(1, "secret must not be empty").max(1000).optional(),
  })
  .refine((body) => body.format === "standard" || body.secret !== undefined, {
    message: "a github, slack or stripe endpoint needs the signing secret its platform shows (secret)",
    path: ["secret"],
  })
  .refine((body) => body.format !== "standard" || body.secret === undefined, {
    message: "a standard endpoint's secret is generated and answered once; leave secret out",
    path: ["secret"],
  });
export type InboundBody = z.input<typeof inboundBody>;
