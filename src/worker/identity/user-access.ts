/**
 * What an end user's token (role `user`, docs/users.md) reaches. A user token acts for one end user
 * (`sub`) and reaches a session only if that user owns it (it was created with a token of that `sub`) or
 * a grant of its `sessions` claim matches the name (an exact name, or `prefix-*`); anything else answers
 * exactly as an unknown session does (404, the same problem), so a user cannot learn which names exist.
 * Within a session it reaches, each route needs one action of the token's `act` claim (403 without it);
 * a route that is in no action's list (the operator's routes, schedules, inbound endpoints, deliveries,
 * the rig, and every route added later until it is listed here) is refused with 403.
 *
 * A `bounded` user token (minted by a token that names its sessions) reaches only its grants: its user's other
 * sessions answer as unknown ones, and it creates no session under a server-assigned name (403).
 *
 * The owner is stored in the session's own object (identity/owner.ts), so the check is one read in the
 * object the request goes to anyway, never a directory read: the directory is not on the accept path.
 * `checkUserAccess` is the one entry point (identity/auth.ts calls it for every user-token request).
 */
import type { Env } from "../env.js";
import { SessionNotFound } from "../errors.js";
import { Problem } from "../problems.js";
import { MAX_USER_GRANTS, userActions, parse, sessionName, type Claims, type UserAction } from "../schemas.js";
import { sessionObjectName, type OwnerCheck } from "./owner.js";

/** Who a user-token request acts for: the end user, its actions, and its session grants. */
export interface UserPrincipal {
  readonly sub: string;
  readonly act: readonly UserAction[];
  readonly grants: readonly string[];
}

/** The principal of a verified user token (identity/auth.ts guarantees `sub`). */
export function userPrincipal(claims: Claims): UserPrincipal {
  return { sub: claims.sub ?? "", act: claims.act ?? userActions, grants: claims.sessions ?? [] };
}

/** Whether a grant names the session: an exact name, or `prefix*` and the name starts with the prefix. */
export function grantMatches(grants: readonly string[], session: string): boolean {
  return grants.some((grant) => (grant.endsWith("*") ? session.startsWith(grant.slice(0, -1)) : grant === session));
}

const S = "/v1/sessions/:session";
const C = `${S}/conversations/:conversation`;

/**
 * The action each route a user may use needs, by `METHOD path` as the app registers it. A route that
 * is not listed has no action: users are refused it (403) whatever their `act`.
 */
export const USER_ROUTE_ACTIONS: Readonly<Record<string, UserAction>> = {
  "GET /v1/sessions": "read",
  "POST /v1/sessions": "create",
  // The user's own usage (docs/users.md "Limits and usage"): not a session's, so no ownership check.
  "GET /v1/me/usage": "read",
  [`PUT ${S}`]: "create",
  [`GET ${S}`]: "read",
  [`PATCH ${S}`]: "write",
  [`GET ${S}/inputs/:inputId`]: "read",
  [`DELETE ${S}/inputs/:inputId`]: "write",
  [`GET ${S}/acceptances/:requestKey`]: "read",
  [`GET ${S}/usage`]: "read",
  // A user's export is redacted as the user's task views are (docs/operations.md "Export and import").
  [`GET ${S}/export`]: "read",
  [`GET ${S}/tasks`]: "read",
  [`GET ${S}/pending`]: "read",
  [`POST ${S}/pending/:pendingId`]: "write",
  [`POST ${S}/ag-ui`]: "write",
  [`GET ${S}/watch`]: "watch",
  // The AI SDK chat routes (docs/frontends.md): a POST accepts an input and may answer approvals.
  [`POST ${S}/chat`]: "write",
  [`GET ${S}/chat/:conversation/stream`]: "read",
  [`GET ${S}/chat/:conversation/messages`]: "read",
  [`POST ${S}/watch-token`]: "watch",
  // The session's MCP endpoint: each tool call goes through its own route and is checked there again.
  [`POST ${S}/mcp`]: "read",
  [`GET ${C}`]: "read",
  [`DELETE ${C}`]: "write",
  [`GET ${C}/entries`]: "read",
  [`GET ${C}/pending`]: "read",
  [`GET ${C}/config`]: "read",
  [`PATCH ${C}/config`]: "write",
  [`POST ${C}/inputs`]: "write",
  [`POST ${C}/abort`]: "write",
  [`POST ${C}/continue`]: "write",
  [`POST ${C}/collapse`]: "write",
  [`POST ${C}/reset`]: "write",
  [`POST ${C}/fork`]: "fork",
  [`GET ${C}/watch`]: "watch",
  [`POST ${C}/watch-token`]: "watch",
};

/** The action a route needs from a user token (undefined: users may not use it). */
export function userActionOf(method: string, route: string): UserAction | undefined {
  return USER_ROUTE_ACTIONS[`${method.toUpperCase()} ${route}`];
}

/**
 * Routes whose handler reaches the session only through `op` calls (http/routes/shared.ts `session`), so the
 * owner check rides the first of them (SessionObject.opAs) instead of a call of its own: the hot paths of sending
 * and reading an input.
 */
const OWNER_IN_OP: ReadonlySet<string> = new Set([`POST ${C}/inputs`, `GET ${S}/inputs/:inputId`]);

/** The request as the check sees it: its method, the registered route path, and the `:session` parameter. */
export interface UserRequest {
  readonly method: string;
  readonly route: string;
  readonly session: string | undefined;
}

