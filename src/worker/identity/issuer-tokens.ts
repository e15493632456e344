/**
 * User tokens issued by a tenant's identity provider (docs/users.md "Identity providers"), verified with
 * `jose` against the provider's JWKS (identity/issuer-keys.ts). `authenticate` (identity/auth.ts) sends a bearer token
 * here when it is not one of ours: its header's `alg` is not HS256, or it carries an `iss` (the tokens
 * this deployment signs carry none).
 *
 * Such a token is always role `user`, for the end user its `subClaim` names. The tenant is the token's
 * `tenant` claim when the provider adds one, else the `X-Tenant` header (both, differing: refused); the
 * token's `iss` must be registered for that tenant (http/routes/issuers.ts) with an audience its `aud`
 * names. Only RS256, ES256 and EdDSA (so never `none`, and never HS256 with a key from the JWKS); `iss`,
 * `aud` and `exp` are required; 60 s of clock skew. Any failure is 401 `unauthorized`, never 403.
 *
 * The answer has the shape of a minted user token's claims (`tenant`, `role: "user"`, `sub`, `exp`,
 * `iat`; no `act`, so every action; no `sessions`), so everything after authentication treats the two
 * alike. The lifetime bound is the deployment's TOKEN_MAX_LIFETIME_SECONDS (the provider sets its
 * tokens' lifetime), not the hour of minted user tokens; a token without `iat` counts as issued that
 * maximum before its `exp`, so a revocation reaches it.
 *
 * A tenant's registrations are read from its DirectoryObject at most once per REGISTRATIONS_TTL_MS per
 * isolate (single-flight), not on every request; the routes drop this isolate's copy when they change one.
 */
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload, type JWTVerifyOptions } from "jose";
import type { Env } from "../env.js";
import type { IssuerRecord } from "../directory/issuers.js";
import { directoryStub } from "../directory/object.js";
import { hostClock } from "../platform/host-config.js";
import { JwksUnavailable, keySet, keySetAfterUnknownKid, UNKNOWN_KID_COOLDOWN_MS, type KeySet } from "./issuer-keys.js";
import { Problem } from "../problems.js";
import { tenantName, type Claims } from "../schemas.js";

/** The signature algorithms an identity provider's token may use. */
export const ISSUER_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const;

/** Clock skew allowed on `exp`, `nbf` and `iat`, seconds. */
export const CLOCK_SKEW_SECONDS = 60;

/** How long an isolate uses its copy of a tenant's registrations, ms (at most 60 s). */
export const REGISTRATIONS_TTL_MS = 60_000;

/** The header naming the tenant when the provider's token has no `tenant` claim. */
export const TENANT_HEADER = "x-tenant";

const FIELD = "authorization";

/**
 * Whether a bearer token goes to the identity-provider path (not HS256, or an `iss`); a token that does not decode
 * stays ours.
 */
export function isIssuerToken(token: string): boolean {
  const known = issuerTokens.get(token);
  if (known !== undefined) return known;
  let issued: boolean;
  try {
    issued = decodeProtectedHeader(token).alg !== "HS256" || decodeJwt(token).iss !== undefined;
  } catch {
    issued = false;
  }
  // A pure function of the token, asked on every request a client sends with it: decoded once per isolate.
  if (issuerTokens.size >= ISSUER_TOKENS_KEPT) issuerTokens.clear();
  issuerTokens.set(token, issued);
  return issued;
}

const issuerTokens = new Map<string, boolean>();
const ISSUER_TOKENS_KEPT = 4_096;

