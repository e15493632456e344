/**
 * Wire schemas of a tenant's tool catalog (docs/tools.md; part of the wire-schema module, so the OpenAPI
 * document and the typed client take them from here): the `{tool}` path parameter, the body of
 * `PUT /v1/tools/{tool}`, and the records the catalog answers. The server fills the defaults
 * (`withToolDefaults`) before it stores a definition, and checks what a schema cannot say here (the URL
 * scheme of this deployment, whether `parameters` compiles) in src/worker/http/routes/tools.ts.
 */
import { z } from "zod";
import type { ToolDefinition } from "../kinds/catalog-types.js";
import type { JsonObject } from "../storage/records.js";
import { jsonValue } from "./responses.js";

/** Limits of a definition (docs/tools.md "Defining a tool"). */
export const TOOL_LIMITS = {
  descriptionChars: 4096,
  httpTimeoutMs: { min: 1_000, max: 600_000, default: 30_000 },
  clientTimeoutMs: { min: 1_000, max: 604_800_000, default: 86_400_000 },
  approvalTimeoutMs: { min: 1_000, max: 604_800_000 },
} as const;

/** The rule every provider accepts for a tool name; `__` is reserved (MCP tools are named `server__tool`). */
export const toolName = z
  .string()
  .regex(/^[a-zA-Z0-9_-]{1,64}$/, "a tool name is 1-64 characters of a-z A-Z 0-9 _ -")
  .refine((name) => !name.includes("__"), "a tool name may not contain __ (reserved for MCP tools)");

const ms = (limits: { readonly min: number; readonly max: number }, what: string): z.ZodNumber =>
  z
    .number({ error: `${what} is a number of milliseconds` })
    .int(`${what} is a whole number of milliseconds`)
    .min(limits.min, `${what} is at least ${limits.min} ms`)
    .max(limits.max, `${what} is at most ${limits.max} ms`);

/** An http: or https: URL (whether plain http: is allowed depends on the deployment: the route checks it). */
const handlerUrl = z
  .string({ error: "handler.url is a string" })
  .max(2048, "handler.url is at most 2,048 characters")
  .refine((url) => ["https:", "http:"].includes(protocolOf(url) ?? ""), "handler.url is an absolute https: URL")
  .refine(
    (url) => protocolOf(url) === undefined || (new URL(url).username === "" && new URL(url).password === ""),
    "handler.url carries no credentials (user:password@ would be answered back on GET)",
  );

function protocolOf(url: string): string | undefined {
  try {
    return new URL(url).protocol;
  } catch {
    return undefined;
  }
}

const httpHandler = z.strictObject({
  type: z.literal("http"),
  url: handlerUrl,
  timeoutMs: ms(TOOL_LIMITS.httpTimeoutMs, "an HTTP tool's timeoutMs").optional(),
  idempotent: z.boolean().optional(),
});

const clientHandler = z.strictObject({
  type: z.literal("client"),
  timeoutMs: ms(TOOL_LIMITS.clientTimeoutMs, "a client tool's timeoutMs").optional(),
});

/** A JSON Schema of the arguments: an object schema (`"type": "object"`). */
const parameters = z
  .record(z.string(), jsonValue, { error: 'parameters is a JSON Schema object with "type": "object"' })
  .refine((schema) => schema["type"] === "object", 'parameters is a JSON Schema with "type": "object"');

/** `PUT /v1/tools/{tool}`: a tool's definition; absent fields get their defaults (docs/tools.md). */
export const toolDefinitionBody = z.strictObject({
  description: z
    .string({ error: "description is a string" })
    .min(1, "description must not be empty")
    .max(TOOL_LIMITS.descriptionChars, `description is at most ${TOOL_LIMITS.descriptionChars} characters`),
  parameters,
  handler: z.discriminatedUnion("type", [httpHandler, clientHandler], {
    error: 'handler is { "type": "http", "url", ... } or { "type": "client", ... }',
  }),
  approval: z.enum(["never", "always"], { error: 'approval is "never" or "always"' }).optional(),
  approvalTimeoutMs: ms(TOOL_LIMITS.approvalTimeoutMs, "approvalTimeoutMs").optional(),
  onTimeout: z.enum(["deny", "allow"], { error: 'onTimeout is "deny" or "allow"' }).optional(),
});
export type ToolDefinitionBody = z.input<typeof toolDefinitionBody>;

