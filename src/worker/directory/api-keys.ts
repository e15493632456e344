/**
 * A tenant's API keys (docs/users.md "API keys"), kept in its DirectoryObject's SQLite next to the session directory:
 * synchronous SQL only, so each call is one atomic step of the object. Only a hash of a key's secret is stored
 * (SHA-256, hex), never the secret: the routes (http/routes/api-keys.ts) answer it once, and the verifier
 * (identity/api-keys.ts) hashes what a request offers and asks `verify`.
 *
 * `verify` records when a key was last used at most once an hour per key (one conditional UPDATE), so a backend's
 * steady traffic costs no write per request. A deleted key's row goes at once: nothing verifies against it again.
 */

/** One key as stored (times in epoch ms). */
export interface ApiKeyRecord {
  readonly id: string;
  readonly name: string;
  readonly prefix: string;
  readonly role: "operator" | "client";
  readonly sessions?: readonly string[];
  readonly act?: readonly string[];
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  readonly expiresAt: number | null;
}

export interface ApiKeyInput {
  readonly name: string;
  readonly prefix: string;
  readonly hash: string;
  readonly role: "operator" | "client";
  readonly sessions?: readonly string[];
  readonly act?: readonly string[];
  readonly expiresAt: number | null;
}

export type CreateApiKeyOutcome =
  { readonly type: "created"; readonly record: ApiKeyRecord } | { readonly type: "too_many"; readonly limit: number };

/** How often a key's last use is written, at most (ms). */
export const LAST_USED_EVERY_MS = 3_600_000;

type Row = Record<string, SqlStorageValue>;

function listOf(value: SqlStorageValue | undefined): readonly string[] | undefined {
  return typeof value === "string" ? (JSON.parse(value) as string[]) : undefined;
}

function record(row: Row): ApiKeyRecord {
  const role = row["role"] === "operator" ? "operator" : "client";
  const sessions = listOf(row["sessions"]);
  const act = listOf(row["act"]);
  return {
    id: String(row["id"]),
    name: String(row["name"]),
    prefix: String(row["prefix"]),
    role,
    ...(sessions === undefined ? {} : { sessions }),
    ...(act === undefined ? {} : { act }),
    createdAt: Number(row["created_at"]),
    lastUsedAt: row["last_used_at"] === null ? null : Number(row["last_used_at"]),
    expiresAt: row["expires_at"] === null ? null : Number(row["expires_at"]),
  };
}

const COLUMNS = "id, name, prefix, role, sessions, act, created_at, last_used_at, expires_at";

export class ApiKeyStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS api_keys (
      id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      prefix TEXT NOT NULL,
      hash TEXT NOT NULL,
      role TEXT NOT NULL,
      sessions TEXT,
      act TEXT,
      created_at INTEGER NOT NULL,
      last_used_at INTEGER,
      expires_at INTEGER
    )`);
  }

  create(id: string, input: ApiKeyInput, limit: number, now: number): CreateApiKeyOutcome {
    const count = Number(this.#sql.exec("SELECT count(*) AS n FROM api_keys").one()["n"]);
    if (count >= limit) return { type: "too_many", limit };
    this.#sql.exec(
      `INSERT INTO api_keys (${COLUMNS}, hash) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`,
      id,
      input.name,
      input.prefix,
      input.role,
      input.sessions === undefined ? null : JSON.stringify(input.sessions),
      input.act === undefined ? null : JSON.stringify(input.act),
      now,
      input.expiresAt,
      input.hash,
    );
    const created = this.get(id);
    if (created === undefined) throw new Error("an API key just written is missing");
    return { type: "created", record: created };
  }

  get(id: string): ApiKeyRecord | undefined {
    const row = this.#sql.exec(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`, id).toArray()[0];
    return row === undefined ? undefined : record(row);
  }

  list(): ApiKeyRecord[] {
    return this.#sql.exec(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`).toArray().map(record);
  }

  delete(id: string): boolean {
    return this.#sql.exec("DELETE FROM api_keys WHERE id = ?", id).rowsWritten > 0;
  }

  /**
   * The key `id` when `hash` is its secret's hash and it has not expired at `now`; its last use is written when the one
   * recorded is more than LAST_USED_EVERY_MS old.
   */
  verify(id: string, hash: string, now: number): ApiKeyRecord | undefined {
    const row = this.#sql.exec(`SELECT ${COLUMNS}, hash FROM api_keys WHERE id = ?`, id).toArray()[0];
    if (row === undefined || !sameText(String(row["hash"]), hash)) return undefined;
    const found = record(row);
    if (found.expiresAt !== null && found.expiresAt <= now) return undefined;
    if (found.lastUsedAt === null || now - found.lastUsedAt >= LAST_USED_EVERY_MS) {
      this.#sql.exec("UPDATE api_keys SET last_used_at = ? WHERE id = ?", now, id);
      return { ...found, lastUsedAt: now };
    }
    return found;
  }
}

/** Constant-time comparison of two hex digests. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
