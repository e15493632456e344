/**
 * Bearer-token auth and the role table (docs/api.md "Authentication and roles"). Every API route except /health and the
 * signed webhooks and inbound deliveries needs an HS256 JWT (verified with `hono/jwt`) carrying `tenant` and `role`;
 * the key is
 * the `JWT_SECRET` wrangler secret. Every token carries `exp`, and a lifetime above
 * TOKEN_MAX_LIFETIME_SECONDS (default 24 h) is refused. Watch routes also take a short-lived watch token
 * (`POST .../watch-token`) as `?access_token=` because browsers cannot set headers on EventSource or
 * WebSocket; a normal bearer token in a URL is refused. A header token that is not HS256, or carries an
 * `iss`, is a tenant's identity provider's (identity/issuer-tokens.ts): always role `user`.
 *
 * A `user` token (an end user's browser, docs/users.md) is held to its own rules: `sub`, at most an hour,
 * and instead of the role table `checkUserAccess` (identity/user-access.ts): only its user's sessions, only its
 * actions.
 *
 * Tenancy is not a check here: the session Durable Object's name is `${tenant}:${session}`, so a token
 * of another tenant addresses a different (never created) object and gets 404, never 403.
 */
import { verify } from "hono/jwt";
import type { Context, MiddlewareHandler } from "hono";
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { admitRequest } from "../limits/admission.js";
import { RESERVED_NAMES } from "../../rig/types.js";
import { routePath } from "hono/route";
import {
  claims as claimsSchema,
  MAX_USER_GRANTS,
  parse,
  USER_TOKEN_MAX_SECONDS,
  type Claims,
  type Role,
  type WatchScope,
} from "../schemas.js";
import { checkUserAccess } from "./user-access.js";
import { refuseRevoked } from "./revocation.js";
import { isIssuerToken, TENANT_HEADER, verifyIssuerToken } from "./issuer-tokens.js";

/** What a route needs; roles grant sets of these. */
export type Capability =
  | "session.create"
  | "session.read"
  | "conversation"
  | "input"
  | "watch"
  | "config"
  | "usage"
  | "tasks"
  | "inspect"
  | "shutdown"
  | "fault"
  | "quarantine"
  | "delete"
  /** The rig's routes (docs/rig.md); the rig checks each transition's role and agent itself. */
  | "rig"
  /** Inbound endpoints' config (docs/integrations.md): where signed deliveries from integrations go. */
  | "inbound"
  /** The tenant's tool catalog (docs/tools.md). */
  | "tools"
  /** The tenant's webhook endpoints and each session's deliveries (docs/integrations.md "Events out"). */
  | "webhooks"
  /** A session's pending list and its answers: approvals and client tools (docs/tools.md). */
  | "pending"
  /** The tenant's identity providers (docs/users.md "Identity providers"). */
  | "issuers"
  /** The tenant's remote MCP servers as tool sources (docs/mcp.md). */
  | "mcp"
  /** The tenant's limits and every user's usage (docs/users.md "Limits and usage"). */
  | "limits"
  /** Minting user tokens for the product's end users (docs/users.md). */
  | "tokens"
  /** The tenant's session templates (docs/users.md "Templates"). */
  | "templates"
  /** The tenant's profiles: what the agent is (docs/api.md "Profiles"). */
  | "profiles"
  /** End-user administration: revoking a user's tokens (docs/users.md "Revocation"). */
  | "users"
  /** A session's export as JSONL (docs/operations.md "Export and import"); users export their own (`read`). */
  | "export"
  /** Importing an export into a new session (docs/operations.md "Export and import"). */
  | "import";

const CLIENT: readonly Capability[] = [
  "session.create",
  "session.read",
  "conversation",
  "input",
  "watch",
  "config",
  "usage",
  "pending",
];

/**
 * The role table. `client` creates sessions and uses conversations, inputs, watch and config;
 * `operator` may also use tasks, inspect, shutdown, fault, quarantine and delete, the rig's routes, and
 * configure inbound endpoints.
 * `mayor` coordinates the rig (registers agents, sets and clears hooks) and has the client's routes;
 * `agent` tokens use only the rig's routes, and the rig lets them touch only their own hook and mail.
 */
export const ROLE_CAPABILITIES: Readonly<Record<Role, ReadonlySet<Capability>>> = {
  client: new Set(CLIENT),
  operator: new Set<Capability>([
    ...CLIENT,
    "tasks",
    "inspect",
    "shutdown",
    "fault",
    "quarantine",
    "delete",
    "rig",
    "inbound",
    "tools",
    "webhooks",
    "mcp",
    "limits",
    "tokens",
    "templates",
    "profiles",
    "users",
    "issuers",
    "export",
    "import",
  ]),
  mayor: new Set<Capability>([...CLIENT, "rig"]),
  agent: new Set<Capability>(["rig"]),
  /**
   * An end user (docs/users.md). Documentation only: a user token is checked by route and action
   * (identity/user-access.ts USER_ROUTE_ACTIONS), in the sessions it owns or is granted, within its `act`
   * (which also lets it read, never abort, a session's tasks).
   */
  user: new Set<Capability>([
    "session.create",
    "session.read",
    "conversation",
    "input",
    "watch",
    "config",
    "usage",
    "pending",
    "export",
  ]),
};

