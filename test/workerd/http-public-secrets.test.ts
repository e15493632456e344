/**
 * Outside development, a Worker bound to a public development secret of `.dev.vars.example` serves nothing: every
 * request answers 500 `misconfigured` naming the secret, and a log line says which (docs/operations.md "Deploying").
 * Without SUBJECT_HASH_KEY it serves everything but an erasure.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/worker/http/app.js";
import type { Env } from "../../src/worker/env.js";
import { setLogSink } from "../../src/worker/log.js";
import { PUBLIC_DEVELOPMENT_SECRETS } from "../../src/worker/platform/public-secrets.js";
import { BASE, token } from "./http-fixtures.js";

const app = createApp();
const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;

afterEach(() => setLogSink(undefined));

/** The app with these vars over the test bindings (ENVIRONMENT undefined: unset). */
function fetchWith(
  vars: Partial<
    Record<"ENVIRONMENT" | "JWT_SECRET" | "WEBHOOK_MASTER_SECRET" | "SUBJECT_HASH_KEY", string | undefined>
  >,
) {
  const configured = { ...(env as unknown as Env), ...vars };
  return async (path: string, init?: RequestInit): Promise<Response> =>
    app.fetch(new Request(`${BASE}${path}`, init), configured, ctx);
}

describe("public development secrets", () => {
  it("A production Worker refuses the public development secrets", async () => {
    const lines: string[] = [];
    setLogSink((line) => lines.push(line));
    for (const environment of ["production", "staging", undefined]) {
      for (const name of ["JWT_SECRET", "WEBHOOK_MASTER_SECRET", "SUBJECT_HASH_KEY"] as const) {
        const fetch = fetchWith({ ENVIRONMENT: environment, [name]: PUBLIC_DEVELOPMENT_SECRETS[name] });
        for (const path of ["/health", "/v1/sessions"]) {
          const response = await fetch(path, {
            headers: { authorization: `Bearer ${await token("acme", "operator")}` },
          });
          expect(response.status, `${environment} ${name} ${path}`).toBe(500);
          const problem = (await response.json()) as { code: string; detail: string };
          expect(problem.code).toBe("misconfigured");
          expect(problem.detail).toContain(name);
          // It names the secret, never its value.
          expect(problem.detail).not.toContain(PUBLIC_DEVELOPMENT_SECRETS[name]);
        }
      }
    }
    const refusals = lines.map((line) => JSON.parse(line) as { type: string; secret?: string });
    expect(refusals.filter((line) => line.type === "misconfigured").map((line) => line.secret)).toContain("JWT_SECRET");
    expect(lines.join("\n")).not.toContain(PUBLIC_DEVELOPMENT_SECRETS.JWT_SECRET);

    // Development serves with them (npm start), and production serves with secrets of its own.
    const development = fetchWith({ ENVIRONMENT: "development", ...PUBLIC_DEVELOPMENT_SECRETS });
    expect((await development("/health")).status).toBe(200);
    expect((await fetchWith({ ENVIRONMENT: "production" })("/health")).status).toBe(200);
  });

  it("Without SUBJECT_HASH_KEY no erasure starts, in development too", async () => {
    const tenant = `no-hash-key-${Date.now().toString(36)}`;
    const headers = { authorization: `Bearer ${await token(tenant, "operator")}` };
    for (const environment of ["development", "production"]) {
      for (const missing of [undefined, "too-short"]) {
        const withoutKey = fetchWith({ ENVIRONMENT: environment, SUBJECT_HASH_KEY: missing });
        // Everything else is served: an upgrade that forgets the new secret is no outage.
        expect((await withoutKey("/v1/sessions", { headers })).status, `${environment} ${missing}`).toBe(200);
        const refused = await withoutKey("/v1/users/someone/erase", { method: "POST", headers });
        expect(refused.status, `${environment} ${missing}`).toBe(500);
        expect(await refused.json()).toMatchObject({
          code: "misconfigured",
          detail: expect.stringContaining("SUBJECT_HASH_KEY"),
        });
      }
    }
    // Nothing was started: with the key, the erasure starts now (202), it is not one already running (200).
    const started = await fetchWith({ ENVIRONMENT: "development" })("/v1/users/someone/erase", {
      method: "POST",
      headers,
    });
    expect(started.status).toBe(202);
  });

  it("An unset ENVIRONMENT is production: no localhost CORS and no plain http: URLs", async () => {
    const fetch = fetchWith({ ENVIRONMENT: undefined });
    const preflight = await fetch("/v1/sessions/x/conversations/root/inputs", {
      method: "OPTIONS",
      headers: { origin: "http://localhost:5173", "access-control-request-method": "POST" },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    const put = await fetch("/v1/webhook-endpoints", {
      method: "POST",
      headers: { authorization: `Bearer ${await token("acme", "operator")}`, "content-type": "application/json" },
      body: JSON.stringify({ url: "http://127.0.0.1:9/hook" }),
    });
    expect(put.status).toBe(422);
    expect(((await put.json()) as { code: string }).code).toBe("invalid_endpoint");
  });
});
