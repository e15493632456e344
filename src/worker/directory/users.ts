/**
 * What a tenant's DirectoryObject keeps for its end users (docs/users.md), next to the session
 * directory: session templates (`/v1/templates`), user revocations (`POST /v1/users/{sub}/revoke`) and
 * which sessions hold a user's open watches, so a revocation reaches them. Synchronous SQL only, so
 * each call is one atomic step of the object.
 *
 * Templates are versioned by one counter (each PUT and DELETE bumps it and stamps the row), so a row's
 * version is its ETag and a deleted-then-recreated template never reuses an old one.
 *
 * A watch row (sub, session, until) says the session may hold a watch of that user until `until`
 * (its token's expiry, Unix seconds); rows past it are pruned, since such a watch has closed itself.
 */
import type { TemplateDefinition, TemplateRecord } from "../../api/templates.js";

/** Templates a tenant may define. */
export const MAX_TEMPLATES = 100;

/** An `If-Match` condition: a version the caller saw, or `*` (the template exists). */
export type TemplateIfMatch = number | "*";

export type PutTemplateOutcome =
  | { readonly type: "stored"; readonly record: TemplateRecord; readonly created: boolean }
  | { readonly type: "precondition"; readonly current?: number }
  | { readonly type: "too_many"; readonly limit: number }
  /** The template names a profile the tenant does not hold (decided by the DirectoryObject). */
  | { readonly type: "unknown_profile"; readonly profile: string };

export type DeleteTemplateOutcome =
  | { readonly type: "deleted" }
  | { readonly type: "not_found" }
  | { readonly type: "precondition"; readonly current: number };

/** What a revocation answers: the time, and the sessions that may hold that user's open watches. */
export interface Revocation {
  readonly revokedAt: number;
  readonly sessions: readonly string[];
}

type Row = Record<string, SqlStorageValue>;

export class UserStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS templates (
      name TEXT PRIMARY KEY,
      version INTEGER NOT NULL,
      definition TEXT NOT NULL,
      updated_at INTEGER NOT NULL
    )`);
    sql.exec(
      "CREATE TABLE IF NOT EXISTS template_counter (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
    );
    sql.exec("CREATE TABLE IF NOT EXISTS user_revocations (sub TEXT PRIMARY KEY, revoked_at INTEGER NOT NULL)");
    sql.exec(
      "CREATE TABLE IF NOT EXISTS user_watches (sub TEXT NOT NULL, session TEXT NOT NULL, until INTEGER NOT NULL, PRIMARY KEY (sub, session))",
    );
  }

  // Templates ---------------------------------------------------------------------------------------

  putTemplate(
    name: string,
    definition: TemplateDefinition,
    now: number,
    ifMatch?: TemplateIfMatch,
  ): PutTemplateOutcome {
    const current = this.getTemplate(name);
    if (ifMatch !== undefined && (current === undefined || (ifMatch !== "*" && ifMatch !== current.version))) {
      return { type: "precondition", ...(current === undefined ? {} : { current: current.version }) };
    }
    if (
      current === undefined &&
      Number(this.#sql.exec("SELECT count(*) AS n FROM templates").one()["n"]) >= MAX_TEMPLATES
    ) {
      return { type: "too_many", limit: MAX_TEMPLATES };
    }
    const version = this.#bump();
    this.#sql.exec(
      `INSERT INTO templates (name, version, definition, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, definition = excluded.definition, updated_at = excluded.updated_at`,
      name,
      version,
      JSON.stringify(definition),
      now,
    );
    return {
      type: "stored",
      created: current === undefined,
      record: { ...definition, userSettable: [...definition.userSettable], name, version, updatedAt: now },
    };
  }

  getTemplate(name: string): TemplateRecord | undefined {
    const row = this.#sql.exec("SELECT * FROM templates WHERE name = ?", name).toArray()[0];
    return row === undefined ? undefined : templateRecord(row);
  }

  listTemplates(): TemplateRecord[] {
    return this.#sql.exec("SELECT * FROM templates ORDER BY name").toArray().map(templateRecord);
  }

  deleteTemplate(name: string, ifMatch?: TemplateIfMatch): DeleteTemplateOutcome {
    const current = this.getTemplate(name);
    if (current === undefined) return { type: "not_found" };
    if (ifMatch !== undefined && ifMatch !== "*" && ifMatch !== current.version)
      return { type: "precondition", current: current.version };
    this.#bump();
    this.#sql.exec("DELETE FROM templates WHERE name = ?", name);
    return { type: "deleted" };
  }

  #bump(): number {
    const row = this.#sql.exec("SELECT version FROM template_counter WHERE id = 1").toArray()[0];
    const version = (row === undefined ? 0 : Number(row["version"])) + 1;
    this.#sql.exec(
      "INSERT INTO template_counter (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version",
      version,
    );
    return version;
  }

  // Revocation and watches --------------------------------------------------------------------------

  /** When `sub`'s tokens were last revoked (Unix seconds: an earlier `iat` is refused), if ever. */
  revokedAt(sub: string): number | undefined {
    const row = this.#sql.exec("SELECT revoked_at FROM user_revocations WHERE sub = ?", sub).toArray()[0];
    return row === undefined ? undefined : Number(row["revoked_at"]);
  }

  /** Refuse `sub`'s tokens issued before `at`; answers the sessions that may hold its open watches. */
  revoke(sub: string, at: number): Revocation {
    this.#sql.exec(
      "INSERT INTO user_revocations (sub, revoked_at) VALUES (?, ?) ON CONFLICT (sub) DO UPDATE SET revoked_at = max(revoked_at, excluded.revoked_at)",
      sub,
      at,
    );
    this.#prune(at);
    const sessions = this.#sql
      .exec("SELECT session FROM user_watches WHERE sub = ? ORDER BY session", sub)
      .toArray()
      .map((row) => String(row["session"]));
    return { revokedAt: this.revokedAt(sub) ?? at, sessions };
  }

  /**
   * A watch of `sub` is opening in `session` and may stay open until `until` (Unix seconds): recorded,
   * so a later revocation reaches it. Answers the revocation time, so the opener refuses a revoked token.
   */
  watching(sub: string, session: string, until: number, now: number): number | undefined {
    this.#prune(now);
    this.#sql.exec(
      "INSERT INTO user_watches (sub, session, until) VALUES (?, ?, ?) ON CONFLICT (sub, session) DO UPDATE SET until = max(until, excluded.until)",
      sub,
      session,
      until,
    );
    return this.revokedAt(sub);
  }

  #prune(now: number): void {
    this.#sql.exec("DELETE FROM user_watches WHERE until < ?", now);
  }
}

function templateRecord(row: Row): TemplateRecord {
  const definition = JSON.parse(String(row["definition"])) as TemplateDefinition;
  return {
    ...definition,
    userSettable: [...definition.userSettable],
    name: String(row["name"]),
    version: Number(row["version"]),
    updatedAt: Number(row["updated_at"]),
  };
}