export interface AuthVariables {
  claims: Claims;
  /**
   * A user token's `sub` whose ownership of the session is checked by the route's session calls rather than by
   * the middleware (identity/user-access.ts OWNER_IN_OP; http/routes/shared.ts `session`).
   */
  ownerInOp?: string;
}

export type AppEnv = { Bindings: Env; Variables: AuthVariables };

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  // The scheme name is case-insensitive (RFC 7235 §2.1).
  const match = /^Bearer +([A-Za-z0-9_.~+/=-]+)$/i.exec(header.trim());
  if (match === null)
    throw new Problem("unauthorized", "the Authorization header must be `Bearer <token>`", "authorization");
  return match[1];
}

export function jwtSecret(env: Env): string {
  const secret = env.JWT_SECRET;
  if (secret === undefined || secret.length < 16) {
    throw new Problem(
      "misconfigured",
      "JWT_SECRET is not set (wrangler secret put JWT_SECRET; .dev.vars in development)",
    );
  }
  return secret;
}

/** A positive whole number of seconds from a var, or the default. */
function secondsVar(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new Problem("misconfigured", `${name} must be a positive whole number of seconds`);
  return n;
}

/** The longest lifetime (exp - iat) a token may have: TOKEN_MAX_LIFETIME_SECONDS, default 24 h. */
export function maxTokenLifetime(env: Env): number {
  return secondsVar(env.TOKEN_MAX_LIFETIME_SECONDS, 86_400, "TOKEN_MAX_LIFETIME_SECONDS");
}

/** A watch token's default lifetime: WATCH_TOKEN_LIFETIME_SECONDS, default 10 minutes. */
export function watchTokenLifetime(env: Env): number {
  return secondsVar(env.WATCH_TOKEN_LIFETIME_SECONDS, 600, "WATCH_TOKEN_LIFETIME_SECONDS");
}

/**
 * Tokens whose signature this isolate verified, with their payload: a client sends the same token with many requests,
 * and the HMAC check (and the key import before it) is the same answer every time for the same token and secret.
 * Time-bound claims are checked again on every use (an expired token falls through to `verify`, which refuses it);
 * everything else is a pure function of the token. Bounded; emptied when the secret changes.
 */
interface Verified {
  readonly payload: unknown;
  readonly exp?: number;
  readonly nbf?: number;
  /** The claims `verifyToken` accepted, under the lifetime maximum it checked them against. */
  accepted?: { readonly claims: Claims; readonly max: number };
}
const verified = new Map<string, Verified>();
let verifiedWith: string | undefined;
const VERIFIED_KEPT = 4_096;

/** The token's entry when its signature was verified with `secret` and it is within exp and nbf now. */
function verifiedNow(token: string, secret: string): Verified | undefined {
  if (verifiedWith !== secret) {
    verified.clear();
    verifiedWith = secret;
  }
  const now = Math.floor(Date.now() / 1000);
  const known = verified.get(token);
  if (
    known !== undefined &&
    (known.exp === undefined || known.exp > now) &&
    (known.nbf === undefined || known.nbf <= now)
  )
    return known;
  return undefined;
}

async function verifiedPayload(token: string, secret: string): Promise<unknown> {
  const known = verifiedNow(token, secret);
  if (known !== undefined) return known.payload;
  const payload = await verify(token, secret, "HS256");
  if (verified.size >= VERIFIED_KEPT) verified.clear();
  verified.set(token, { payload, exp: payload.exp, nbf: payload.nbf });
  return payload;
}

/**
 * Verify a token: signature, expiry, claims, and a lifetime within the configured maximum. Claims this isolate accepted
 * before for the same token, secret and maximum are answered again while exp and nbf hold: every other check is a
 * pure function of the token, or (a lifetime counted from now when iat is absent) only grows easier with time.
 */
export async function verifyToken(token: string, env: Env, field: string): Promise<Claims> {
  const secret = jwtSecret(env);
  const max = maxTokenLifetime(env);
  const known = verifiedNow(token, secret)?.accepted;
  if (known !== undefined && known.max === max) return known.claims;
  const claims = await checkedClaims(token, secret, max, field);
  const entry = verified.get(token);
  if (entry !== undefined) entry.accepted = { claims, max };
  return claims;
}

