/**
 * User revocation on the request path (docs/users.md "Revocation"): a user token (role `user`, and the
 * watch tokens minted with one) whose `iat` is before its user's revocation time is refused with 401.
 * The time lives in the tenant's DirectoryObject; each isolate caches it per tenant and user for at
 * most REVOCATION_CACHE_MS, so a user's requests cost one small directory read a minute per isolate.
 * The isolate that serves a revocation learns it at once.
 */
import { directoryStub } from "../directory/object.js";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import type { Claims } from "../schemas.js";

/** How long an isolate trusts what it read of a user's revocation. */
export const REVOCATION_CACHE_MS = 60_000;
/** Users an isolate remembers (oldest read first go). */
const MAX_CACHED = 10_000;

const cache = new Map<string, { readonly revokedAt: number | undefined; readonly readAt: number }>();

function key(tenant: string, sub: string): string {
  return `${tenant}\u0000${sub}`;
}

function remember(tenant: string, sub: string, revokedAt: number | undefined): void {
  const k = key(tenant, sub);
  cache.delete(k);
  cache.set(k, { revokedAt, readAt: Date.now() });
  if (cache.size > MAX_CACHED) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
}

/** `sub`'s revocation time (Unix seconds), read through the isolate's cache. */
export async function revokedAt(env: Env, tenant: string, sub: string): Promise<number | undefined> {
  const hit = cache.get(key(tenant, sub));
  if (hit !== undefined && Date.now() - hit.readAt < REVOCATION_CACHE_MS) return hit.revokedAt;
  const at = await directoryStub(env, tenant).revokedAt(sub);
  remember(tenant, sub, at);
  return at;
}

/** This isolate revoked (or learned of a revocation of) `sub`: no need to wait for its cache. */
export function noteRevocation(tenant: string, sub: string, at: number): void {
  remember(tenant, sub, at);
}

/** Whether a token issued at `iat` (Unix seconds; none: before any time) falls under a revocation at `at`. */
export function isRevoked(iat: number | undefined, at: number | undefined): boolean {
  return at !== undefined && (iat === undefined || iat < at);
}

/** Refuse (401) a user token issued before its user's revocation; other roles pass. */
export async function refuseRevoked(env: Env, claims: Claims): Promise<void> {
  if (claims.role !== "user" || claims.sub === undefined) return;
  const at = await revokedAt(env, claims.tenant, claims.sub);
  if (isRevoked(claims.iat, at)) {
    throw new Problem(
      "unauthorized",
      `the tokens of user ${claims.sub} issued before ${new Date((at ?? 0) * 1000).toISOString()} were revoked; get a new token`,
      "token.iat",
    );
  }
}
