/**
 * Browsers (docs/api.md "Browsers"): CORS (configured origins, the development default, the header lists, a disallowed
 * origin gets no CORS headers and writes nothing), watch tokens (`POST .../watch-token`, the only tokens
 * `?access_token=` accepts, checked at connect), and token lifetimes (every token carries exp; a lifetime
 * above the configured maximum is refused).
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/worker/http/app.js";
import type { Env } from "../../src/worker/env.js";
import { BASE, call, client, exists, json, token, uniqueSession, watchToken } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const app = createApp();
const ctx = {
  waitUntil: () => undefined,
  passThroughOnException: () => undefined,
  props: {},
} as unknown as ExecutionContext;

/** The app under a different configuration (vars override wrangler.toml's). */
function withVars(
  vars: Partial<Record<"ENVIRONMENT" | "CORS_ORIGINS" | "TOKEN_MAX_LIFETIME_SECONDS", string>>,
): (request: Request) => Promise<Response> {
  const configured = { ...(env as unknown as Env), ...vars };
  return async (request) => app.fetch(request, configured, ctx);
}

function preflight(origin: string, path = "/v1/sessions/x/conversations/root/inputs"): Request {
  return new Request(`${BASE}${path}`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type,idempotency-key",
    },
  });
}

describe("CORS", () => {
  it("development allows any port of localhost and 127.0.0.1, with the request and exposed header lists", async () => {
    const fetch = withVars({ ENVIRONMENT: "development" });
    for (const origin of ["http://localhost:5173", "http://127.0.0.1:8080", "http://localhost"]) {
      const response = await fetch(preflight(origin));
      expect(response.status, origin).toBe(204);
      expect(response.headers.get("access-control-allow-origin")).toBe(origin);
      expect(response.headers.get("access-control-allow-headers")?.toLowerCase().split(",")).toEqual([
        "authorization",
        "content-type",
        "idempotency-key",
        "last-event-id",
        "if-match",
        "x-tenant",
        "mcp-protocol-version",
      ]);
      expect(response.headers.get("access-control-allow-methods")).toContain("PATCH");
    }
    const session = uniqueSession("cors-dev");
    const created = await fetch(
      new Request(`${BASE}/v1/sessions/${session}`, {
        method: "PUT",
        headers: { origin: "http://localhost:5173", authorization: `Bearer ${await token("cors", "client")}` },
      }),
    );
    expect(created.status).toBe(201);
    expect(created.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect(created.headers.get("access-control-expose-headers")?.toLowerCase().split(",")).toEqual([
      "etag",
      "location",
      "retry-after",
      "idempotency-key",
    ]);
    // Problems are readable by the page too.
    const refused = await fetch(
      new Request(`${BASE}/v1/sessions/${session}`, { headers: { origin: "http://localhost:5173" } }),
    );
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
  });

  it("a disallowed origin gets no CORS headers and its request writes nothing", async () => {
    const fetch = withVars({ ENVIRONMENT: "development" });
    const origin = "https://evil.example";
    const pre = await fetch(preflight(origin));
    for (const [name] of pre.headers) expect(name.startsWith("access-control-"), name).toBe(false);
    const session = uniqueSession("cors-evil");
    const response = await fetch(
      new Request(`${BASE}/v1/sessions/${session}`, {
        method: "PUT",
        headers: { origin, authorization: `Bearer ${await token("cors", "client")}` },
      }),
    );
    expect(response.status).toBe(403);
    for (const [name] of response.headers) expect(name.startsWith("access-control-"), name).toBe(false);
    expect(await json(response)).toMatchObject({ code: "origin_not_allowed", field: "origin" });
    expect(await exists("cors", session)).toBe(false);
  });

  it("CORS_ORIGINS replaces the default; production without it allows no origin", async () => {
    const configured = withVars({
      ENVIRONMENT: "production",
      CORS_ORIGINS: "https://app.example.com, https://admin.example.com",
    });
    expect((await configured(preflight("https://app.example.com"))).headers.get("access-control-allow-origin")).toBe(
      "https://app.example.com",
    );
    expect(
      (await configured(preflight("http://localhost:5173"))).headers.get("access-control-allow-origin"),
    ).toBeNull();
    const production = withVars({ ENVIRONMENT: "production" });
    for (const origin of ["http://localhost:5173", "https://app.example.com"]) {
      const response = await production(preflight(origin));
      expect(response.headers.get("access-control-allow-origin"), origin).toBeNull();
    }
    // Requests without Origin (servers, curl) are unaffected.
    expect((await production(new Request(`${BASE}/health`))).status).toBe(200);
  });
});

describe("watch tokens", () => {
  it("a watch token opens its one watch from the URL, for SSE and WebSocket, and nothing else", async () => {
    const tenant = "browser";
    const session = uniqueSession("wt");
    const api = await client(tenant);
    await api.session(session).create({});
    const jwt = await token(tenant, "client");
    const issued = await call("POST", `/v1/sessions/${session}/conversations/root/watch-token`, { token: jwt });
    expect(issued.status).toBe(201);
    const body = await json<{ token: string; expiresIn: number; expiresAt: string }>(issued);
    expect(body.expiresIn).toBe(600);
    expect(Date.parse(body.expiresAt) - Date.now()).toBeLessThanOrEqual(600_000);

    const sse = await call("GET", `/v1/sessions/${session}/conversations/root/watch?access_token=${body.token}`);
    expect(sse.status).toBe(200);
    expect(sse.headers.get("content-type")).toContain("text/event-stream");
    await sse.body?.cancel();
    const { SELF } = await import("cloudflare:test");
    const ws = await SELF.fetch(`${BASE}/v1/sessions/${session}/conversations/root/watch?access_token=${body.token}`, {
      headers: { upgrade: "websocket" },
    });
    expect(ws.status).toBe(101);
    ws.webSocket?.accept();
    ws.webSocket?.close();

    // Another watch, another route, the header: refused.
    const fork = await api.session(session).conversation("root").fork({ at: "start" });
    for (const [method, path, status] of [
      ["GET", `/v1/sessions/${session}/watch?access_token=${body.token}`, 403],
      ["GET", `/v1/sessions/${session}/conversations/${fork.conversationId}/watch?access_token=${body.token}`, 403],
    ] as const) {
      const response = await call(method, path);
      expect(response.status, path).toBe(status);
      await response.body?.cancel();
    }
    const viaHeader = await call("GET", `/v1/sessions/${session}/conversations/root/entries`, { token: body.token });
    expect(viaHeader.status).toBe(403);
    const mint = await call("POST", `/v1/sessions/${session}/conversations/root/watch-token`, { token: body.token });
    expect(mint.status).toBe(403);

    const sessionToken = await json<{ token: string }>(
      await call("POST", `/v1/sessions/${session}/watch-token`, { token: jwt, body: { ttlSeconds: 60 } }),
    );
    const sessionWatch = await call("GET", `/v1/sessions/${session}/watch?access_token=${sessionToken.token}`);
    expect(sessionWatch.status).toBe(200);
    await sessionWatch.body?.cancel();
  });

  it("a watch token matches its conversation whether the path says root or the id, and no other conversation", async () => {
    const tenant = "browser";
    const session = uniqueSession("wt-match");
    const api = await client(tenant);
    await api.session(session).create({});
    const rootId = (await api.session(session).get()).rootConversationId;
    const fork = await api.session(session).conversation("root").fork({ at: "start" });
    const byRef = await watchToken(tenant, session, "root");
    const byId = await watchToken(tenant, session, String(rootId));
    const forkToken = await watchToken(tenant, session, String(fork.conversationId));
    for (const [jwt, path, status] of [
      [byRef, "root", 200],
      [byRef, String(rootId), 200],
      [byId, "root", 200],
      [byId, String(rootId), 200],
      [byRef, String(fork.conversationId), 403],
      [byId, String(fork.conversationId), 403],
      [forkToken, String(fork.conversationId), 200],
      [forkToken, "root", 403],
      [forkToken, String(rootId), 403],
    ] as const) {
      const response = await call("GET", `/v1/sessions/${session}/conversations/${path}/watch?access_token=${jwt}`);
      expect(response.status, `${jwt === byRef ? "root" : jwt === byId ? "id" : "fork"} token on ${path}`).toBe(status);
      await response.body?.cancel();
    }
  });

  it("a normal bearer token in ?access_token= is refused with a problem that says why", async () => {
    const tenant = "browser";
    const session = uniqueSession("wt-bearer");
    await (await client(tenant)).session(session).create({});
    const response = await call(
      "GET",
      `/v1/sessions/${session}/conversations/root/watch?access_token=${await token(tenant, "client")}`,
    );
    expect(response.status).toBe(401);
    const problem = await json(response);
    expect(problem).toMatchObject({ code: "unauthorized", field: "access_token" });
    expect(String(problem["detail"])).toContain("watch-token");
  });

  it("a watch token is checked when the stream connects: expired it is refused, an open stream outlives it", async () => {
    const tenant = "browser";
    const session = uniqueSession("wt-exp");
    const api = await client(tenant);
    await api.session(session).create({});
    const now = Math.floor(Date.now() / 1000);
    const scoped = { tenant, role: "client", scope: "watch", watch: { session, conversation: "root" }, iat: now - 10 };
    const expired = await sign({ ...scoped, exp: now - 1 }, env.JWT_SECRET, "HS256");
    const refused = await call("GET", `/v1/sessions/${session}/conversations/root/watch?access_token=${expired}`);
    expect(refused.status).toBe(401);
    await refused.body?.cancel();

    const short = await sign({ ...scoped, exp: now + 2 }, env.JWT_SECRET, "HS256");
    const stream = await call("GET", `/v1/sessions/${session}/conversations/root/watch?access_token=${short}`);
    expect(stream.status).toBe(200);
    const reader = stream.body?.pipeThrough(new TextDecoderStream()).getReader();
    if (reader === undefined) throw new Error("no body");
    try {
      await new Promise((resolve) => setTimeout(resolve, 3000));
      await api.session(session).conversation("root").accept("after expiry", { wait: 10 });
      let text = "";
      while (!text.includes("after expiry")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      expect(text).toContain("after expiry");
    } finally {
      await reader.cancel();
    }
  }, 20_000);
});

describe("token lifetimes", () => {
  it("every token carries exp, and a lifetime above the configured maximum is refused", async () => {
    const session = uniqueSession("lifetime");
    const now = Math.floor(Date.now() / 1000);
    const noExp = await sign({ tenant: "life", role: "client", iat: now }, env.JWT_SECRET, "HS256");
    const tooLong = await sign(
      { tenant: "life", role: "client", iat: now, exp: now + 25 * 3600 },
      env.JWT_SECRET,
      "HS256",
    );
    const noIatTooLong = await sign({ tenant: "life", role: "client", exp: now + 25 * 3600 }, env.JWT_SECRET, "HS256");
    const fine = await sign(
      { tenant: "life", role: "client", iat: now, exp: now + 23 * 3600 },
      env.JWT_SECRET,
      "HS256",
    );
    for (const [jwt, field] of [
      [noExp, "token.exp"],
      [tooLong, "token.exp"],
      [noIatTooLong, "token.exp"],
    ] as const) {
      const response = await call("GET", `/v1/sessions/${session}`, { token: jwt });
      expect(response.status).toBe(401);
      expect(await json(response)).toMatchObject({ code: "unauthorized", field });
    }
    const ok = await call("GET", `/v1/sessions/${session}`, { token: fine });
    expect(ok.status).toBe(404);
    await ok.body?.cancel();
    const shorter = withVars({ TOKEN_MAX_LIFETIME_SECONDS: "3600" });
    const response = await shorter(
      new Request(`${BASE}/v1/sessions/${session}`, { headers: { authorization: `Bearer ${fine}` } }),
    );
    expect(response.status).toBe(401);
  });
});
