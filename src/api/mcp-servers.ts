/**
 * Wire schemas of a tenant's remote MCP servers (docs/mcp.md "MCP servers as tool sources"; part of the
 * wire-schema module, so the OpenAPI document and the typed client take them from here): the `{name}`
 * path parameter, the body of `PUT /v1/mcp-servers/{name}`, and what the routes answer. Header values are
 * write-only: the answers carry their names only. The route checks what a schema cannot say here (the
 * URL scheme of this deployment).
 */
import { z } from "zod";
import { jsonValue } from "./responses.js";

/** Limits of a registration (docs/mcp.md). */
export const MCP_SERVER_LIMITS = {
  /** Servers one tenant may register. */
  servers: 20,
  urlChars: 2048,
  headers: 20,
  headerValueChars: 8192,
  allowedTools: 200,
  /** Tools a server's list may hold (every page together). */
  tools: 500,
  /** `tools/list` pages followed before the list counts as too long. */
  pages: 20,
  /** The snapshot's largest size, bytes of JSON (UTF-8). */
  snapshotBytes: 1_048_576,
} as const;

/** A server's name: also the first half of its tools' selectable names (`{server}__{tool}`). */
export const mcpServerName = z
  .string()
  .regex(/^[a-zA-Z0-9-]{1,32}$/, "a server name is 1-32 characters of a-z A-Z 0-9 -");

/**
 * Headers a registration may not set: the transport sets them itself (content negotiation, the MCP
 * protocol and session headers) or the runtime does.
 */
export const RESERVED_MCP_HEADERS: readonly string[] = [
  "accept",
  "content-type",
  "content-length",
  "host",
  "connection",
  "transfer-encoding",
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
];

const url = z
  .string({ error: "url is a string" })
  .max(MCP_SERVER_LIMITS.urlChars, `url is at most ${MCP_SERVER_LIMITS.urlChars} characters`)
  .refine((text) => URL.canParse(text), "url is not an absolute URL")
  .refine(
    (text) => !URL.canParse(text) || ["https:", "http:"].includes(new URL(text).protocol),
    "url is https: (plain http: only where ENVIRONMENT is development)",
  )
  .refine(
    (text) => !URL.canParse(text) || (new URL(text).username === "" && new URL(text).password === ""),
    "url carries no credentials (put them in headers)",
  );

/** A header's name (an HTTP token); its value must not break the header line. Messages never echo a value. */
const headers = z
  .record(
    z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/, "a header name is an HTTP token of 1-64 characters"),
    z
      .string({ error: "a header value is a string" })
      .min(1, "a header value must not be empty")
      .max(
        MCP_SERVER_LIMITS.headerValueChars,
        `a header value is at most ${MCP_SERVER_LIMITS.headerValueChars} characters`,
      )
      .refine((value) => !/[\r\n\0]/.test(value), "a header value may not contain CR, LF or NUL"),
    { error: "headers is an object of header names to string values" },
  )
  .refine(
    (record) => Object.keys(record).length <= MCP_SERVER_LIMITS.headers,
    `at most ${MCP_SERVER_LIMITS.headers} headers`,
  )
  .superRefine((record, context) => {
    const seen = new Set<string>();
    for (const name of Object.keys(record)) {
      const lower = name.toLowerCase();
      if (RESERVED_MCP_HEADERS.includes(lower))
        context.addIssue({ code: "custom", path: [name], message: `${lower} is set by the MCP transport` });
      else if (seen.has(lower))
        context.addIssue({
          code: "custom",
          path: [name],
          message: `${lower} is given twice (header names are case-insensitive)`,
        });
      seen.add(lower);
    }
  });

/** `PUT /v1/mcp-servers/{name}`: a registration; it replaces the whole previous one (headers too). */
export const mcpServerBody = z.strictObject({
  url,
  headers: headers.optional(),
  allowedTools: z
    .array(
      z
        .string({ error: "allowedTools are tool names" })
        .min(1, "a tool name must not be empty")
        .max(128, "a tool name is at most 128 characters"),
      { error: "allowedTools is an array of the server's tool names" },
    )
    .max(MCP_SERVER_LIMITS.allowedTools, `allowedTools holds at most ${MCP_SERVER_LIMITS.allowedTools} names`)
    .optional(),
  approval: z.enum(["never", "always"], { error: 'approval is "never" or "always"' }).optional(),
});
export type McpServerBody = z.input<typeof mcpServerBody>;

// ---------------------------------------------------------------------------------------------
// Responses

/** One tool of the server's pinned list: exactly one of `selectableAs` and `reason`. */
export const mcpToolOut = z.strictObject({
  name: z.string().describe("The server's own name for the tool"),
  title: z.string().optional(),
  description: z.string().optional(),
  inputSchema: z.record(z.string(), jsonValue),
  outputSchema: z.record(z.string(), jsonValue).optional(),
  annotations: z.record(z.string(), jsonValue).optional(),
  selectableAs: z.string().optional().describe("The name sessions select it by in selectedTools: {server}__{tool}"),
  reason: z
    .string()
    .optional()
    .describe("Why it is not selectable (a combined name that breaks the tool-name rule, not in allowedTools, ...)"),
});

export const mcpServerOut = z.strictObject({
  name: z.string(),
  url: z.string(),
  headers: z.array(z.string()).describe("The names of the headers sent (lower-case); their values are never returned"),
  allowedTools: z.array(z.string()).optional(),
  approval: z.enum(["never", "always"]),
  version: z.number().int().describe("The catalog version of the server's last change"),
  snapshot: z.string().describe("The content hash (SHA-256, hex) of the pinned tool list"),
  refreshedAt: z.number().int().describe("Epoch ms the tool list was last read"),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
  tools: z.array(mcpToolOut),
});
export const mcpServerList = z.strictObject({ items: z.array(mcpServerOut) });
export const mcpServerDeleted = z.strictObject({
  name: z.string(),
  deleted: z.literal(true),
  version: z.number().int(),
});

export type McpToolView = z.infer<typeof mcpToolOut>;
export type McpServerResponse = z.infer<typeof mcpServerOut>;
export type McpServerListResponse = z.infer<typeof mcpServerList>;
export type McpServerDeletedResponse = z.infer<typeof mcpServerDeleted>;
