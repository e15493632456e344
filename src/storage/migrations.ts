/**
 * The SQLite schema as numbered migrations (migrations/NNNN_name.sql, bundled as text modules by the
 * wrangler `Text` rule) and `migrate`, which `SqliteStorage.open` runs: apply every migration newer than
 * the stored version, each in its own transaction together with the version bump and its additive mark,
 * and refuse storage written by newer code (§6.5) except one version ahead when that version only adds
 * (docs/operations.md "Upgrading": expand first, so a one-step rollback keeps working).
 *
 * Each file's first line says whether it is additive: `-- additive: yes` when code of the version before
 * it can open storage it migrated, ignore what it added and keep working (new tables, new columns with
 * defaults, new indexes), `-- additive: no (why)` otherwise.
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
  /** Code of version `version - 1` can read and write storage at this version (the file's first line says). */
  readonly additive: boolean;
}

/** A migration from its file: the `-- additive: yes|no` first line is required. */
export function migration(version: number, name: string, sql: string): Migration {
  const mark = /^-- additive: (yes|no)\b/.exec(sql);
  if (mark === null) throw new Error(`migration ${name} does not start with "-- additive: yes" or "-- additive: no"`);
  return { version, name, sql, additive: mark[1] === "yes" };
}

/** In order; append only. Version n is MIGRATIONS[n - 1]. */
export const MIGRATIONS: readonly Migration[] = [
  migration(1, "0001_init", init),
  migration(2, "0002_host", host),
  migration(3, "0003_entries_by_kind", entriesByKind),
  migration(4, "0004_narrow_indexes", narrowIndexes),
  migration(5, "0005_tasks_settled", tasksSettled),
  migration(6, "0006_commit_marks", commitMarks),
  migration(7, "0007_session_elements", sessionElements),
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

/** Whether the stored version is marked additive (the `schema_additive` row its migration wrote; absent: no). */
export function storedAdditive(host: SqlHost): boolean {
  const row = host.sql.exec("SELECT value FROM session_metadata WHERE name = 'schema_additive'").toArray()[0];
  return row?.["value"] === 1;
}

/**
 * Bring the schema up to `migrations`' last version and return the version the storage is open at. A
 * stored version one ahead of the code that is marked additive is opened as it is (nothing is written:
 * its migration only added what this code ignores). Any other newer version throws StorageError("version")
 * without touching anything: older code must not write a schema it doesn't know. `migrations` is
 * MIGRATIONS but for tests that play a newer release.
 */
export function migrate(host: SqlHost, migrations: readonly Migration[] = MIGRATIONS): number {
  const current = migrations.length;
  const stored = storedVersion(host);
  if (stored > current) {
    if (stored === current + 1 && storedAdditive(host)) return stored;
    throw new StorageError(
      "version",
      `session storage has schema version ${stored}, newer than this code's version ${current}${
        stored === current + 1
          ? " and not marked additive"
          : ` by ${stored - current} (only one additive version ahead opens)`
      }; deploy the newer code to open it`,
    );
  }
  for (const migration of migrations.slice(stored)) {
    host.transactionSync(() => {
      host.sql.exec(migration.sql);
      host.sql.exec(
        "INSERT INTO session_metadata (name, value) VALUES ('schema_version', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        migration.version,
      );
      host.sql.exec(
        "INSERT INTO session_metadata (name, value) VALUES ('schema_additive', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        migration.additive ? 1 : 0,
      );
    });
  }
  return current;
}
