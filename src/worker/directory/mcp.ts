/**
 * A tenant's registered MCP servers (docs/mcp.md "MCP servers as tool sources"), kept in its
 * DirectoryObject's SQLite next to the tool catalog: synchronous SQL only, so each call is one atomic
 * step of the object. The routes (http/routes/mcp-servers.ts) validate bodies, seal header values and read
 * the server's tool list before anything is written here.
 *
 * Two tables: `mcp_servers` (the registration, its sealed headers and its pinned tool-list snapshot) and
 * `mcp_tools` (one catalog record per selectable `{server}__{tool}`, derived from the snapshot by
 * `selectTools`). Every change of a server (PUT, a refresh that changed the list, DELETE) bumps the
 * tenant's catalog version once (`bump`), stamps the server's rows with it, and turns the rows of tools
 * that are no longer selectable into tombstones: still selectable, their new calls a tool error, exactly
 * like a deleted catalog tool. The DirectoryObject's `catalog(version)` answers these rows with the
 * catalog's own, so a session's catalog copy (session/tool-catalog.ts) learns of a change like any other.
 */
import type { CatalogRecord, ToolDefinition } from "../../kinds/catalog-types.js";
import { MCP_SERVER_LIMITS } from "../../api/mcp-servers.js";
import { selectTools, type McpServerRecord, type SnapshotTool } from "./mcp-snapshot.js";
import type { SealedSecret } from "../crypto/sealed-secrets.js";

/** What a PUT stores: the registration with its sealed header values (lower-case names) and its snapshot. */
export interface McpServerWrite {
  readonly name: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, SealedSecret>>;
  readonly allowedTools?: readonly string[];
  readonly approval: "never" | "always";
  readonly tools: readonly SnapshotTool[];
  readonly snapshot: string;
}

/** A tool list read by a refresh. */
export interface McpSnapshotWrite {
  readonly tools: readonly SnapshotTool[];
  readonly snapshot: string;
}

/** What a caller needs to reach the server: its URL, its sealed headers, and the registration's revision. */
export interface McpServerSecrets {
  readonly url: string;
  readonly headers: Readonly<Record<string, SealedSecret>>;
  /** Changes with every PUT: a refresh writes its list only if the registration it read is still the one stored. */
  readonly revision: number;
}

export type PutMcpServerOutcome =
  | { readonly type: "stored"; readonly created: boolean; readonly record: McpServerRecord }
  | { readonly type: "too_many"; readonly limit: number };

export type RefreshMcpServerOutcome =
  /** `changed`: the hash differs (the catalog version moved); otherwise only `refreshedAt` did. */
  | { readonly type: "refreshed"; readonly changed: boolean; readonly record: McpServerRecord }
  /** A PUT replaced the registration after the refresh read it: the PUT's own snapshot stands. */
  | { readonly type: "superseded"; readonly record: McpServerRecord }
  | { readonly type: "not_found" };

export type DeleteMcpServerOutcome =
  { readonly type: "deleted"; readonly name: string; readonly version: number } | { readonly type: "not_found" };

type Row = Record<string, SqlStorageValue>;

export class McpServerStore {
  readonly #sql: SqlStorage;
  /** Bumps the tenant's catalog version and answers the new one. */
  readonly #bump: () => number;

  constructor(sql: SqlStorage, bump: () => number) {
    this.#sql = sql;
    this.#bump = bump;
    sql.exec(`CREATE TABLE IF NOT EXISTS mcp_servers (
      name TEXT PRIMARY KEY,
      url TEXT NOT NULL,
      headers TEXT NOT NULL,
      allowed_tools TEXT,
      approval TEXT NOT NULL,
      tools TEXT NOT NULL,
      snapshot TEXT NOT NULL,
      version INTEGER NOT NULL,
      revision INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      refreshed_at INTEGER NOT NULL
    )`);
    sql.exec(`CREATE TABLE IF NOT EXISTS mcp_tools (
      name TEXT PRIMARY KEY,
      server TEXT NOT NULL,
      version INTEGER NOT NULL,
      deleted INTEGER NOT NULL,
      definition TEXT,
      updated_at INTEGER NOT NULL
    )`);
  }

