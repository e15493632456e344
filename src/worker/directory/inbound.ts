/**
 * A tenant's inbound endpoints (docs/integrations.md "Routing"): endpoints defined on the tenant rather than on one
 * session, whose deliveries are routed to a session and a thread rendered from the payload. Kept in its
 * DirectoryObject's SQLite (synchronous SQL only, so each call is one atomic step of the object). The config is
 * opaque here (JSON the routes validate and read: http/routes/inbound-endpoints.ts); the signing secret is kept
 * sealed (crypto/sealed-secrets.ts), the Worker seals and opens it. After a rotation the previous secret still
 * verifies until `previousSecretExpiresAt`, so deliveries the platform signed before it learned the new secret pass.
 */
import type { SealedSecret } from "../crypto/sealed-secrets.js";
import type { JsonObject } from "../../storage/records.js";

/** An endpoint as stored: its name, config (opaque JSON), sealed secrets and times (epoch ms). */
export interface TenantInboundRecord {
  readonly name: string;
  readonly config: JsonObject;
  readonly secret: SealedSecret;
  readonly previousSecret?: SealedSecret;
  readonly previousSecretExpiresAt?: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** How many inbound endpoints one tenant may have. */
export const MAX_TENANT_INBOUND = 100;

/** How long the previous secret verifies after a rotation. */
export const INBOUND_ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export type PutTenantInboundOutcome =
  | {
      readonly type: "put";
      readonly created: boolean;
      readonly secretStored: boolean;
      readonly record: TenantInboundRecord;
    }
  | { readonly type: "too_many"; readonly limit: number };

type Row = Record<string, SqlStorageValue>;

function record(row: Row): TenantInboundRecord {
  const previous = row["previous_secret"];
  const expires = row["previous_expires_at"];
  return {
    name: String(row["name"]),
    config: JSON.parse(String(row["config"])) as JsonObject,
    secret: JSON.parse(String(row["secret"])) as SealedSecret,
    ...(typeof previous === "string" ? { previousSecret: JSON.parse(previous) as SealedSecret } : {}),
    ...(expires === null || expires === undefined ? {} : { previousSecretExpiresAt: Number(expires) }),
    createdAt: Number(row["created_at"]),
    updatedAt: Number(row["updated_at"]),
  };
}

export class TenantInboundStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS tenant_inbound (
      name TEXT PRIMARY KEY,
      config TEXT NOT NULL,
      secret TEXT NOT NULL,
      previous_secret TEXT,
      previous_expires_at INTEGER,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
  }

  /**
   * Create or replace `name`'s config. `keepSecret`: the endpoint keeps the secret it has when it exists and its
   * format is `format` (a standard endpoint's generated secret survives a PUT); otherwise `secret` is stored.
   */
  put(
    name: string,
    config: JsonObject,
    secret: SealedSecret,
    keepSecret: boolean,
    now: number,
  ): PutTenantInboundOutcome {
    const prior = this.get(name);
    if (prior === undefined) {
      const count = Number(this.#sql.exec("SELECT count(*) AS n FROM tenant_inbound").one()["n"]);
      if (count >= MAX_TENANT_INBOUND) return { type: "too_many", limit: MAX_TENANT_INBOUND };
      this.#sql.exec(
        "INSERT INTO tenant_inbound (name, config, secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        name,
        JSON.stringify(config),
        JSON.stringify(secret),
        now,
        now,
      );
    } else {
      const keep = keepSecret && prior.config["format"] === config["format"];
      if (keep) {
        this.#sql.exec(
          "UPDATE tenant_inbound SET config = ?, updated_at = ? WHERE name = ?",
          JSON.stringify(config),
          now,
          name,
        );
      } else {
        this.#sql.exec(
          "UPDATE tenant_inbound SET config = ?, secret = ?, previous_secret = NULL, previous_expires_at = NULL, updated_at = ? WHERE name = ?",
          JSON.stringify(config),
          JSON.stringify(secret),
          now,
          name,
        );
      }
    }
    const stored = this.get(name);
    if (stored === undefined) throw new Error("an inbound endpoint just written is missing");
    const secretStored = prior === undefined || !(keepSecret && prior.config["format"] === config["format"]);
    return { type: "put", created: prior === undefined, secretStored, record: stored };
  }

  get(name: string): TenantInboundRecord | undefined {
    const row = this.#sql.exec("SELECT * FROM tenant_inbound WHERE name = ?", name).toArray()[0];
    return row === undefined ? undefined : record(row);
  }

  list(): TenantInboundRecord[] {
    return this.#sql.exec("SELECT * FROM tenant_inbound ORDER BY name").toArray().map(record);
  }

  delete(name: string): boolean {
    return this.#sql.exec("DELETE FROM tenant_inbound WHERE name = ?", name).rowsWritten > 0;
  }

  /** A new secret; the current one becomes the previous, verifying until `now` + INBOUND_ROTATION_OVERLAP_MS. */
  rotate(name: string, secret: SealedSecret, now: number): TenantInboundRecord | undefined {
    const prior = this.get(name);
    if (prior === undefined) return undefined;
    this.#sql.exec(
      "UPDATE tenant_inbound SET secret = ?, previous_secret = ?, previous_expires_at = ?, updated_at = ? WHERE name = ?",
      JSON.stringify(secret),
      JSON.stringify(prior.secret),
      now + INBOUND_ROTATION_OVERLAP_MS,
      now,
      name,
    );
    return this.get(name);
  }
}
