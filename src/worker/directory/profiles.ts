/**
 * A tenant's profiles (docs/api.md "Profiles"), kept by its DirectoryObject next to the tool catalog and
 * the templates: `profiles` holds each name's latest version and whether it is deleted; `profile_versions`
 * holds every version's sections. Synchronous SQL only, so each call is one atomic step of the object.
 *
 * Versions count from 1 per name and are never reused: a DELETE keeps the name's row (as deleted) and its
 * versions, and a later PUT makes the next version. So `(name, version)` always means the same sections,
 * and a generation that prepared its instructions from one can read it again after the profile changed or
 * was deleted.
 */
import type { ProfileRecord, ProfileSection } from "../../api/profiles.js";

/** Live profiles a tenant may hold. */
export const MAX_PROFILES = 100;

/** An `If-Match` condition: a version the caller saw, or `*` (the profile exists). */
export type ProfileIfMatch = number | "*";

export type PutProfileOutcome =
  | { readonly type: "stored"; readonly record: ProfileRecord; readonly created: boolean }
  /** `If-Match` names another version (`current`), or the profile does not exist (no `current`). */
  | { readonly type: "precondition"; readonly current?: number }
  | { readonly type: "too_many"; readonly limit: number };

export type DeleteProfileOutcome =
  | { readonly type: "deleted"; readonly name: string; readonly version: number }
  | { readonly type: "not_found" }
  | { readonly type: "precondition"; readonly current: number }
  /** Templates name it (by name, sorted): delete or change them first. */
  | { readonly type: "in_use"; readonly templates: readonly string[] };

/** The profile RPC surface of the directory, as callers see it through a stub. */
export interface ProfileRpc {
  putProfile(name: string, sections: readonly ProfileSection[], ifMatch?: ProfileIfMatch): Promise<PutProfileOutcome>;
  getProfile(name: string): Promise<ProfileRecord | undefined>;
  /** One version of a profile, also of a deleted one (what a generation prepared its instructions from). */
  getProfileVersion(name: string, version: number): Promise<ProfileRecord | undefined>;
  hasProfile(name: string): Promise<boolean>;
  listProfiles(): Promise<ProfileRecord[]>;
  deleteProfile(name: string, ifMatch?: ProfileIfMatch): Promise<DeleteProfileOutcome>;
}

interface Head {
  readonly version: number;
  readonly deleted: boolean;
}

type Row = Record<string, SqlStorageValue>;

export class ProfileStore {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS profiles (
      name TEXT PRIMARY KEY,
      version INTEGER NOT NULL,
      deleted INTEGER NOT NULL
    )`);
    sql.exec(`CREATE TABLE IF NOT EXISTS profile_versions (
      name TEXT NOT NULL,
      version INTEGER NOT NULL,
      sections TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (name, version)
    )`);
  }

  put(name: string, sections: readonly ProfileSection[], now: number, ifMatch?: ProfileIfMatch): PutProfileOutcome {
    const head = this.#head(name);
    const live = head !== undefined && !head.deleted;
    if (ifMatch !== undefined && (!live || (ifMatch !== "*" && ifMatch !== head.version)))
      return { type: "precondition", ...(live ? { current: head.version } : {}) };
    if (!live && this.#liveCount() >= MAX_PROFILES) return { type: "too_many", limit: MAX_PROFILES };
    const version = (head?.version ?? 0) + 1;
    this.#sql.exec(
      "INSERT INTO profile_versions (name, version, sections, created_at) VALUES (?, ?, ?, ?)",
      name,
      version,
      JSON.stringify(sections),
      now,
    );
    this.#sql.exec(
      `INSERT INTO profiles (name, version, deleted) VALUES (?, ?, 0)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, deleted = 0`,
      name,
      version,
    );
    return { type: "stored", created: !live, record: { name, version, sections: [...sections], createdAt: now } };
  }

  /** The latest version of a live profile. */
  get(name: string): ProfileRecord | undefined {
    const head = this.#head(name);
    return head === undefined || head.deleted ? undefined : this.version(name, head.version);
  }

  version(name: string, version: number): ProfileRecord | undefined {
    const row = this.#sql
      .exec("SELECT * FROM profile_versions WHERE name = ? AND version = ?", name, version)
      .toArray()[0];
    return row === undefined ? undefined : profileRecord(row);
  }

  has(name: string): boolean {
    const head = this.#head(name);
    return head !== undefined && !head.deleted;
  }

  /** The live profiles' latest versions, by name. */
  list(): ProfileRecord[] {
    return this.#sql
      .exec(
        `SELECT v.* FROM profiles p JOIN profile_versions v ON v.name = p.name AND v.version = p.version
         WHERE p.deleted = 0 ORDER BY p.name`,
      )
      .toArray()
      .map(profileRecord);
  }

  /** Delete a live profile unless `templates` (the templates naming it) is not empty; its versions stay. */
  delete(name: string, templates: readonly string[], ifMatch?: ProfileIfMatch): DeleteProfileOutcome {
    const head = this.#head(name);
    if (head === undefined || head.deleted) return { type: "not_found" };
    if (ifMatch !== undefined && ifMatch !== "*" && ifMatch !== head.version)
      return { type: "precondition", current: head.version };
    if (templates.length > 0) return { type: "in_use", templates: [...templates].sort() };
    this.#sql.exec("UPDATE profiles SET deleted = 1 WHERE name = ?", name);
    return { type: "deleted", name, version: head.version };
  }

  #head(name: string): Head | undefined {
    const row = this.#sql.exec("SELECT version, deleted FROM profiles WHERE name = ?", name).toArray()[0];
    return row === undefined ? undefined : { version: Number(row["version"]), deleted: Number(row["deleted"]) === 1 };
  }

  #liveCount(): number {
    return Number(this.#sql.exec("SELECT count(*) AS n FROM profiles WHERE deleted = 0").one()["n"]);
  }
}

function profileRecord(row: Row): ProfileRecord {
  return {
    name: String(row["name"]),
    version: Number(row["version"]),
    sections: JSON.parse(String(row["sections"])) as ProfileSection[],
    createdAt: Number(row["created_at"]),
  };
}
