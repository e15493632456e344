/**
 * Identity providers by JWKS (docs/users.md "Identity providers"): an operator registers a provider
 * (`/v1/issuers`), and tokens the provider signs act as user tokens of the tenant. Each provider here is
 * local: its keys are made in the test and its JWKS is served through the host's fetch seam, which
 * counts the fetches. Time is a manual clock (tokens are signed on it and the caches' TTLs and the
 * unknown-kid cooldown run on it), so nothing depends on how fast the machine is.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { resetIssuerKeys, UNKNOWN_KID_COOLDOWN_MS } from "../../src/worker/identity/issuer-keys.js";
import { REGISTRATIONS_TTL_MS, resetRegistrations } from "../../src/worker/identity/issuer-tokens.js";
import { checkJwksUri } from "../../src/worker/http/routes/issuers.js";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { Problem } from "../../src/worker/problems.js";
import { IssuersClient } from "../../src/client/issuers.js";
import { call, client, json, token, uniqueSession } from "./http-fixtures.js";
import { LocalProvider, providerFetch, unsignedToken } from "./issuer-fixtures.js";
import { ManualClock, ManualTime } from "./session-fixtures.js";

let time = new ManualTime();
let providers: LocalProvider[] = [];

beforeEach(() => {
  time = new ManualTime();
  providers = [];
  resetIssuerKeys();
  resetRegistrations();
  setHostSeams({ clock: () => new ManualClock(time), fetch: providerFetch(providers) });
});

afterEach(async () => {
  setHostSeams({});
  resetIssuerKeys();
  resetRegistrations();
  await abortAllDurableObjects();
});

let tenants = 0;
function uniqueTenant(label: string): string {
  tenants += 1;
  return `${label}-${Date.now().toString(36)}-${tenants}`;
}

function provider(label: string): LocalProvider {
  const made = new LocalProvider(label);
  providers.push(made);
  return made;
}

async function register(tenant: string, name: string, body: Record<string, unknown>): Promise<Response> {
  return call("PUT", `/v1/issuers/${name}`, { token: await token(tenant, "operator"), body });
}

/** A user's create of a session with the provider's token (the body a user's create takes). */
/**
 * Create `session` as the provider's user: users create from an operator's template (docs/users.md
 * "Templates"), so the tenant (the token's `tenant` claim, else X-Tenant) gets one first.
 */
async function createAsUser(jwt: string, session: string, headers: Record<string, string> = {}): Promise<Response> {
  const payload = JSON.parse(atob((jwt.split(".")[1] ?? "").replaceAll("-", "+").replaceAll("_", "/"))) as {
    tenant?: string;
  };
  const tenant = payload.tenant ?? headers["x-tenant"] ?? headers["X-Tenant"] ?? "";
  const template = await call("PUT", "/v1/templates/provider-users", {
    token: await token(tenant, "operator"),
    body: { model: "echo" },
  });
  expect([200, 201], await template.clone().text()).toContain(template.status);
  await template.body?.cancel();
  return call("PUT", `/v1/sessions/${session}`, { token: jwt, body: { template: "provider-users" }, headers });
}

/** GET /v1/sessions with the provider's token: the status (the body is drained). */
async function listStatus(jwt: string, headers: Record<string, string> = {}): Promise<number> {
  const response = await call("GET", "/v1/sessions?limit=1", { token: jwt, headers });
  await response.body?.cancel();
  return response.status;
}

async function refusal(jwt: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const response = await call("GET", "/v1/sessions?limit=1", { token: jwt, headers });
  const body = await json(response);
  expect(response.status, JSON.stringify(body)).toBe(401);
  expect(body["code"]).toBe("unauthorized");
  return body;
}

