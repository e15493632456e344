/**
 * `POST /v1/sessions/{session}/mcp`: the session as an MCP server (docs/mcp.md "Every session as an MCP
 * server"), streamable HTTP with JSON responses, stateless. GET and DELETE are not routes, so the app
 * answers them 405 (Allow: POST), which is what a stateless server without an SSE stream answers.
 *
 * The caller's bearer token is checked here (the `input` capability: sending a message is what the
 * endpoint is for), then every tool calls the app's own route with the same Authorization header, so
 * each tool gets exactly the rights that route gives this token. Before any MCP message is read the
 * session is looked up the same way (`GET /v1/sessions/{session}`): a session the caller cannot see (never
 * created, another tenant's, or otherwise not visible to this token) is that route's 404, with nothing
 * about the session in it.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { requires, type AppEnv } from "../../identity/auth.js";
import type { Env } from "../../env.js";
import { serveMcp, type RouteCall } from "../mcp-serve.js";
import { TENANT_HEADER } from "../../identity/issuer-tokens.js";
import { noQuery, parse, sessionName } from "../../schemas.js";
import { query } from "./shared.js";

/** The app's own fetch, for requests to its routes (given by http/app.ts, which this module cannot import). */
export type AppFetch = (
  request: Request,
  env: Env,
  ctx: HonoExecutionContext | undefined,
) => Response | Promise<Response>;

type HonoExecutionContext = Context<AppEnv>["executionCtx"];

function executionContext(c: Context<AppEnv>): HonoExecutionContext | undefined {
  try {
    return c.executionCtx;
  } catch {
    // Hono throws when the app was called without one (app.request in a unit test).
    return undefined;
  }
}

export function mcpRoutes(appFetch: AppFetch): Hono<AppEnv> {
  const routes = new Hono<AppEnv>();

  routes.post("/:session/mcp", requires("input"), async (c) => {
    const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
    query(c, noQuery);
    const base = new URL(`/v1/sessions/${encodeURIComponent(name)}`, c.req.url);
    const authorization = c.req.header("authorization") ?? "";
    const ctx = executionContext(c);
    const call: RouteCall = async (method, path, options = {}) => {
      // The tenant too: an identity provider's token may name it only in X-Tenant (identity/issuer-tokens.ts).
      const headers = new Headers({ authorization, [TENANT_HEADER]: c.get("claims").tenant });
      if (options.idempotencyKey !== undefined) headers.set("idempotency-key", options.idempotencyKey);
      if (options.body !== undefined) headers.set("content-type", "application/json");
      const request = new Request(`${base.href}${path}`, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      });
      return appFetch(request, c.env, ctx);
    };
    const visible = await call("GET", "");
    if (!visible.ok) {
      // The session route's own problem (404 session_not_found for an unknown or foreign session), at this path.
      const problem = (await visible.json()) as Record<string, unknown>;
      return new Response(JSON.stringify({ ...problem, instance: new URL(c.req.url).pathname }), {
        status: visible.status,
        headers: { "content-type": "application/problem+json" },
      });
    }
    await visible.body?.cancel();
    return serveMcp(c.req.raw, name, call);
  });

  return routes;
}
