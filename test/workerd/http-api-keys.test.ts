/**
 * API keys (docs/users.md "API keys"): a long-lived bearer credential of role operator or client, created with a token
 * signed with JWT_SECRET (or another key), answered once, stored only as a hash in the tenant's directory, working as a
 * token of its role does (minting user tokens included) until it is deleted: at once in the isolate that served the
 * delete, within 5 s everywhere; its last use is recorded at most once an hour.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import { secretHash } from "../../src/worker/identity/api-keys.js";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { installSeams, resetSeams } from "./session-fixtures.js";

afterEach(async () => {
  resetSeams();
  await abortAllDurableObjects();
});

interface CreatedKey {
  readonly id: string;
  readonly secret: string;
  readonly prefix: string;
  readonly role: string;
  readonly lastUsedAt: string | null;
}

/** Every cell of every table of the tenant's directory, as text. */
async function directoryText(tenant: string): Promise<string> {
  const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
  return runInDurableObject(directory, (instance: DirectoryObject, state) => {
    const sql = state.storage.sql;
    const tables = sql
      .exec("SELECT name FROM sqlite_master WHERE type = 'table'")
      .toArray()
      .map((row) => String(row["name"]));
    const cells = tables.flatMap((table) =>
      table.startsWith("_cf_") || table.startsWith("sqlite_")
        ? []
        : sql
            .exec(`SELECT * FROM "${table}"`)
            .toArray()
            .map((row) => JSON.stringify(row)),
    );
    void instance;
    return cells.join("\n");
  });
}