describe("identity providers by JWKS", () => {
  it("JWKS: wrong iss or aud, alg none, HS256 are refused; a new kid fetches once", async () => {
    const tenant = uniqueTenant("jwks");
    const idp = provider("main");
    const rsa = await idp.addKey("k1", "RS256");
    expect((await register(tenant, "main", idp.registration())).status).toBe(201);

    const claims = { sub: "user-1", tenant };
    expect(await listStatus(await idp.sign(rsa, claims, time.now))).toBe(200);
    expect(idp.fetches).toBe(1);

    // Wrong iss: another provider's issuer (not registered), or this provider's keys claiming another issuer.
    await refusal(await idp.sign(rsa, { ...claims, iss: "https://elsewhere.example/" }, time.now));
    // Wrong aud, or none.
    await refusal(await idp.sign(rsa, { ...claims, aud: "another-api" }, time.now));
    await refusal(await idp.sign(rsa, { ...claims, aud: undefined }, time.now));
    // No exp.
    await refusal(await idp.sign(rsa, { ...claims, exp: undefined }, time.now));
    // Expired beyond the 60 s skew: 401, never 403.
    const seconds = Math.floor(time.now / 1000);
    const expired = await refusal(await idp.sign(rsa, { ...claims, iat: seconds - 700, exp: seconds - 61 }, time.now));
    expect(expired["field"]).toBe("token.exp");
    expect(await listStatus(await idp.sign(rsa, { ...claims, iat: seconds - 700, exp: seconds - 30 }, time.now))).toBe(
      200,
    );
    // alg none, with every claim right.
    await refusal(unsignedToken({ iss: idp.issuer, aud: idp.audience, ...claims, iat: seconds, exp: seconds + 600 }));
    // HS256 with an iss: with this deployment's own secret, and with the provider's public key as the HMAC secret.
    // (Role user and real time, which hono/jwt checks: the deployment's own path would accept it, were an iss not a
    // provider's.)
    const real = Math.floor(Date.now() / 1000);
    const hs = { iss: idp.issuer, aud: idp.audience, ...claims, role: "user", iat: real, exp: real + 600 };
    await refusal(await sign(hs, env.JWT_SECRET, "HS256"));
    await refusal(await sign(hs, String(idp.served[0]?.n), "HS256"));
    // A signature by a key the JWKS does not hold under that kid.
    const stranger = await idp.addKey("stranger", "RS256", { publish: false });
    const forged = (await idp.sign(stranger, claims, time.now)).split(".");
    const genuine = (await idp.sign(rsa, claims, time.now)).split(".");
    await refusal(`${genuine[0]}.${forged[1]}.${forged[2]}`);
    expect(idp.fetches).toBe(1);

    // The provider rotates in a new key: a burst of tokens with the new kid fetches the JWKS once.
    const next = await idp.addKey("k2", "RS256");
    const burst = await Promise.all(
      Array.from({ length: 8 }, async (_, i) =>
        listStatus(await idp.sign(next, { ...claims, sub: `user-${i}` }, time.now)),
      ),
    );
    expect(burst).toEqual(Array.from({ length: 8 }, () => 200));
    expect(idp.fetches).toBe(2);

    // A flood of made-up kids within the cooldown fetches nothing more, and is refused.
    for (let i = 0; i < 5; i++) {
      const kid = await idp.addKey(`bogus-${i}`, "RS256", { publish: false });
      await refusal(await idp.sign(kid, claims, time.now));
    }
    expect(idp.fetches).toBe(2);
    // After the cooldown an unknown kid may fetch again, once.
    time.now += UNKNOWN_KID_COOLDOWN_MS + 1000;
    await Promise.all([0, 1, 2].map(async () => refusal(await idp.sign("bogus-0", claims, time.now))));
    expect(idp.fetches).toBe(3);
  });

  it("a provider's RS256, ES256 and EdDSA tokens act as user tokens: they create and reach sessions, and only a user's routes", async () => {
    const tenant = uniqueTenant("algs");
    const idp = provider("algs");
    expect((await register(tenant, "algs", idp.registration())).status).toBe(201);
    const algs = ["RS256", "ES256", "EdDSA"] as const;
    for (const alg of algs) await idp.addKey(`key-${alg}`, alg);
    for (const alg of algs) {
      const kid = `key-${alg}`;
      const jwt = await idp.sign(kid, { sub: `user-${alg}`, tenant }, time.now);
      const session = uniqueSession(`idp-${alg}`);
      const created = await createAsUser(jwt, session);
      expect(created.status, `${alg}: ${await created.clone().text()}`).toBe(201);
      await created.body?.cancel();
      const read = await call("GET", `/v1/sessions/${session}`, { token: jwt });
      expect(read.status, alg).toBe(200);
      await read.body?.cancel();
      // The session is the tenant's: its operator reads it.
      const byOperator = await call("GET", `/v1/sessions/${session}`, { token: await token(tenant, "operator") });
      expect(byOperator.status, alg).toBe(200);
      await byOperator.body?.cancel();
      // Always role user: an operator's route is 403 for a valid provider token (its capability is missing).
      const operatorRoute = await call("GET", "/v1/issuers", { token: jwt });
      expect(operatorRoute.status, alg).toBe(403);
      await operatorRoute.body?.cancel();
    }
    // Without a kid, every key of the token's type is tried (two RSA keys here; the second signed).
    await idp.addKey("key-RS256-b", "RS256");
    time.now += UNKNOWN_KID_COOLDOWN_MS + 1000;
    expect(await listStatus(await idp.sign("key-RS256-b", { sub: "no-kid", tenant }, time.now))).toBe(200);
    expect(
      await listStatus(await idp.sign("key-RS256-b", { sub: "no-kid", tenant }, time.now, { headerKid: false })),
    ).toBe(200);
    const unknownNoKid = await idp.addKey("unpublished", "RS256", { publish: false });
    await refusal(await idp.sign(unknownNoKid, { sub: "no-kid", tenant }, time.now, { headerKid: false }));
    // The provider sets the lifetime: past an hour is accepted, past TOKEN_MAX_LIFETIME_SECONDS (24 h) is not; no iat
    // is accepted.
    const now = Math.floor(time.now / 1000);
    expect(
      await listStatus(await idp.sign("key-ES256", { sub: "long", tenant, iat: now, exp: now + 7200 }, time.now)),
    ).toBe(200);
    expect(
      (await refusal(await idp.sign("key-ES256", { sub: "long", tenant, iat: now, exp: now + 86_401 }, time.now)))[
        "field"
      ],
    ).toBe("token.exp");
    expect(await listStatus(await idp.sign("key-ES256", { sub: "no-iat", tenant, iat: undefined }, time.now))).toBe(
      200,
    );
    expect(
      (await refusal(await idp.sign("key-ES256", { sub: "later", tenant, iat: now + 120, exp: now + 600 }, time.now)))[
        "field"
      ],
    ).toBe("token.iat");
    // A provider's claim of another role changes nothing.
    const kid = "key-ES256";
    const claimsOperator = await idp.sign(kid, { sub: "mallory", tenant, role: "operator" }, time.now);
    const tools = await call("GET", "/v1/tools", { token: claimsOperator });
    expect(tools.status).toBe(403);
    await tools.body?.cancel();
  });

  it("the tenant comes from the token's tenant claim, else the X-Tenant header; the issuer must be registered for it", async () => {
    const tenant = uniqueTenant("home");
    const other = uniqueTenant("other");
    const idp = provider("tenancy");
    const kid = await idp.addKey("k", "ES256");
    expect((await register(tenant, "idp", idp.registration())).status).toBe(201);

    // The claim.
    const session = uniqueSession("claimed");
    const withClaim = await idp.sign(kid, { sub: "u", tenant }, time.now);
    const created = await createAsUser(withClaim, session);
    expect(created.status).toBe(201);
    await created.body?.cancel();
    expect((await call("GET", `/v1/sessions/${session}`, { token: await token(tenant, "operator") })).status).toBe(200);
    expect((await call("GET", `/v1/sessions/${session}`, { token: await token(other, "operator") })).status).toBe(404);

    // The header, when the provider cannot add a claim.
    const noClaim = await idp.sign(kid, { sub: "u" }, time.now);
    const viaHeader = uniqueSession("header");
    const createdViaHeader = await createAsUser(noClaim, viaHeader, { "x-tenant": tenant });
    expect(createdViaHeader.status).toBe(201);
    await createdViaHeader.body?.cancel();
    expect((await call("GET", `/v1/sessions/${viaHeader}`, { token: await token(tenant, "operator") })).status).toBe(
      200,
    );

    // Neither: refused. Both, differing: refused. A tenant that did not register the issuer: refused.
    expect((await refusal(noClaim))["field"]).toBe("x-tenant");
    expect((await refusal(withClaim, { "x-tenant": other }))["field"]).toBe("x-tenant");
    expect(await listStatus(withClaim, { "x-tenant": tenant })).toBe(200);
    await refusal(noClaim, { "x-tenant": other });
    await refusal(await idp.sign(kid, { sub: "u", tenant: other }, time.now));
    await refusal(noClaim, { "x-tenant": "not a tenant" });
    // The registration's subClaim names the user; a token without it is refused.
    await refusal(await idp.sign(kid, { sub: undefined, tenant }, time.now));
  });

  it("an unregistered or deleted issuer is refused with 401, and another isolate's copy of the registrations lives at most its TTL", async () => {
    const tenant = uniqueTenant("reg");
    const idp = provider("reg");
    const kid = await idp.addKey("k", "EdDSA");
    const jwt = await idp.sign(kid, { sub: "u", tenant }, time.now);
    await refusal(jwt);
    expect(idp.fetches).toBe(0);

    expect((await register(tenant, "reg", idp.registration())).status).toBe(201);
    expect(await listStatus(jwt)).toBe(200);

    // Another isolate's change (written straight into the directory): this isolate's copy still accepts the token...
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    await runInDurableObject(directory, (instance: DirectoryObject) => {
      expect(instance.deleteIssuer("reg")).toBe(true);
    });
    expect(await listStatus(jwt)).toBe(200);
    // ...until the copy's TTL has passed.
    time.now += REGISTRATIONS_TTL_MS + 1000;
    await refusal(await idp.sign(kid, { sub: "u", tenant }, time.now));

    // A DELETE through the API is seen at once by the isolate that served it.
    expect((await register(tenant, "reg", idp.registration())).status).toBe(201);
    const fresh = await idp.sign(kid, { sub: "u", tenant }, time.now);
    expect(await listStatus(fresh)).toBe(200);
    const deleted = await call("DELETE", "/v1/issuers/reg", { token: await token(tenant, "operator") });
    expect(await json(deleted)).toEqual({ name: "reg", deleted: true });
    await refusal(fresh);
  });

  it("the keys outlive an isolate through the Cache API, until their max-age", async () => {
    const tenant = uniqueTenant("cache");
    const idp = provider("cache");
    idp.cacheControl = "public, max-age=120";
    const kid = await idp.addKey("k", "RS256");
    expect((await register(tenant, "cache", idp.registration())).status).toBe(201);
    expect(await listStatus(await idp.sign(kid, { sub: "u", tenant }, time.now))).toBe(200);
    expect(idp.fetches).toBe(1);
    // A recycled isolate (nothing in memory) reads the Cache API's copy.
    resetIssuerKeys();
    resetRegistrations();
    expect(await listStatus(await idp.sign(kid, { sub: "u", tenant }, time.now))).toBe(200);
    expect(idp.fetches).toBe(1);
    // Past the provider's max-age the set is fetched again.
    time.now += 121_000;
    expect(await listStatus(await idp.sign(kid, { sub: "u", tenant }, time.now))).toBe(200);
    expect(idp.fetches).toBe(2);
    // A provider that cannot be reached: 401 naming it (no keys were ever held for this one).
    const down = provider("down");
    expect(
      (await register(tenant, "down", { ...down.registration(), jwksUri: "https://down.idp.test/jwks" })).status,
    ).toBe(201);
    const downKid = await down.addKey("k", "RS256");
    const body = await refusal(await down.sign(downKid, { sub: "u", tenant }, time.now));
    expect(String(body["detail"])).toContain("JWKS answered 404");
  });

  it("a provider's token that names its tenant in X-Tenant reaches the session's MCP endpoint (its tools call the routes with that tenant)", async () => {
    const tenant = uniqueTenant("mcp");
    const idp = provider("mcp");
    const kid = await idp.addKey("k", "ES256");
    expect((await register(tenant, "mcp", idp.registration())).status).toBe(201);
    const jwt = await idp.sign(kid, { sub: "u" }, time.now);
    const session = uniqueSession("mcp");
    const created = await createAsUser(jwt, session, { "x-tenant": tenant });
    expect(created.status).toBe(201);
    await created.body?.cancel();
    const response = await call("POST", `/v1/sessions/${session}/mcp`, {
      token: jwt,
      headers: { "x-tenant": tenant, accept: "application/json, text/event-stream" },
      body: {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
      },
    });
    const answer = await json(response);
    expect(response.status, JSON.stringify(answer)).toBe(200);
    expect(answer["id"]).toBe(1);
  });

  it("a provider's user owns the sessions it creates: another user of the provider gets the unknown id's 404, a minted token of the same sub reaches them", async () => {
    const tenant = uniqueTenant("owner");
    const idp = provider("owner");
    const kid = await idp.addKey("k", "ES256");
    expect((await register(tenant, "owner", idp.registration())).status).toBe(201);
    const alice = await idp.sign(kid, { sub: "alice", tenant }, time.now);
    const bob = await idp.sign(kid, { sub: "bob", tenant }, time.now);
    const session = uniqueSession("owned");
    const created = await createAsUser(alice, session);
    expect(created.status).toBe(201);
    await created.body?.cancel();
    expect((await call("GET", `/v1/sessions/${session}`, { token: alice })).status).toBe(200);
    const foreign = await call("GET", `/v1/sessions/${session}`, { token: bob });
    const unknown = await call("GET", `/v1/sessions/${uniqueSession("never")}`, { token: bob });
    expect(foreign.status).toBe(404);
    const { instance: _a, ...foreignBody } = await json(foreign);
    const { instance: _b, ...unknownBody } = await json(unknown);
    expect(foreignBody).toEqual(unknownBody);
    // The same sub, minted by the product's backend, is the same user.
    const minted = await call("GET", `/v1/sessions/${session}`, {
      token: await token(tenant, "user", { sub: "alice" }),
    });
    expect(minted.status).toBe(200);
    await minted.body?.cancel();
  });

  it("a provider's user is counted by its sub against the user limits, like a minted user", async () => {
    const tenant = uniqueTenant("limits");
    const idp = provider("limits");
    const kid = await idp.addKey("k", "RS256");
    expect((await register(tenant, "limits", idp.registration())).status).toBe(201);
    const limits = await call("PUT", "/v1/limits", {
      token: await token(tenant, "operator"),
      body: { user: { requestsPerMinute: 2 } },
    });
    expect(limits.status).toBe(200);
    await limits.body?.cancel();
    const busy = await idp.sign(kid, { sub: "busy", tenant }, time.now);
    const statuses = [await listStatus(busy), await listStatus(busy), await listStatus(busy)];
    expect(statuses).toEqual([200, 200, 429]);
    // Another user of the same provider has its own count.
    expect(await listStatus(await idp.sign(kid, { sub: "calm", tenant }, time.now))).toBe(200);
  });

  it("a provider's token is accepted only in the Authorization header, never as ?access_token=; a watch token minted with it is", async () => {
    // Watch tokens are verified against the wall clock and an open watch's expiry against the host's:
    // run this one at the wall clock's time so the two agree.
    time.now = Date.now();
    const tenant = uniqueTenant("url");
    const idp = provider("url");
    const kid = await idp.addKey("k", "RS256");
    expect((await register(tenant, "url", idp.registration())).status).toBe(201);
    const jwt = await idp.sign(kid, { sub: "u", tenant }, time.now);
    const session = uniqueSession("url");
    expect((await createAsUser(jwt, session)).status).toBe(201);
    const response = await call("GET", `/v1/sessions/${session}/watch?access_token=${jwt}`);
    expect(response.status).toBe(401);
    await response.body?.cancel();
    // A watch token minted with it opens the watch.
    const minted = await call("POST", `/v1/sessions/${session}/watch-token`, { token: jwt });
    expect(minted.status).toBe(201);
    const watchToken = (await json<{ token: string }>(minted)).token;
    const stream = await call("GET", `/v1/sessions/${session}/watch?access_token=${watchToken}`, {
      headers: { accept: "text/event-stream" },
    });
    expect(stream.status, stream.status === 200 ? "" : await stream.clone().text()).toBe(200);
    await stream.body?.cancel();
  });
});

