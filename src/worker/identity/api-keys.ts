/**
 * API keys on the request path (docs/users.md "API keys"): a bearer credential that starts with `pe_live_` is a key,
 * not a JWT. Its secret is `pe_live_` + the tenant (base64url) + `.` + the key's id (16 hex) + `.` + 32 random bytes
 * (base64url); the tenant's DirectoryObject keeps only the SHA-256 of the whole secret (directory/api-keys.ts).
 *
 * A key verified in this isolate is trusted for at most API_KEY_CACHE_MS (5 s): a backend's requests cost one small
 * directory read per isolate every 5 s, and a deleted key is refused at once in the isolate that served the delete
 * (`forgetApiKey`) and within 5 s everywhere. Every refusal is one 401 whose detail names no part of the credential.
 *
 * A key acts as a token of its role would: its claims are `{ tenant, role, sessions?, act?, iat, exp }`, with `exp`
 * the key's expiry or the deployment's longest token lifetime from now (what a watch token minted with it may reach).
 */
import { directoryStub } from "../directory/object.js";
import type { ApiKeyRecord } from "../directory/api-keys.js";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { tenantName, type Claims } from "../schemas.js";
import { API_KEY_PREFIX } from "../../api/api-keys.js";
import { hostClock } from "../platform/host-config.js";

/** How long an isolate trusts a key it verified, ms. */
export const API_KEY_CACHE_MS = 5_000;
/** Keys an isolate remembers (all go when it is full). */
const KEPT = 4_096;

interface Known {
  readonly tenant: string;
  readonly record: ApiKeyRecord;
  readonly readAt: number;
}

/** By the hash of the secret: the isolate never keeps a secret it was shown. */
const cache = new Map<string, Known>();

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

function unbase64url(text: string): string | undefined {
  try {
    const padded = text.replaceAll("-", "+").replaceAll("_", "/");
    const binary = atob(padded + "=".repeat((4 - (padded.length % 4)) % 4));
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
      Uint8Array.from(binary, (char) => char.charCodeAt(0)),
    );
  } catch {
    return undefined;
  }
}

/** Whether a bearer credential is an API key (not a JWT). */
export function isApiKey(credential: string): boolean {
  return credential.startsWith(API_KEY_PREFIX);
}

/** SHA-256 of a secret, hex: what the directory stores and compares. */
export async function secretHash(secret: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(secret));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** A new key of `tenant`: its id (`ak_...`), the secret answered once, and the prefix its listing shows. */
export function newApiKey(tenant: string): { readonly id: string; readonly secret: string; readonly prefix: string } {
  const hex = Array.from(crypto.getRandomValues(new Uint8Array(8)), (byte) => byte.toString(16).padStart(2, "0")).join(
    "",
  );
  const prefix = `${API_KEY_PREFIX}${base64url(encoder.encode(tenant))}.${hex}`;
  const secret = `${prefix}.${base64url(crypto.getRandomValues(new Uint8Array(32)))}`;
  return { id: `ak_${hex}`, secret, prefix };
}

/** The one answer to a key that does not verify, whatever the reason: it repeats nothing of what was offered. */
function refused(): Problem {
  return new Problem(
    "unauthorized",
    "the API key does not verify (unknown, deleted or expired); create a new one with POST /v1/api-keys",
    "authorization",
  );
}

/** The tenant and key id a secret names, or undefined when it is not shaped like one. */
function parts(secret: string): { readonly tenant: string; readonly id: string } | undefined {
  const match = /^([A-Za-z0-9_-]{1,200})\.([0-9a-f]{16})\.[A-Za-z0-9_-]{43}$/.exec(secret.slice(API_KEY_PREFIX.length));
  if (match === null) return undefined;
  const tenant = unbase64url(match[1] ?? "");
  if (tenant === undefined || !tenantName.safeParse(tenant).success) return undefined;
  return { tenant, id: `ak_${match[2] ?? ""}` };
}

/** The claims a verified key acts with. */
function claimsOf(tenant: string, record: ApiKeyRecord, maxLifetime: number): Claims {
  const now = Math.floor(hostClock().now() / 1000);
  const latest = now + maxLifetime;
  const exp = record.expiresAt === null ? latest : Math.min(latest, Math.floor(record.expiresAt / 1000));
  return {
    tenant,
    role: record.role,
    ...(record.sessions === undefined ? {} : { sessions: [...record.sessions] }),
    ...(record.act === undefined ? {} : { act: record.act as Claims["act"] }),
    apiKey: record.id,
    iat: now,
    exp,
  };
}

/** Verify an API key (401 `unauthorized` for anything wrong) and answer the claims it acts with. */
export async function verifyApiKey(secret: string, env: Env, maxLifetime: number): Promise<Claims> {
  const named = parts(secret);
  if (named === undefined) throw refused();
  const hash = await secretHash(secret);
  const now = hostClock().now();
  const known = cache.get(hash);
  if (known !== undefined && now - known.readAt < API_KEY_CACHE_MS) {
    if (known.record.expiresAt !== null && known.record.expiresAt <= now) throw refused();
    return claimsOf(known.tenant, known.record, maxLifetime);
  }
  cache.delete(hash);
  const record = await directoryStub(env, named.tenant).verifyApiKey(named.id, hash);
  if (record === undefined) throw refused();
  if (cache.size >= KEPT) cache.clear();
  cache.set(hash, { tenant: named.tenant, record, readAt: now });
  return claimsOf(named.tenant, record, maxLifetime);
}

/** This isolate deleted key `id` of `tenant`: refuse it here at once, without waiting for the cache. */
export function forgetApiKey(tenant: string, id: string): void {
  for (const [hash, known] of cache) if (known.tenant === tenant && known.record.id === id) cache.delete(hash);
}