async function checkedClaims(token: string, secret: string, max: number, field: string): Promise<Claims> {
  let payload: unknown;
  try {
    payload = await verifiedPayload(token, secret);
  } catch (error) {
    if (error instanceof Problem) throw error;
    throw new Problem(
      "unauthorized",
      `the token does not verify: ${error instanceof Error ? error.message : "invalid token"}`,
      field,
    );
  }
  const claims = parse(claimsSchema, payload, "unauthorized", "token");
  if (claims.role === "agent" && claims.agent === undefined)
    throw new Problem("unauthorized", "an agent token carries its agent id", "token.agent");
  if (claims.role === "agent" && claims.agent !== undefined && RESERVED_NAMES.includes(claims.agent)) {
    throw new Problem(
      "unauthorized",
      `an agent token may not be named ${claims.agent}: ${RESERVED_NAMES.join(", ")} are reserved names, not agent ids`,
      "token.agent",
    );
  }
  if (claims.role === "agent" && (claims.sessions === undefined || claims.sessions.length === 0)) {
    throw new Problem(
      "unauthorized",
      "an agent token carries the sessions it may act in (a sessions claim: a list of session names)",
      "token.sessions",
    );
  }
  if (claims.role === "user") checkUserClaims(claims);
  else if (claims.sessions?.some((grant) => grant.endsWith("*")) === true) {
    throw new Problem(
      "unauthorized",
      "only a user token's sessions claim may hold patterns (prefix-*); this token names sessions",
      "token.sessions",
    );
  }
  const lifetime = claims.exp - (claims.iat ?? Math.floor(Date.now() / 1000));
  if (lifetime > max)
    throw new Problem(
      "unauthorized",
      `the token's lifetime (${lifetime} s) is above the maximum of ${max} s; sign a shorter-lived token`,
      "token.exp",
    );
  if ((claims.scope === "watch") !== (claims.watch !== undefined))
    throw new Problem("unauthorized", "a watch token carries scope and watch together", "token.watch");
  return claims;
}

/**
 * A `user` token's own rules (docs/users.md): it names its end user (`sub`), lives at most an hour
 * (exp - iat; iat absent counts from now), and grants at most MAX_USER_GRANTS sessions. Refused: 401.
 */
function checkUserClaims(claims: Claims): void {
  if (claims.sub === undefined)
    throw new Problem("unauthorized", "a user token carries its end user (a sub claim, 1-128 characters)", "token.sub");
  const lifetime = claims.exp - (claims.iat ?? Math.floor(Date.now() / 1000));
  if (lifetime > USER_TOKEN_MAX_SECONDS) {
    throw new Problem(
      "unauthorized",
      `a user token lives at most ${USER_TOKEN_MAX_SECONDS} s (this one ${lifetime} s); mint a shorter-lived one`,
      "token.exp",
    );
  }
  if ((claims.sessions?.length ?? 0) > MAX_USER_GRANTS)
    throw new Problem("unauthorized", `a user token grants at most ${MAX_USER_GRANTS} sessions`, "token.sessions");
}

/**
 * The sessions a non-user token is held to (its `sessions` claim), or undefined when it names none. Every route holds
 * to it: a path's `:session` (authenticate), the tenant's listing (filtered to them), a body naming sessions, a create
 * under a server-assigned name (never one of them), and minting (identity/user-access.ts `mintedGrants`).
 */
export function claimedSessions(claims: Claims): readonly string[] | undefined {
  return claims.role === "user" ? undefined : claims.sessions;
}

/**
 * Refuse (401, `token.sessions`, as for a path) a request of a token that names its sessions when it names others;
 * `names` undefined means "every session of the tenant" (a body without a sessions filter, a server-assigned name).
 */
export function refuseOutsideClaim(claims: Claims, names: readonly string[] | undefined): void {
  const claimed = claimedSessions(claims);
  if (claimed === undefined) return;
  const outside = names === undefined ? "other sessions" : names.filter((name) => !claimed.includes(name)).join(", ");
  if (outside === "") return;
  throw new Problem(
    "unauthorized",
    `this token may act only in the sessions it names (${claimed.join(", ")}), not in ${outside}`,
    "token.sessions",
  );
}

/** Which watch a route serves (its path's session and, for a conversation watch, the `{conversation}` ref). */
function watchOf(c: Context<AppEnv>): { readonly session: string; readonly conversation: string | undefined } {
  return { session: c.req.param("session") ?? "", conversation: c.req.param("conversation") };
}

/**
 * Whether a watch token's conversation is the one the path names: `root` matches the token of the root
 * conversation (minted for `root` or for its id), an id matches the token of that id. A session watch's
 * token (no conversation) matches only the session watch.
 */
