/**
 * The HTTP layer's request log (docs/operations.md "Logs"): one `request` line (log.ts) per request, after
 * the response is made, naming the route template, never the URL.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../identity/auth.js";
import { log, logging, setLogLevel } from "../log.js";

/** This isolate's prefix for request ids where Cloudflare gives none (`wrangler dev`): one random UUID per isolate. */
let isolatePrefix: string | undefined;
let served = 0;

/** The request's id: its `cf-ray`, else this isolate's prefix and a count (unique without a random UUID a request). */
function requestIdOf(ray: string | undefined): string {
  if (ray !== undefined) return ray;
  isolatePrefix ??= crypto.randomUUID();
  served += 1;
  return `${isolatePrefix}-${served}`;
}

/** Middleware: one `request` line per request, after the response is made (nothing at all while the log is quiet). */
export function requestLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    setLogLevel(c.env.LOG_LEVEL);
    if (!logging()) return next();
    const started = Date.now();
    const requestId = requestIdOf(c.req.header("cf-ray"));
    try {
      await next();
    } finally {
      const claims = c.get("claims") as AppEnv["Variables"]["claims"] | undefined;
      const session = c.req.param("session");
      const conversation = c.req.param("conversation");
      log({
        type: "request",
        requestId,
        method: c.req.method,
        route: c.req.routePath,
        status: c.res.status,
        durationMs: Date.now() - started,
        ...(claims === undefined ? {} : { tenant: claims.tenant }),
        ...(session === undefined ? {} : { session }),
        ...(conversation === undefined ? {} : { conversation }),
      });
    }
  };
}
