/**
 * Credentials over their life (docs/operations.md "Rotating JWT_SECRET", docs/api.md "Authentication and roles"):
 * `JWT_SECRET_PREVIOUS` keeps the tokens the secret before a rotation signed valid, and signs nothing; and no refusal
 * of a credential, for any reason, repeats it or any part of it in the problem body or in any log line.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign, verify } from "hono/jwt";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/worker/http/app.js";
import type { Env } from "../../src/worker/env.js";
import { setLogSink } from "../../src/worker/log.js";
import { BASE, call, json, token, uniqueSession, watchToken } from "./http-fixtures.js";

afterEach(async () => {
  setLogSink(undefined);
  vi.restoreAllMocks();
  await abortAllDurableObjects();
});

const app = createApp();
const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;

const OLD = (env as unknown as Env).JWT_SECRET ?? "";
const NEW = "rotated-jwt-secret-for-tests-0123456789";

/** The app with these JWT secrets (the rest of the configuration as the tests'). */
function withSecrets(
  current: string,
  previous?: string,
): (path: string, bearer: string, init?: RequestInit) => Promise<Response> {
  const configured = { ...(env as unknown as Env), JWT_SECRET: current, JWT_SECRET_PREVIOUS: previous } as Env;
  return (path, bearer, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${bearer}`);
    return Promise.resolve(app.fetch(new Request(`${BASE}${path}`, { ...init, headers }), configured, ctx));
  };
}

async function signed(
  secret: string,
  tenant: string,
  role: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return sign({ tenant, role, iat: now, exp: now + 600, ...extra }, secret, "HS256");
}

async function verifiesWith(jwt: string, secret: string): Promise<boolean> {
  return verify(jwt, secret, "HS256").then(
    () => true,
    () => false,
  );
}

/** Every 8-character piece of `credential` that `text` holds. */
function pieces(credential: string, text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i + 8 <= credential.length; i++) {
    const piece = credential.slice(i, i + 8);
    if (text.includes(piece)) found.push(piece);
  }
  return found;
}

describe("JWT secret rotation", () => {
  it("A rotated JWT secret keeps earlier tokens valid until the previous secret is removed", async () => {
    const tenant = uniqueSession("rotation");
    const before = await signed(OLD, tenant, "operator");
    const after = await signed(NEW, tenant, "operator");
    // Before the rotation: the old secret alone.
    const unrotated = withSecrets(OLD);
    expect((await unrotated("/v1/sessions", before)).status).toBe(200);
    // During it: the new secret, the old one as JWT_SECRET_PREVIOUS. Both verify.
    const rotating = withSecrets(NEW, OLD);
    expect((await rotating("/v1/sessions", before)).status).toBe(200);
    expect((await rotating("/v1/sessions", after)).status).toBe(200);
    // After it: the previous secret removed, only the new tokens verify.
    const rotated = withSecrets(NEW);
    expect((await rotated("/v1/sessions", after)).status).toBe(200);
    const refused = await rotated("/v1/sessions", before);
    expect(refused.status).toBe(401);
    expect(await json(refused)).toMatchObject({ code: "unauthorized" });
    // A token signed with neither is refused while rotating too.
    const other = await signed("some-other-secret-0123456789abcdef", tenant, "operator");
    expect((await rotating("/v1/sessions", other)).status).toBe(401);
  });

  it("The previous JWT secret verifies and never signs", async () => {
    const tenant = uniqueSession("previous");
    const rotating = withSecrets(NEW, OLD);
    const operator = await signed(OLD, tenant, "operator");
    // A user token minted with an operator token the previous secret signed: signed with the current secret.
    const minted = await rotating("/v1/tokens", operator, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sub: "alice" }),
    });
    expect(minted.status).toBe(201);
    const userToken = (await json<{ token: string }>(minted)).token;
    expect(await verifiesWith(userToken, NEW)).toBe(true);
    expect(await verifiesWith(userToken, OLD)).toBe(false);
    // So is a watch token.
    const session = uniqueSession("watched");
    expect((await rotating(`/v1/sessions/${session}`, operator, { method: "PUT" })).status).toBe(201);
    const watch = await rotating(`/v1/sessions/${session}/watch-token`, operator, { method: "POST" });
    expect(watch.status).toBe(201);
    const watchJwt = (await json<{ token: string }>(watch)).token;
    expect(await verifiesWith(watchJwt, NEW)).toBe(true);
    expect(await verifiesWith(watchJwt, OLD)).toBe(false);
    // A previous secret too short to be one is a misconfiguration, not a silent downgrade.
    const short = await withSecrets(NEW, "short")("/v1/sessions", operator);
    expect(short.status).toBe(500);
    expect(await json(short)).toMatchObject({ code: "misconfigured" });
  });
});

describe("credentials in errors", () => {
  it("No error repeats a credential", async () => {
    const tenant = uniqueSession("no-echo");
    const session = uniqueSession("echo-session");
    const operator = await token(tenant, "operator");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: operator })).status).toBe(201);
    const now = Math.floor(Date.now() / 1000);
    const secret = (env as unknown as Env).JWT_SECRET ?? "";

    const deleted = await json<{ id: string; secret: string }>(
      await call("POST", "/v1/api-keys", { token: operator, body: { name: "gone", role: "client" } }),
    );
    expect((await call("DELETE", `/v1/api-keys/${deleted.id}`, { token: operator })).status).toBe(200);
    const revokedUser = await token(tenant, "user", { sub: "revoked-user", iat: now - 10 });
    expect((await call("POST", "/v1/users/revoked-user/revoke", { token: operator })).status).toBe(200);
    const rsHeader = btoa(JSON.stringify({ alg: "RS256", typ: "JWT" })).replace(/=+$/, "");
    const rsPayload = btoa(JSON.stringify({ iss: "https://id.example", aud: "x", sub: "u", exp: now + 600 })).replace(
      /=+$/,
      "",
    );

    /** Each failure mode: the credential, and where it goes. */
    const modes: {
      readonly what: string;
      readonly credential: string;
      readonly path?: string;
      readonly inUrl?: boolean;
    }[] = [
      {
        what: "expired",
        credential: await sign({ tenant, role: "client", iat: now - 7200, exp: now - 3600 }, secret, "HS256"),
      },
      {
        what: "not yet valid",
        credential: await sign({ tenant, role: "client", nbf: now + 3600, exp: now + 7200 }, secret, "HS256"),
      },
      {
        what: "issued in the future",
        credential: await sign({ tenant, role: "client", iat: now + 3600, exp: now + 7200 }, secret, "HS256"),
      },
      {
        what: "forged",
        credential: await sign(
          { tenant, role: "operator", iat: now, exp: now + 600 },
          "not-the-secret-0123456789",
          "HS256",
        ),
      },
      {
        what: "another algorithm",
        credential: await sign({ tenant, role: "client", iat: now, exp: now + 600 }, secret, "HS512"),
      },
      { what: "malformed", credential: "thisIsNotAJwtAtAllButItIsLongEnough.0123456789" },
      {
        what: "too long-lived",
        credential: await sign({ tenant, role: "client", iat: now, exp: now + 10 * 86_400 }, secret, "HS256"),
      },
      {
        what: "bad claims",
        credential: await sign({ tenant, role: "emperor", iat: now, exp: now + 600 }, secret, "HS256"),
      },
      {
        what: "user without sub",
        credential: await sign({ tenant, role: "user", iat: now, exp: now + 600 }, secret, "HS256"),
      },
      { what: "revoked user", credential: revokedUser },
      { what: "a session outside its claim", credential: await token(tenant, "client", { sessions: ["elsewhere"] }) },
      { what: "bearer token in the URL", credential: operator, inUrl: true },
      {
        what: "another watch's token",
        credential: await watchToken(tenant, session),
        path: `/v1/sessions/${session}/conversations/root/watch`,
        inUrl: true,
      },
      {
        what: "identity provider token of no registration",
        credential: `${rsHeader}.${rsPayload}.c2lnbmF0dXJlLWJ5dGVz`,
      },
      { what: "unknown API key", credential: deleted.secret.replace(/\.[0-9a-f]{16}\./, ".0123456789abcdef.") },
      { what: "deleted API key", credential: deleted.secret },
      { what: "malformed API key", credential: "pe_live_this-is-not-shaped-like-a-key-at-all" },
      { what: "API key in the URL", credential: deleted.secret, path: `/v1/sessions/${session}/watch`, inUrl: true },
    ];

    for (const mode of modes) {
      const lines: string[] = [];
      setLogSink((line) => lines.push(line));
      for (const method of ["log", "info", "warn", "error", "debug"] as const)
        vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
          lines.push(args.map(String).join(" "));
        });
      const path = mode.path ?? (mode.inUrl === true ? `/v1/sessions/${session}/watch` : `/v1/sessions/${session}`);
      const response =
        mode.inUrl === true
          ? await call("GET", `${path}?access_token=${encodeURIComponent(mode.credential)}`)
          : await call("GET", path, { token: mode.credential });
      const body = await response.text();
      expect([401, 403], `${mode.what}: ${response.status} ${body}`).toContain(response.status);
      expect(pieces(mode.credential, body), `${mode.what}: the problem repeats the credential`).toEqual([]);
      expect(pieces(mode.credential, lines.join("\n")), `${mode.what}: a log line repeats the credential`).toEqual([]);
      setLogSink(undefined);
      vi.restoreAllMocks();
    }
  });
});
