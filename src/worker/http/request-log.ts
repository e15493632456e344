/**
 * The HTTP layer's request log (docs/operations.md "Logs"): one `request` line (log.ts) per request, after
 * the response is made, naming the route template, never the URL.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../identity/auth.js";
import { log, setLogLevel } from "../log.js";

/** Middleware: one `request` line per request, after the response is made. */
export function requestLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    setLogLevel(c.env.LOG_LEVEL);
    const started = Date.now();
    const requestId = c.req.header("cf-ray") ?? crypto.randomUUID();
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
