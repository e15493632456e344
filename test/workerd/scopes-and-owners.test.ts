/**
 * Who may do what (docs/api.md "Authentication and roles", docs/users.md): a token that names its sessions reaches no
 * tenant-level route (every route the app serves without a `:session`, but the listing, a create, the models and
 * minting, which hold the claim themselves); a refused PATCH writes nothing, and the variable cap counts a template's
 * defaults. (The keyed erasure hash and a client token's missing "me" are parts of "Imports and exports respect owners
 * and erasures", test/workerd/import.test.ts.)
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { app, servedRoutes } from "../../src/worker/http/app.js";
import { tenantLevel, type Capability } from "../../src/worker/identity/auth.js";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { TENANT_ROUTES } from "./http-routes.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `scopes-${label}-${Date.now().toString(36)}-${tenants}`;
}

/** Routes the app serves without a `:session` that answer without a bearer token (signed deliveries, public). */
const UNAUTHENTICATED = /^\/(?:health|v1\/openapi\.json|v1\/webhooks\/|v1\/tool-results\/|v1\/inbound\/)/;

/** `/v1/tools/:tool` -> `/v1/tools/x`. */
function concrete(path: string): string {
  return path.replace(/:[A-Za-z]+/g, "x");
}

/** An empty JSON body for the methods that carry one. */
function bodyFor(method: string): { body?: unknown } {
  return method === "GET" || method === "HEAD" ? {} : { body: {} };
}

