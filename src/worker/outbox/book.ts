/**
 * Delivery bookkeeping of the session's outbox (docs/integrations.md "Events out"): one row per event
 * and matching endpoint, the scan cursor over `edge.outbox`, and each endpoint's failing streak. Host
 * state like HostBook's (synchronous SQL on the object's storage, not commits): a send attempt writes
 * no seq, feeds no watcher and works while the session is faulted.
 *
 * Two more tables carry what must survive a kill across a call to the tenant's directory: the events
 * committed while the directory could not be read (`host_unresolved`: their endpoints are resolved
 * when it answers), and an endpoint being disabled (`host_disabling`: recorded before the directory is
 * asked, ended by the `delivery.disabled` event's commit or by the answer that nothing is to be sent).
 *
 * The tables are created with the first event this session ever materializes, so a session whose
 * tenant has no endpoints never has them (and `present` answers without writing).
 */
import type { Id } from "../../storage/records.js";
import type { SqlHost } from "../../storage/sql.js";
import type { EventType } from "../directory/endpoints.js";
import type { DeliveryStatus, DeliveryView, OutboxEvent } from "./types.js";

/** Tables added after the first ones: created (if missing) when a session with the first ones is opened. */
const LATER_SCHEMA = [
  "CREATE TABLE IF NOT EXISTS host_unresolved (event INTEGER PRIMARY KEY)",
  "CREATE TABLE IF NOT EXISTS host_disabling (endpoint TEXT PRIMARY KEY, failing_since INTEGER NOT NULL, last_status INTEGER, reason TEXT NOT NULL, disabled INTEGER) WITHOUT ROWID",
];

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS host_deliveries (
    event INTEGER NOT NULL,
    endpoint TEXT NOT NULL,
    event_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    first_attempt_at INTEGER,
    next_attempt_at INTEGER,
    last_status INTEGER,
    last_error TEXT,
    finished_at INTEGER,
    PRIMARY KEY (event, endpoint)
  ) WITHOUT ROWID`,
  "CREATE INDEX IF NOT EXISTS host_deliveries_due ON host_deliveries (status, next_attempt_at)",
  "CREATE TABLE IF NOT EXISTS host_outbox (id INTEGER PRIMARY KEY CHECK (id = 1), cursor INTEGER NOT NULL, pruned_at INTEGER NOT NULL)",
  "CREATE TABLE IF NOT EXISTS host_endpoint_health (endpoint TEXT PRIMARY KEY, failing_since INTEGER NOT NULL, last_status INTEGER) WITHOUT ROWID",
  ...LATER_SCHEMA,
];

/** An endpoint being disabled: what the directory was (or is to be) asked, and its answer once known. */
export interface Disabling {
  readonly endpoint: string;
  readonly since: number;
  readonly lastStatus: number | undefined;
  readonly reason: string;
  /** The directory's answer (undefined: not known; the call failed, or the object died during it). */
  readonly disabled: boolean | undefined;
}

/** A delivery row as the sender needs it. */
export interface DeliveryRow {
  readonly event: Id;
  readonly endpoint: string;
  readonly eventId: string;
  readonly type: EventType;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly firstAttemptAt: number | undefined;
  readonly nextAttemptAt: number | undefined;
  readonly lastStatus: number | undefined;
  readonly lastError: string | undefined;
}

type Row = Record<string, SqlStorageValue>;

function optionalNumber(value: SqlStorageValue | undefined): number | undefined {
  return typeof value === "number" ? value : undefined;
}

function deliveryRow(row: Row): DeliveryRow {
  return {
    event: Number(row["event"]),
    endpoint: String(row["endpoint"]),
    eventId: String(row["event_id"]),
    type: String(row["type"]) as EventType,
    status: String(row["status"]) as DeliveryStatus,
    attempts: Number(row["attempts"]),
    firstAttemptAt: optionalNumber(row["first_attempt_at"]),
    nextAttemptAt: optionalNumber(row["next_attempt_at"]),
    lastStatus: optionalNumber(row["last_status"]),
    lastError: typeof row["last_error"] === "string" ? row["last_error"] : undefined,
  };
}

export function deliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: `${row.event}.${row.endpoint}`,
    eventId: row.eventId,
    endpointId: row.endpoint,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    lastStatusCode: row.lastStatus ?? null,
    nextAttemptAt:
      row.status === "pending" && row.nextAttemptAt !== undefined ? new Date(row.nextAttemptAt).toISOString() : null,
    ...(row.lastError === undefined ? {} : { lastError: row.lastError }),
  };
}

export class OutboxBook {
  readonly #host: SqlHost;
  #present = false;

  constructor(host: SqlHost) {
    this.#host = host;
  }

  /** Whether this session ever materialized an event (the tables exist). Reads only. */
  get present(): boolean {
    if (!this.#present) {
      this.#present =
        this.#host.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'host_outbox'").toArray()
          .length > 0;
      // A session whose tables predate the later ones gets them (writes nothing when they exist).
      if (this.#present) for (const statement of LATER_SCHEMA) this.#host.sql.exec(statement);
    }
    return this.#present;
  }

  /** The storage was wiped (the session deleted): ask again. */
  forget(): void {
    this.#present = false;
  }

  /** The last `edge.outbox` element materialized (0: none). */
  cursor(): Id {
    if (!this.present) return 0;
    const row = this.#host.sql.exec("SELECT cursor FROM host_outbox WHERE id = 1").toArray()[0];
    return row === undefined ? 0 : Number(row["cursor"]);
  }

  /**
   * One pending row per event and endpoint (idempotent), then the cursor moves past them. An event
   * committed while the endpoints were not known is recorded unresolved; a `delivery.disabled` event
   * ends the disabling it reports.
   */
  materialize(events: readonly { readonly element: Id; readonly event: OutboxEvent }[], now: number): void {
    if (events.length === 0) return;
    this.#ensure(now);
    let cursor = this.cursor();
    for (const { element, event } of events) {
      if (event.unresolved === true)
        this.#host.sql.exec("INSERT OR IGNORE INTO host_unresolved (event) VALUES (?)", element);
      const disabled = event.data["endpointId"];
      if (event.type === "delivery.disabled" && typeof disabled === "string")
        this.#host.sql.exec("DELETE FROM host_disabling WHERE endpoint = ?", disabled);
      this.#insert(element, event.id, event.type, event.to, event.timestamp);
      cursor = Math.max(cursor, element);
    }
    this.#host.sql.exec("UPDATE host_outbox SET cursor = ? WHERE id = 1", cursor);
  }

  #insert(element: Id, eventId: string, type: EventType, to: readonly string[], at: number): void {
    for (const endpoint of to) {
      this.#host.sql.exec(
        "INSERT OR IGNORE INTO host_deliveries (event, endpoint, event_id, type, status, attempts, next_attempt_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)",
        element,
        endpoint,
        eventId,
        type,
        at,
      );
    }
  }

  /** Events committed while the endpoints were not known, oldest first. */
  unresolved(limit: number): Id[] {
    if (!this.present) return [];
    return this.#host.sql
      .exec("SELECT event FROM host_unresolved ORDER BY event LIMIT ?", limit)
      .toArray()
      .map((row) => Number(row["event"]));
  }

  /** An unresolved event's endpoints are known: its pending rows (due `now`), and it is resolved. */
  resolve(element: Id, event: OutboxEvent, to: readonly string[], now: number): void {
    this.#insert(element, event.id, event.type, to, now);
    this.#host.sql.exec("DELETE FROM host_unresolved WHERE event = ?", element);
  }

  /** Unresolved events that are gone or matched no endpoint (their elements were removed). */
  dropUnresolved(elements: readonly Id[]): void {
    for (const element of elements) this.#host.sql.exec("DELETE FROM host_unresolved WHERE event = ?", element);
  }

  /** Pending rows due at `now`, in commit order. */
  due(now: number, limit: number): DeliveryRow[] {
    if (!this.present) return [];
    return this.#host.sql
      .exec(
        "SELECT * FROM host_deliveries WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY event, endpoint LIMIT ?",
        now,
        limit,
      )
      .toArray()
      .map(deliveryRow);
  }

  /** Deliveries still to send (pending) and given up (dead, until pruned): the session's counters for GET /v1/stats. */
  counts(): { readonly backlog: number; readonly dead: number } {
    if (!this.present) return { backlog: 0, dead: 0 };
    const row = this.#host.sql
      .exec(
        "SELECT coalesce(sum(status = 'pending'), 0) AS backlog, coalesce(sum(status = 'dead'), 0) AS dead FROM host_deliveries",
      )
      .one();
    return { backlog: Number(row["backlog"]), dead: Number(row["dead"]) };
  }

  /** The earliest pending attempt (undefined: nothing pending). */
  earliest(): number | undefined {
    if (!this.present) return undefined;
    const row = this.#host.sql
      .exec("SELECT min(next_attempt_at) AS at FROM host_deliveries WHERE status = 'pending'")
      .one();
    return optionalNumber(row["at"]);
  }

  get(event: Id, endpoint: string): DeliveryRow | undefined {
    if (!this.present) return undefined;
    const row = this.#host.sql
      .exec("SELECT * FROM host_deliveries WHERE event = ? AND endpoint = ?", event, endpoint)
      .toArray()[0];
    return row === undefined ? undefined : deliveryRow(row);
  }

  /** Newest first. */
  list(query: { readonly status?: DeliveryStatus; readonly endpoint?: string; readonly limit: number }): DeliveryRow[] {
    if (!this.present) return [];
    const where: string[] = [];
    const params: (string | number)[] = [];
    if (query.status !== undefined) {
      where.push("status = ?");
      params.push(query.status);
    }
    if (query.endpoint !== undefined) {
      where.push("endpoint = ?");
      params.push(query.endpoint);
    }
    const clause = where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`;
    return this.#host.sql
      .exec(`SELECT * FROM host_deliveries ${clause} ORDER BY event DESC, endpoint LIMIT ?`, ...params, query.limit)
      .toArray()
      .map(deliveryRow);
  }

  /**
   * Before a send: the attempt counts even if the object dies during it (the output gate holds the fetch until this is
   * durable).
   */
  attempting(event: Id, endpoint: string, now: number): void {
    this.#host.sql.exec(
      "UPDATE host_deliveries SET attempts = attempts + 1, first_attempt_at = coalesce(first_attempt_at, ?) WHERE event = ? AND endpoint = ?",
      now,
      event,
      endpoint,
    );
  }

  delivered(event: Id, endpoint: string, status: number, now: number): void {
    this.#host.sql.exec(
      "UPDATE host_deliveries SET status = 'done', last_status = ?, last_error = NULL, next_attempt_at = NULL, finished_at = ? WHERE event = ? AND endpoint = ?",
      status,
      now,
      event,
      endpoint,
    );
    this.#host.sql.exec("DELETE FROM host_endpoint_health WHERE endpoint = ?", endpoint);
  }

  /** A failed attempt: retried at `next`, or dead when `next` is undefined. */
  failed(
    event: Id,
    endpoint: string,
    status: number | undefined,
    error: string,
    next: number | undefined,
    now: number,
  ): void {
    this.#host.sql.exec(
      `UPDATE host_deliveries SET last_status = ?, last_error = ?, status = ?, next_attempt_at = ?, finished_at = ? WHERE event = ? AND endpoint = ?`,
      status ?? null,
      error,
      next === undefined ? "dead" : "pending",
      next ?? null,
      next === undefined ? now : null,
      event,
      endpoint,
    );
    this.#host.sql.exec(
      "INSERT INTO host_endpoint_health (endpoint, failing_since, last_status) VALUES (?, ?, ?) ON CONFLICT (endpoint) DO UPDATE SET last_status = excluded.last_status",
      endpoint,
      now,
      status ?? null,
    );
  }

  /** Since when `endpoint` has been failing (undefined: its last attempt succeeded, or none failed). */
  failing(endpoint: string): { readonly since: number; readonly lastStatus: number | undefined } | undefined {
    if (!this.present) return undefined;
    const row = this.#host.sql
      .exec("SELECT failing_since, last_status FROM host_endpoint_health WHERE endpoint = ?", endpoint)
      .toArray()[0];
    return row === undefined
      ? undefined
      : { since: Number(row["failing_since"]), lastStatus: optionalNumber(row["last_status"]) };
  }

  /** Endpoints with a failing streak. */
  failingEndpoints(): string[] {
    if (!this.present) return [];
    return this.#host.sql
      .exec("SELECT endpoint FROM host_endpoint_health ORDER BY endpoint")
      .toArray()
      .map((row) => String(row["endpoint"]));
  }

  /** The endpoint was re-enabled after its streak began: its streak starts again now. */
  restartStreak(endpoint: string, now: number): void {
    this.#host.sql.exec("UPDATE host_endpoint_health SET failing_since = ? WHERE endpoint = ?", now, endpoint);
  }

  /** Every pending row of `endpoint` dies (it was disabled or deleted). */
  abandon(endpoint: string, reason: string, now: number): void {
    if (!this.present) return;
    this.#host.sql.exec(
      "UPDATE host_deliveries SET status = 'dead', last_error = ?, next_attempt_at = NULL, finished_at = ? WHERE endpoint = ? AND status = 'pending'",
      reason,
      now,
      endpoint,
    );
    this.#host.sql.exec("DELETE FROM host_endpoint_health WHERE endpoint = ?", endpoint);
  }

  /** An operator's retry: pending now, with a fresh retry window. */
  retry(event: Id, endpoint: string, now: number): void {
    this.#host.sql.exec(
      "UPDATE host_deliveries SET status = 'pending', next_attempt_at = ?, first_attempt_at = NULL, finished_at = NULL WHERE event = ? AND endpoint = ?",
      now,
      event,
      endpoint,
    );
  }

  /** Since when the longest-failing endpoint has been failing (undefined: none is failing). */
  failingSince(): number | undefined {
    if (!this.present) return undefined;
    return optionalNumber(this.#host.sql.exec("SELECT min(failing_since) AS at FROM host_endpoint_health").one()["at"]);
  }

  /** When the oldest done or dead row finished (undefined: none waits to be pruned). */
  oldestFinished(): number | undefined {
    if (!this.present) return undefined;
    return optionalNumber(
      this.#host.sql.exec("SELECT min(finished_at) AS at FROM host_deliveries WHERE status != 'pending'").one()["at"],
    );
  }

  /** When the last prune ran. */
  prunedAt(): number {
    if (!this.present) return 0;
    const row = this.#host.sql.exec("SELECT pruned_at FROM host_outbox WHERE id = 1").toArray()[0];
    return row === undefined ? 0 : Number(row["pruned_at"]);
  }

  /**
   * Events whose every row is done or dead and finished before `before` (at most `limit`, oldest
   * first): their `edge.outbox` elements can go, and then their rows (`forgetEvents`). Marks the prune run.
   */
  prunable(before: number, limit: number, now: number): Id[] {
    if (!this.present) return [];
    this.#host.sql.exec("UPDATE host_outbox SET pruned_at = ? WHERE id = 1", now);
    return this.#host.sql
      .exec(
        "SELECT event FROM host_deliveries GROUP BY event HAVING sum(status = 'pending') = 0 AND max(finished_at) < ? ORDER BY event LIMIT ?",
        before,
        limit,
      )
      .toArray()
      .map((row) => Number(row["event"]));
  }

  /** The rows of events whose elements were removed (after the removal committed: a kill between repeats it). */
  forgetEvents(elements: readonly Id[]): void {
    for (const element of elements) this.#host.sql.exec("DELETE FROM host_deliveries WHERE event = ?", element);
  }

  // Disabling -------------------------------------------------------------------------------------

  /** Record, before the directory is asked, that `endpoint` is being disabled. */
  disabling(endpoint: string, since: number, lastStatus: number | undefined, reason: string): Disabling {
    this.#host.sql.exec(
      "INSERT OR IGNORE INTO host_disabling (endpoint, failing_since, last_status, reason, disabled) VALUES (?, ?, ?, ?, NULL)",
      endpoint,
      since,
      lastStatus ?? null,
      reason,
    );
    return this.disablingOf(endpoint) ?? { endpoint, since, lastStatus, reason, disabled: undefined };
  }

  disablingOf(endpoint: string): Disabling | undefined {
    if (!this.present) return undefined;
    const row = this.#host.sql.exec("SELECT * FROM host_disabling WHERE endpoint = ?", endpoint).toArray()[0];
    if (row === undefined) return undefined;
    const disabled = optionalNumber(row["disabled"]);
    return {
      endpoint,
      since: Number(row["failing_since"]),
      lastStatus: optionalNumber(row["last_status"]),
      reason: String(row["reason"]),
      disabled: disabled === undefined ? undefined : disabled === 1,
    };
  }

  /** Endpoints being disabled. */
  disablingEndpoints(): string[] {
    if (!this.present) return [];
    return this.#host.sql
      .exec("SELECT endpoint FROM host_disabling ORDER BY endpoint")
      .toArray()
      .map((row) => String(row["endpoint"]));
  }

  /** The directory's answer about disabling `endpoint`. */
  disabledAnswer(endpoint: string, disabled: boolean): void {
    this.#host.sql.exec("UPDATE host_disabling SET disabled = ? WHERE endpoint = ?", disabled ? 1 : 0, endpoint);
  }

  /** Nothing more is to be done for disabling `endpoint` (no event is sent, or it is committed). */
  disablingDone(endpoint: string): void {
    if (!this.present) return;
    this.#host.sql.exec("DELETE FROM host_disabling WHERE endpoint = ?", endpoint);
  }

  #ensure(now: number): void {
    if (this.present) return;
    for (const statement of SCHEMA) this.#host.sql.exec(statement);
    this.#host.sql.exec("INSERT OR IGNORE INTO host_outbox (id, cursor, pruned_at) VALUES (1, 0, ?)", now);
    this.#present = true;
  }
}
