/**
 * A tenant's tool catalog as the turn kinds see it: tools a product defines over HTTP (docs/tools.md),
 * selected by name in a session's `selectedTools` exactly like the built-in tools. The kinds never read
 * the catalog's storage: the host gives them a `ToolCatalog` that answers from memory, and the generation
 * captures the definition a call uses on its tool task when the call is created (`CapturedTool`), so
 * recovery and replay never read live configuration.
 */
import type { JsonObject } from "../storage/records.js";

/**
 * Where a catalog tool runs: a product's HTTPS endpoint, the session's frontend (a client tool), or a
 * tool of a registered MCP server (docs/mcp.md), offered as `{server}__{tool}` from the server's pinned
 * tool-list snapshot. `tool` is the server's own name for it; `snapshot` the content hash of the tool
 * list it came from; `idempotent` its `idempotentHint` annotation (only then is a cut call re-sent).
 */
export type ToolHandler =
  | {
      readonly type: "http";
      readonly url: string;
      readonly timeoutMs: number;
      readonly idempotent: boolean;
      /** The generation of the tool's signing secret its calls are signed with (absent: 1; docs/tools.md). */
      readonly secretGeneration?: number;
    }
  | { readonly type: "client"; readonly timeoutMs: number }
  | {
      readonly type: "mcp";
      readonly server: string;
      readonly tool: string;
      readonly url: string;
      readonly timeoutMs: number;
      readonly idempotent: boolean;
      readonly snapshot: string;
    };

/** A catalog tool's definition with every default filled in (what is stored and captured). */
export type ToolDefinition = {
  readonly description: string;
  /** JSON Schema of the arguments, `type: "object"`. */
  readonly parameters: JsonObject;
  readonly handler: ToolHandler;
  readonly approval: "never" | "always";
  /** Absent: an approval waits without a deadline. */
  readonly approvalTimeoutMs?: number;
  readonly onTimeout: "deny" | "allow";
};

/** A catalog row: the live definition, or a tombstone (a deleted tool stays selectable; its calls fail). */
export type CatalogRecord = {
  readonly name: string;
  /** The catalog version at its last change (also its ETag). */
  readonly version: number;
  readonly updatedAt: number;
  readonly deleted: boolean;
  /** Absent exactly when deleted. */
  readonly definition?: ToolDefinition;
};

/** What a tool task stores of the catalog tool its call uses, captured when the call was created. */
export type CapturedTool =
  | { readonly name: string; readonly version: number; readonly removed: true }
  | { readonly name: string; readonly version: number; readonly definition: ToolDefinition };

/** What the model is offered for a live catalog tool. */
export type OfferedTool = {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonObject;
};

/**
 * The session's view of its tenant's catalog, answered from memory. `refresh` reads the catalog's owner
 * at most once per its time-to-live (an unchanged catalog costs one small read), never throws (a failed
 * read keeps the last copy and is reported), and is called only by sessions that select a tool that is
 * not built in.
 */
export type ToolCatalog = {
  /** Undefined: the name is not in the catalog (not even as a tombstone). */
  capture(name: string): CapturedTool | undefined;
  /** Live tools only: a tombstone is not offered. */
  offer(name: string): OfferedTool | undefined;
  /** Every name a selection may use: live tools and tombstones. */
  names(): readonly string[];
  refresh(options: { readonly force?: boolean }): Promise<void>;
};