function sameConversation(scope: WatchScope, ref: string | undefined): boolean {
  if (scope.conversation === undefined || ref === undefined) return scope.conversation === ref;
  if (ref === "root") return scope.root === true || scope.conversation === "root";
  return scope.conversation === ref;
}

/**
 * Verify the request's token and return its claims. The header carries a normal bearer token; in the
 * URL (`?access_token=`, watch routes only) only a watch token is accepted, because URLs are kept in
 * logs and browser histories. A watch token opens only the watch it names; it is checked when the
 * stream connects, so an open stream is not cut when the token expires.
 */
export async function authenticate(c: Context<AppEnv>, options: { readonly watch: boolean }): Promise<Claims> {
  const fromHeader = bearer(c.req.header("authorization"));
  const fromQuery = options.watch && fromHeader === undefined ? c.req.query("access_token") : undefined;
  const token = fromHeader ?? fromQuery;
  if (token === undefined)
    throw new Problem("unauthorized", "a bearer token is required (Authorization: Bearer <token>)", "authorization");
  // A token of a tenant's identity provider (identity/issuer-tokens.ts) comes in the header only, never in a URL.
  const claims =
    fromHeader !== undefined && isIssuerToken(fromHeader)
      ? await verifyIssuerToken(fromHeader, c.env, c.req.header(TENANT_HEADER), maxTokenLifetime(c.env))
      : await verifyToken(token, c.env, fromHeader === undefined ? "access_token" : "authorization");
  // A user's tokens issued before its revocation are refused (identity/revocation.ts).
  await refuseRevoked(c.env, claims);
  if (fromQuery !== undefined && claims.scope !== "watch") {
    throw new Problem(
      "unauthorized",
      "a bearer token in the URL is refused: URLs are kept in logs and browser histories. Get a short-lived watch token with POST .../watch-token and pass that as ?access_token=",
      "access_token",
    );
  }
  // A token that names its sessions acts in no other (agent tokens always name theirs).
  // (A user token's sessions are grants, checked with ownership: identity/user-access.ts.)
  const session = c.req.param("session");
  if (session !== undefined) refuseOutsideClaim(claims, [session]);
  if (claims.watch !== undefined) {
    const here = watchOf(c);
    if (!options.watch || claims.watch.session !== here.session || !sameConversation(claims.watch, here.conversation)) {
      throw new Problem("forbidden", "a watch token opens only the watch it was issued for");
    }
  }
  return claims;
}

/**
 * The capabilities of routes without a `:session` that a `sessions` claim holds by itself: the listing (filtered to
 * the claim), a create (refused: its name is not one of them), the models a config may name, and minting (bounded to
 * the claim). Every other route without a `:session` is tenant-level (the tenant's catalog, limits, usage, users,
 * erasures, stats ...): a token that names its sessions reaches none of them. A new route is tenant-level unless
 * its capability is listed here.
 */
const HELD_WITHOUT_SESSION: ReadonlySet<Capability> = new Set<Capability>([
  "session.create",
  "session.read",
  "config",
  "tokens",
]);

/** Whether a route needing `capability` on `session` (undefined: no `:session` in its path) is tenant-level. */
export function tenantLevel(capability: Capability, session: string | undefined): boolean {
  return session === undefined && !HELD_WITHOUT_SESSION.has(capability);
}

/** Refuse a tenant-level route to a token that names its sessions (401, `token.sessions`, as for another session). */
function refuseTenantLevel(claims: Claims): void {
  const claimed = claimedSessions(claims);
  if (claimed === undefined) return;
  throw new Problem(
    "unauthorized",
    `this token may act only in the sessions it names (${claimed.join(", ")}), not on the tenant's own routes`,
    "token.sessions",
  );
}

/**
 * Middleware: authenticate and require one capability (401 without a valid token, 403 without the role).
 * A user token is checked by `checkUserAccess` instead (identity/user-access.ts): the session must be the user's
 * (404 as for an unknown one otherwise), and the route's action must be in its `act` (403).
 */
export function requires(
  capability: Capability,
  options: { readonly watch?: boolean } = {},
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const claims = await authenticate(c, { watch: options.watch === true });
    if (claims.role === "user") {
      const access = await checkUserAccess(c.env, claims, {
        method: c.req.method,
        route: routePath(c),
        session: c.req.param("session"),
      });
      if (access.ownerInOp !== undefined) c.set("ownerInOp", access.ownerInOp);
    } else if (!ROLE_CAPABILITIES[claims.role].has(capability)) {
      throw new Problem("forbidden", `role ${claims.role} may not use this route (needs ${capability})`);
    } else if (tenantLevel(capability, c.req.param("session"))) refuseTenantLevel(claims);
    c.set("claims", claims);
    // requestsPerMinute (docs/users.md "Limits and usage"): nothing is read or counted for a tenant without it.
    await admitRequest(c.env, claims);
    await next();
  };
}
