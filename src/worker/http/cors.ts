/**
 * CORS for browser frontends (docs/api.md "Browsers"), with `hono/cors`. Allowed origins come from
 * `CORS_ORIGINS` (comma-separated; an entry may end in `:*` for any port); unset, development allows
 * `http://localhost:*` and `http://127.0.0.1:*` and every other environment allows none. A request
 * from an origin that is not allowed gets no CORS headers at all (the browser blocks it) and, because
 * a browser request that skips the preflight can still arrive, it is refused with 403
 * `origin_not_allowed` before anything runs (WebSocket upgrades carry Origin too, and are not
 * covered by CORS, so this is also their cross-site check). Requests without Origin (servers, curl,
 * webhook senders) are not affected.
 */
import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import type { AppEnv } from "../identity/auth.js";
import { isDevelopment, type Env } from "../env.js";
import { Problem } from "../problems.js";

/** Request headers a browser may send (the preflight's Access-Control-Allow-Headers). */
export const CORS_ALLOW_HEADERS = [
  "Authorization",
  "Content-Type",
  "Idempotency-Key",
  "Last-Event-ID",
  "If-Match",
  "X-Tenant",
  "Mcp-Protocol-Version",
] as const;
/** Response headers a page may read. */
export const CORS_EXPOSE_HEADERS = ["ETag", "Location", "Retry-After", "Idempotency-Key"] as const;
export const CORS_ALLOW_METHODS = ["GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"] as const;

const DEVELOPMENT_ORIGINS = "http://localhost:*,http://127.0.0.1:*";

/** The configured origin patterns: exact origins, or `scheme://host:*` for any port of that host. */
export function allowedOrigins(env: Env): readonly string[] {
  const configured = env.CORS_ORIGINS ?? (isDevelopment(env.ENVIRONMENT) ? DEVELOPMENT_ORIGINS : "");
  return configured
    .split(",")
    .map((origin) => origin.trim())
    .filter((origin) => origin !== "");
}

/** Whether `origin` (a request's Origin header) matches one of `patterns`. */
export function originAllowed(origin: string, patterns: readonly string[]): boolean {
  for (const pattern of patterns) {
    if (pattern === origin) return true;
    if (pattern.endsWith(":*")) {
      const base = pattern.slice(0, -2);
      if (origin === base) return true;
      if (origin.startsWith(`${base}:`) && /^[0-9]{1,5}$/.test(origin.slice(base.length + 1))) return true;
    }
  }
  return false;
}

const corsHeaders = cors({
  origin: (origin) => origin,
  allowHeaders: [...CORS_ALLOW_HEADERS],
  exposeHeaders: [...CORS_EXPOSE_HEADERS],
  allowMethods: [...CORS_ALLOW_METHODS],
  maxAge: 600,
});

/** The middleware: CORS headers for allowed origins; 403 and no CORS headers for any other origin. */
export function corsMiddleware(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const origin = c.req.header("origin");
    if (origin === undefined) return next();
    if (!originAllowed(origin, allowedOrigins(c.env))) {
      return new Problem(
        "origin_not_allowed",
        `origin ${origin} is not allowed to call this API (CORS_ORIGINS)`,
        "origin",
      ).response();
    }
    return corsHeaders(c, next);
  };
}
