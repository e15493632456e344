/**
 * End users (docs/users.md): a `user` token reaches only the sessions its user owns (or a grant
 * names), and only for the actions of its `act`; another user's session answers exactly as an unknown
 * one does. The route table is generated from the app's own route list, so a route added later is in it.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sign } from "hono/jwt";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { API_ROUTES } from "../../src/api/openapi.js";
import { app, servedRoutes } from "../../src/worker/http/app.js";
import { call, json, lastSeq, token } from "./http-fixtures.js";
import { createBody, fromTemplate, putUserTemplate } from "./users-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const TENANT = "users";

// Users create sessions from a template (docs/users.md "Templates"): the tenant has one.
beforeEach(async () => {
  await putUserTemplate(TENANT);
});

/** A user token for `sub` (an hour long unless `extra` says otherwise). */
function user(sub: string, extra: Record<string, unknown> = {}, tenant = TENANT): Promise<string> {
  return token(tenant, "user", { sub, ...extra });
}

let counter = 0;
function name(label: string): string {
  counter += 1;
  return `${label}-${Date.now().toString(36)}-${counter}`;
}

/** Create a session with a token (a user token's from the tenant's template); answers its name. */
async function create(jwt: string, session: string, body: Record<string, unknown> = {}): Promise<string> {
  const response = await call("PUT", `/v1/sessions/${session}`, { token: jwt, body: createBody(jwt, body) });
  expect(response.status, await response.clone().text()).toBe(201);
  return session;
}

/**
 * `/v1/sessions/:session/...` with every parameter filled in (the session's by `session`, the rest with plausible
 * values).
 */
function concrete(path: string, session: string): string {
  const values: Record<string, string> = {
    session,
    conversation: "root",
    requestKey: "some-key",
    pendingId: "t3-client",
    deliveryId: "3.we_aaaaaaaaaaaaaaaa",
    name: "github",
  };
  return path.replace(/:([A-Za-z]+)/g, (_, param: string) => values[param] ?? "2");
}

/**
 * A problem body as text with its `instance` (the request's path) blanked: what "byte-identical apart from instance"
 * compares.
 */
async function withoutInstance(response: Response): Promise<string> {
  const text = await response.text();
  const instance = (JSON.parse(text) as { instance?: unknown }).instance;
  return instance === undefined ? text : text.replace(`"instance":${JSON.stringify(instance)}`, `"instance":""`);
}

/** What B's session looks like to B: its summary, root entries and directory row. */
async function stateOf(jwt: string, session: string): Promise<string> {
  const summary = await call("GET", `/v1/sessions/${session}`, { token: jwt });
  const entries = await call("GET", `/v1/sessions/${session}/conversations/root/entries?limit=100`, { token: jwt });
  const listed = await call("GET", `/v1/sessions?q=${session}`, { token: jwt });
  return JSON.stringify([
    summary.status,
    await summary.json(),
    entries.status,
    await entries.json(),
    await listed.json(),
  ]);
}

const SESSION_ROUTES = servedRoutes(app).filter(
  (route) => route.path === "/v1/sessions/:session" || route.path.startsWith("/v1/sessions/:session/"),
);