  /** Register or replace a server (its headers, filter and snapshot all replaced). */
  put(input: McpServerWrite, now: number): PutMcpServerOutcome {
    const current = this.#row(input.name);
    if (current === undefined && this.#count() >= MCP_SERVER_LIMITS.servers)
      return { type: "too_many", limit: MCP_SERVER_LIMITS.servers };
    const version = this.#bump();
    this.#sql.exec(
      `INSERT INTO mcp_servers (name, url, headers, allowed_tools, approval, tools, snapshot, version, revision, created_at, updated_at, refreshed_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET url = excluded.url, headers = excluded.headers, allowed_tools = excluded.allowed_tools,
         approval = excluded.approval, tools = excluded.tools, snapshot = excluded.snapshot, version = excluded.version,
         revision = mcp_servers.revision + 1, updated_at = excluded.updated_at, refreshed_at = excluded.refreshed_at`,
      input.name,
      input.url,
      JSON.stringify(input.headers),
      input.allowedTools === undefined ? null : JSON.stringify(input.allowedTools),
      input.approval,
      JSON.stringify(input.tools),
      input.snapshot,
      version,
      now,
      now,
      now,
    );
    const record = this.#sync(input.name, version, now);
    return { type: "stored", created: current === undefined, record };
  }

  /** Pin a freshly read list, unless a PUT replaced the registration since `revision` was read. */
  refresh(name: string, revision: number, list: McpSnapshotWrite, now: number): RefreshMcpServerOutcome {
    const row = this.#row(name);
    if (row === undefined) return { type: "not_found" };
    if (Number(row["revision"]) !== revision) return { type: "superseded", record: record(row) };
    if (String(row["snapshot"]) === list.snapshot) {
      this.#sql.exec("UPDATE mcp_servers SET refreshed_at = ? WHERE name = ?", now, name);
      return { type: "refreshed", changed: false, record: this.#record(name) };
    }
    const version = this.#bump();
    this.#sql.exec(
      "UPDATE mcp_servers SET tools = ?, snapshot = ?, version = ?, updated_at = ?, refreshed_at = ? WHERE name = ?",
      JSON.stringify(list.tools),
      list.snapshot,
      version,
      now,
      now,
      name,
    );
    return { type: "refreshed", changed: true, record: this.#sync(name, version, now) };
  }

  get(name: string): McpServerRecord | undefined {
    const row = this.#row(name);
    return row === undefined ? undefined : record(row);
  }

  list(): McpServerRecord[] {
    return this.#sql.exec("SELECT * FROM mcp_servers ORDER BY name").toArray().map(record);
  }

  /** Remove the registration; its tools stay as tombstones (selectable, their new calls a tool error). */
  delete(name: string, now: number): DeleteMcpServerOutcome {
    if (this.#row(name) === undefined) return { type: "not_found" };
    const version = this.#bump();
    this.#sql.exec("DELETE FROM mcp_servers WHERE name = ?", name);
    this.#tombstone(name, new Set(), version, now);
    return { type: "deleted", name, version };
  }

  /** The URL, sealed headers and revision of a server (undefined: not registered). */
  secrets(name: string): McpServerSecrets | undefined {
    const row = this.#row(name);
    if (row === undefined) return undefined;
    return {
      url: String(row["url"]),
      headers: JSON.parse(String(row["headers"])) as Record<string, SealedSecret>,
      revision: Number(row["revision"]),
    };
  }

  /** Every MCP tool record, tombstones too (the catalog's `catalog(version)` adds them to its own). */
  records(): CatalogRecord[] {
    return this.#sql
      .exec("SELECT name, version, deleted, definition, updated_at FROM mcp_tools ORDER BY name")
      .toArray()
      .map(toolRecord);
  }

  /** Write the server's selectable tools as live rows at `version`, and tombstone the rest. */
  #sync(name: string, version: number, now: number): McpServerRecord {
    const server = this.#record(name);
    const live = new Set<string>();
    for (const selection of selectTools(server)) {
      if (!("name" in selection)) continue;
      live.add(selection.name);
      this.#sql.exec(
        `INSERT INTO mcp_tools (name, server, version, deleted, definition, updated_at) VALUES (?, ?, ?, 0, ?, ?)
         ON CONFLICT (name) DO UPDATE SET server = excluded.server, version = excluded.version, deleted = 0,
           definition = excluded.definition, updated_at = excluded.updated_at`,
        selection.name,
        name,
        version,
        JSON.stringify(selection.definition),
        now,
      );
    }
    this.#tombstone(name, live, version, now);
    return server;
  }