/** A value from the request, as a problem's detail quotes it (at most 200 characters). */
function shown(value: unknown): string {
  const text = String(value);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

function refused(detail: string, field = FIELD): Problem {
  return new Problem("unauthorized", detail, field);
}

/** Verify an identity provider's token and answer a user token's claims (401 for anything wrong). */
export async function verifyIssuerToken(
  token: string,
  env: Env,
  tenantHeader: string | undefined,
  maxLifetimeSeconds: number,
): Promise<Claims> {
  let alg: unknown;
  let unverified: JWTPayload;
  try {
    alg = decodeProtectedHeader(token).alg;
    unverified = decodeJwt(token);
  } catch (error) {
    throw refused(`the token does not decode: ${messageOf(error)}`);
  }
  if (!ISSUER_ALGORITHMS.some((allowed) => allowed === alg)) {
    throw refused(`an identity provider's token is signed with ${ISSUER_ALGORITHMS.join(", ")}, not ${shown(alg)}`);
  }
  if (typeof unverified.iss !== "string") throw refused("an identity provider's token carries iss", "token.iss");
  // Refused before anything is read for it (the signature is checked later, with the registration's keys).
  if (typeof unverified.exp !== "number") throw refused("an identity provider's token carries exp", "token.exp");
  if (unverified.exp + CLOCK_SKEW_SECONDS < hostClock().now() / 1000)
    throw refused("the token has expired", "token.exp");
  const tenant = tenantOf(unverified, tenantHeader);
  const registration = chooseRegistration(await registrationsOf(env, tenant), unverified, tenant);
  const payload = await verifySignature(token, registration, {
    algorithms: [String(alg)],
    issuer: registration.issuer,
    audience: registration.audience,
    requiredClaims: ["iss", "aud", "exp"],
    clockTolerance: CLOCK_SKEW_SECONDS,
    currentDate: new Date(hostClock().now()),
  });
  const sub = payload[registration.subClaim];
  if (typeof sub !== "string" || sub.length < 1 || sub.length > 128) {
    throw refused(
      `the token's ${registration.subClaim} claim names the end user: a string of 1-128 characters`,
      `token.${registration.subClaim}`,
    );
  }
  const exp = Math.floor(Number(payload.exp));
  const iat = typeof payload.iat === "number" ? Math.floor(payload.iat) : exp - maxLifetimeSeconds;
  // An iat ahead of now would put the token after a revocation that came before it.
  if (iat > hostClock().now() / 1000 + CLOCK_SKEW_SECONDS)
    throw refused("the token's iat is in the future", "token.iat");
  if (exp - iat > maxLifetimeSeconds) {
    throw refused(`the token's lifetime (${exp - iat} s) is above the maximum of ${maxLifetimeSeconds} s`, "token.exp");
  }
  return { tenant, role: "user", sub, exp, iat };
}

/** The `tenant` claim, else the X-Tenant header; both, naming different tenants, is refused. */
function tenantOf(payload: JWTPayload, header: string | undefined): string {
  const claim = payload["tenant"];
  if (claim !== undefined && typeof claim !== "string")
    throw refused("the token's tenant claim is a tenant name", "token.tenant");
  if (claim !== undefined && header !== undefined && header !== claim) {
    throw refused(
      `the token's tenant claim (${shown(claim)}) and the X-Tenant header (${shown(header)}) differ`,
      TENANT_HEADER,
    );
  }
  const tenant = claim ?? header;
  if (tenant === undefined) {
    throw refused(
      "an identity provider's token names its tenant: a tenant claim, or the X-Tenant header",
      TENANT_HEADER,
    );
  }
  if (!tenantName.safeParse(tenant).success)
    throw refused(`${shown(tenant)} is not a tenant name`, claim === undefined ? TENANT_HEADER : "token.tenant");
  return tenant;
}

/** The registration of the token's `iss` whose audience the token's `aud` names. */
function chooseRegistration(registrations: readonly IssuerRecord[], payload: JWTPayload, tenant: string): IssuerRecord {
  const ofIssuer = registrations.filter((registration) => registration.issuer === payload.iss);
  if (ofIssuer.length === 0)
    throw refused(`the issuer ${shown(payload.iss)} is not registered for tenant ${tenant}`, "token.iss");
  const audiences = typeof payload.aud === "string" ? [payload.aud] : Array.isArray(payload.aud) ? payload.aud : [];
  const chosen = ofIssuer.find((registration) => audiences.includes(registration.audience));
  if (chosen === undefined)
    throw refused(`the token's aud names no audience registered for ${shown(payload.iss)}`, "token.aud");
  return chosen;
}

/** The signature and claims, with the provider's keys (one refetch for an unknown `kid`). */
async function verifySignature(
  token: string,
  registration: IssuerRecord,
  options: JWTVerifyOptions,
): Promise<JWTPayload> {
  let keys: KeySet;
  try {
    keys = await keySet(registration.jwksUri);
  } catch (error) {
    throw refused(
      error instanceof JwksUnavailable
        ? error.message
        : `the identity provider's keys could not be read: ${messageOf(error)}`,
    );
  }
  try {
    return await verifyWith(token, keys, options);
  } catch (error) {
    if (!(error instanceof errors.JWKSNoMatchingKey)) throw refusal(error);
  }
  let fresher: KeySet | undefined;
  try {
    fresher = await keySetAfterUnknownKid(registration.jwksUri, keys);
  } catch (error) {
    throw refused(
      error instanceof JwksUnavailable
        ? error.message
        : `the identity provider's keys could not be read: ${messageOf(error)}`,
    );
  }
  if (fresher === undefined) {
    throw refused(
      `no key of the identity provider's JWKS matches the token's kid (the keys are fetched again at most every ${UNKNOWN_KID_COOLDOWN_MS / 1000} s)`,
    );
  }
  try {
    return await verifyWith(token, fresher, options);
  } catch (error) {
    throw refusal(error);
  }
}

/** Verify with a set; several keys matching (no `kid`) are each tried. */
async function verifyWith(token: string, keys: KeySet, options: JWTVerifyOptions): Promise<JWTPayload> {
  try {
    return (await jwtVerify(token, keys.resolve, options)).payload;
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error) {
      try {
        return (await jwtVerify(token, key, options)).payload;
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

function refusal(error: unknown): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof errors.JWTExpired) return refused("the token has expired", "token.exp");
  if (error instanceof errors.JWKSNoMatchingKey)
    return refused("no key of the identity provider's JWKS matches the token's kid");
  return refused(`the token does not verify: ${messageOf(error)}`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------------------------------
// A tenant's registrations, per isolate

interface Registrations {
  readonly items: readonly IssuerRecord[];
  readonly until: number;
}

const registrations = new Map<string, Registrations>();
const loading = new Map<string, Promise<readonly IssuerRecord[]>>();
/** Bumped by every forget: a read that started before it does not install its (older) answer. */
let epoch = 0;
/** Tenants one isolate keeps (the oldest is dropped beyond this). */
const MAX_TENANTS = 1_000;

/**
 * The tenant's registrations: this isolate's copy while younger than REGISTRATIONS_TTL_MS, else one read shared by
 * concurrent callers.
 */
export async function registrationsOf(env: Env, tenant: string): Promise<readonly IssuerRecord[]> {
  const copy = registrations.get(tenant);
  if (copy !== undefined && copy.until > hostClock().now()) return copy.items;
  const pending = loading.get(tenant);
  if (pending !== undefined) return pending;
  const started = epoch;
  const read = directoryStub(env, tenant)
    .listIssuers()
    .then((items) => {
      if (started !== epoch) return items;
      registrations.delete(tenant);
      registrations.set(tenant, { items, until: hostClock().now() + REGISTRATIONS_TTL_MS });
      if (registrations.size > MAX_TENANTS) {
        const oldest = registrations.keys().next().value;
        if (oldest !== undefined) registrations.delete(oldest);
      }
      return items;
    })
    .finally(() => {
      if (loading.get(tenant) === read) loading.delete(tenant);
    });
  loading.set(tenant, read);
  return read;
}

/**
 * Drop this isolate's copy of a tenant's registrations (after a PUT or DELETE; other isolates see it within the TTL).
 */
export function forgetRegistrations(tenant: string): void {
  epoch += 1;
  registrations.delete(tenant);
  loading.delete(tenant);
}

/** Test only: forget every tenant's registrations, as a recycled isolate would. */
export function resetRegistrations(): void {
  epoch += 1;
  registrations.clear();
  loading.clear();
}
