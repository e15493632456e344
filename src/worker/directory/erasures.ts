/**
 * User erasures as the tenant's DirectoryObject keeps them (docs/operations.md "Deleting a user's data"):
 * synchronous SQL only, so each call is one atomic step of the object. The runner (directory/erasure-run.ts)
 * drives a running erasure from the object's alarm; this store records where it stands, so a kill at any
 * point resumes from the last recorded step.
 *
 *   erasures          the record: id, the sub's hash and its version (directory/subject-hash.ts: 1 plain SHA-256 in records
 *                     written before the keyed hash, 2 keyed), the cutoff, the phase, the counts and the tenant (never the sub)
 *   erasure_work      a running erasure's sub, sealed (crypto/sealed-secrets.ts, bound to the tenant and the erasure):
 *                     the limits' usage rows and the directory's revocation and watch rows are keyed by the sub, so
 *                     the runner needs it until its last step, which deletes the row. A row written before sealing
 *                     holds the sub in `sub` (its `sealed` is null); new rows leave `sub` empty.
 *   erasure_sessions  the sessions of a running erasure, each pending until its delete is answered
 *   erasure_late      sessions of a finished erasure whose directory row landed after it ended, pending the same way
 *   erasure_events    the `user.erased` deliveries, one per subscribed endpoint
 *
 * A session of the user created before the cutoff whose directory row lands after the start (its create raced the
 * erasure, or its update was retried) is never listed: `claim` takes it into the erasure instead, running or done, and
 * the runner deletes it through the session's own delete, which checks again that the session is the erased user's
 * (its owner's hash) and was created before the cutoff, so no other user's session, and none the user made after, goes.
 *
 * A finished erasure's cutoff still refuses the user's older tokens: `cutoffFor(hashes)` is read with the
 * revocation time (identity/revocation.ts), so no row keeps the sub once the erasure is done.
 *
 * Every lookup by user takes the sub's hash under both versions (SubHashes) and matches each record under its own.
 */
import type { SealedSecret } from "../crypto/sealed-secrets.js";
import { subHashVersionOf, type SubHashes, type SubHashVersion } from "./subject-hash.js";

/** Where a running erasure is: its sessions, then its usage rows, then the directory's own rows. */
export type ErasurePhase = "sessions" | "usage" | "directory" | "done";

/** An erasure as `GET /v1/erasures/{id}` shows it. */
export interface ErasureRecord {
  readonly id: string;
  /** The sub's hash, hex (directory/subject-hash.ts): the only trace of who it was. */
  readonly subHash: string;
  /** 2: keyed (HMAC under SUBJECT_HASH_KEY's tenant key); 1: plain SHA-256, an erasure recorded before. */
  readonly subHashVersion: SubHashVersion;
  readonly status: "running" | "done";
  readonly phase: ErasurePhase;
  /** Tokens of the user issued before this time (Unix seconds) are refused. */
  readonly cutoff: number;
  readonly sessionsFound: number;
  readonly sessionsDeleted: number;
  readonly sessionsRemaining: number;
  readonly startedAt: number;
  readonly finishedAt?: number;
}

/** What the runner works on next for one running erasure. */
export interface ErasureWork {
  readonly id: string;
  /** The sub, sealed; or in clear in a row written before sealing. */
  readonly sub:
    { readonly type: "sealed"; readonly sealed: SealedSecret } | { readonly type: "clear"; readonly sub: string };
  readonly subHash: string;
  readonly subHashVersion: SubHashVersion;
  /** Unix seconds: only sessions created before it are the erasure's. */
  readonly cutoff: number;
  readonly tenant: string;
  readonly phase: Exclude<ErasurePhase, "done">;
}

/** A session of a finished erasure still to delete (its row landed late). */
export interface LateSession {
  readonly id: string;
  readonly session: string;
  readonly subHash: string;
  readonly subHashVersion: SubHashVersion;
  readonly cutoff: number;
  readonly tenant: string;
}

/** What a session checks before an erasure deletes it (SessionObject.eraseFor): its owner's hash and its creation. */
export interface ErasedOwner {
  readonly subHash: string;
  /** Absent (a directory from before the keyed hash): 1. */
  readonly subHashVersion?: SubHashVersion;
  /** Epoch ms: only a session created before it is the erasure's. */
  readonly createdBefore: number;
}