/**
 * Refuse a user-token request that may not proceed: a session the user neither owns nor is granted is
 * `session_not_found` (exactly what an unknown name answers, checked before anything else, so even the
 * routes users may never use answer 404 on another user's session); then a route without an action for
 * users, or an action missing from `act`, is 403. A create (PUT) on a name nobody created passes here:
 * the session object checks again when it creates, so two users racing for one name cannot both win.
 *
 * On a route of OWNER_IN_OP that the token may use, the owner check is not made here: the answer names the user
 * (`ownerInOp`) and the route's session calls carry the check (SessionObject.opAs), one object call fewer.
 */
export async function checkUserAccess(
  env: Env,
  claims: Claims,
  request: UserRequest,
): Promise<{ readonly ownerInOp?: string }> {
  const principal = userPrincipal(claims);
  const action = userActionOf(request.method, request.route);
  let ownerInOp: string | undefined;
  if (request.session !== undefined) {
    const name = parse(sessionName, request.session, "invalid_id", "session");
    if (!grantMatches(principal.grants, name)) {
      if (claims.bounded === true) throw new SessionNotFound();
      const allowed = action !== undefined && action !== "create" && principal.act.includes(action);
      if (allowed && OWNER_IN_OP.has(`${request.method.toUpperCase()} ${request.route}`)) {
        ownerInOp = principal.sub;
      } else {
        const stub = env.SESSIONS.get(
          env.SESSIONS.idFromName(sessionObjectName(claims.tenant, name)),
        ) as unknown as OwnerCheck;
        const reaches = await stub.reaches(principal.sub, action === "create");
        if (!reaches) throw new SessionNotFound();
      }
    }
  }
  if (request.session === undefined && action === "create" && claims.bounded === true) {
    throw new Problem(
      "forbidden",
      "this user token reaches only the sessions it was granted; it creates none under a new name",
      "token.bounded",
    );
  }
  if (action === undefined)
    throw new Problem(
      "forbidden",
      `a user token may not use ${request.method.toUpperCase()} ${request.route} (docs/users.md)`,
    );
  if (!principal.act.includes(action)) {
    throw new Problem(
      "forbidden",
      `this user token lacks the ${action} action (it has: ${principal.act.join(", ") || "none"})`,
      "token.act",
    );
  }
  return ownerInOp === undefined ? {} : { ownerInOp };
}

/**
 * Refuse (403, `token.act`) a user token lacking `action` for a part of a request that needs more than its route does
 * (a fork that aborts the running turn needs `write`, as the abort route does). Other roles pass.
 */
export function requireUserAction(claims: Claims, action: UserAction, what: string): void {
  if (claims.role !== "user") return;
  const act = userPrincipal(claims).act;
  if (!act.includes(action)) {
    throw new Problem(
      "forbidden",
      `${what} needs the ${action} action; this user token has: ${act.join(", ") || "none"}`,
      "token.act",
    );
  }
}

/**
 * The sessions a user token minted by `minter` grants, within the minter's own reach: a minter that names its sessions
 * grants only those (each asked-for grant must be one of them, 403 naming `sessions` otherwise; none asked: all of
 * them) and the token is `bounded` to them (it reaches none of its user's other sessions). Any other minter grants what
 * is asked.
 */
export function mintedGrants(
  minter: Claims,
  wanted: readonly string[] | undefined,
): { readonly sessions?: readonly string[]; readonly bounded?: true } {
  const claimed = minter.role === "user" ? undefined : minter.sessions;
  if (claimed === undefined) return wanted === undefined ? {} : { sessions: wanted };
  const outside = (wanted ?? []).filter((grant) => !claimed.includes(grant));
  if (outside.length > 0) {
    throw new Problem(
      "forbidden",
      `this token names its sessions (${claimed.join(", ")}) and may grant only those, not ${outside.join(", ")}`,
      "sessions",
    );
  }
  const sessions = wanted ?? claimed;
  if (sessions.length > MAX_USER_GRANTS) {
    throw new Problem(
      "forbidden",
      `a user token grants at most ${MAX_USER_GRANTS} sessions: name which of this token's sessions to grant`,
      "sessions",
    );
  }
  return { sessions, bounded: true };
}

/**
 * The sessions a listing holds to: a non-user token's `sessions` claim, a bounded user token's grants (exact names,
 * since its minter's were), or undefined (no filter besides a user's ownership).
 */
export function listedSessions(claims: Claims): readonly string[] | undefined {
  if (claims.role !== "user") return claims.sessions;
  return claims.bounded === true ? (claims.sessions ?? []) : undefined;
}

/**
 * The owner a create records: the user's `sub` for a user token (with whether a grant reaches the name), nothing
 * otherwise.
 */
export function creator(claims: Claims, session: string): { readonly owner?: string; readonly granted?: boolean } {
  if (claims.role !== "user") return {};
  const principal = userPrincipal(claims);
  return { owner: principal.sub, granted: grantMatches(principal.grants, session) };
}

/**
 * What a directory cursor is bound to: nothing for tenant-wide listings, a digest of the user for a
 * user's listing, so a cursor from one user's pages is refused (invalid_cursor) on another's.
 */
export async function cursorBinding(claims: Claims): Promise<string | undefined> {
  if (claims.role !== "user") return undefined;
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`${claims.tenant}\n${claims.sub ?? ""}`),
  );
  return btoa(String.fromCharCode(...new Uint8Array(digest).slice(0, 12)))
    .replaceAll("+", "-")
    .replaceAll("/", "_");
}

/** A server-assigned session name (POST /v1/sessions): `s-` and 22 characters of 128 random bits. */
export function newSessionName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `s-${btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replaceAll("=", "")}`;
}
