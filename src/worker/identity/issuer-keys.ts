/**
 * The signing keys of tenants' identity providers (docs/users.md "Identity providers"): each provider's
 * JWKS, fetched through the host's fetch seam (platform/host-config.ts `hostFetch`, so tests can route it) and
 * kept at three levels:
 *
 *   1. this isolate's memory, one entry per `jwksUri`, until the provider's `max-age` (clamped to
 *      JWKS_MAX_AGE) runs out;
 *   2. the Cache API (`caches.default`, keyed by the `jwksUri`), so a fresh isolate (isolates recycle
 *      often) does not fetch again: a provider sees a fetch per data centre and max-age, not per isolate;
 *   3. the provider itself.
 *
 * Loads are single-flight per isolate: concurrent requests share one promise per `jwksUri`. A token
 * whose `kid` is in no key of the set refetches the set once, bypassing the Cache API, and at most once
 * per UNKNOWN_KID_COOLDOWN_MS per `jwksUri`, so a flood of made-up `kid`s cannot hammer the provider
 * (after a refetch, later unknown `kid`s are refused until the cooldown has passed). A refetch that
 * fails keeps the keys already held for STALE_GRACE_MS, so a provider's outage does not sign everyone out.
 */
import { createLocalJWKSet, type JSONWebKeySet } from "jose";
import { hostClock, hostFetch } from "../platform/host-config.js";

/** How long a set is used, seconds: the provider's `Cache-Control: max-age` within these bounds, else the default. */
export const JWKS_MAX_AGE = { default: 600, min: 60, max: 86_400 } as const;

/** After a refetch for an unknown `kid`, another waits this long (ms). */
export const UNKNOWN_KID_COOLDOWN_MS = 30_000;

/** A failed refresh keeps the previous keys this much longer (ms). */
export const STALE_GRACE_MS = 60_000;

/** A JWKS document's largest size, bytes. */
export const MAX_JWKS_BYTES = 65_536;

/** How long a fetch of a JWKS may take, ms. */
export const JWKS_FETCH_TIMEOUT_MS = 5_000;

/** Providers' sets one isolate keeps (the oldest is dropped beyond this). */
const MAX_SETS = 256;

/** The header the Cache API copy carries its expiry in (epoch ms). */
const EXPIRES_HEADER = "x-jwks-expires-at";

export type KeyResolver = ReturnType<typeof createLocalJWKSet>;

/** One loaded set: its key resolver, until when it is used, and a generation (each load gets a new one). */
export interface KeySet {
  readonly resolve: KeyResolver;
  readonly expiresAt: number;
  readonly generation: number;
}

interface ProviderState {
  entry?: KeySet;
  inFlight?: Promise<KeySet>;
  /** When a refetch for an unknown `kid` last started (epoch ms). */
  lastKidRefetchAt?: number;
}

const providers = new Map<string, ProviderState>();
let generations = 0;

/** Test only: forget every set this isolate holds, as a recycled isolate would (the Cache API keeps its copies). */
export function resetIssuerKeys(): void {
  providers.clear();
}

function stateOf(jwksUri: string): ProviderState {
  let state = providers.get(jwksUri);
  if (state === undefined) {
    state = {};
    providers.set(jwksUri, state);
    if (providers.size > MAX_SETS) {
      const oldest = providers.keys().next().value;
      if (oldest !== undefined) providers.delete(oldest);
    }
  }
  return state;
}

/** The provider's keys: memory while fresh, else the Cache API, else a fetch (single-flight). */
export async function keySet(jwksUri: string): Promise<KeySet> {
  const state = stateOf(jwksUri);
  const now = hostClock().now();
  if (state.entry !== undefined && state.entry.expiresAt > now) return state.entry;
  return state.inFlight ?? load(jwksUri, state, "cached");
}

/**
 * `seen` had no key for the token's `kid`: a newer set if another request loaded one since, else a
 * refetch from the provider (shared with concurrent callers), or `undefined` while the cooldown after
 * the last such refetch lasts.
 */
export async function keySetAfterUnknownKid(jwksUri: string, seen: KeySet): Promise<KeySet | undefined> {
  const state = stateOf(jwksUri);
  if (state.entry !== undefined && state.entry.generation !== seen.generation) return state.entry;
  if (state.inFlight !== undefined) return state.inFlight;
  const now = hostClock().now();
  if (state.lastKidRefetchAt !== undefined && now - state.lastKidRefetchAt < UNKNOWN_KID_COOLDOWN_MS) return undefined;
  state.lastKidRefetchAt = now;
  return load(jwksUri, state, "fresh");
}

