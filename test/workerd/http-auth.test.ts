/**
 * Auth over every route: no token or a bad token is 401; each role gets exactly the routes of the role
 * table (403 otherwise); and tenants are isolated: another tenant's token addresses a different Durable
 * Object, so every route on the first tenant's session answers 404 (PUT creates the caller's own
 * session) and nothing of the first tenant's session changes.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { sign } from "hono/jwt";
import { generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { ROLE_CAPABILITIES } from "../../src/worker/identity/auth.js";
import { roles } from "../../src/worker/schemas.js";
import { call, client, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";
import { ROUTES, TENANT_ROUTES } from "./http-routes.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

async function send(route: (typeof ROUTES)[number], session: string, jwt: string | undefined): Promise<Response> {
  return call(route.method, route.path(session), {
    ...(jwt === undefined ? {} : { token: jwt }),
    ...(route.body === undefined ? {} : { body: route.body }),
    ...(route.headers === undefined ? {} : { headers: route.headers }),
  });
}

describe("authentication", () => {
  it("every route without a token, with a token signed by another key, or with a malformed header answers 401", async () => {
    const session = uniqueSession("noauth");
    const forged = await sign({ tenant: "t", role: "operator" }, "some-other-secret-of-enough-length", "HS256");
    // A token of an identity provider the tenant never registered (docs/users.md "Identity providers").
    const { privateKey } = await generateKeyPair("ES256");
    const unregistered = await new SignJWT({ tenant: "t", sub: "u" })
      .setProtectedHeader({ alg: "ES256", kid: "k" })
      .setIssuer("https://idp.example/")
      .setAudience("pico")
      .setIssuedAt()
      .setExpirationTime("10m")
      .sign(privateKey);
    for (const route of [...ROUTES, ...TENANT_ROUTES]) {
      for (const jwt of [undefined, forged, "not.a.jwt", unregistered]) {
        const response = await send(route, session, jwt);
        expect(response.status, `${route.name} with ${jwt === undefined ? "no token" : jwt}`).toBe(401);
        expect(response.headers.get("content-type")).toBe("application/problem+json");
        await response.body?.cancel();
      }
    }
    const basic = await call("GET", `/v1/sessions/${session}`, { headers: { authorization: "Basic abc" } });
    expect(basic.status).toBe(401);
    expect((await json(basic))["field"]).toBe("authorization");
    expect(await lastSeq("t", session)).toBe(0);
  });

  it("an expired token and a token without a tenant or with an unknown role answer 401", async () => {
    const session = uniqueSession("claims");
    const secret = (await import("cloudflare:workers")).env.JWT_SECRET;
    const expired = await sign(
      { tenant: "t", role: "client", exp: Math.floor(Date.now() / 1000) - 60 },
      secret,
      "HS256",
    );
    const noTenant = await sign({ role: "client" }, secret, "HS256");
    const badRole = await sign({ tenant: "t", role: "admin" }, secret, "HS256");
    const agentWithoutId = await sign({ tenant: "t", role: "agent" }, secret, "HS256");
    for (const jwt of [expired, noTenant, badRole, agentWithoutId]) {
      const response = await call("GET", `/v1/sessions/${session}`, { token: jwt });
      expect(response.status).toBe(401);
      await response.body?.cancel();
    }
  });
});

describe("roles", () => {
  it("each role reaches exactly the routes the role table grants (403 otherwise) on every route", async () => {
    for (const role of roles) {
      for (const route of ROUTES) {
        // A session nobody created: an allowed route gets past the role check to 404 (PUT creates).
        const session = uniqueSession(`role-${role}`);
        // Agent tokens name the sessions they act in; user tokens their end user.
        const jwt = await token(
          "roles",
          role,
          role === "agent" ? { sessions: [session] } : role === "user" ? { sub: "someone" } : {},
        );
        const response = await send(route, session, jwt);
        const body = response.status === 101 ? {} : await json(response);
        const allowed = ROLE_CAPABILITIES[role].has(route.capability);
        if (role === "user") {
          // A session that is not the user's answers as an unknown one on every route, before the route's
          // action is looked at (users-access.test.ts); PUT on a free name would create the user's own
          // session, but a user creates only from a template (docs/users.md "Templates"): 422 naming it.
          expect(response.status, `${role} ${route.name}`).toBe(route.method === "PUT" ? 422 : 404);
          expect(body[route.method === "PUT" ? "field" : "code"], `${role} ${route.name}`).toBe(
            route.method === "PUT" ? "template" : "session_not_found",
          );
          expect(await lastSeq("roles", session)).toBe(0);
        } else if (!allowed) {
          expect(response.status, `${role} ${route.name}`).toBe(403);
          expect(body["code"]).toBe("forbidden");
          expect(await lastSeq("roles", session)).toBe(0);
        } else if (route.method === "PUT") {
          expect(response.status, `${role} ${route.name}`).toBe(201);
        } else {
          expect(response.status, `${role} ${route.name}`).toBe(404);
          expect(body["code"], `${role} ${route.name}`).toBe("session_not_found");
          expect(await lastSeq("roles", session)).toBe(0);
        }
      }
      // The tenant's routes: an allowed role gets past the role check (to its own, empty catalog).
      for (const route of TENANT_ROUTES) {
        const jwt = await token(`roles-${role}`, role, {
          ...(role === "agent" ? { sessions: ["rig"] } : role === "user" ? { sub: "someone" } : {}),
          ...route.claims,
        });
        const response = await send(route, "unused", jwt);
        const body = await json(response);
        if (role === "user" && route.path("unused").startsWith("/v1/sessions/")) {
          // A session route (import into a name): a session that is not the user's answers as an unknown one.
          expect([response.status, body["code"]], `${role} ${route.name}`).toEqual([404, "session_not_found"]);
          continue;
        }
        // Only a user token has a "me": another role's token carrying a sub has no usage of its own.
        const allowed = route.name === "GET me usage" ? role === "user" : ROLE_CAPABILITIES[role].has(route.capability);
        expect(response.status === 403 && body["code"] === "forbidden", `${role} ${route.name}`).toBe(!allowed);
      }
    }
    // ~100 requests, each to a fresh object: slow on a loaded machine, so a larger budget than the default.
  }, 60_000);

  it("the role table: client and mayor lack the operator routes, operator has all, agent has only the rig's", () => {
    expect([...ROLE_CAPABILITIES.operator].sort()).toEqual(
      [...new Set([...ROUTES, ...TENANT_ROUTES].map((r) => r.capability))].sort(),
    );
    for (const capability of [
      "tasks",
      "inspect",
      "shutdown",
      "fault",
      "quarantine",
      "delete",
      "inbound",
      "tools",
      "mcp",
      "limits",
      "templates",
      "profiles",
      "users",
    ] as const) {
      expect(ROLE_CAPABILITIES.client.has(capability)).toBe(false);
      expect(ROLE_CAPABILITIES.user.has(capability)).toBe(false);
    }
    expect([...ROLE_CAPABILITIES.agent]).toEqual(["rig"]);
    expect(ROLE_CAPABILITIES.client.has("rig")).toBe(false);
    expect(ROLE_CAPABILITIES.mayor.has("inbound")).toBe(false);
    // Only operators mint user tokens; users never reach the tenant's configuration.
    for (const role of ["client", "mayor", "agent", "user"] as const)
      expect(ROLE_CAPABILITIES[role].has("tokens"), role).toBe(false);
    for (const capability of ["tools", "webhooks", "inbound", "rig", "delete", "inspect"] as const)
      expect(ROLE_CAPABILITIES.user.has(capability)).toBe(false);
  });
});

describe("tenant isolation", () => {
  it("another tenant's operator token gets 404 on every route of a session, and the session does not change", async () => {
    const session = uniqueSession("iso");
    const owner = await client("tenant-a");
    await owner.session(session).create({});
    const answered = await owner
      .session(session)
      .conversation("root")
      .accept("private", { idempotencyKey: "some-key", wait: 10 });
    expect(answered.status).toBe("done");
    const before = await lastSeq("tenant-a", session);
    const snapshot = JSON.stringify(await owner.session(session).conversation("root").entries({ limit: 100 }));

    const intruder = await token("tenant-b", "operator");
    // PUT last: it creates tenant-b's own session of that name, which later routes would then find.
    const ordered = [...ROUTES.filter((r) => r.method !== "PUT"), ...ROUTES.filter((r) => r.method === "PUT")];
    for (const route of ordered) {
      const response = await send(route, session, intruder);
      const body = await json(response);
      if (route.method === "PUT") {
        // Creates tenant-b's own session of that name; tenant-a's is another object.
        expect(response.status, route.name).toBe(201);
      } else {
        expect(response.status, route.name).toBe(404);
        expect(body["code"], route.name).toBe("session_not_found");
      }
      expect(await lastSeq("tenant-a", session), route.name).toBe(before);
    }
    expect(JSON.stringify(await owner.session(session).conversation("root").entries({ limit: 100 }))).toBe(snapshot);
    expect((await owner.session(session).get()).lastSeq).toBe(before);
  });
});
