/**
 * Structured logs for operators (issue 14): one JSON line per request and per task invocation, which
 * Workers Logs (`[observability]` in wrangler.toml) indexes by field and `wrangler tail` streams. A line
 * carries ids, kinds, outcomes and durations, never a token, a query string or input text: request
 * lines name the route template (`/v1/sessions/:session/...`), not the URL.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./auth.js";

export type LogLine =
  | {
      readonly type: "request";
      readonly requestId: string;
      readonly method: string;
      readonly route: string;
      readonly status: number;
      readonly durationMs: number;
      readonly tenant?: string;
      readonly session?: string;
      readonly conversation?: string;
    }
  | {
      readonly type: "task";
      readonly taskId: number;
      readonly kind: string;
      readonly method: string;
      readonly outcome: "returned" | "withheld";
      readonly durationMs: number;
    };

/** Where lines go (console.log, which Workers Logs collects); tests replace it. */
let sink: (line: string) => void = (line) => console.log(line);

export function setLogSink(next: ((line: string) => void) | undefined): void {
  sink = next ?? ((line) => console.log(line));
}

export function log(line: LogLine): void {
  sink(JSON.stringify(line));
}

/** Middleware: one `request` line per request, after the response is made. */
export function requestLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
