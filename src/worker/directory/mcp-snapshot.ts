/**
 * A registered MCP server's pinned tool list (docs/mcp.md "MCP servers as tool sources"): what
 * `tools/list` answered on PUT or refresh, kept as a snapshot with a content hash, and what of it sessions
 * may select. Pure functions, used by the routes (reading a server's list) and the DirectoryObject's
 * store (directory/mcp.ts; deriving the catalog records).
 *
 * The hash is SHA-256 (hex) of the canonical JSON of the tool list: tools sorted by name, object keys
 * sorted, no whitespace; so the same list hashes the same however the server ordered it.
 */
import { compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ToolDefinition } from "../../kinds/catalog-types.js";
import type { JsonObject, JsonValue } from "../../storage/records.js";

/** One tool as the snapshot keeps it (the fields of the server's `tools/list` entry that shape a call). */
export interface SnapshotTool {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: JsonObject;
  readonly outputSchema?: JsonObject;
  readonly annotations?: JsonObject;
}

/**
 * What a registration stores besides its sealed header values (and what the routes answer, less the tools' selection).
 */
export interface McpServerRecord {
  readonly name: string;
  readonly url: string;
  /** Lower-case names of the headers sent; the values are sealed and never leave the store but to `mcpEndpoint`. */
  readonly headerNames: readonly string[];
  readonly allowedTools?: readonly string[];
  readonly approval: "never" | "always";
  /** The catalog version of the server's last change (a PUT, a refresh that changed the list). */
  readonly version: number;
  /** The pinned tool list's content hash. */
  readonly snapshot: string;
  readonly tools: readonly SnapshotTool[];
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly refreshedAt: number;
}

/** A server's tool as sessions see it: its selectable name and catalog definition, or why it is not selectable. */
export type McpToolSelection =
  | { readonly tool: SnapshotTool; readonly name: string; readonly definition: ToolDefinition }
  | { readonly tool: SnapshotTool; readonly reason: string };

/** An MCP call's timeout (reset by each progress notification; the §8.3 blocking budget still bounds it). */
export const MCP_TOOL_TIMEOUT_MS = 60_000;
/** A selectable tool's largest definition, bytes of JSON (as for the catalog's own tools). */
export const MCP_DEFINITION_BYTES = 65_536;
/** The rule every provider accepts for a tool name (the combined `{server}__{tool}` must pass it). */
export const SELECTABLE_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The name a session selects a server's tool by. */
export function combinedName(server: string, tool: string): string {
  return `${server}__${tool}`;
}

/** The snapshot's form of the SDK's listed tool (fields outside the snapshot are dropped). */
export function snapshotTool(tool: Tool): SnapshotTool {
  const json = (value: unknown): JsonObject => JSON.parse(JSON.stringify(value)) as JsonObject;
  return {
    name: tool.name,
    ...(tool.title === undefined ? {} : { title: tool.title }),
    ...(tool.description === undefined ? {} : { description: tool.description }),
    inputSchema: json(tool.inputSchema),
    ...(tool.outputSchema === undefined ? {} : { outputSchema: json(tool.outputSchema) }),
    ...(tool.annotations === undefined ? {} : { annotations: json(tool.annotations) }),
  };
}

/** JSON with object keys sorted and no whitespace. */
export function canonicalJson(value: JsonValue | undefined): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (isArray(value)) return `[${value.map((item) => canonicalJson(item)).join(",")}]`;
  const object = value;
  const keys = Object.keys(object)
    .filter((key) => object[key] !== undefined)
    .sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`).join(",")}}`;
}

function isArray(value: JsonValue): value is readonly JsonValue[] {
  return Array.isArray(value);
}

/** The tools sorted by name (the snapshot's order). */
export function sortedTools(tools: readonly SnapshotTool[]): SnapshotTool[] {
  return [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** SHA-256 (hex) of the canonical tool list. */
export async function snapshotHash(tools: readonly SnapshotTool[]): Promise<string> {
  const text = canonicalJson(sortedTools(tools) as unknown as JsonValue);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Whether a tool's annotations declare it idempotent (only then is a call cut by a restart sent again). */
export function idempotentHint(tool: SnapshotTool): boolean {
  return tool.annotations?.["idempotentHint"] === true;
}

/**
 * Each tool of the server's snapshot: selectable as `{server}__{tool}` with its catalog definition, or
 * not, with the reason (not in `allowedTools`; a combined name that breaks the tool-name rule; an
 * `inputSchema` the argument validator cannot compile; a definition over MCP_DEFINITION_BYTES).
 */
export function selectTools(server: McpServerRecord): McpToolSelection[] {
  const allowed = server.allowedTools === undefined ? undefined : new Set(server.allowedTools);
  const seen = new Set<string>();
  return server.tools.map((tool): McpToolSelection => {
    if (seen.has(tool.name)) return { tool, reason: "the server lists this name more than once" };
    seen.add(tool.name);
    if (allowed !== undefined && !allowed.has(tool.name)) return { tool, reason: "not in allowedTools" };
    const name = combinedName(server.name, tool.name);
    if (!SELECTABLE_NAME.test(name)) {
      return { tool, reason: `${JSON.stringify(name)} is not a valid tool name (1-64 characters of a-z A-Z 0-9 _ -)` };
    }
    if (tool.inputSchema["type"] !== "object")
      return { tool, reason: 'inputSchema is not a JSON Schema with "type": "object"' };
    try {
      compile(tool.inputSchema, { formats, coerce: true });
    } catch (error) {
      return {
        tool,
        reason: `inputSchema does not compile: ${error instanceof Error ? error.message : String(error)}`,
      };
    }
    const definition: ToolDefinition = {
      description: tool.description ?? tool.title ?? `${tool.name} (MCP server ${server.name})`,
      parameters: tool.inputSchema,
      handler: {
        type: "mcp",
        server: server.name,
        tool: tool.name,
        url: server.url,
        timeoutMs: MCP_TOOL_TIMEOUT_MS,
        idempotent: idempotentHint(tool),
        snapshot: server.snapshot,
      },
      approval: server.approval,
      onTimeout: "deny",
    };
    const bytes = new TextEncoder().encode(JSON.stringify(definition)).length;
    if (bytes > MCP_DEFINITION_BYTES)
      return { tool, reason: `its definition is ${bytes} bytes of JSON; at most ${MCP_DEFINITION_BYTES}` };
    return { tool, name, definition };
  });
}
