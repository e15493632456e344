/**
 * The session directory's rows in the tenant's DirectoryObject (docs/api.md "Directory" and "Search and
 * metadata"): one row per session (owner, title, labels, metadata, status, activity), a (session, key, value)
 * table that indexes metadata, the versioned schema they live in, and the listing `GET /v1/sessions` reads.
 * Every filter is an indexed query of this SQLite: a listing never opens a session object.
 *
 * The schema is versioned like a session's (`directory_schema` holds the version; each step runs once, in
 * order, in one transaction with its version bump). A directory written by newer code refuses to open rather
 * than guess at a layout it does not know.
 */
import type { SessionStatus } from "../schemas.js";

/** One session's row as the directory lists it. */
export interface DirectoryEntry {
  readonly session: string;
  /** The end user who owns it (docs/users.md); undefined: the tenant's (created by a client or operator). */
  readonly owner: string | undefined;
  readonly title: string | undefined;
  readonly labels: readonly string[];
  readonly metadata: Readonly<Record<string, string>>;
  /** idle, busy (a live turn) or faulted (a session fault or a quarantined task), as the session last reported. */
  readonly status: SessionStatus;
  readonly createdAt: number;
  readonly lastActivityAt: number;
  readonly liveTasks: number;
}

/** What a session counts of itself for `GET /v1/stats` (sent with its directory row). */
export interface SessionCounters {
  /** Live tasks the host withholds after repeated kills (quarantined). */
  readonly quarantinedTasks: number;
  /** Outbox deliveries still to be sent (pending, retrying included). */
  readonly outboxBacklog: number;
  /** Outbox deliveries that gave up (dead), until pruned. */
  readonly deadDeliveries: number;
  /** Items on the pending list (approvals, client tools). */
  readonly pendingItems: number;
  /** The earliest deadline among them (epoch ms; null: none has one). */
  readonly pendingDeadline: number | null;
}

/** The tenant's totals over its directory rows (GET /v1/stats). */
export interface DirectoryStats {
  readonly sessions: Readonly<Record<SessionStatus, number>>;
  readonly liveTasks: number;
  readonly quarantinedTasks: number;
  readonly outboxBacklog: number;
  readonly deadDeliveries: number;
  readonly pendingItems: number;
  readonly earliestPendingDeadline: number | null;
}

/** What a session object sends: its whole row, or its deletion. */
export type DirectoryUpdate =
  | ({
      readonly type: "upsert";
      readonly version: number;
      /** The operator's counters (GET /v1/stats) as of this update; absent in updates sent before them. */
      readonly counters?: SessionCounters;
    } & DirectoryEntry)
  | { readonly type: "delete"; readonly version: number; readonly session: string };

export interface DirectoryQuery {
  readonly limit: number;
  readonly cursor?: string;
  readonly q?: string;
  /** Only this end user's sessions (a user token's listing, or an operator's `owner` filter). */
  readonly owner?: string;
  /** Only these sessions (a token's sessions claim; at most 100 names). */
  readonly names?: readonly string[];
  /** Only sessions whose metadata holds every one of these pairs. */
  readonly metadata?: Readonly<Record<string, string>>;
  readonly status?: SessionStatus;
  /** Only sessions whose lastActivityAt is at or after this time (epoch ms). */
  readonly activeSince?: number;
  /** Only sessions whose lastActivityAt is before this time (epoch ms). */
  readonly activeBefore?: number;
  /**
   * What the next page's cursor is bound to (identity/user-access.ts `cursorBinding`): the route refuses a cursor bound
   * to another.
   */
  readonly binding?: string;
}

export interface DirectoryPage {
  readonly items: readonly DirectoryEntry[];
  /** Pass as `cursor` for the next page; absent on the last page. */
  readonly cursor?: string;
}

/**
 * A cursor is the last row's (lastActivityAt, session) position, opaque to clients, and for a user's
 * listing the binding of that user (so the route refuses it on anyone else's listing).
 */
