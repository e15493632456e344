/**
 * Fixtures for the end-to-end HTTP tests: tokens signed with the test JWT secret (vitest.config.ts),
 * typed clients whose fetch goes through the Worker's own fetch (SELF), raw requests, unique session
 * names, and helpers that read a session's lastSeq through its stub to prove a refused request wrote
 * nothing.
 */
import { SELF } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { PicoClient } from "../../src/client/client.js";
import type { Role } from "../../src/worker/schemas.js";
import { sessionStub } from "../../src/worker/http/routes/shared.js";
import type { Env } from "../../src/worker/env.js";

export const BASE = "https://pico.test";

let counter = 0;

/** A session name no other test uses. */
export function uniqueSession(label: string): string {
  counter += 1;
  return `${label}-${Date.now().toString(36)}-${counter}`;
}

export async function token(tenant: string, role: Role, extra: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return sign(
    { tenant, role, iat: now, exp: now + 3600, ...(role === "agent" ? { agent: "agent-1" } : {}), ...extra },
    env.JWT_SECRET,
    "HS256",
  );
}

/** A watch token for one watch (what `?access_token=` accepts), issued by the API itself. */
export async function watchToken(tenant: string, session: string, conversation?: string): Promise<string> {
  const path =
    conversation === undefined
      ? `/v1/sessions/${session}/watch-token`
      : `/v1/sessions/${session}/conversations/${conversation}/watch-token`;
  const response = await call("POST", path, { token: await token(tenant, "client") });
  if (response.status !== 201) throw new Error(`watch-token: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { token: string }).token;
}

export const workerFetch = (request: Request): Promise<Response> => SELF.fetch(request);

export async function client(tenant: string, role: Role = "client"): Promise<PicoClient> {
  return new PicoClient({ baseUrl: BASE, token: await token(tenant, role), fetch: workerFetch });
}

/** A raw request through the Worker. */
export async function call(
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<Response> {
  const headers = new Headers(options.headers);
  if (options.token !== undefined) headers.set("authorization", `Bearer ${options.token}`);
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  return SELF.fetch(new Request(`${BASE}${path}`, { method, headers, ...(body === undefined ? {} : { body }) }));
}

export async function json<T = Record<string, unknown>>(response: Response): Promise<T> {
  return (await response.json()) as T;
}

/** The session's lastSeq, read through its stub (0 when never created: nothing exists). */
export async function lastSeq(tenant: string, session: string): Promise<number> {
  const stub = sessionStub(env as unknown as Env, tenant, session);
  if (!(await stub.exists())) return 0;
  const outcome = await stub.op("lastSeq");
  if (!outcome.ok) throw new Error(outcome.problem.detail);
  return outcome.value;
}

export async function exists(tenant: string, session: string): Promise<boolean> {
  return sessionStub(env as unknown as Env, tenant, session).exists();
}

export function stubOf(tenant: string, session: string): ReturnType<typeof sessionStub> {
  return sessionStub(env as unknown as Env, tenant, session);
}

/** Poll until `check` returns a value (commits run asynchronously after an accept returns). */
export async function until<T>(check: () => Promise<T | undefined>, what: string, tries = 200): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}
