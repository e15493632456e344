/**
 * Structured logs for operators (docs/operations.md "Logs"): one JSON line per request and per task invocation, which
 * Workers Logs (`[observability]` in wrangler.toml) indexes by field and `wrangler tail` streams. A line
 * carries ids, kinds, outcomes and durations, never a token, a query string or input text: request
 * lines name the route template (`/v1/sessions/:session/...`), not the URL. `LOG_LEVEL=quiet` silences them
 * (the tests' setting; wrangler.toml says `info`). The request line is written by the HTTP layer's middleware
 * (http/request-log.ts).
 */

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
      /** The session's tenant and name (absent for a session not created over HTTP). */
      readonly tenant?: string;
      readonly session?: string;
      readonly conversation: number;
      readonly taskId: number;
      readonly kind: string;
      readonly method: string;
      /**
       * The task's status when the invocation returned (its terminal status if it settled), or `withheld` (quarantine).
       */
      readonly outcome: string;
      readonly durationMs: number;
    }
  /** The Worker refuses to serve: a secret holds a public development value (http/public-secrets.ts). */
  | { readonly type: "misconfigured"; readonly secret: string; readonly message: string };

/** `LOG_LEVEL`: `info` (the default) writes every line; `quiet` writes none (the vitest config sets it). */
export type LogLevel = "info" | "quiet";

const toConsole = (line: string): void => console.log(line);
/** Where lines go (console.log, which Workers Logs collects); tests replace it. */
let sink: ((line: string) => void) | undefined;
let level: LogLevel = "info";

/** Capture every line (tests), whatever the level; `undefined` restores console output. */
export function setLogSink(next: ((line: string) => void) | undefined): void {
  sink = next;
}

/** Apply the `LOG_LEVEL` var (anything but `quiet` is `info`). */
export function setLogLevel(value: string | undefined): void {
  level = value === "quiet" ? "quiet" : "info";
}

/** Whether a line would be written now (the request log builds nothing when not). */
export function logging(): boolean {
  return sink !== undefined || level === "info";
}

export function log(line: LogLine): void {
  if (sink !== undefined) sink(JSON.stringify(line));
  else if (level === "info") toConsole(JSON.stringify(line));
}