describe("end users: ownership", () => {
  it("A well-formed input to another user's session is refused as an unknown session, uncounted, with or without limits", async () => {
    const alice = await user("alice");
    const bob = await user("bob");
    const theirs = await create(bob, name("bob"));
    const seq = await lastSeq(TENANT, theirs);
    // The owner check rides the accept itself on this route (no call of its own): it must still refuse first.
    for (const limits of [{}, { user: { inputsPerDay: 10 } }]) {
      expect((await call("PUT", "/v1/limits", { token: await token(TENANT, "operator"), body: limits })).status).toBe(
        200,
      );
      for (const headers of [{}, { "idempotency-key": "alice-key" }] as Record<string, string>[]) {
        const send = (session: string) =>
          call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=1`, {
            token: alice,
            body: { input: "let me in" },
            headers,
          });
        const refused = await send(theirs);
        const missing = await send(name("nobody"));
        expect(refused.status).toBe(404);
        expect(await withoutInstance(refused)).toBe(await withoutInstance(missing));
        const read = await call("GET", `/v1/sessions/${theirs}/inputs/1`, { token: alice });
        expect(read.status).toBe(404);
        expect(await json(read)).toMatchObject({ code: "session_not_found" });
      }
    }
    expect(await lastSeq(TENANT, theirs)).toBe(seq);
    const usage = await call("GET", "/v1/usage?sub=alice", { token: await token(TENANT, "operator") });
    expect((await json<{ items: { inputs: number }[] }>(usage)).items.map((day) => day.inputs)).toEqual([]);
    expect((await call("PUT", "/v1/limits", { token: await token(TENANT, "operator"), body: {} })).status).toBe(200);
  });

  it("A name deleted and created again by another user reaches only its new owner at once", async () => {
    const alice = await user("alice");
    const bob = await user("bob");
    const session = await create(alice, name("reused"));
    const send = (jwt: string, key: string) =>
      call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
        token: jwt,
        body: { input: "hello" },
        headers: { "idempotency-key": key },
      });
    // Alice's input makes the object read (and keep) its owner; the same object then serves the new incarnation.
    expect((await send(alice, "alice-1")).status).toBe(201);
    const deleted = await call("DELETE", `/v1/sessions/${session}`, { token: await token(TENANT, "operator") });
    expect(deleted.status).toBe(200);
    await create(bob, session);
    const refused = await send(alice, "alice-2");
    expect(refused.status).toBe(404);
    expect(await json(refused)).toMatchObject({ code: "session_not_found" });
    expect((await call("GET", `/v1/sessions/${session}`, { token: alice })).status).toBe(404);
    expect((await send(bob, "bob-1")).status).toBe(201);
  });

  it("User A is refused on every route of user B's session", async () => {
    const alice = await user("alice");
    const bob = await user("bob");
    const theirs = await create(bob, name("bob"), { title: "Bob's" });
    const accepted = await call("POST", `/v1/sessions/${theirs}/conversations/root/inputs?wait=10`, {
      token: bob,
      body: { input: "private" },
      headers: { "idempotency-key": "bob-key" },
    });
    expect(accepted.status).toBe(201);
    const seq = await lastSeq(TENANT, theirs);
    const before = await stateOf(bob, theirs);

    // Generated from the app's route list: a route added later is in this table without an edit.
    expect(SESSION_ROUTES.length).toBeGreaterThan(40);
    for (const route of SESSION_ROUTES) {
      const unknown = name("nobody");
      // The session PUT names the template, so on a free name it creates: B's name is refused for being B's.
      const putSession = route.method === "PUT" && route.path === "/v1/sessions/:session";
      const options = {
        token: alice,
        ...(route.method === "GET" || route.method === "DELETE" ? {} : { body: putSession ? fromTemplate() : {} }),
      };
      const refused = await call(route.method, concrete(route.path, theirs), options);
      const missing = await call(route.method, concrete(route.path, unknown), options);
      const label = `${route.method} ${route.path}`;
      expect(refused.status, label).toBe(404);
      expect(missing.status, label).toBe(missing.status === 201 ? 201 : 404);
      expect(refused.headers.get("content-type"), label).toBe("application/problem+json");
      if (putSession) {
        // A PUT on a free name creates A's own session; on B's name it is the unknown-session answer.
        expect(missing.status, label).toBe(201);
        const again = await call("GET", concrete(route.path, name("nobody")), { token: alice });
        expect(await withoutInstance(refused), label).toBe(await withoutInstance(again));
      } else {
        expect(await withoutInstance(refused), label).toBe(await withoutInstance(missing));
      }
      expect(await lastSeq(TENANT, theirs), label).toBe(seq);
    }
    expect(await stateOf(bob, theirs)).toBe(before);
  }, 60_000);

  it("Lists and cursors never show another user's sessions", async () => {
    const tag = name("tag");
    const alice = await user("alice");
    const bob = await user("bob");
    const operator = await token(TENANT, "operator");
    const tenantWide = await token(TENANT, "client");
    const mine: string[] = [];
    for (let i = 0; i < 3; i++) mine.push(await create(alice, name("a"), { title: `${tag} a${i}` }));
    const posted = await call("POST", "/v1/sessions", { token: alice, body: fromTemplate({ title: `${tag} a3` }) });
    expect(posted.status).toBe(201);
    const postedName = (await json<{ session: string }>(posted)).session;
    expect(posted.headers.get("location")).toBe(`/v1/sessions/${postedName}`);
    mine.push(postedName);
    const bobs = [
      await create(bob, name("b"), { title: `${tag} b0` }),
      await create(bob, name("b"), { title: `${tag} b1` }),
    ];
    const shared = await create(tenantWide, name("c"), { title: `${tag} c0` });

    async function pages(jwt: string, q: string): Promise<{ readonly sessions: string[]; readonly cursors: string[] }> {
      const sessions: string[] = [];
      const cursors: string[] = [];
      let cursor: string | undefined;
      do {
        const response = await call(
          "GET",
          `/v1/sessions?limit=1&q=${encodeURIComponent(q)}${cursor === undefined ? "" : `&cursor=${cursor}`}`,
          { token: jwt },
        );
        expect(response.status).toBe(200);
        const page = await json<{ items: { session: string; owner?: string }[]; cursor?: string }>(response);
        sessions.push(...page.items.map((row) => row.session));
        cursor = page.cursor;
        if (cursor !== undefined) cursors.push(cursor);
      } while (cursor !== undefined);
      return { sessions, cursors };
    }

    // Every page, with and without a filter, holds only the caller's own sessions.
    const alicePages = await pages(alice, tag);
    expect(alicePages.sessions.sort()).toEqual([...mine].sort());
    expect((await pages(alice, `${tag} a1`)).sessions).toEqual([mine[1]]);
    expect((await pages(alice, `${tag} b`)).sessions).toEqual([]);
    expect((await pages(bob, tag)).sessions.sort()).toEqual([...bobs].sort());
    expect((await pages(alice, bobs[0] ?? "")).sessions).toEqual([]);
    // The operator and tenant-wide client tokens still see everything.
    expect((await pages(operator, tag)).sessions.sort()).toEqual([...mine, ...bobs, shared].sort());
    expect((await pages(tenantWide, tag)).sessions.sort()).toEqual([...mine, ...bobs, shared].sort());
    const listed = await json<{ items: { session: string; owner?: string }[] }>(
      await call("GET", `/v1/sessions?q=${encodeURIComponent(tag)}`, { token: operator }),
    );
    expect(Object.fromEntries(listed.items.map((row) => [row.session, row.owner ?? null]))).toEqual({
      ...Object.fromEntries(mine.map((s) => [s, "alice"])),
      ...Object.fromEntries(bobs.map((s) => [s, "bob"])),
      [shared]: null,
    });

    // A cursor is good only for the listing it came from.
    expect(alicePages.cursors.length).toBeGreaterThan(1);
    const operatorCursor = (await pages(operator, tag)).cursors[0] ?? "";
    for (const [jwt, cursor] of [
      [bob, alicePages.cursors[0] ?? ""],
      [await user("alice", {}, "users-other"), alicePages.cursors[0] ?? ""],
      [operator, alicePages.cursors[0] ?? ""],
      [alice, operatorCursor],
    ] as const) {
      const response = await call("GET", `/v1/sessions?limit=1&q=${encodeURIComponent(tag)}&cursor=${cursor}`, {
        token: jwt,
      });
      expect(response.status).toBe(400);
      expect((await json(response))["code"]).toBe("invalid_cursor");
    }
  }, 30_000);

  it("Owner in a body is ignored", async () => {
    const alice = await user("alice");
    const bob = await user("bob");
    const operator = await token(TENANT, "operator");
    const put = await create(alice, name("owned"), { owner: "bob" });
    const posted = await call("POST", "/v1/sessions", { token: alice, body: fromTemplate({ owner: "bob" }) });
    expect(posted.status).toBe(201);
    const postedName = (await json<{ session: string }>(posted)).session;
    const byClient = await create(await token(TENANT, "client"), name("tenant"), { owner: "bob" });
    for (const session of [put, postedName]) {
      expect((await call("GET", `/v1/sessions/${session}`, { token: alice })).status).toBe(200);
      const refused = await call("GET", `/v1/sessions/${session}`, { token: bob });
      expect(refused.status).toBe(404);
      expect((await json(refused))["code"]).toBe("session_not_found");
    }
    // A client token's session is the tenant's: no user owns it, whatever the body said.
    expect((await call("GET", `/v1/sessions/${byClient}`, { token: bob })).status).toBe(404);
    const rows = await json<{ items: { session: string; owner?: string }[] }>(
      await call("GET", `/v1/sessions?limit=200`, { token: operator }),
    );
    const owners = Object.fromEntries(rows.items.map((row) => [row.session, row.owner ?? null]));
    expect([owners[put], owners[postedName], owners[byClient]]).toEqual(["alice", "alice", null]);
  });

  it("Read-only token cannot write, accept, fork or watch", async () => {
    const full = await user("reader");
    const readOnly = await user("reader", { act: ["read"] });
    const session = await create(full, name("ro"));
    const answered = await call("POST", `/v1/sessions/${session}/conversations/root/inputs?wait=10`, {
      token: full,
      body: { input: "hello" },
    });
    expect(answered.status).toBe(201);
    const seq = await lastSeq(TENANT, session);
    const s = `/v1/sessions/${session}`;
    const c = `${s}/conversations/root`;
    // Reads pass.
    for (const path of [
      s,
      c,
      `${c}/entries?limit=5`,
      `${s}/usage`,
      `${s}/pending`,
      `${s}/tasks`,
      `${c}/config`,
      "/v1/sessions",
    ]) {
      const response = await call("GET", path, { token: readOnly });
      expect(response.status, path).toBe(200);
      await response.body?.cancel();
    }
    const refused: [string, string, unknown?][] = [
      ["POST", `${c}/inputs`, { input: "more" }],
      ["PATCH", `${c}/config`, { thinking: "low" }],
      ["POST", `${s}/pending/t3-client`, { output: "x" }],
      ["POST", `${c}/abort`],
      ["POST", `${c}/fork`, { at: "start" }],
      ["GET", `${c}/watch`],
      ["GET", `${s}/watch`],
      ["POST", `${c}/watch-token`],
      ["POST", `${s}/watch-token`],
      ["PUT", `/v1/sessions/${name("new")}`, fromTemplate()],
      ["POST", "/v1/sessions", fromTemplate()],
    ];
    for (const [method, path, body] of refused) {
      const response = await call(method, path, { token: readOnly, ...(body === undefined ? {} : { body }) });
      expect(response.status, `${method} ${path}`).toBe(403);
      expect((await json(response))["code"], `${method} ${path}`).toBe("forbidden");
    }
    expect(await lastSeq(TENANT, session)).toBe(seq);
    // A token with watch but not write watches, and still cannot accept.
    const watcher = await user("reader", { act: ["watch"] });
    const minted = await call("POST", `${s}/watch-token`, { token: watcher });
    expect(minted.status).toBe(201);
    expect((await call("POST", `${c}/inputs`, { token: watcher, body: { input: "x" } })).status).toBe(403);
  });
});

describe("end users: the session's MCP endpoint", () => {
  it("a user reaches its own session's MCP endpoint, and each tool call is held to the token's actions", async () => {
    const full = await user("mcp-user");
    const readOnly = await user("mcp-user", { act: ["read"] });
    const session = await create(full, name("mcp"));
    const headers = { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" };
    const rpc = async (jwt: string, method: string, params: Record<string, unknown>): Promise<Response> =>
      call("POST", `/v1/sessions/${session}/mcp`, {
        token: jwt,
        headers,
        body: { jsonrpc: "2.0", id: 1, method, params },
      });
    const initialized = await rpc(readOnly, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "raw", version: "1" },
    });
    expect(initialized.status).toBe(200);
    await initialized.body?.cancel();
    const send = async (jwt: string): Promise<{ isError?: boolean; content?: { text?: string }[] } | undefined> => {
      const sent = await rpc(jwt, "tools/call", {
        name: "send_message",
        arguments: { input: "hello", wait_seconds: 10 },
      });
      expect(sent.status).toBe(200);
      return (await json<{ result?: { isError?: boolean; content?: { text?: string }[] } }>(sent)).result;
    };
    const seq = await lastSeq(TENANT, session);
    const refused = await send(readOnly);
    expect(refused?.isError).toBe(true);
    expect(JSON.stringify(refused?.content)).toContain("write");
    expect(await lastSeq(TENANT, session)).toBe(seq);
    // The same call with the write action goes through.
    expect((await send(full))?.isError).not.toBe(true);
    expect(await lastSeq(TENANT, session)).toBeGreaterThan(seq);
    // Another user's token: the unknown-session answer.
    expect((await rpc(await user("someone-else"), "initialize", {})).status).toBe(404);
  });
});

describe("end users: grants", () => {
  it("a grant reaches a session by its name or a prefix pattern; other tokens may not carry patterns", async () => {
    const tenantWide = await token(TENANT, "client");
    const prefix = name("shared");
    const exact = await create(tenantWide, `${prefix}-exact`);
    const patterned = await create(tenantWide, `${prefix}-room-1`);
    const bobs = await create(await user("bob"), `${prefix}-room-2`);
    const granted = await user("carol", { sessions: [exact, `${prefix}-room-*`], act: ["read"] });
    for (const session of [exact, patterned, bobs])
      expect((await call("GET", `/v1/sessions/${session}`, { token: granted })).status, session).toBe(200);
    // Not granted, not owned: the unknown-session answer.
    const other = await create(tenantWide, `${prefix}-other`);
    expect((await call("GET", `/v1/sessions/${other}`, { token: granted })).status).toBe(404);
    // A grant reaches, `act` still limits.
    expect(
      (
        await call("POST", `/v1/sessions/${patterned}/conversations/root/inputs`, {
          token: granted,
          body: { input: "x" },
        })
      ).status,
    ).toBe(403);
    // Grants are not listed: the list is the user's own sessions.
    expect(
      (await json<{ items: unknown[] }>(await call("GET", `/v1/sessions?q=${prefix}`, { token: granted }))).items,
    ).toEqual([]);
    const tooMany = await user("carol", { sessions: Array.from({ length: 21 }, (_, i) => `s${i}`) });
    expect((await call("GET", "/v1/sessions", { token: tooMany })).status).toBe(401);
    const patternedClient = await token(TENANT, "client", { sessions: [`${prefix}-*`] });
    expect((await call("GET", `/v1/sessions/${exact}`, { token: patternedClient })).status).toBe(401);
  });
});

describe("end users: tokens", () => {
  it("User token past one hour is refused", async () => {
    const now = Math.floor(Date.now() / 1000);
    const long = await sign(
      { tenant: TENANT, role: "user", sub: "alice", iat: now, exp: now + 3601 },
      env.JWT_SECRET,
      "HS256",
    );
    const noIat = await sign({ tenant: TENANT, role: "user", sub: "alice", exp: now + 7200 }, env.JWT_SECRET, "HS256");
    const hour = await sign(
      { tenant: TENANT, role: "user", sub: "alice", iat: now, exp: now + 3600 },
      env.JWT_SECRET,
      "HS256",
    );
    for (const jwt of [long, noIat]) {
      for (const path of ["/v1/sessions", `/v1/sessions/${name("x")}`]) {
        const response = await call("GET", path, { token: jwt });
        expect(response.status, path).toBe(401);
        expect((await json(response))["field"]).toBe("token.exp");
      }
    }
    expect((await call("GET", "/v1/sessions", { token: hour })).status).toBe(200);
    // Minting: default and maximum one hour; more is refused.
    const operator = await token(TENANT, "operator");
    const tooLong = await call("POST", "/v1/tokens", { token: operator, body: { sub: "alice", ttlSeconds: 3601 } });
    expect(tooLong.status).toBe(400);
    expect((await json(tooLong))["code"]).toBe("invalid_body");
    const minted = await call("POST", "/v1/tokens", {
      token: operator,
      body: { sub: "alice", act: ["read", "create"], sessions: ["shared-*"] },
    });
    expect(minted.status).toBe(201);
    const { token: userToken, expiresAt } = await json<{ token: string; expiresAt: string }>(minted);
    const payload = JSON.parse(
      atob(userToken.split(".")[1]?.replaceAll("-", "+").replaceAll("_", "/") ?? ""),
    ) as Record<string, unknown>;
    expect(payload).toMatchObject({
      tenant: TENANT,
      role: "user",
      sub: "alice",
      act: ["read", "create"],
      sessions: ["shared-*"],
    });
    expect(Number(payload["exp"]) - Number(payload["iat"])).toBe(3600);
    expect(new Date(expiresAt).getTime()).toBe(Number(payload["exp"]) * 1000);
    expect((await call("GET", "/v1/sessions", { token: userToken })).status).toBe(200);
    // Only operators mint.
    for (const role of ["client", "mayor"] as const)
      expect((await call("POST", "/v1/tokens", { token: await token(TENANT, role), body: { sub: "x" } })).status).toBe(
        403,
      );
    expect((await call("POST", "/v1/tokens", { token: userToken, body: { sub: "x" } })).status).toBe(403);
  });

  it("Expired is 401, never 403", async () => {
    const now = Math.floor(Date.now() / 1000);
    const alice = await user("alice");
    const mine = await create(alice, name("mine"));
    const theirs = await create(await user("bob"), name("theirs"));
    const expired = await sign(
      { tenant: TENANT, role: "user", sub: "alice", iat: now - 120, exp: now - 60 },
      env.JWT_SECRET,
      "HS256",
    );
    const readOnlyExpired = await sign(
      { tenant: TENANT, role: "user", sub: "alice", act: ["read"], iat: now - 120, exp: now - 60 },
      env.JWT_SECRET,
      "HS256",
    );
    const forged = await sign(
      { tenant: TENANT, role: "user", sub: "alice", iat: now, exp: now + 600 },
      "another-secret-of-enough-length",
      "HS256",
    );
    const noSub = await sign({ tenant: TENANT, role: "user", iat: now, exp: now + 600 }, env.JWT_SECRET, "HS256");
    const agentPattern = await sign(
      { tenant: TENANT, role: "agent", agent: "a1", sessions: ["x-*"], iat: now, exp: now + 600 },
      env.JWT_SECRET,
      "HS256",
    );
    // Every bearer route, on the user's own session, another user's, and routes a user may never use.
    const bearer = API_ROUTES.filter((route) => route.auth.type === "bearer" || route.auth.type === "watch");
    expect(bearer.length).toBeGreaterThan(40);
    for (const route of bearer) {
      for (const session of [mine, theirs]) {
        const path = concrete(route.path.replace(/\{([A-Za-z]+)\}/g, ":$1"), session);
        for (const jwt of [expired, readOnlyExpired, forged, noSub, agentPattern]) {
          const response = await call(route.method.toUpperCase(), path, {
            token: jwt,
            ...(route.method === "get" || route.method === "delete" ? {} : { body: {} }),
          });
          expect(response.status, `${route.method} ${route.path}`).toBe(401);
          expect((await json(response))["code"]).toBe("unauthorized");
        }
      }
    }
    // A watch token in the URL: expired, or forged, is 401 too.
    const watch = { tenant: TENANT, role: "user", sub: "alice", scope: "watch", watch: { session: mine } };
    const expiredWatch = await sign({ ...watch, iat: now - 120, exp: now - 60 }, env.JWT_SECRET, "HS256");
    const forgedWatch = await sign({ ...watch, iat: now, exp: now + 60 }, "another-secret-of-enough-length", "HS256");
    for (const jwt of [expiredWatch, forgedWatch, expired]) {
      const response = await call("GET", `/v1/sessions/${mine}/watch?access_token=${jwt}`);
      expect(response.status).toBe(401);
      await response.body?.cancel();
    }
    // The same watch token, valid, opens the watch; for another user's session it is the unknown-session answer.
    const minted = await call("POST", `/v1/sessions/${mine}/watch-token`, { token: alice });
    expect(minted.status).toBe(201);
    const watchToken = (await json<{ token: string }>(minted)).token;
    const claims = JSON.parse(
      atob(watchToken.split(".")[1]?.replaceAll("-", "+").replaceAll("_", "/") ?? ""),
    ) as Record<string, unknown>;
    expect(claims).toMatchObject({ role: "user", sub: "alice", scope: "watch" });
    const bobsWatch = await sign({ ...watch, sub: "bob", iat: now, exp: now + 60 }, env.JWT_SECRET, "HS256");
    const refused = await call("GET", `/v1/sessions/${mine}/watch?access_token=${bobsWatch}`);
    expect(refused.status).toBe(404);
    await refused.body?.cancel();
  }, 60_000);
});
