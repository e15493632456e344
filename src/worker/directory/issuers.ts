/**
 * A tenant's identity providers (docs/users.md "Identity providers"), kept in its DirectoryObject's
 * SQLite next to the session directory: synchronous SQL only, so each call is one atomic step of the
 * object. The routes (http/routes/issuers.ts) validate bodies; the token verifier (identity/issuer-tokens.ts) reads
 * `list` at most once per its cache's TTL per isolate.
 */

/** One registration as stored (times in epoch ms). */
export interface IssuerRecord {
  readonly name: string;
  readonly issuer: string;
  readonly jwksUri: string;
  readonly audience: string;
  readonly subClaim: string;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface IssuerInput {
  readonly issuer: string;
  readonly jwksUri: string;
  readonly audience: string;
  readonly subClaim: string;
}

export type PutIssuerOutcome =
  | { readonly type: "stored"; readonly record: IssuerRecord; readonly created: boolean }
  /** Another registration already accepts this issuer and audience (tokens could not tell them apart). */
  | { readonly type: "duplicate"; readonly other: string }
  | { readonly type: "too_many"; readonly limit: number };

type Row = Record<string, SqlStorageValue>;

export class IssuerStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS issuers (
      name TEXT PRIMARY KEY,
      issuer TEXT NOT NULL,
      jwks_uri TEXT NOT NULL,
      audience TEXT NOT NULL,
      sub_claim TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
  }

  /** Create or replace `name`; at most `limit` registrations, and one per (issuer, audience). */
  put(name: string, input: IssuerInput, limit: number, now: number): PutIssuerOutcome {
    const current = this.get(name);
    const clash = this.#sql
      .exec(
        "SELECT name FROM issuers WHERE issuer = ? AND audience = ? AND name <> ? LIMIT 1",
        input.issuer,
        input.audience,
        name,
      )
      .toArray()[0];
    if (clash !== undefined) return { type: "duplicate", other: String(clash["name"]) };
    if (current === undefined && Number(this.#sql.exec("SELECT count(*) AS n FROM issuers").one()["n"]) >= limit)
      return { type: "too_many", limit };
    this.#sql.exec(
      `INSERT INTO issuers (name, issuer, jwks_uri, audience, sub_claim, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET issuer = excluded.issuer, jwks_uri = excluded.jwks_uri, audience = excluded.audience,
         sub_claim = excluded.sub_claim, updated_at = excluded.updated_at`,
      name,
      input.issuer,
      input.jwksUri,
      input.audience,
      input.subClaim,
      now,
      now,
    );
    const record = this.get(name);
    if (record === undefined) throw new Error(`issuer ${name} was written but cannot be read`);
    return { type: "stored", record, created: current === undefined };
  }

  /** Every registration, by name. */
  list(): IssuerRecord[] {
    return this.#sql.exec("SELECT * FROM issuers ORDER BY name").toArray().map(record);
  }

  get(name: string): IssuerRecord | undefined {
    const row = this.#sql.exec("SELECT * FROM issuers WHERE name = ?", name).toArray()[0];
    return row === undefined ? undefined : record(row);
  }

  delete(name: string): boolean {
    if (this.get(name) === undefined) return false;
    this.#sql.exec("DELETE FROM issuers WHERE name = ?", name);
    return true;
  }
}

function record(row: Row): IssuerRecord {
  return {
    name: String(row["name"]),
    issuer: String(row["issuer"]),
    jwksUri: String(row["jwks_uri"]),
    audience: String(row["audience"]),
    subClaim: String(row["sub_claim"]),
    createdAt: Number(row["created_at"]),
    updatedAt: Number(row["updated_at"]),
  };
}
