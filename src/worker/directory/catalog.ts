/**
 * The tenant's tool catalog in its DirectoryObject's SQLite (docs/tools.md): the tables, the outcomes of its RPC
 * calls and the synchronous SQL helpers the object's catalog methods (directory/object.ts) are written with.
 */
import type { CatalogRecord, ToolDefinition } from "../../kinds/catalog-types.js";
import { toolRecord } from "./mcp.js";

// ---------------------------------------------------------------------------------------------------
// The tenant's tool catalog (docs/tools.md): operators define tools over `/v1/tools`; sessions keep a
// memory copy (src/worker/session/tool-catalog.ts) that reads `catalog(version)` at most once per its TTL.
// One counter versions the whole catalog: every PUT and DELETE bumps it and stamps the row with it, so
// a row's version is its ETag and the counter is the list's.

/** Live tools a tenant may define. */
export const MAX_LIVE_TOOLS = 200;
/** A stored definition's largest size, bytes of JSON (UTF-8). */
export const MAX_DEFINITION_BYTES = 65_536;

/** An `If-Match` condition: a version the caller saw, or `*` (the tool exists). */
export type IfMatch = number | "*";

export type PutToolOutcome =
  | {
      readonly type: "stored";
      readonly record: CatalogRecord;
      readonly created: boolean;
      /** The tool became an HTTP tool with this PUT: its signing secret is answered this once. */
      readonly firstSecret: boolean;
    }
  /** `If-Match` names another version (`current`), or the tool does not exist (no `current`). */
  | { readonly type: "precondition"; readonly current?: number }
  | { readonly type: "too_large"; readonly bytes: number; readonly limit: number }
  | { readonly type: "too_many"; readonly limit: number };

export type DeleteToolOutcome =
  | { readonly type: "deleted"; readonly name: string; readonly version: number }
  | { readonly type: "not_found" }
  | { readonly type: "precondition"; readonly current: number };

export type RotateToolSecretOutcome =
  | { readonly type: "rotated"; readonly version: number; readonly generation: number; readonly previousUntil: number }
  | { readonly type: "not_found" }
  /** A client tool has no secret. */
  | { readonly type: "not_http" };

/** A tool's secret generations: the current one, and the one before while it still verifies (epoch ms). */
export interface SecretGenerations {
  readonly current: number;
  readonly previous?: { readonly generation: number; readonly until: number };
}

/** The catalog version, and every record (tombstones too) when it changed since the version asked about. */
export interface CatalogSnapshot {
  readonly version: number;
  readonly records?: readonly CatalogRecord[];
}

/** The catalog's RPC surface as callers see it through a stub. */
export interface ToolCatalogRpc {
  putTool(name: string, definition: ToolDefinition, ifMatch?: IfMatch): Promise<PutToolOutcome>;
  getTool(name: string): Promise<CatalogRecord | undefined>;
  listTools(): Promise<{ readonly version: number; readonly items: readonly CatalogRecord[] }>;
  deleteTool(name: string, ifMatch?: IfMatch): Promise<DeleteToolOutcome>;
  catalog(since?: number): Promise<CatalogSnapshot>;
  rotateToolSecret(name: string, previousUntil: number): Promise<RotateToolSecretOutcome>;
  toolSecretGenerations(name: string): Promise<SecretGenerations>;
}

export function createCatalogTables(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS tools (
    name TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    definition TEXT,
    updated_at INTEGER NOT NULL
  )`);
  sql.exec("CREATE TABLE IF NOT EXISTS catalog (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)");
  // An HTTP tool's secret generation (no row: 1) and until when the one before verifies late results.
  sql.exec(
    "CREATE TABLE IF NOT EXISTS tool_secrets (name TEXT PRIMARY KEY, generation INTEGER NOT NULL, previous_until INTEGER)",
  );
}

export function secretGenerations(sql: SqlStorage, name: string): SecretGenerations {
  const row = sql.exec("SELECT generation, previous_until FROM tool_secrets WHERE name = ?", name).toArray()[0];
  if (row === undefined) return { current: 1 };
  const current = Number(row["generation"]);
  const until = row["previous_until"];
  return {
    current,
    ...(until === null || until === undefined || current <= 1
      ? {}
      : { previous: { generation: current - 1, until: Number(until) } }),
  };
}

/** An HTTP definition stamped with its secret's generation (1 is left out: what every definition had before). */
export function withGeneration(definition: ToolDefinition, generation: number): ToolDefinition {
  if (definition.handler.type !== "http") return definition;
  const { secretGeneration: _old, ...handler } = definition.handler;
  void _old;
  return { ...definition, handler: generation === 1 ? handler : { ...handler, secretGeneration: generation } };
}

export function catalogVersion(sql: SqlStorage): number {
  const row = sql.exec("SELECT version FROM catalog WHERE id = 1").toArray()[0];
  return row === undefined ? 0 : Number(row["version"]);
}

export function bumpCatalog(sql: SqlStorage): number {
  const version = catalogVersion(sql) + 1;
  sql.exec(
    "INSERT INTO catalog (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version",
    version,
  );
  return version;
}

export function liveToolCount(sql: SqlStorage): number {
  return Number(sql.exec("SELECT count(*) AS n FROM tools WHERE deleted = 0").one()["n"]);
}

export function toolRow(sql: SqlStorage, name: string): CatalogRecord | undefined {
  const row = sql
    .exec("SELECT name, version, deleted, definition, updated_at FROM tools WHERE name = ?", name)
    .toArray()[0];
  return row === undefined ? undefined : toolRecord(row);
}

/** `If-Match` holds: the tool is live and `*` or its version was named. */
export function matches(current: CatalogRecord | undefined, ifMatch: IfMatch): boolean {
  if (current === undefined || current.deleted) return false;
  return ifMatch === "*" || ifMatch === current.version;
}
