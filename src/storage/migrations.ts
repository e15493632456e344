/**
 * The SQLite schema as numbered migrations (migrations/NNNN_name.sql, bundled as text modules by the
 * wrangler `Text` rule) and `migrate`, which `SqliteStorage.open` runs: apply every migration newer than
 * the stored version, each in its own transaction together with the version bump, and refuse storage
 * written by newer code (§6.5).
 */
import init from "../../migrations/0001_init.sql";
import host from "../../migrations/0002_host.sql";
import entriesByKind from "../../migrations/0003_entries_by_kind.sql";
import narrowIndexes from "../../migrations/0004_narrow_indexes.sql";
import tasksSettled from "../../migrations/0005_tasks_settled.sql";
import commitMarks from "../../migrations/0006_commit_marks.sql";
import sessionElements from "../../migrations/0007_session_elements.sql";
import type { SqlHost } from "./sql.js";
import { StorageError } from "./storage.js";

export interface Migration {
  /** 1-based; the schema version after it is applied. */
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** In order; append only. Version n is MIGRATIONS[n - 1]. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "0001_init", sql: init },
  { version: 2, name: "0002_host", sql: host },
  { version: 3, name: "0003_entries_by_kind", sql: entriesByKind },
  { version: 4, name: "0004_narrow_indexes", sql: narrowIndexes },
  { version: 5, name: "0005_tasks_settled", sql: tasksSettled },
  { version: 6, name: "0006_commit_marks", sql: commitMarks },
  { version: 7, name: "0007_session_elements", sql: sessionElements },
];

/** The schema version this code writes. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** The stored schema version; 0 for a database that was never opened (no tables yet). */
export function storedVersion(host: SqlHost): number {
  const table = host.sql
    .exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_metadata'")
    .toArray();
  if (table.length === 0) return 0;
  const row = host.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_version'").toArray()[0];
  const version = row?.["value"];
  if (typeof version !== "number") throw new StorageError("corrupt", "session_metadata has no schema_version");
  return version;
}

/**
 * Bring the schema up to `SCHEMA_VERSION` and return it. A stored version newer than the code throws
 * StorageError("version") without touching anything: older code must not write a schema it doesn't know.
 */
export function migrate(host: SqlHost): number {
  const stored = storedVersion(host);
  if (stored > SCHEMA_VERSION) {
    throw new StorageError(
      "version",
      `session storage has schema version ${stored}, newer than this code's version ${SCHEMA_VERSION}; deploy the newer code to open it`,
    );
  }
  for (const migration of MIGRATIONS.slice(stored)) {
    host.transactionSync(() => {
      host.sql.exec(migration.sql);
      host.sql.exec(
        "INSERT INTO session_metadata (name, value) VALUES ('schema_version', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        migration.version,
      );
    });
  }
  return SCHEMA_VERSION;
}
