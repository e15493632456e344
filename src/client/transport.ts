/**
 * The typed client's core request/response plumbing (docs/api.md "Typed client"): the options a
 * `PicoClient` is made with, problem+json answers as `PicoApiError`, query strings, and `ClientTransport`,
 * the raw `request` / `send` of PicoClient that the route groups (conversation.ts, rig.ts) and the live
 * watch (watch.ts) call, so they do not import client.ts.
 */
import type { ProblemBody } from "../api/problems.js";

export interface ClientOptions {
  /** e.g. `http://localhost:8787` (no trailing /v1). */
  readonly baseUrl: string;
  readonly token: string;
  /** A fetch implementation (default: the global fetch). */
  readonly fetch?: (request: Request) => Promise<Response>;
}

/** A problem+json answer. */
export class PicoApiError extends Error {
  override readonly name = "PicoApiError";
  constructor(
    readonly status: number,
    readonly problem: ProblemBody,
  ) {
    super(`${status} ${problem.code}: ${problem.detail}`);
  }

  get code(): string {
    return this.problem.code;
  }
}

/** What the route groups and the watch need of PicoClient: its raw `request` (JSON in and out) and `send`. */
export interface ClientTransport {
  request<T>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; body: T; headers: Headers }>;
  send(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal; bearer?: boolean },
  ): Promise<Response>;
}

/** `?a=1&b=x` of the defined values (empty when none). */
export function queryString(query: Readonly<Record<string, string | number | boolean | undefined>>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  return params.size > 0 ? `?${params}` : "";
}