describe("API keys", () => {
  it("An API key works until it is revoked, and its secret is never stored", async () => {
    const seams = installSeams();
    const tenant = uniqueSession("keys");
    const operator = await token(tenant, "operator");

    // Created with a JWT_SECRET token; the secret is answered once.
    const created = await call("POST", "/v1/api-keys", {
      token: operator,
      body: { name: "backend", role: "operator" },
    });
    expect(created.status).toBe(201);
    const key = await json<CreatedKey>(created);
    expect(key.secret).toMatch(/^pe_live_/);
    expect(key.secret.startsWith(`${key.prefix}.`)).toBe(true);
    expect(key).toMatchObject({ role: "operator", lastUsedAt: null, expiresAt: null });
    expect(key.id).toMatch(/^ak_[0-9a-f]{16}$/);

    // Only a hash is stored: no cell of the directory holds the secret or its random part.
    const stored = await directoryText(tenant);
    expect(stored).toContain(await secretHash(key.secret));
    const random = key.secret.slice(key.prefix.length + 1);
    for (let i = 0; i + 8 <= random.length; i += 4) expect(stored).not.toContain(random.slice(i, i + 8));

    // It works as an operator token does: sessions, the tenant's config, minting user tokens, creating more keys.
    const session = uniqueSession("by-key");
    expect((await call("PUT", `/v1/sessions/${session}`, { token: key.secret })).status).toBe(201);
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(200);
    expect((await call("GET", "/v1/tools", { token: key.secret })).status).toBe(200);
    const minted = await call("POST", "/v1/tokens", { token: key.secret, body: { sub: "alice" } });
    expect(minted.status).toBe(201);
    const userToken = (await json<{ token: string }>(minted)).token;
    expect((await call("GET", "/v1/me/usage", { token: userToken })).status).toBe(200);
    const clientKey = await json<CreatedKey>(
      await call("POST", "/v1/api-keys", { token: key.secret, body: { name: "frontend-server", role: "client" } }),
    );
    expect(clientKey.role).toBe("client");
    // A client key acts as a client: no tenant config, no keys.
    expect((await call("PUT", `/v1/sessions/${uniqueSession("c")}`, { token: clientKey.secret })).status).toBe(201);
    expect((await call("GET", "/v1/api-keys", { token: clientKey.secret })).status).toBe(403);
    expect((await call("POST", "/v1/tokens", { token: clientKey.secret, body: { sub: "x" } })).status).toBe(403);

    // A scoped key acts only in its sessions.
    const scoped = await json<CreatedKey>(
      await call("POST", "/v1/api-keys", {
        token: operator,
        body: { name: "one-session", role: "operator", sessions: [session], act: ["read"] },
      }),
    );
    expect((await call("GET", `/v1/sessions/${session}`, { token: scoped.secret })).status).toBe(200);
    expect((await call("GET", `/v1/sessions/${uniqueSession("other")}`, { token: scoped.secret })).status).toBe(401);
    // A credential that names its sessions manages no keys (as on every tenant route: 401 naming token.sessions).
    const wider = await call("POST", "/v1/api-keys", { token: scoped.secret, body: { name: "w", role: "client" } });
    expect(wider.status).toBe(401);
    // Its `act` bounds the user tokens it mints.
    const tooMuch = await call("POST", "/v1/tokens", { token: scoped.secret, body: { sub: "bob", act: ["write"] } });
    expect(tooMuch.status).toBe(403);
    expect((await call("POST", "/v1/tokens", { token: scoped.secret, body: { sub: "bob" } })).status).toBe(201);

    // The listing: every key, never a secret, with its last use.
    const listed = await json<{ items: CreatedKey[] }>(await call("GET", "/v1/api-keys", { token: operator }));
    expect(listed.items.map((item) => item.id).sort()).toEqual([key.id, clientKey.id, scoped.id].sort());
    expect(JSON.stringify(listed)).not.toContain(key.secret);
    for (const item of listed.items) expect(item).not.toHaveProperty("secret");
    const mine = listed.items.find((item) => item.id === key.id);
    expect(mine?.lastUsedAt).not.toBeNull();

    // The last use is written at most once an hour.
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant));
    const hash = await secretHash(key.secret);
    const firstUse = await runInDurableObject(directory, (instance: DirectoryObject) =>
      instance.verifyApiKey(key.id, hash),
    );
    seams.time.now += 30 * 60_000;
    const laterUse = await runInDurableObject(directory, (instance: DirectoryObject) =>
      instance.verifyApiKey(key.id, hash),
    );
    expect(laterUse?.lastUsedAt).toBe(firstUse?.lastUsedAt);
    seams.time.now += 31 * 60_000;
    const nextHour = await runInDurableObject(directory, (instance: DirectoryObject) =>
      instance.verifyApiKey(key.id, hash),
    );
    expect(nextHour?.lastUsedAt).toBe(seams.time.now);

    // Deleted through the API: refused at once in this isolate.
    expect(await json(await call("DELETE", `/v1/api-keys/${clientKey.id}`, { token: operator }))).toEqual({
      id: clientKey.id,
      deleted: true,
    });
    expect((await call("GET", "/v1/sessions", { token: clientKey.secret })).status).toBe(401);
    expect((await call("DELETE", `/v1/api-keys/${clientKey.id}`, { token: operator })).status).toBe(404);

    // Deleted where this isolate does not hear of it (another isolate served the delete): refused within 5 s.
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(200);
    await runInDurableObject(directory, (instance: DirectoryObject) => instance.deleteApiKey(key.id));
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(200);
    seams.time.now += 5_000;
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(401);

    // A key of one tenant names that tenant: the same secret shape with another key id is refused.
    const forged = key.secret.replace(/\.[0-9a-f]{16}\./, ".0123456789abcdef.");
    expect((await call("GET", "/v1/sessions", { token: forged })).status).toBe(401);
  });

  it("a key may expire, and bad bodies are refused naming the field", async () => {
    const seams = installSeams();
    const tenant = uniqueSession("keys-expiry");
    const operator = await token(tenant, "operator");
    const past = await call("POST", "/v1/api-keys", {
      token: operator,
      body: { name: "old", role: "client", expiresAt: new Date(seams.time.now - 1000).toISOString() },
    });
    expect(past.status).toBe(400);
    expect(await json(past)).toMatchObject({ code: "invalid_body", field: "expiresAt" });
    const badRole = await call("POST", "/v1/api-keys", { token: operator, body: { name: "x", role: "agent" } });
    expect(await json(badRole)).toMatchObject({ code: "invalid_body", field: "role" });
    const key = await json<CreatedKey>(
      await call("POST", "/v1/api-keys", {
        token: operator,
        body: { name: "short", role: "client", expiresAt: new Date(seams.time.now + 60_000).toISOString() },
      }),
    );
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(200);
    seams.time.now += 60_000;
    expect((await call("GET", "/v1/sessions", { token: key.secret })).status).toBe(401);
    // An expired key stays listed until it is deleted.
    const listed = await json<{ items: CreatedKey[] }>(await call("GET", "/v1/api-keys", { token: operator }));
    expect(listed.items.map((item) => item.id)).toEqual([key.id]);
  });
});