  /** The server's live rows not in `keep` become tombstones at `version`. */
  #tombstone(server: string, keep: ReadonlySet<string>, version: number, now: number): void {
    for (const row of this.#sql.exec("SELECT name FROM mcp_tools WHERE server = ? AND deleted = 0", server).toArray()) {
      const tool = String(row["name"]);
      if (keep.has(tool)) continue;
      this.#sql.exec(
        "UPDATE mcp_tools SET version = ?, deleted = 1, definition = NULL, updated_at = ? WHERE name = ?",
        version,
        now,
        tool,
      );
    }
  }

  #record(name: string): McpServerRecord {
    const row = this.#row(name);
    if (row === undefined) throw new Error(`the MCP server ${name} was just written and is not there`);
    return record(row);
  }

  #row(name: string): Row | undefined {
    return this.#sql.exec("SELECT * FROM mcp_servers WHERE name = ?", name).toArray()[0];
  }

  #count(): number {
    return Number(this.#sql.exec("SELECT count(*) AS n FROM mcp_servers").one()["n"]);
  }
}

function record(row: Row): McpServerRecord {
  const allowed = row["allowed_tools"];
  return {
    name: String(row["name"]),
    url: String(row["url"]),
    headerNames: Object.keys(JSON.parse(String(row["headers"])) as Record<string, unknown>).sort(),
    ...(typeof allowed === "string" ? { allowedTools: JSON.parse(allowed) as string[] } : {}),
    approval: row["approval"] === "always" ? "always" : "never",
    version: Number(row["version"]),
    snapshot: String(row["snapshot"]),
    tools: JSON.parse(String(row["tools"])) as SnapshotTool[],
    createdAt: Number(row["created_at"]),
    updatedAt: Number(row["updated_at"]),
    refreshedAt: Number(row["refreshed_at"]),
  };
}

/** A `tools` or `mcp_tools` row as a catalog record (a tombstone has no definition). */
export function toolRecord(row: Row): CatalogRecord {
  const deleted = Number(row["deleted"]) === 1;
  return {
    name: String(row["name"]),
    version: Number(row["version"]),
    updatedAt: Number(row["updated_at"]),
    deleted,
    ...(deleted || row["definition"] === null
      ? {}
      : { definition: JSON.parse(String(row["definition"])) as ToolDefinition }),
  };
}

/** The MCP servers' RPC surface of the DirectoryObject as callers see it through a stub. */
export interface McpServerRpc {
  putMcpServer(input: McpServerWrite): Promise<PutMcpServerOutcome>;
  getMcpServer(name: string): Promise<McpServerRecord | undefined>;
  listMcpServers(): Promise<McpServerRecord[]>;
  deleteMcpServer(name: string): Promise<DeleteMcpServerOutcome>;
  refreshMcpServer(name: string, revision: number, list: McpSnapshotWrite): Promise<RefreshMcpServerOutcome>;
  mcpServerSecrets(name: string): Promise<McpServerSecrets | undefined>;
}
