/**
 * The hash an erasure keeps of the user it erased (docs/operations.md "Deleting a user's data"): the record and the
 * `user.erased` event name the user by it, never by the sub. Two versions, each record carrying its own:
 *
 *   version 1  SHA-256(sub), hex. Records written before the keyed hash: anyone holding a list of candidate subs
 *              (emails, say) could find the erased one among them, so nothing new is written this way.
 *   version 2  HMAC-SHA-256(tenant key, sub), hex, where tenant key = HMAC-SHA-256(SUBJECT_HASH_KEY,
 *              "pico-edge subject-hash:" + tenant). Without the secret the hash names no one; per tenant, so two
 *              tenants' records of one sub do not match.
 *
 * SUBJECT_HASH_KEY is never rotated: a record's hash is compared with the hash of a sub presented later (its tokens,
 * its sessions' rows), so a new key would unlink every record made under the old one. A check compares under both
 * versions, so erasures recorded before the keyed hash keep refusing their user.
 */
import type { Env } from "../env.js";
import { Problem } from "../problems.js";

/** Which hash a record holds (absent in older records and messages: 1). */
export type SubHashVersion = 1 | 2;

/** What new records are written with. */
export const SUB_HASH_VERSION = 2 satisfies SubHashVersion;

/** The shortest key accepted (characters of SUBJECT_HASH_KEY). */
export const SUBJECT_HASH_KEY_MIN_LENGTH = 32;

/** One sub's hash under each version; `v2` undefined: nothing keyed to compare with (no tenant known yet). */
export interface SubHashes {
  readonly v1: string;
  readonly v2: string | undefined;
}

const encoder = new TextEncoder();
/** Per tenant key, by secret and tenant (the secret does not change while an isolate lives, but a test may bind another). */
const tenantKeys = new Map<string, Promise<CryptoKey>>();

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Whether SUBJECT_HASH_KEY is set (to a usable value). */
export function subjectHashKeySet(env: Env): boolean {
  const key = env.SUBJECT_HASH_KEY;
  return key !== undefined && key.length >= SUBJECT_HASH_KEY_MIN_LENGTH;
}

/** The problem a missing key is: 500 `misconfigured`, naming the secret. */
export function subjectHashKeyMissing(): Problem {
  return new Problem(
    "misconfigured",
    `SUBJECT_HASH_KEY is not set (wrangler secret put SUBJECT_HASH_KEY; .dev.vars in development; at least ${SUBJECT_HASH_KEY_MIN_LENGTH} characters, never rotated)`,
  );
}

function tenantKey(secret: string, tenant: string): Promise<CryptoKey> {
  const cacheKey = `${secret.length}:${secret}\u0000${tenant}`;
  let key = tenantKeys.get(cacheKey);
  if (key === undefined) {
    key = (async () => {
      const master = await crypto.subtle.importKey(
        "raw",
        encoder.encode(secret),
        { name: "HMAC", hash: "SHA-256" },
        false,
        ["sign"],
      );
      const bits = await crypto.subtle.sign("HMAC", master, encoder.encode(`pico-edge subject-hash:${tenant}`));
      return crypto.subtle.importKey("raw", bits, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    })();
    tenantKeys.set(cacheKey, key);
  }
  return key;
}

/** Version 1: SHA-256 of `sub`, hex. */
export async function plainSubHash(sub: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", encoder.encode(sub)));
}

/** Version 2: the keyed hash of `sub` for `tenant`, hex. A missing SUBJECT_HASH_KEY is a `misconfigured` problem. */
export async function keyedSubHash(env: Env, tenant: string, sub: string): Promise<string> {
  if (!subjectHashKeySet(env)) throw subjectHashKeyMissing();
  const secret = env.SUBJECT_HASH_KEY ?? "";
  return hex(await crypto.subtle.sign("HMAC", await tenantKey(secret, tenant), encoder.encode(sub)));
}

/** `sub`'s hash under `version` (a record's, to compare with it). */
export function subHashAt(env: Env, tenant: string, sub: string, version: SubHashVersion): Promise<string> {
  switch (version) {
    case 1:
      return plainSubHash(sub);
    case 2:
      return keyedSubHash(env, tenant, sub);
    default: {
      const never: never = version;
      return never;
    }
  }
}

/** Both versions of `sub`'s hash; `tenant` undefined: only version 1 (nothing keyed is recorded). */
export async function subHashes(env: Env, tenant: string | undefined, sub: string): Promise<SubHashes> {
  const v1 = await plainSubHash(sub);
  return { v1, v2: tenant === undefined ? undefined : await keyedSubHash(env, tenant, sub) };
}

/** A stored version (a column or an optional field): anything but 2 is 1, the version before it had one. */
export function subHashVersionOf(value: unknown): SubHashVersion {
  return value === 2 ? 2 : 1;
}
