/**
 * Bearer-token auth and the role table (DESIGN §6, issue 6). Every API route except /health and the
 * signed webhooks needs an HS256 JWT (verified with `hono/jwt`) carrying `tenant` and `role`; the key is
 * the `JWT_SECRET` wrangler secret. Watch routes also take the token as `?access_token=` because
 * browsers cannot set headers on EventSource or WebSocket.
 *
 * Tenancy is not a check here: the session Durable Object's name is `${tenant}:${session}`, so a token
 * of another tenant addresses a different (never created) object and gets 404, never 403.
 */
import { verify } from "hono/jwt";
import type { Context, MiddlewareHandler } from "hono";
import type { Env } from "./env.js";
import { Problem } from "./problems.js";
import { claims as claimsSchema, parse, type Claims, type Role } from "./schemas.js";

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
  | "delete";

const CLIENT: readonly Capability[] = ["session.create", "session.read", "conversation", "input", "watch", "config", "usage"];

/**
 * The role table. `client` creates sessions and uses conversations, inputs, watch and config;
 * `operator` may also use tasks, inspect, shutdown, fault, quarantine and delete. The rig's roles come
 * with the rig: `mayor` coordinates work and gets the client's capabilities for now; `agent` tokens are
 * for the hook routes the rig adds, so they may use none of these routes yet.
 */
export const ROLE_CAPABILITIES: Readonly<Record<Role, ReadonlySet<Capability>>> = {
  client: new Set(CLIENT),
  operator: new Set<Capability>([...CLIENT, "tasks", "inspect", "shutdown", "fault", "quarantine", "delete"]),
  mayor: new Set(CLIENT),
  agent: new Set<Capability>(),
};

export interface AuthVariables {
  claims: Claims;
}

export type AppEnv = { Bindings: Env; Variables: AuthVariables };

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  // The scheme name is case-insensitive (RFC 7235 §2.1).
  const match = /^Bearer +([A-Za-z0-9_.~+/=-]+)$/i.exec(header.trim());
  if (match === null) throw new Problem("unauthorized", "the Authorization header must be `Bearer <token>`", "authorization");
  return match[1];
}

export function jwtSecret(env: Env): string {
  const secret = env.JWT_SECRET;
  if (secret === undefined || secret.length < 16) {
    throw new Problem("misconfigured", "JWT_SECRET is not set (wrangler secret put JWT_SECRET; .dev.vars in development)");
  }
  return secret;
}

/** Verify the request's token and return its claims. */
export async function authenticate(c: Context<AppEnv>, options: { readonly queryToken: boolean }): Promise<Claims> {
  const fromHeader = bearer(c.req.header("authorization"));
  const fromQuery = options.queryToken ? c.req.query("access_token") : undefined;
  const token = fromHeader ?? fromQuery;
  if (token === undefined) throw new Problem("unauthorized", "a bearer token is required (Authorization: Bearer <token>)", "authorization");
  let payload: unknown;
  try {
    payload = await verify(token, jwtSecret(c.env), "HS256");
  } catch (error) {
    if (error instanceof Problem) throw error;
    throw new Problem("unauthorized", `the token does not verify: ${error instanceof Error ? error.message : "invalid token"}`, "authorization");
  }
  const claims = parse(claimsSchema, payload, "unauthorized", "token");
  if (claims.role === "agent" && claims.agent === undefined) throw new Problem("unauthorized", "an agent token carries its agent id", "token.agent");
  return claims;
}

/** Middleware: authenticate and require one capability (401 without a valid token, 403 without the role). */
export function requires(capability: Capability, options: { readonly queryToken?: boolean } = {}): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const claims = await authenticate(c, { queryToken: options.queryToken === true });
    if (!ROLE_CAPABILITIES[claims.role].has(capability)) {
      throw new Problem("forbidden", `role ${claims.role} may not use this route (needs ${capability})`);
    }
    c.set("claims", claims);
    await next();
  };
}