export function encodeCursor(lastActivityAt: number, session: string, binding?: string): string {
  const value = binding === undefined ? [lastActivityAt, session] : [lastActivityAt, session, binding];
  return btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

export function decodeCursor(
  cursor: string,
): { readonly lastActivityAt: number; readonly session: string; readonly binding: string | undefined } | undefined {
  try {
    const padded = cursor.replaceAll("-", "+").replaceAll("_", "/");
    const value: unknown = JSON.parse(atob(padded + "=".repeat((4 - (padded.length % 4)) % 4)));
    if (!Array.isArray(value) || value.length < 2 || value.length > 3) return undefined;
    const [at, session, binding] = value as unknown[];
    if (typeof at !== "number" || !Number.isFinite(at) || typeof session !== "string") return undefined;
    if (binding !== undefined && typeof binding !== "string") return undefined;
    return { lastActivityAt: at, session, binding };
  } catch {
    return undefined;
  }
}

/**
 * The schema steps, in order; step i brings the directory to version i + 1. Append only. `additive`: code of
 * the version before the step can read and write a directory it migrated (docs/operations.md "Upgrading").
 */
export interface DirectoryStep {
  readonly additive: boolean;
  readonly run: (sql: SqlStorage) => void;
}
const SCHEMA: readonly DirectoryStep[] = [
  // 1: the directory as it was before versions (a directory created then already has it: every statement is a no-op).
  // Not additive: the first version.
  {
    additive: false,
    run: (sql) => {
      sql.exec(`CREATE TABLE IF NOT EXISTS directory (
      session TEXT PRIMARY KEY,
      version INTEGER NOT NULL,
      deleted INTEGER NOT NULL,
      title TEXT,
      labels TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      last_activity_at INTEGER NOT NULL,
      live_tasks INTEGER NOT NULL
    )`);
      sql.exec("CREATE INDEX IF NOT EXISTS directory_activity ON directory (deleted, last_activity_at DESC, session)");
      if (!hasColumn(sql, "directory", "owner")) sql.exec("ALTER TABLE directory ADD COLUMN owner TEXT");
      sql.exec(
        "CREATE INDEX IF NOT EXISTS directory_owner ON directory (owner, deleted, last_activity_at DESC, session)",
      );
    },
  },
  // 2: metadata and status (search). Rows from before list as idle with no metadata until their next update.
  // Additive: columns with defaults, a table and indexes that version 1 ignores.
  {
    additive: true,
    run: (sql) => {
      sql.exec("ALTER TABLE directory ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'");
      sql.exec("ALTER TABLE directory ADD COLUMN status TEXT NOT NULL DEFAULT 'idle'");
      sql.exec(
        "CREATE INDEX IF NOT EXISTS directory_status ON directory (status, deleted, last_activity_at DESC, session)",
      );
      sql.exec(`CREATE TABLE IF NOT EXISTS directory_metadata (
      session TEXT NOT NULL,
      key TEXT NOT NULL,
      value TEXT NOT NULL,
      PRIMARY KEY (session, key)
    ) WITHOUT ROWID`);
      sql.exec("CREATE INDEX IF NOT EXISTS directory_metadata_pair ON directory_metadata (key, value, session)");
    },
  },
  // 3: the operator's counters (GET /v1/stats). Rows from before count zero until their session's next update.
  // Additive: columns with defaults that version 2 ignores (its upserts leave them as they were).
  {
    additive: true,
    run: (sql) => {
      for (const column of ["quarantined_tasks", "outbox_backlog", "dead_deliveries", "pending_items"])
        sql.exec(`ALTER TABLE directory ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`);
      sql.exec("ALTER TABLE directory ADD COLUMN pending_deadline INTEGER");
    },
  },
];

/** The directory schema version this code writes. */
export const DIRECTORY_SCHEMA_VERSION = SCHEMA.length;

function hasColumn(sql: SqlStorage, table: string, column: string): boolean {
  return sql
    .exec(`PRAGMA table_info(${table})`)
    .toArray()
    .some((row) => row["name"] === column);
}

/**
 * Bring the directory's session tables to this code's version (each step once, with its version bump and its
 * additive mark) and return the version it is open at. A stored version one ahead that is marked additive opens
 * as it is (nothing written); any other newer version refuses. `extra`: steps past this code's, for tests that
 * play a newer release.
 */
export function migrateDirectory(storage: DurableObjectStorage, extra: readonly DirectoryStep[] = []): number {
  const sql = storage.sql;
  const steps = [...SCHEMA, ...extra];
  sql.exec(
    "CREATE TABLE IF NOT EXISTS directory_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
  );
  // The mark beside the version: a column the code before it never names (its statements read and write `version` only).
  if (!hasColumn(sql, "directory_schema", "additive"))
    sql.exec("ALTER TABLE directory_schema ADD COLUMN additive INTEGER NOT NULL DEFAULT 0");
  const row = sql.exec("SELECT version, additive FROM directory_schema WHERE id = 1").toArray()[0];
  const stored = row === undefined ? 0 : Number(row["version"]);
  if (stored > steps.length) {
    if (stored === steps.length + 1 && row?.["additive"] === 1) return stored;
    throw new Error(
      `the tenant directory's schema is version ${stored}, newer than this code's ${steps.length}${
        stored === steps.length + 1
          ? " and not marked additive"
          : ` by ${stored - steps.length} (only one additive version ahead opens)`
      }: deploy the newer code`,
    );
  }
  for (let version = stored; version < steps.length; version++) {
    const step = steps[version];
    if (step === undefined) continue;
    storage.transactionSync(() => {
      step.run(sql);
      sql.exec(
        "INSERT INTO directory_schema (id, version, additive) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version, additive = excluded.additive",
        version + 1,
        step.additive ? 1 : 0,
      );
    });
  }
  return steps.length;
}

const COLUMNS = "session, owner, title, labels, metadata, status, created_at, last_activity_at, live_tasks";

/** The session rows of one tenant's directory (the DirectoryObject's SQLite, after `migrateDirectory`). */
export class SessionDirectory {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  /** Whether `update` is newer than the row (a late retry is not, and is ignored). */
  newer(update: DirectoryUpdate): boolean {
    const row = this.#sql.exec("SELECT version FROM directory WHERE session = ?", update.session).toArray()[0];
    return row === undefined || Number(row["version"]) < update.version;
  }

  /** Apply an update unless the row holds a newer version (then it is ignored: a late retry). */
  apply(update: DirectoryUpdate): void {
    const sql = this.#sql;
    const row = sql.exec("SELECT version, metadata FROM directory WHERE session = ?", update.session).toArray()[0];
    if (row !== undefined && Number(row["version"]) >= update.version) return;
    const before = row === undefined ? {} : (JSON.parse(String(row["metadata"])) as Record<string, string>);
    switch (update.type) {
      case "upsert":
        sql.exec(
          `INSERT INTO directory (session, version, deleted, owner, title, labels, metadata, status, created_at, last_activity_at, live_tasks,
             quarantined_tasks, outbox_backlog, dead_deliveries, pending_items, pending_deadline)
           VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (session) DO UPDATE SET version = excluded.version, deleted = 0, owner = excluded.owner, title = excluded.title,
             labels = excluded.labels, metadata = excluded.metadata, status = excluded.status, created_at = excluded.created_at,
             last_activity_at = excluded.last_activity_at, live_tasks = excluded.live_tasks,
             quarantined_tasks = excluded.quarantined_tasks, outbox_backlog = excluded.outbox_backlog,
             dead_deliveries = excluded.dead_deliveries, pending_items = excluded.pending_items,
             pending_deadline = excluded.pending_deadline`,
          update.session,
          update.version,
          update.owner ?? null,
          update.title ?? null,
          JSON.stringify(update.labels),
          JSON.stringify(update.metadata),
          update.status,
          update.createdAt,
          update.lastActivityAt,
          update.liveTasks,
          update.counters?.quarantinedTasks ?? 0,
          update.counters?.outboxBacklog ?? 0,
          update.counters?.deadDeliveries ?? 0,
          update.counters?.pendingItems ?? 0,
          update.counters?.pendingDeadline ?? null,
        );
        this.#indexMetadata(update.session, before, update.metadata);
        return;
      case "delete":
        sql.exec(
          `INSERT INTO directory (session, version, deleted, title, labels, created_at, last_activity_at, live_tasks)
           VALUES (?, ?, 1, NULL, '[]', 0, 0, 0)
           ON CONFLICT (session) DO UPDATE SET version = excluded.version, deleted = 1, owner = NULL, title = NULL, labels = '[]',
             metadata = '{}', status = 'idle', live_tasks = 0, quarantined_tasks = 0, outbox_backlog = 0, dead_deliveries = 0,
             pending_items = 0, pending_deadline = NULL`,
          update.session,
          update.version,
        );
        this.#indexMetadata(update.session, before, {});
        return;
      default: {
        const never: never = update;
        return never;
      }
    }
  }

  /** A tombstone newer than the row and `version` for a listed session; whether it was listed. */
  unlink(session: string, version: number): boolean {
    const sql = this.#sql;
    const row = sql.exec("SELECT version, deleted, metadata FROM directory WHERE session = ?", session).toArray()[0];
    if (row === undefined || Number(row["deleted"]) === 1) return false;
    sql.exec(
      `UPDATE directory SET version = ?, deleted = 1, owner = NULL, title = NULL, labels = '[]', metadata = '{}', status = 'idle',
         live_tasks = 0, quarantined_tasks = 0, outbox_backlog = 0, dead_deliveries = 0, pending_items = 0, pending_deadline = NULL
       WHERE session = ?`,
      Math.max(version, Number(row["version"]) + 1),
      session,
    );
    this.#indexMetadata(session, JSON.parse(String(row["metadata"])) as Record<string, string>, {});
    return true;
  }

  /**
   * Newest activity first (ties by session name); `q` matches the name, title or a label (case-insensitive); the
   * other filters are exact and combine (every metadata pair must match).
   */
  list(query: DirectoryQuery): DirectoryPage {
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const where: string[] = ["deleted = 0"];
    const params: (string | number)[] = [];
    if (query.owner !== undefined) {
      where.push("owner = ?");
      params.push(query.owner);
    }
    if (query.status !== undefined) {
      where.push("status = ?");
      params.push(query.status);
    }
    if (query.names !== undefined) {
      where.push(`session IN (${query.names.map(() => "?").join(", ") || "NULL"})`);
      params.push(...query.names);
    }
    // Each pair is one range of the (key, value, session) index.
    for (const [key, value] of Object.entries(query.metadata ?? {})) {
      where.push("session IN (SELECT session FROM directory_metadata WHERE key = ? AND value = ?)");
      params.push(key, value);
    }
    if (query.activeSince !== undefined) {
      where.push("last_activity_at >= ?");
      params.push(query.activeSince);
    }
    if (query.activeBefore !== undefined) {
      where.push("last_activity_at < ?");
      params.push(query.activeBefore);
    }
    if (after !== undefined) {
      // The first term bounds the index range, so a deep page starts at the cursor instead of reading every row before
      // it.
      where.push("last_activity_at <= ? AND (last_activity_at < ? OR session > ?)");
      params.push(after.lastActivityAt, after.lastActivityAt, after.session);
    }
    if (query.q !== undefined && query.q !== "") {
      const pattern = `%${query.q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      where.push(
        "(lower(session) LIKE ? ESCAPE '\\' OR lower(coalesce(title, '')) LIKE ? ESCAPE '\\' OR lower(labels) LIKE ? ESCAPE '\\')",
      );
      params.push(pattern, pattern, pattern);
    }
    const rows = this.#sql
      .exec(
        `SELECT ${COLUMNS} FROM directory WHERE ${where.join(" AND ")}
         ORDER BY last_activity_at DESC, session ASC LIMIT ?`,
        ...params,
        query.limit + 1,
      )
      .toArray();
    const items: DirectoryEntry[] = rows.slice(0, query.limit).map((row) => ({
      session: String(row["session"]),
      owner: row["owner"] === null ? undefined : String(row["owner"]),
      title: row["title"] === null ? undefined : String(row["title"]),
      labels: JSON.parse(String(row["labels"])) as string[],
      metadata: JSON.parse(String(row["metadata"])) as Record<string, string>,
      status: String(row["status"]) as SessionStatus,
      createdAt: Number(row["created_at"]),
      lastActivityAt: Number(row["last_activity_at"]),
      liveTasks: Number(row["live_tasks"]),
    }));
    const last = items[items.length - 1];
    return rows.length > query.limit && last !== undefined
      ? { items, cursor: encodeCursor(last.lastActivityAt, last.session, query.binding) }
      : { items };
  }

  /**
   * The tenant's totals, summed over the rows the sessions pushed (no session is opened). One pass over the live rows
   * when asked: an operator's occasional read costs rows read (cheap), where totals kept up to date would cost a row
   * written on every session update (billed a thousand times more).
   */
  stats(): DirectoryStats {
    const sessions: Record<SessionStatus, number> = { idle: 0, busy: 0, faulted: 0 };
    for (const row of this.#sql
      .exec("SELECT status, count(*) AS n FROM directory WHERE deleted = 0 GROUP BY status")
      .toArray()) {
      const status = String(row["status"]);
      if (status === "idle" || status === "busy" || status === "faulted") sessions[status] = Number(row["n"]);
    }
    const sums = this.#sql
      .exec(
        `SELECT coalesce(sum(live_tasks), 0) AS live, coalesce(sum(quarantined_tasks), 0) AS quarantined,
           coalesce(sum(outbox_backlog), 0) AS backlog, coalesce(sum(dead_deliveries), 0) AS dead,
           coalesce(sum(pending_items), 0) AS pending, min(pending_deadline) AS deadline
         FROM directory WHERE deleted = 0`,
      )
      .one();
    return {
      sessions,
      liveTasks: Number(sums["live"]),
      quarantinedTasks: Number(sums["quarantined"]),
      outboxBacklog: Number(sums["backlog"]),
      deadDeliveries: Number(sums["dead"]),
      pendingItems: Number(sums["pending"]),
      earliestPendingDeadline: sums["deadline"] === null ? null : Number(sums["deadline"]),
    };
  }

  /** Make the index rows of `session` say `next`, writing only the pairs that changed (rows written are billed). */
  #indexMetadata(
    session: string,
    before: Readonly<Record<string, string>>,
    next: Readonly<Record<string, string>>,
  ): void {
    for (const key of Object.keys(before)) {
      if (next[key] === undefined)
        this.#sql.exec("DELETE FROM directory_metadata WHERE session = ? AND key = ?", session, key);
    }
    for (const [key, value] of Object.entries(next)) {
      if (before[key] === value) continue;
      this.#sql.exec(
        "INSERT INTO directory_metadata (session, key, value) VALUES (?, ?, ?) ON CONFLICT (session, key) DO UPDATE SET value = excluded.value",
        session,
        key,
        value,
      );
    }
  }
}