function load(jwksUri: string, state: ProviderState, mode: "cached" | "fresh"): Promise<KeySet> {
  const promise = (async (): Promise<KeySet> => {
    const now = hostClock().now();
    if (mode === "cached") {
      const copy = await fromCache(jwksUri, now);
      if (copy !== undefined) return install(state, copy.jwks, copy.expiresAt);
    }
    let fetched: { readonly jwks: JSONWebKeySet; readonly maxAge: number };
    try {
      fetched = await fetchJwks(jwksUri);
    } catch (error) {
      if (state.entry === undefined) throw error;
      return install(state, undefined, now + STALE_GRACE_MS);
    }
    const expiresAt = now + fetched.maxAge * 1000;
    await toCache(jwksUri, fetched.jwks, fetched.maxAge, expiresAt);
    return install(state, fetched.jwks, expiresAt);
  })();
  state.inFlight = promise;
  const settle = (): void => {
    if (state.inFlight === promise) delete state.inFlight;
  };
  promise.then(settle, settle);
  return promise;
}

/** A new entry with `jwks`, or (undefined) the current entry's keys kept longer after a failed refresh. */
function install(state: ProviderState, jwks: JSONWebKeySet | undefined, expiresAt: number): KeySet {
  const resolve = jwks === undefined ? state.entry?.resolve : createLocalJWKSet(jwks);
  if (resolve === undefined) throw new Error("no keys to keep");
  generations += 1;
  const entry: KeySet = { resolve, expiresAt, generation: generations };
  state.entry = entry;
  return entry;
}

/** Why a provider's keys could not be had (the verifier answers 401 naming it). */
export class JwksUnavailable extends Error {
  override readonly name = "JwksUnavailable";
}

async function fetchJwks(jwksUri: string): Promise<{ readonly jwks: JSONWebKeySet; readonly maxAge: number }> {
  let response: Response;
  try {
    response = await hostFetch()(
      new Request(jwksUri, {
        headers: { accept: "application/json" },
        signal: AbortSignal.timeout(JWKS_FETCH_TIMEOUT_MS),
      }),
    );
  } catch (error) {
    throw new JwksUnavailable(
      `the identity provider's keys could not be fetched: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const text = await response.text();
  if (response.status !== 200) throw new JwksUnavailable(`the identity provider's JWKS answered ${response.status}`);
  if (new TextEncoder().encode(text).length > MAX_JWKS_BYTES)
    throw new JwksUnavailable(`the identity provider's JWKS is over ${MAX_JWKS_BYTES} bytes`);
  const jwks = jwksOf(text);
  if (jwks === undefined) throw new JwksUnavailable("the identity provider's JWKS is not a JSON Web Key Set");
  return { jwks, maxAge: maxAgeOf(response.headers.get("cache-control")) };
}

function jwksOf(text: string): JSONWebKeySet | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || !Array.isArray((value as { keys?: unknown }).keys))
      return undefined;
    const jwks = value as JSONWebKeySet;
    createLocalJWKSet(jwks);
    return jwks;
  } catch {
    return undefined;
  }
}

/** The provider's `max-age` within JWKS_MAX_AGE (`no-store`/`no-cache`: the minimum), in seconds. */
export function maxAgeOf(cacheControl: string | null): number {
  if (cacheControl === null) return JWKS_MAX_AGE.default;
  if (/(?:^|[,\s])no-(?:store|cache)\b/i.test(cacheControl)) return JWKS_MAX_AGE.min;
  const match = /(?:^|[,\s])max-age=(\d{1,10})\b/i.exec(cacheControl);
  if (match === null) return JWKS_MAX_AGE.default;
  return Math.min(JWKS_MAX_AGE.max, Math.max(JWKS_MAX_AGE.min, Number(match[1])));
}

function cache(): Cache | undefined {
  return typeof caches === "undefined" ? undefined : caches.default;
}

async function fromCache(
  jwksUri: string,
  now: number,
): Promise<{ readonly jwks: JSONWebKeySet; readonly expiresAt: number } | undefined> {
  try {
    const response = await cache()?.match(jwksUri);
    if (response === undefined) return undefined;
    const expiresAt = Number(response.headers.get(EXPIRES_HEADER));
    const jwks = jwksOf(await response.text());
    if (jwks === undefined || !Number.isFinite(expiresAt) || expiresAt <= now) return undefined;
    return { jwks, expiresAt };
  } catch {
    // The Cache API is an optimisation: without it every isolate fetches once per max-age.
    return undefined;
  }
}

async function toCache(jwksUri: string, jwks: JSONWebKeySet, maxAge: number, expiresAt: number): Promise<void> {
  try {
    await cache()?.put(
      jwksUri,
      new Response(JSON.stringify(jwks), {
        headers: {
          "content-type": "application/json",
          "cache-control": `max-age=${maxAge}`,
          [EXPIRES_HEADER]: String(expiresAt),
        },
      }),
    );
  } catch {
    // As above: a failed put costs a later isolate one fetch.
  }
}
