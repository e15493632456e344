/**
 * A session's owner (docs/users.md): the end user (`sub`) whose token created it, kept in the session
 * object's synchronous KV storage. Written before the creating commit, so a session never exists without
 * the owner it was created for; a session without one (created by a client or operator token) is the
 * tenant's, and no user token reaches it except through a grant. `deleteAll` removes it with the rest.
 */
import type { ErasedOwner } from "../directory/erasures.js";
import { subHashAt, type SubHashVersion } from "../directory/subject-hash.js";
import type { Env } from "../env.js";

/**
 * Where the HTTP layer creates a session: its tenant and name, and for a user token the owner it records
 * (`granted`: a grant of the token reaches the name, so an existing session of another owner is not refused).
 */
export interface SessionWhere {
  readonly tenant: string;
  readonly session: string;
  readonly owner?: string;
  readonly granted?: boolean;
}

/** A session by its tenant and name. */
export interface SessionAt {
  readonly tenant: string;
  readonly session: string;
}

export { sessionObjectName } from "../env.js";

/**
 * The owner check as a session stub serves it (SessionObject.reaches), typed here so auth needs nothing of the object.
 */
export interface OwnerCheck {
  reaches(sub: string, creating: boolean): Promise<boolean>;
}

const KEY = "edge.owner";

/**
 * The owner as last read from each object's KV (null: none), so a user's request does not read it again: every op a
 * user token makes checks it. Only `recordOwner` writes the key, and it (like every `deleteAll`, through
 * `forgetOwner`) drops the copy instead of setting it, so a write a failed transaction rolled back is never believed.
 */
const owners = new WeakMap<SyncKvStorage, string | null>();

export function readOwner(kv: SyncKvStorage): string | undefined {
  const known = owners.get(kv);
  if (known !== undefined) return known ?? undefined;
  const owner = kv.get<string>(KEY);
  owners.set(kv, owner ?? null);
  return owner;
}

export function recordOwner(kv: SyncKvStorage, owner: string | undefined): void {
  owners.delete(kv);
  if (owner === undefined) kv.delete(KEY);
  else kv.put(KEY, owner);
}

/** The object's storage was wiped (`deleteAll`): read the owner from storage again. */
export function forgetOwner(kv: SyncKvStorage): void {
  owners.delete(kv);
}

/**
 * Whether a user erasure may delete the session (`where`): its owner is the erased user (by the sub's hash, under the
 * record's version) and it was created (`createdAt`, epoch ms; undefined: not over HTTP) before the erasure's cutoff.
 * A name deleted and created again by another user, or by the same user after the cutoff, is not the erasure's.
 */
export async function isErasedOwner(
  env: Env,
  where: SessionAt,
  kv: SyncKvStorage,
  createdAt: number | undefined,
  erased: ErasedOwner,
): Promise<boolean> {
  const owner = readOwner(kv);
  if (owner === undefined || createdAt === undefined || createdAt >= erased.createdBefore) return false;
  const version: SubHashVersion = erased.subHashVersion ?? 1;
  return (await subHashAt(env, where.tenant, owner, version)) === erased.subHash;
}

/** Whether end user `sub` reaches the session: it owns it, or it does not exist yet and is being created. */
export function ownerReaches(kv: SyncKvStorage, created: boolean, sub: string, creating: boolean): boolean {
  return created ? readOwner(kv) === sub : creating;
}