describe("who may do what", () => {
  it("A sessions-scoped token reaches no tenant-level route", async () => {
    const tenant = uniqueTenant("tenant-level");
    const operator = await token(tenant, "operator");
    const mine = uniqueSession("scoped");
    expect((await call("PUT", `/v1/sessions/${mine}`, { token: operator, body: {} })).status).toBe(201);
    const scoped = await token(tenant, "operator", { sessions: [mine] });

    // Every route the app serves without a `:session` is tenant-level, but these four, which hold the claim themselves.
    const held = ["GET /v1/sessions", "POST /v1/sessions", "GET /v1/models", "POST /v1/tokens"];
    const tenantRoutes = servedRoutes(app).filter(
      (route) =>
        !route.path.includes(":session") &&
        !UNAUTHENTICATED.test(route.path) &&
        !held.includes(`${route.method} ${route.path}`),
    );
    // The list, each served: erase, erasures, retention, stats, usage, profiles, templates, tools, limits, MCP
    // servers, webhook endpoints, issuers (and the token's own "me").
    const paths = tenantRoutes.map((route) => route.path);
    for (const prefix of [
      "/v1/users/:sub/erase",
      "/v1/erasures/",
      "/v1/retention",
      "/v1/stats",
      "/v1/usage",
      "/v1/me/usage",
      "/v1/profiles",
      "/v1/templates",
      "/v1/tools",
      "/v1/limits",
      "/v1/mcp-servers",
      "/v1/webhook-endpoints",
      "/v1/issuers",
    ])
      expect(
        paths.some((path) => path.startsWith(prefix)),
        prefix,
      ).toBe(true);
    for (const route of tenantRoutes) {
      const response = await call(route.method, concrete(route.path), { token: scoped, ...bodyFor(route.method) });
      const body = await json(response);
      expect([response.status, body["code"], body["field"]], `${route.method} ${route.path}`).toEqual([
        401,
        "unauthorized",
        "token.sessions",
      ]);
    }
    // The same routes to the same role without the claim pass the check (to whatever the route answers next).
    for (const route of tenantRoutes) {
      const response = await call(route.method, concrete(route.path), { token: operator, ...bodyFor(route.method) });
      const body = await json(response);
      expect(body["field"], `${route.method} ${route.path}`).not.toBe("token.sessions");
    }
    // Nothing was erased, revoked or configured: the scoped erase did not start an erasure.
    const templates = await json<{ items: unknown[] }>(await call("GET", "/v1/templates", { token: operator }));
    expect(templates.items).toEqual([]);

    // The routes the claim holds by itself still answer within it.
    const listed = await json<{ items: { session: string }[] }>(await call("GET", "/v1/sessions", { token: scoped }));
    expect(listed.items.map((item) => item.session)).toEqual([mine]);
    expect((await call("GET", "/v1/models", { token: scoped })).status).toBe(200);
    expect((await call("GET", `/v1/sessions/${mine}`, { token: scoped })).status).toBe(200);

    // The shared route table of the auth tests agrees with the rule, route by route.
    for (const route of TENANT_ROUTES) {
      const path = route.path("unused");
      const session = /^\/v1\/sessions\/([^/?]+)/.exec(path)?.[1];
      const heldByClaim = held.includes(`${route.method} ${path.split("?")[0] ?? ""}`);
      expect(tenantLevel(route.capability, session), route.name).toBe(
        !path.startsWith("/v1/sessions/") && !heldByClaim,
      );
    }
    const capabilities: Capability[] = ["session.create", "session.read", "config", "tokens"];
    for (const capability of capabilities) expect(tenantLevel(capability, undefined)).toBe(false);
  }, 60_000);

  it("A refused PATCH writes nothing", async () => {
    const tenant = uniqueTenant("patch");
    const operator = await token(tenant, "operator");
    const name = uniqueSession("patch");
    const full = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`v${i}`, `value ${i}`]));
    expect(
      (await call("PUT", `/v1/sessions/${name}`, { token: operator, body: { title: "before", variables: full } }))
        .status,
    ).toBe(201);
    // A 33rd variable is refused after the merge: the title that came with it is not written either.
    const refused = await call("PATCH", `/v1/sessions/${name}`, {
      token: operator,
      body: { title: "after", labels: ["new"], metadata: { k: "v" }, variables: { extra: "one too many" } },
    });
    expect(refused.status, await refused.clone().text()).toBe(400);
    expect(await json(refused)).toMatchObject({ field: "variables" });
    const listed = await json<{ items: { session: string; title: string; labels: string[]; metadata: object }[] }>(
      await call("GET", "/v1/sessions?limit=200", { token: operator }),
    );
    expect(listed.items.find((item) => item.session === name)).toMatchObject({
      title: "before",
      labels: [],
      metadata: {},
    });
    const summary = await json<{ title?: string; labels: string[] }>(
      await call("GET", `/v1/sessions/${name}`, { token: operator }),
    );
    expect(summary).toMatchObject({ title: "before", labels: [] });
    // Within the cap both are written, and answered together.
    const accepted = await call("PATCH", `/v1/sessions/${name}`, {
      token: operator,
      body: { title: "after", variables: { v0: null, extra: "fits" } },
    });
    expect(accepted.status, await accepted.clone().text()).toBe(200);
    const patched = await json<{ title: string; variables: Record<string, string> }>(accepted);
    expect(patched.title).toBe("after");
    expect(Object.keys(patched.variables)).toHaveLength(32);
    expect(patched.variables["extra"]).toBe("fits");

    // A create with 32 variables from a template with a default of its own holds 33: refused, and nothing created.
    const template = await call("PUT", "/v1/templates/with-default", {
      token: operator,
      body: { model: "echo", variables: { from_template: "default" } },
    });
    expect(template.status, await template.clone().text()).toBe(201);
    const over = uniqueSession("over");
    const created = await call("PUT", `/v1/sessions/${over}`, {
      token: operator,
      body: { template: "with-default", variables: full },
    });
    expect(created.status, await created.clone().text()).toBe(400);
    expect(await json(created)).toMatchObject({ field: "variables" });
    expect((await call("GET", `/v1/sessions/${over}`, { token: operator })).status).toBe(404);
    // One fewer of the body's fits (31 + the template's default = 32).
    const { v31: _dropped, ...fewer } = full;
    const fits = await call("PUT", `/v1/sessions/${over}`, {
      token: operator,
      body: { template: "with-default", variables: fewer },
    });
    expect(fits.status, await fits.clone().text()).toBe(201);
  });
});