describe("issuer registrations", () => {
  it("PUT validates (422 invalid_issuer naming the field, nothing written), GET lists and reads, DELETE removes; unknown is 404", async () => {
    const tenant = uniqueTenant("crud");
    const operator = await token(tenant, "operator");
    const good = {
      issuer: "https://login.example/",
      jwksUri: "https://login.example/.well-known/jwks.json",
      audience: "pico",
    };
    const bad: readonly (readonly [string, string, unknown])[] = [
      ["name", "bad_name", good],
      ["name", "x".repeat(33), good],
      ["issuer", "ok", { ...good, issuer: "" }],
      ["issuer", "ok", { jwksUri: good.jwksUri, audience: "pico" }],
      ["jwksUri", "ok", { ...good, jwksUri: "not a url" }],
      ["jwksUri", "ok", { ...good, jwksUri: "ftp://login.example/jwks" }],
      ["jwksUri", "ok", { ...good, jwksUri: "https://user:pass@login.example/jwks" }],
      ["audience", "ok", { ...good, audience: 42 }],
      ["subClaim", "ok", { ...good, subClaim: "has space" }],
      ["extra", "ok", { ...good, extra: true }],
    ];
    for (const [field, name, body] of bad) {
      const response = await call("PUT", `/v1/issuers/${name}`, { token: operator, body });
      const problem = await json(response);
      expect(response.status, `${field}: ${JSON.stringify(problem)}`).toBe(422);
      expect(problem["code"]).toBe("invalid_issuer");
      expect(problem["field"], JSON.stringify(problem)).toBe(field);
    }
    expect(await json(await call("GET", "/v1/issuers", { token: operator }))).toEqual({ items: [] });

    const created = await call("PUT", "/v1/issuers/login", { token: operator, body: good });
    expect(created.status).toBe(201);
    const record = await json(created);
    expect(record).toMatchObject({ name: "login", ...good, subClaim: "sub" });
    const replaced = await call("PUT", "/v1/issuers/login", { token: operator, body: { ...good, subClaim: "email" } });
    expect(replaced.status).toBe(200);
    expect(await json(replaced)).toMatchObject({ name: "login", subClaim: "email", createdAt: record["createdAt"] });
    // One registration per issuer and audience: another name for the same pair is refused.
    const duplicate = await call("PUT", "/v1/issuers/login-2", { token: operator, body: good });
    expect(duplicate.status).toBe(422);
    expect((await json(duplicate))["field"]).toBe("audience");
    expect(
      (await call("PUT", "/v1/issuers/login-2", { token: operator, body: { ...good, audience: "other" } })).status,
    ).toBe(201);

    // The typed client reads the same.
    const issuers = new IssuersClient(await client(tenant, "operator"));
    expect((await issuers.list()).items.map((item) => item.name)).toEqual(["login", "login-2"]);
    expect(await issuers.get("login")).toMatchObject({ name: "login", subClaim: "email" });
    expect(await json(await call("DELETE", "/v1/issuers/login", { token: operator }))).toEqual({
      name: "login",
      deleted: true,
    });
    for (const [method, name] of [
      ["GET", "login"],
      ["DELETE", "login"],
      ["GET", "bad_name"],
      ["DELETE", "nope"],
    ] as const) {
      const response = await call(method, `/v1/issuers/${name}`, { token: operator });
      expect(response.status, `${method} ${name}`).toBe(404);
      expect((await json(response))["code"]).toBe("issuer_not_found");
    }
    // Another tenant sees none of them.
    expect(
      await json(await call("GET", "/v1/issuers", { token: await token(uniqueTenant("crud-other"), "operator") })),
    ).toEqual({ items: [] });
  });

  it("jwksUri is https: outside development", () => {
    expect(() => checkJwksUri("http://localhost:8788/jwks", "development")).not.toThrow();
    for (const environment of ["production", "staging", undefined]) {
      try {
        checkJwksUri("http://idp.example/jwks", environment);
        expect.unreachable(`plain http: accepted in ${String(environment)}`);
      } catch (error) {
        expect(error).toBeInstanceOf(Problem);
        expect((error as Problem).field).toBe("jwksUri");
        expect((error as Problem).code).toBe("invalid_issuer");
      }
    }
    expect(() => checkJwksUri("https://idp.example/jwks", "production")).not.toThrow();
  });
});