/** A pending `user.erased` delivery. */
export interface ErasureDelivery {
  readonly erasure: string;
  readonly tenant: string;
  readonly endpoint: string;
  readonly attempts: number;
  readonly firstAttemptAt: number | undefined;
}

export type StartOutcome =
  | { readonly type: "started"; readonly record: ErasureRecord }
  /** The user's erasure already running: the same record (a repeated POST starts nothing). */
  | { readonly type: "running"; readonly record: ErasureRecord };

type Row = Record<string, SqlStorageValue>;

/** Records of one user: each matched under its own hash version. */
const BY_SUB = "((hash_version = 1 AND sub_hash = ?) OR (hash_version = 2 AND sub_hash = ?))";

function bySub(hashes: SubHashes): [string, string] {
  // No keyed hash (nothing keyed is recorded): "" matches no hex hash.
  return [hashes.v1, hashes.v2 ?? ""];
}

export class ErasureStore {
  readonly #sql: SqlStorage;
  /** The tenant of the keyed records (every record of a directory is its tenant's); undefined: none yet. */
  #keyedTenant: string | undefined | null = null;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS erasures (
      id TEXT PRIMARY KEY,
      sub_hash TEXT NOT NULL,
      phase TEXT NOT NULL,
      cutoff INTEGER NOT NULL,
      found INTEGER NOT NULL,
      deleted INTEGER NOT NULL,
      started_at INTEGER NOT NULL,
      finished_at INTEGER
    )`);
    sql.exec("CREATE INDEX IF NOT EXISTS erasures_sub ON erasures (sub_hash, phase)");
    if (!hasColumn(sql, "erasures", "tenant")) sql.exec("ALTER TABLE erasures ADD COLUMN tenant TEXT");
    // Additive: records written before the keyed hash read as version 1 (plain SHA-256).
    if (!hasColumn(sql, "erasures", "hash_version"))
      sql.exec("ALTER TABLE erasures ADD COLUMN hash_version INTEGER NOT NULL DEFAULT 1");
    sql.exec(
      "CREATE TABLE IF NOT EXISTS erasure_work (id TEXT PRIMARY KEY, sub TEXT NOT NULL, tenant TEXT NOT NULL, next_at INTEGER NOT NULL)",
    );
    if (!hasColumn(sql, "erasure_work", "sealed")) sql.exec("ALTER TABLE erasure_work ADD COLUMN sealed TEXT");
    sql.exec(
      "CREATE TABLE IF NOT EXISTS erasure_late (id TEXT NOT NULL, session TEXT NOT NULL, next_at INTEGER NOT NULL, PRIMARY KEY (id, session)) WITHOUT ROWID",
    );
    sql.exec(
      "CREATE TABLE IF NOT EXISTS erasure_sessions (id TEXT NOT NULL, session TEXT NOT NULL, PRIMARY KEY (id, session)) WITHOUT ROWID",
    );
    sql.exec(`CREATE TABLE IF NOT EXISTS erasure_events (
      erasure TEXT NOT NULL, endpoint TEXT NOT NULL, tenant TEXT NOT NULL, attempts INTEGER NOT NULL, first_attempt_at INTEGER,
      next_at INTEGER NOT NULL, PRIMARY KEY (erasure, endpoint)) WITHOUT ROWID`);
  }

  /**
   * The tenant keyed hashes are made for, once a keyed record exists (a lookup then needs the keyed hash too);
   * undefined: only plain records, or none. This object is the only writer, so it is read once.
   */
  keyedTenant(): string | undefined {
    if (this.#keyedTenant === null) {
      const row = this.#sql.exec("SELECT tenant FROM erasures WHERE hash_version = 2 LIMIT 1").toArray()[0];
      this.#keyedTenant = row === undefined ? undefined : String(row["tenant"]);
    }
    return this.#keyedTenant;
  }

  /**
   * Start erasing `sub` (one step): the record (its keyed hash, `hashes.v2`), its work row (the sub sealed as
   * `sealed`), and the sessions the directory lists for the owner. A running erasure of the same user (under either
   * version) is answered instead.
   */
  start(
    id: string,
    sub: string,
    sealed: SealedSecret,
    hashes: SubHashes & { readonly v2: string },
    tenant: string,
    cutoff: number,
    now: number,
  ): StartOutcome {
    const running = this.#sql
      .exec(`SELECT * FROM erasures WHERE ${BY_SUB} AND phase != 'done' ORDER BY started_at LIMIT 1`, ...bySub(hashes))
      .toArray()[0];
    if (running !== undefined) return { type: "running", record: this.#record(running) };
    this.#sql.exec(
      "INSERT INTO erasures (id, sub_hash, hash_version, phase, cutoff, found, deleted, started_at, tenant) VALUES (?, ?, 2, 'sessions', ?, 0, 0, ?, ?)",
      id,
      hashes.v2,
      cutoff,
      now,
      tenant,
    );
    this.#keyedTenant = tenant;
    this.#sql.exec(
      "INSERT INTO erasure_work (id, sub, sealed, tenant, next_at) VALUES (?, '', ?, ?, ?)",
      id,
      JSON.stringify(sealed),
      tenant,
      now,
    );
    this.collect(id, sub);
    const record = this.get(id);
    if (record === undefined) throw new Error(`erasure ${id} was not recorded`);
    return { type: "started", record };
  }

  /**
   * A directory row of `session`, owned by the user with this hash and created at `createdAt` (epoch ms), is landing:
   * when an erasure of that user has a later cutoff, the session is the erasure's (pending its delete, counted as
   * found) and the row must not be listed. A running erasure goes back to its sessions phase and runs at once; a
   * finished one takes it as a late session. Whether the erasure took it.
   */
  claim(hashes: SubHashes, session: string, createdAt: number, now: number): boolean {
    const row = this.#sql
      .exec(
        `SELECT id, phase, cutoff, tenant FROM erasures WHERE ${BY_SUB} ORDER BY cutoff DESC LIMIT 1`,
        ...bySub(hashes),
      )
      .toArray()[0];
    if (row === undefined || createdAt >= Number(row["cutoff"]) * 1000) return false;
    // A record written before erasures kept their tenant cannot address the session: the row is listed as before.
    if (row["tenant"] === null) return false;
    const id = String(row["id"]);
    const running = row["phase"] !== "done";
    const added = this.#sql
      .exec(
        running
          ? "INSERT INTO erasure_sessions (id, session) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING session"
          : "INSERT INTO erasure_late (id, session, next_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING session",
        ...(running ? [id, session] : [id, session, now]),
      )
      .toArray().length;
    if (added === 0) return true;
    this.#sql.exec("UPDATE erasures SET found = found + 1 WHERE id = ?", id);
    if (running) {
      this.#sql.exec("UPDATE erasures SET phase = 'sessions' WHERE id = ?", id);
      this.#sql.exec("UPDATE erasure_work SET next_at = min(next_at, ?) WHERE id = ?", now, id);
    }
    return true;
  }

  /** Late sessions of finished erasures due at `now`, at most `limit`. */
  dueLate(now: number, limit: number): LateSession[] {
    return this.#sql
      .exec(
        `SELECT l.id, l.session, e.sub_hash, e.hash_version, e.cutoff, e.tenant FROM erasure_late l JOIN erasures e ON e.id = l.id
         WHERE l.next_at <= ? ORDER BY l.next_at, l.id, l.session LIMIT ?`,
        now,
        limit,
      )
      .toArray()
      .map((row) => ({
        id: String(row["id"]),
        session: String(row["session"]),
        subHash: String(row["sub_hash"]),
        subHashVersion: subHashVersionOf(row["hash_version"]),
        cutoff: Number(row["cutoff"]),
        tenant: String(row["tenant"]),
      }));
  }

  /** A late session's delete was answered: it counts as deleted (or, `deleted` false, as not the erasure's). */
  lateDone(late: LateSession, deleted: boolean): void {
    const removed = this.#sql
      .exec("DELETE FROM erasure_late WHERE id = ? AND session = ? RETURNING session", late.id, late.session)
      .toArray().length;
    if (removed === 0) return;
    this.#sql.exec(
      deleted
        ? "UPDATE erasures SET deleted = deleted + 1 WHERE id = ?"
        : "UPDATE erasures SET found = found - 1 WHERE id = ?",
      late.id,
    );
  }

  /** A late session's delete did not answer: tried again at `at`. */
  lateRetryAt(late: LateSession, at: number): void {
    this.#sql.exec("UPDATE erasure_late SET next_at = ? WHERE id = ? AND session = ?", at, late.id, late.session);
  }

  /** Add the sessions the directory lists for `sub` that the erasure does not hold yet (found counts them). */
  collect(id: string, sub: string): number {
    const added = this.#sql
      .exec(
        `INSERT INTO erasure_sessions (id, session)
         SELECT ?, session FROM directory WHERE owner = ? AND deleted = 0
         ON CONFLICT (id, session) DO NOTHING RETURNING session`,
        id,
        sub,
      )
      .toArray().length;
    if (added > 0) this.#sql.exec("UPDATE erasures SET found = found + ? WHERE id = ?", added, id);
    return added;
  }

  get(id: string): ErasureRecord | undefined {
    const row = this.#sql.exec("SELECT * FROM erasures WHERE id = ?", id).toArray()[0];
    return row === undefined ? undefined : this.#record(row);
  }

  /** Whether an erasure of the user with these hashes is running (its creates are refused). */
  running(hashes: SubHashes): boolean {
    return (
      this.#sql
        .exec(`SELECT 1 AS found FROM erasures WHERE ${BY_SUB} AND phase != 'done' LIMIT 1`, ...bySub(hashes))
        .toArray().length > 0
    );
  }

  /** The latest cutoff of the user's erasures (Unix seconds), if any. */
  cutoffFor(hashes: SubHashes): number | undefined {
    const row = this.#sql.exec(`SELECT max(cutoff) AS cutoff FROM erasures WHERE ${BY_SUB}`, ...bySub(hashes)).one();
    return row["cutoff"] === null ? undefined : Number(row["cutoff"]);
  }

  /** The running erasures due at `now`, oldest first. */
  due(now: number): ErasureWork[] {
    return this.#sql
      .exec(
        `SELECT w.id, w.sub, w.sealed, w.tenant, e.phase, e.sub_hash, e.hash_version, e.cutoff FROM erasure_work w JOIN erasures e ON e.id = w.id
         WHERE w.next_at <= ? ORDER BY e.started_at, w.id`,
        now,
      )
      .toArray()
      .map((row) => ({
        id: String(row["id"]),
        sub:
          row["sealed"] === null
            ? { type: "clear" as const, sub: String(row["sub"]) }
            : { type: "sealed" as const, sealed: JSON.parse(String(row["sealed"])) as SealedSecret },
        subHash: String(row["sub_hash"]),
        subHashVersion: subHashVersionOf(row["hash_version"]),
        cutoff: Number(row["cutoff"]),
        tenant: String(row["tenant"]),
        phase: String(row["phase"]) as ErasureWork["phase"],
      }));
  }

  /** The sessions of an erasure still to delete, at most `limit`. */
  pendingSessions(id: string, limit: number): string[] {
    return this.#sql
      .exec("SELECT session FROM erasure_sessions WHERE id = ? ORDER BY session LIMIT ?", id, limit)
      .toArray()
      .map((row) => String(row["session"]));
  }

  /** A session's delete was answered: deleted (or gone), or `deleted` false: not the erasure's (someone else's now). */
  sessionDone(id: string, session: string, deleted: boolean): void {
    const removed = this.#sql
      .exec("DELETE FROM erasure_sessions WHERE id = ? AND session = ? RETURNING session", id, session)
      .toArray().length;
    if (removed === 0) return;
    if (deleted) this.#sql.exec("UPDATE erasures SET deleted = deleted + 1 WHERE id = ?", id);
    else this.#sql.exec("UPDATE erasures SET found = found - 1 WHERE id = ?", id);
  }

  /** From phase `from` to `to`, unless a claim sent the erasure back meanwhile. Whether it moved. */
  advance(id: string, from: Exclude<ErasurePhase, "done">, to: Exclude<ErasurePhase, "done">): boolean {
    return (
      this.#sql.exec("UPDATE erasures SET phase = ? WHERE id = ? AND phase = ? RETURNING id", to, id, from).toArray()
        .length > 0
    );
  }

  /** Something did not answer: try the erasure again at `at`. */
  retryAt(id: string, at: number): void {
    this.#sql.exec("UPDATE erasure_work SET next_at = ? WHERE id = ?", at, id);
  }

  /** The sessions that may hold the user's open watches (the directory's watch rows). */
  watchedSessions(sub: string): string[] {
    return this.#sql
      .exec("SELECT session FROM user_watches WHERE sub = ? ORDER BY session", sub)
      .toArray()
      .map((row) => String(row["session"]));
  }

  /**
   * The last step: the directory's rows of the user (revocation, watches) and the work row with the sub go, the record
   * is done, and a `user.erased` delivery is queued for each endpoint in `endpoints`. One step, so none of it is
   * half done.
   */
  finish(id: string, sub: string, tenant: string, endpoints: readonly string[], now: number): void {
    this.#sql.exec("DELETE FROM user_revocations WHERE sub = ?", sub);
    this.#sql.exec("DELETE FROM user_watches WHERE sub = ?", sub);
    this.#sql.exec("DELETE FROM erasure_sessions WHERE id = ?", id);
    this.#sql.exec("DELETE FROM erasure_work WHERE id = ?", id);
    this.#sql.exec("UPDATE erasures SET phase = 'done', finished_at = ? WHERE id = ?", now, id);
    for (const endpoint of endpoints)
      this.#sql.exec(
        "INSERT INTO erasure_events (erasure, endpoint, tenant, attempts, next_at) VALUES (?, ?, ?, 0, ?) ON CONFLICT DO NOTHING",
        id,
        endpoint,
        tenant,
        now,
      );
  }

  /** Deliveries due at `now`. */
  dueEvents(now: number, limit: number): ErasureDelivery[] {
    return this.#sql
      .exec("SELECT * FROM erasure_events WHERE next_at <= ? ORDER BY next_at LIMIT ?", now, limit)
      .toArray()
      .map((row) => ({
        erasure: String(row["erasure"]),
        tenant: String(row["tenant"]),
        endpoint: String(row["endpoint"]),
        attempts: Number(row["attempts"]),
        firstAttemptAt: typeof row["first_attempt_at"] === "number" ? row["first_attempt_at"] : undefined,
      }));
  }

  /** Counted before the send (a kill during it still counts the attempt). */
  attempting(delivery: ErasureDelivery, now: number, retryAt: number): void {
    this.#sql.exec(
      "UPDATE erasure_events SET attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, ?), next_at = ? WHERE erasure = ? AND endpoint = ?",
      now,
      retryAt,
      delivery.erasure,
      delivery.endpoint,
    );
  }

  /** Delivered, or given up on: the row goes. */
  delivered(delivery: ErasureDelivery): void {
    this.#sql.exec(
      "DELETE FROM erasure_events WHERE erasure = ? AND endpoint = ?",
      delivery.erasure,
      delivery.endpoint,
    );
  }

  /** The earliest time anything is due (for the alarm). */
  nextDue(): number | undefined {
    const row = this.#sql
      .exec(
        `SELECT min(at) AS at FROM (SELECT min(next_at) AS at FROM erasure_work UNION ALL SELECT min(next_at) AS at FROM erasure_events
           UNION ALL SELECT min(next_at) AS at FROM erasure_late)`,
      )
      .one();
    return row["at"] === null ? undefined : Number(row["at"]);
  }

  #record(row: Row): ErasureRecord {
    const phase = String(row["phase"]) as ErasurePhase;
    const found = Number(row["found"]);
    const deleted = Number(row["deleted"]);
    const finishedAt = row["finished_at"];
    return {
      id: String(row["id"]),
      subHash: String(row["sub_hash"]),
      subHashVersion: subHashVersionOf(row["hash_version"]),
      status: phase === "done" ? "done" : "running",
      phase,
      cutoff: Number(row["cutoff"]),
      sessionsFound: found,
      sessionsDeleted: deleted,
      sessionsRemaining: Math.max(0, found - deleted),
      startedAt: Number(row["started_at"]),
      ...(typeof finishedAt === "number" ? { finishedAt } : {}),
    };
  }
}

function hasColumn(sql: SqlStorage, table: string, column: string): boolean {
  return sql
    .exec(`PRAGMA table_info(${table})`)
    .toArray()
    .some((row) => row["name"] === column);
}
