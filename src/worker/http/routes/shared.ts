/**
 * Helpers every route module uses: the tenant-scoped session stub, and strict readers for path
 * parameters, query strings, headers and JSON bodies that throw a `Problem` naming the bad field before
 * anything is sent to a session (so a refused request writes nothing).
 */
import { objectId } from "../../platform/object-ids.js";
import type { Context } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../../identity/auth.js";
import type { Env } from "../../env.js";
import { Problem, unwrap, type Outcome } from "../../problems.js";
import { conversationRef, idString, parse, queryOf, sessionName, type ConversationRef } from "../../schemas.js";
import type { SessionObject } from "../../session/object.js";
import { sessionObjectName } from "../../identity/owner.js";
import { sessionRpc, type SessionRpc } from "../../session/rpc.js";
import { SessionNotFound } from "../../errors.js";

export type AppContext = Context<AppEnv>;

/** The session object of `tenant`: its name is tenant-scoped, so other tenants cannot address it. */
export function sessionStub(env: Env, tenant: string, session: string): SessionRpc {
  const namespace = env.SESSIONS;
  return sessionRpc(
    namespace.get(
      objectId(namespace, sessionObjectName(tenant, session)),
    ) as unknown as DurableObjectStub<SessionObject>,
  );
}

/** The validated `:session` parameter. */
export function sessionParam(c: AppContext): string {
  return parse(sessionName, c.req.param("session"), "invalid_id", "session");
}

/** The validated `:session` parameter and the caller's stub. */
/**
 * The request's session. When the middleware left a user's ownership to the session calls (`ownerInOp`,
 * identity/user-access.ts), each `op` carries it (SessionObject.opAs: a session the user does not reach answers
 * `session_not_found` as an unknown one does), and any other method checks `reaches` once before it runs.
 */
export function session(c: AppContext): SessionRpc {
  const stub = sessionStub(c.env, c.get("claims").tenant, sessionParam(c));
  const owner = c.get("ownerInOp");
  return owner === undefined ? stub : ownedBy(stub, owner);
}

/**
 * Run a route's checks that come before its first session call. When the owner check rides that call
 * (`ownerInOp`), a refusal here is answered only once the user is known to reach the session: to a user who does
 * not, every route answers 404 first, whatever else is wrong with the request.
 */
export async function beforeSession<T>(c: AppContext, checks: () => Promise<T> | T): Promise<T> {
  try {
    return await checks();
  } catch (error) {
    const owner = c.get("ownerInOp");
    if (
      owner !== undefined &&
      !(await sessionStub(c.env, c.get("claims").tenant, sessionParam(c)).reaches(owner, false))
    )
      throw new SessionNotFound();
    throw error;
  }
}

function ownedBy(stub: SessionRpc, owner: string): SessionRpc {
  let reached: Promise<void> | undefined;
  const reach = (): Promise<void> =>
    (reached ??= stub.reaches(owner, false).then((reaches) => {
      if (!reaches) throw new SessionNotFound();
    }));
  return new Proxy(stub, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== "function" || typeof property !== "string") return value;
      if (property === "op")
        return (...args: unknown[]) =>
          Reflect.apply(target.opAs as (...a: unknown[]) => unknown, target, [owner, ...args]);
      return async (...args: unknown[]) => {
        await reach();
        // Reflect.apply: an RPC method's own `apply` would be another remote method.
        return Reflect.apply(value as (...a: unknown[]) => unknown, target, args);
      };
    },
  });
}

export function conversationParam(c: AppContext): ConversationRef {
  return parse(conversationRef, c.req.param("conversation"), "invalid_id", "conversation");
}

export function idParam(c: AppContext, name: string): number {
  return parse(idString, c.req.param(name), "invalid_id", name);
}

/** The query string, parsed strictly (unknown or repeated parameters are refused). */
export function query<S extends z.ZodType>(c: AppContext, schema: S): z.output<S> {
  return parse(schema, queryOf(c.req.url), "invalid_query");
}

/** A JSON body parsed with `schema`; with `optional`, an empty body means `{}`. */
export async function body<S extends z.ZodType>(
  c: AppContext,
  schema: S,
  options: { readonly optional?: boolean } = {},
): Promise<z.output<S>> {
  const text = await c.req.text();
  return parseBody(c.req.header("content-type"), text, schema, options);
}

export function parseBody<S extends z.ZodType>(
  contentType: string | undefined,
  text: string,
  schema: S,
  options: { readonly optional?: boolean } = {},
): z.output<S> {
  if (text.trim() === "") {
    if (options.optional === true) return parse(schema, {}, "invalid_body");
    throw new Problem("invalid_body", "a JSON body is required");
  }
  if (contentType === undefined || !/^application\/(?:[a-z0-9.+-]*\+)?json\s*(?:;|$)/i.test(contentType)) {
    throw new Problem("unsupported_media_type", "send the body as Content-Type: application/json", "content-type");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Problem(
      "invalid_json",
      `the body is not JSON: ${error instanceof Error ? error.message : "parse error"}`,
    );
  }
  return parse(schema, json, "invalid_body");
}

/** Await a session outcome; a problem is thrown for the app's error handler. */
export async function run<T>(outcome: Promise<Outcome<T>>): Promise<T> {
  return unwrap(await outcome);
}