/** The stored definition: every default filled in. */
export function withToolDefaults(body: z.output<typeof toolDefinitionBody>): ToolDefinition {
  const handler: ToolDefinition["handler"] =
    body.handler.type === "http"
      ? {
          type: "http",
          url: body.handler.url,
          timeoutMs: body.handler.timeoutMs ?? TOOL_LIMITS.httpTimeoutMs.default,
          idempotent: body.handler.idempotent ?? false,
        }
      : { type: "client", timeoutMs: body.handler.timeoutMs ?? TOOL_LIMITS.clientTimeoutMs.default };
  return {
    description: body.description,
    parameters: body.parameters as JsonObject,
    handler,
    approval: body.approval ?? "never",
    ...(body.approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs: body.approvalTimeoutMs }),
    onTimeout: body.onTimeout ?? "deny",
  };
}

// ---------------------------------------------------------------------------------------------
// Responses

const toolDefinitionOut = z.strictObject({
  description: z.string(),
  parameters: z.record(z.string(), jsonValue).describe('The JSON Schema of the arguments ("type": "object")'),
  handler: z.union([
    z.strictObject({
      type: z.literal("http"),
      url: z.string(),
      timeoutMs: z.number().int(),
      idempotent: z.boolean(),
      secretGeneration: z
        .number()
        .int()
        .optional()
        .describe("The generation of the signing secret new calls use (absent: 1; POST .../rotate-secret moves it)"),
    }),
    z.strictObject({ type: z.literal("client"), timeoutMs: z.number().int() }),
  ]),
  approval: z.enum(["never", "always"]),
  approvalTimeoutMs: z.number().int().optional().describe("Absent: an approval waits without a deadline"),
  onTimeout: z.enum(["deny", "allow"]),
});

/** A live tool: its definition with every default filled in, and its version (also its ETag). */
export const toolRecordOut = z.strictObject({
  name: z.string(),
  version: z
    .number()
    .int()
    .describe("The catalog version of the tool's last change; the ETag is this number in quotes"),
  updatedAt: z.number().int().describe("Epoch ms of the last change"),
  deleted: z.literal(false),
  definition: toolDefinitionOut,
});
/** What `PUT /v1/tools/{tool}` answers: the record, and the first time it is an HTTP tool its signing secret. */
export const toolPutResponse = toolRecordOut.extend({
  secret: z
    .string()
    .optional()
    .describe("An HTTP tool's signing secret (whsec_...), answered the first time the tool is an HTTP tool"),
});
/** What `POST /v1/tools/{tool}/rotate-secret` answers: the new secret, answered this once. */
export const toolSecretRotated = z.strictObject({
  name: z.string(),
  version: z.number().int(),
  secretGeneration: z.number().int(),
  secret: z.string(),
  previousSecretExpiresAt: z.string().describe("ISO 8601: until then the previous secret still verifies late results"),
});
export const toolsListResponse = z.strictObject({ items: z.array(toolRecordOut) });
export const toolDeletedResponse = z.strictObject({
  name: z.string(),
  deleted: z.literal(true),
  version: z.number().int(),
});

export type ToolRecordResponse = z.infer<typeof toolRecordOut>;
export type ToolsListResponse = z.infer<typeof toolsListResponse>;
export type ToolPutResponse = z.infer<typeof toolPutResponse>;
export type ToolSecretRotatedResponse = z.infer<typeof toolSecretRotated>;
export type ToolDeletedResponse = z.infer<typeof toolDeletedResponse>;
