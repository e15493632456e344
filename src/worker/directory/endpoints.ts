/**
 * A tenant's webhook endpoints (docs/integrations.md "Events out"), kept in its DirectoryObject's
 * SQLite next to the session directory: synchronous SQL only, so each call is one atomic step of the
 * object. The routes (http/routes/webhook-endpoints.ts) validate bodies and seal secrets; sessions read the
 * endpoints that match them (`forSession`, cached for ENDPOINTS_TTL_MS by outbox/outbox.ts)
 * and disable an endpoint that kept failing (`disable`). The event types and endpoint shapes are defined
 * here, where endpoints are kept; the session's outbox (outbox/outbox.ts) reads them.
 */
import type { SealedSecret } from "../crypto/sealed-secrets.js";

export const EVENT_TYPES = [
  "input.completed",
  "turn.failed",
  "session.idle",
  "schedule.fired",
  "job.finished",
  "rig.escalation",
  "pending.created",
  "pending.resolved",
  "session.expired",
  "delivery.disabled",
  "user.erased",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** An endpoint as operators see it (never its secret). */
export interface EndpointRecord {
  readonly id: string;
  readonly url: string;
  readonly events: readonly EventType[];
  /** Session names or `prefix*` patterns; absent: every session of the tenant. */
  readonly sessions?: readonly string[];
  readonly description?: string;
  readonly enabled: boolean;
  readonly disabledAt?: number;
  readonly disabledReason?: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** While set and in the future, deliveries are signed with the previous secret too. */
  readonly previousSecretExpiresAt?: number;
}

/** An endpoint as a session needs it to sign: the record and its sealed secrets. */
export interface SessionEndpoint extends EndpointRecord {
  readonly secret: SealedSecret;
  readonly previousSecret?: SealedSecret;
}

/** How a sealed endpoint secret is bound (crypto/sealed-secrets.ts). */
export function endpointSealContext(
  tenant: string,
  endpointId: string,
): { tenant: string; owner: string; field: string } {
  return { tenant, owner: `endpoint:${endpointId}`, field: "secret" };
}

/** Does an endpoint's `sessions` filter take this session name? */
export function sessionMatches(patterns: readonly string[] | undefined, session: string): boolean {
  if (patterns === undefined) return true;
  return patterns.some((pattern) =>
    pattern.endsWith("*") ? session.startsWith(pattern.slice(0, -1)) : pattern === session,
  );
}

/** Endpoints one tenant may register. */
export const MAX_ENDPOINTS = 50;

/** Both secrets sign deliveries for this long after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export interface EndpointInput {
  readonly url: string;
  readonly events: readonly EventType[];
  readonly sessions?: readonly string[];
  readonly description?: string;
}

/** A PATCH: absent fields are kept; `null` clears `sessions` (every session) or `description`. */
export interface EndpointPatch {
  readonly url?: string;
  readonly events?: readonly EventType[];
  readonly sessions?: readonly string[] | null;
  readonly description?: string | null;
  readonly enabled?: boolean;
}

type Row = Record<string, SqlStorageValue>;

export class EndpointStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS webhook_endpoints (
      id TEXT PRIMARY KEY,
      url TEXT NOT NULL,
      events TEXT NOT NULL,
      sessions TEXT,
      description TEXT,
      enabled INTEGER NOT NULL,
      enabled_at INTEGER NOT NULL,
      disabled_at INTEGER,
      disabled_reason TEXT,
      secret TEXT NOT NULL,
      previous_secret TEXT,
      previous_until INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
  }

  /** `undefined` when the tenant already has MAX_ENDPOINTS. */
  create(id: string, input: EndpointInput, secret: SealedSecret, now: number): EndpointRecord | undefined {
    const count = Number(this.#sql.exec("SELECT count(*) AS n FROM webhook_endpoints").one()["n"]);
    if (count >= MAX_ENDPOINTS) return undefined;
    this.#sql.exec(
      `INSERT INTO webhook_endpoints (id, url, events, sessions, description, enabled, enabled_at, secret, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
      id,
      input.url,
      JSON.stringify(input.events),
      input.sessions === undefined ? null : JSON.stringify(input.sessions),
      input.description ?? null,
      now,
      JSON.stringify(secret),
      now,
      now,
    );
    return this.get(id);
  }

  list(): EndpointRecord[] {
    return this.#sql
      .exec("SELECT * FROM webhook_endpoints ORDER BY created_at, id")
      .toArray()
      .map((row) => record(row));
  }

  get(id: string): EndpointRecord | undefined {
    const row = this.#row(id);
    return row === undefined ? undefined : record(row);
  }

  patch(id: string, patch: EndpointPatch, now: number): EndpointRecord | undefined {
    const row = this.#row(id);
    if (row === undefined) return undefined;
    const current = record(row);
    const sessions =
      patch.sessions === undefined ? current.sessions : patch.sessions === null ? undefined : patch.sessions;
    const description =
      patch.description === undefined
        ? current.description
        : patch.description === null
          ? undefined
          : patch.description;
    const enabled = patch.enabled ?? current.enabled;
    const reenabled = enabled && !current.enabled;
    const disabled = !enabled && current.enabled;
    this.#sql.exec(
      `UPDATE webhook_endpoints SET url = ?, events = ?, sessions = ?, description = ?, enabled = ?,
         enabled_at = CASE WHEN ? THEN ? ELSE enabled_at END,
         disabled_at = CASE WHEN ? THEN NULL WHEN ? THEN ? ELSE disabled_at END,
         disabled_reason = CASE WHEN ? THEN NULL WHEN ? THEN 'disabled by an operator' ELSE disabled_reason END,
         updated_at = ? WHERE id = ?`,
      patch.url ?? current.url,
      JSON.stringify(patch.events ?? current.events),
      sessions === undefined ? null : JSON.stringify(sessions),
      description ?? null,
      enabled ? 1 : 0,
      reenabled ? 1 : 0,
      now,
      reenabled ? 1 : 0,
      disabled ? 1 : 0,
      now,
      reenabled ? 1 : 0,
      disabled ? 1 : 0,
      now,
      id,
    );
    return this.get(id);
  }

  delete(id: string): boolean {
    if (this.#row(id) === undefined) return false;
    this.#sql.exec("DELETE FROM webhook_endpoints WHERE id = ?", id);
    return true;
  }

  /** The current secret becomes the previous one until `now + ROTATION_OVERLAP_MS`. */
  rotate(id: string, secret: SealedSecret, now: number): EndpointRecord | undefined {
    if (this.#row(id) === undefined) return undefined;
    this.#sql.exec(
      "UPDATE webhook_endpoints SET previous_secret = secret, previous_until = ?, secret = ?, updated_at = ? WHERE id = ?",
      now + ROTATION_OVERLAP_MS,
      JSON.stringify(secret),
      now,
      id,
    );
    return this.get(id);
  }

  /**
   * A session saw the endpoint fail since `failingSince`: disable it, unless it is disabled already or
   * was (re-)enabled after that (a session's stale view cannot disable a freshly re-enabled endpoint).
   */
  disable(id: string, failingSince: number, reason: string, now: number): { readonly disabled: boolean } {
    const row = this.#row(id);
    if (row === undefined || Number(row["enabled"]) !== 1 || Number(row["enabled_at"]) > failingSince)
      return { disabled: false };
    this.#sql.exec(
      "UPDATE webhook_endpoints SET enabled = 0, disabled_at = ?, disabled_reason = ?, updated_at = ? WHERE id = ?",
      now,
      reason,
      now,
      id,
    );
    return { disabled: true };
  }

  /**
   * Every endpoint whose `sessions` filter takes `session` (disabled ones too: their pending deliveries die), with
   * secrets.
   */
  forSession(session: string): SessionEndpoint[] {
    const out: SessionEndpoint[] = [];
    for (const row of this.#sql.exec("SELECT * FROM webhook_endpoints ORDER BY created_at, id").toArray()) {
      const base = record(row);
      if (!sessionMatches(base.sessions, session)) continue;
      const previous = row["previous_secret"];
      out.push({
        ...base,
        secret: JSON.parse(String(row["secret"])) as SealedSecret,
        ...(typeof previous === "string" ? { previousSecret: JSON.parse(previous) as SealedSecret } : {}),
      });
    }
    return out;
  }

  /** The enabled endpoints subscribed to a tenant-wide event (`user.erased`), with secrets; no sessions filter applies. */
  subscribed(type: EventType): SessionEndpoint[] {
    const out: SessionEndpoint[] = [];
    for (const row of this.#sql.exec("SELECT * FROM webhook_endpoints ORDER BY created_at, id").toArray()) {
      const base = record(row);
      if (!base.enabled || !base.events.includes(type)) continue;
      const previous = row["previous_secret"];
      out.push({
        ...base,
        secret: JSON.parse(String(row["secret"])) as SealedSecret,
        ...(typeof previous === "string" ? { previousSecret: JSON.parse(previous) as SealedSecret } : {}),
      });
    }
    return out;
  }

  #row(id: string): Row | undefined {
    return this.#sql.exec("SELECT * FROM webhook_endpoints WHERE id = ?", id).toArray()[0];
  }
}

function record(row: Row): EndpointRecord {
  const sessions = row["sessions"];
  const description = row["description"];
  const disabledAt = row["disabled_at"];
  const reason = row["disabled_reason"];
  const previousUntil = row["previous_until"];
  return {
    id: String(row["id"]),
    url: String(row["url"]),
    events: JSON.parse(String(row["events"])) as EventType[],
    ...(typeof sessions === "string" ? { sessions: JSON.parse(sessions) as string[] } : {}),
    ...(typeof description === "string" ? { description } : {}),
    enabled: Number(row["enabled"]) === 1,
    ...(typeof disabledAt === "number" ? { disabledAt } : {}),
    ...(typeof reason === "string" ? { disabledReason: reason } : {}),
    createdAt: Number(row["created_at"]),
    updatedAt: Number(row["updated_at"]),
    ...(typeof previousUntil === "number" ? { previousSecretExpiresAt: previousUntil } : {}),
  };
}
