/**
 * Erasing a user (docs/operations.md "Deleting a user's data"): `POST /v1/users/{sub}/erase` deletes the
 * sessions the user owns (their outbox rows with them), its usage and metering rows and its directory rows,
 * refuses its older tokens and its creates while it runs, survives a kill of the tenant's directory mid-way,
 * shows its progress at `GET /v1/erasures/{id}` and ends with a signed `user.erased` event; the record
 * keeps only a hash of the sub.
 */
import { abortAllDurableObjects, env, runInDurableObject, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { DirectoryObject } from "../../src/worker/directory/object.js";
import type { LimitsObject } from "../../src/worker/limits/object.js";
import { shardOf } from "../../src/worker/limits/shards.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { receiverPerTest, registerEndpoint, verifyAt } from "./event-fixtures.js";
import { BASE, call, exists, json, token, uniqueSession, until } from "./http-fixtures.js";
import { mintWatchToken, sseOf, sseWatch, waitFor, wsWatch } from "./watch-fixtures.js";
import { WATCH_CLOSE_CODE } from "../../src/worker/watch/guard.js";
import { keyedHashOf, putUserTemplate, USER_TEMPLATE } from "./users-fixtures.js";

const receiver = receiverPerTest();

interface Erasure {
  id: string;
  subHash: string;
  subHashVersion: number;
  status: "running" | "done";
  phase: string;
  cutoff: number;
  sessionsFound: number;
  sessionsDeleted: number;
  sessionsRemaining: number;
}

function directoryOf(tenant: string): DurableObjectStub<DirectoryObject> {
  return env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant)) as DurableObjectStub<DirectoryObject>;
}

function limitsOf(tenant: string): DurableObjectStub<LimitsObject> {
  return env.LIMITS.get(env.LIMITS.idFromName(tenant)) as DurableObjectStub<LimitsObject>;
}

/** Every row of every table of an object's SQLite, as text (to search for what must be gone). */
function everyRow(sql: SqlStorage): string {
  const tables = sql
    .exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'")
    .toArray()
    .map((row) => String(row["name"]));
  return tables.map((table) => JSON.stringify(sql.exec(`SELECT * FROM "${table}"`).toArray())).join("\n");
}

async function createAs(jwt: string): Promise<string> {
  const name = uniqueSession("er");
  const created = await call("PUT", `/v1/sessions/${name}`, { token: jwt, body: { template: USER_TEMPLATE } });
  expect(created.status, await created.clone().text()).toBe(201);
  return name;
}

describe("user erasure", () => {
  it("Erasing a user leaves nothing readable and survives a kill", async () => {
    const tenant = `erase-${Date.now().toString(36)}`;
    const sub = `u${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const operator = await token(tenant, "operator");
    await putUserTemplate(tenant);
    expect((await call("PUT", "/v1/limits", { token: operator, body: { user: { inputsPerDay: 100 } } })).status).toBe(
      200,
    );
    const hook = await registerEndpoint(tenant, {
      url: "https://receiver.test/erased",
      events: ["user.erased", "input.completed"],
    });
    const issued = Math.floor(Date.now() / 1000) - 5;
    const old = await token(tenant, "user", { sub, iat: issued, exp: issued + 3000 });
    const sessions = [await createAs(old), await createAs(old), await createAs(old)];
    // One answered input: usage rows in the tenant's limits and an outbox row in the session.
    const sent = await call("POST", `/v1/sessions/${sessions[0]}/conversations/root/inputs?wait=10`, {
      token: old,
      body: { input: "remember me" },
      headers: { "idempotency-key": "erase-k1" },
    });
    expect(sent.status).toBe(201);
    await until(
      async () =>
        receiver()
          .to(hook.url)
          .some((r) => r.event.type === "input.completed")
          ? true
          : undefined,
      "the input's event",
    );
    const usageBefore = await json<{ items: unknown[] }>(
      await call("GET", `/v1/usage?sub=${sub}`, { token: operator }),
    );
    expect(usageBefore.items.length).toBe(1);
    const bob = await token(tenant, "user", { sub: `b${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}` });
    const bobs = await createAs(bob);

    // One round of one session, then the directory stops until it is killed.
    await runInDurableObject(directoryOf(tenant), (instance: DirectoryObject) => {
      instance.eraseBatch = 1;
      instance.eraseRoundsLeft = 1;
    });
    const started = await call("POST", `/v1/users/${sub}/erase`, { token: operator });
    expect(started.status).toBe(202);
    const erasure = await json<Erasure>(started);
    expect(started.headers.get("location")).toBe(`/v1/erasures/${erasure.id}`);
    expect(erasure).toMatchObject({
      status: "running",
      subHash: await keyedHashOf(env.SUBJECT_HASH_KEY, tenant, sub),
      subHashVersion: 2,
      sessionsFound: 3,
    });
    const progress = (): Promise<Erasure> =>
      call("GET", `/v1/erasures/${erasure.id}`, { token: operator }).then((r) => json<Erasure>(r));
    const midway = await until(
      async () => ((await progress()).sessionsDeleted === 1 ? progress() : undefined),
      "the first round",
    );
    expect(midway).toMatchObject({ status: "running", sessionsFound: 3, sessionsDeleted: 1, sessionsRemaining: 2 });

    // While it runs: a repeat answers the same erasure, older tokens are refused, and so are the user's creates.
    const again = await call("POST", `/v1/users/${sub}/erase`, { token: operator });
    expect(again.status).toBe(200);
    expect((await json<Erasure>(again)).id).toBe(erasure.id);
    const refusedOld = await call("GET", "/v1/sessions", { token: old });
    expect(refusedOld.status).toBe(401);
    await until(async () => (Date.now() >= erasure.cutoff * 1000 ? true : undefined), "the cutoff", 300);
    const fresh = await token(tenant, "user", { sub, iat: erasure.cutoff });
    const refusedCreate = await call("PUT", `/v1/sessions/${uniqueSession("er")}`, {
      token: fresh,
      body: { template: USER_TEMPLATE },
    });
    expect(refusedCreate.status).toBe(409);
    expect(await json(refusedCreate)).toMatchObject({ code: "user_erasing" });

    // The kill: the directory's next instance resumes from what it recorded.
    await abortAllDurableObjects();
    const done = await until(
      async () => {
        const now = await progress();
        return now.status === "done" ? now : undefined;
      },
      "the erasure to finish after the kill",
      500,
    );
    expect(done).toMatchObject({ phase: "done", sessionsFound: 3, sessionsDeleted: 3, sessionsRemaining: 0 });
    expect(JSON.stringify(done)).not.toContain(sub);

    // Nothing of the user is readable: its sessions, its listing, its usage.
    for (const session of sessions) {
      expect(await exists(tenant, session)).toBe(false);
      expect((await call("GET", `/v1/sessions/${session}`, { token: operator })).status).toBe(404);
      expect((await call("GET", `/v1/sessions/${session}/deliveries`, { token: operator })).status).toBe(404);
    }
    expect(await json(await call("GET", `/v1/sessions?owner=${sub}`, { token: operator }))).toEqual({ items: [] });
    expect(await json(await call("GET", `/v1/usage?sub=${sub}`, { token: operator }))).toMatchObject({ items: [] });
    // Nor kept anywhere: no row of the tenant's directory or limits holds the sub.
    expect(await runInDurableObject(directoryOf(tenant), (_i, state) => everyRow(state.storage.sql))).not.toContain(
      sub,
    );
    // The tenant's limits object and the user's shard (where its inputs were admitted and counted) alike.
    for (const limits of [limitsOf(tenant), limitsOf(`${tenant}\n${shardOf(tenant, sub, undefined).key}`)]) {
      const limitsRows = await runInDurableObject(limits, (_i, state) => everyRow(state.storage.sql));
      expect(limitsRows).not.toContain(sub);
      for (const session of sessions) expect(limitsRows).not.toContain(session);
    }

    // The signed event, once, naming the hash only.
    const erased = await until(
      async () => {
        const got = receiver()
          .to(hook.url)
          .filter((r) => r.event.type === "user.erased");
        return got.length > 0 ? got : undefined;
      },
      "the user.erased event",
      500,
    );
    expect(erased.length).toBe(1);
    expect(verifyAt(undefined, hook.secret, erased[0] as (typeof erased)[number])).toMatchObject({
      type: "user.erased",
      data: { erasure: erasure.id, subHash: erasure.subHash, subHashVersion: 2, sessionsDeleted: 3 },
    });
    expect(erased[0]?.body).not.toContain(sub);

    // The old token stays refused; a token issued after the cutoff works, and the same sub starts clean.
    expect((await call("GET", "/v1/sessions", { token: old })).status).toBe(401);
    const mine = await createAs(fresh);
    const listed = await json<{ items: { session: string }[] }>(await call("GET", "/v1/sessions", { token: fresh }));
    expect(listed.items.map((item) => item.session)).toEqual([mine]);
    expect(await json(await call("GET", "/v1/me/usage", { token: fresh }))).toMatchObject({ items: [] });
    // Another user's session is untouched.
    expect((await call("GET", `/v1/sessions/${bobs}`, { token: bob })).status).toBe(200);
  });

  it("A session created just before the erasure whose directory row lands after it finished is erased too", async () => {
    const tenant = `erase-late-${Date.now().toString(36)}`;
    const sub = `u${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const operator = await token(tenant, "operator");
    await putUserTemplate(tenant);
    const issued = Math.floor(Date.now() / 1000) - 5;
    const old = await token(tenant, "user", { sub, iat: issued, exp: issued + 3000 });
    const listed = await createAs(old);
    // The late one: created before the erasure, its first directory row refused (it retries from its alarm).
    await runInDurableObject(directoryOf(tenant), (instance: DirectoryObject) => {
      instance.refusing = 1;
    });
    const late = await createAs(old);
    expect(await runInDurableObject(directoryOf(tenant), (instance: DirectoryObject) => instance.refusing)).toBe(0);
    const bob = await token(tenant, "user", { sub: `b${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}` });
    const bobs = await createAs(bob);

    const started = await call("POST", `/v1/users/${sub}/erase`, { token: operator });
    expect(started.status).toBe(202);
    const erasure = await json<Erasure>(started);
    // Only the listed session was found: the late one's row has not landed yet.
    expect(erasure.sessionsFound).toBe(1);
    const progress = (): Promise<Erasure> =>
      call("GET", `/v1/erasures/${erasure.id}`, { token: operator }).then((r) => json<Erasure>(r));
    await until(async () => ((await progress()).status === "done" ? true : undefined), "the erasure to finish", 500);
    expect(await exists(tenant, listed)).toBe(false);

    // The late row lands (the session's retry) after the erasure finished: the session is deleted, never listed.
    await until(async () => ((await exists(tenant, late)) ? undefined : true), "the late session to be deleted", 1_000);
    expect((await call("GET", `/v1/sessions/${late}`, { token: operator })).status).toBe(404);
    expect(await json(await call("GET", `/v1/sessions?owner=${sub}`, { token: operator }))).toEqual({ items: [] });
    const after = await until(
      async () => {
        const now = await progress();
        return now.sessionsDeleted === 2 ? now : undefined;
      },
      "the late session to be counted",
      500,
    );
    expect(after).toMatchObject({ status: "done", sessionsFound: 2, sessionsDeleted: 2, sessionsRemaining: 0 });
    // Other users' sessions, and the user's own sessions made after the cutoff, are not touched.
    await until(async () => (Date.now() >= erasure.cutoff * 1000 ? true : undefined), "the cutoff", 300);
    const fresh = await token(tenant, "user", { sub, iat: erasure.cutoff });
    const mine = await createAs(fresh);
    expect((await call("GET", `/v1/sessions/${mine}`, { token: fresh })).status).toBe(200);
    expect((await call("GET", `/v1/sessions/${bobs}`, { token: bob })).status).toBe(200);
    const listing = await json<{ items: { session: string }[] }>(await call("GET", "/v1/sessions", { token: fresh }));
    expect(listing.items.map((item) => item.session)).toEqual([mine]);
  }, 30_000);

  it("Erasing a user ends its open watches at once, on sessions it owns and sessions it was granted", async () => {
    const tenant = `erase-watch-${Date.now().toString(36)}`;
    const sub = `u${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const operator = await token(tenant, "operator");
    // A tool whose product never answers keeps bob's turn live, so a chat resume stays open on it.
    const product: string[] = [];
    const hanging = (request: Request): Promise<Response> => {
      if (!request.url.startsWith("https://product.test/")) return receiver().fetch(request);
      product.push(request.url);
      return new Promise<Response>((_resolve, reject) =>
        request.signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true }),
      );
    };
    setHostSeams({ fetch: hanging });
    const tool = await call("PUT", "/v1/tools/wait", {
      token: operator,
      body: {
        description: "waits (test)",
        parameters: { type: "object", properties: { id: { type: "integer" } } },
        handler: { type: "http", url: "https://product.test/tools", timeoutMs: 60_000, idempotent: false },
      },
    });
    expect(tool.status, await tool.clone().text()).toBe(201);
    await putUserTemplate(tenant, USER_TEMPLATE, { model: "echo", userSettable: [], selectedTools: ["wait"] });
    const bob = await token(tenant, "user", { sub: `b${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}` });
    const bobs = await createAs(bob);
    const issued = Math.floor(Date.now() / 1000) - 5;
    const old = await token(tenant, "user", { sub, iat: issued, exp: issued + 3000, sessions: [bobs] });
    const own = await createAs(old);
    const watchPath = (session: string): string => `/v1/sessions/${session}/conversations/root/watch`;
    const ownSse = await sseWatch(watchPath(own), await mintWatchToken(own, old));
    const grantedWs = await wsWatch(watchPath(bobs), await mintWatchToken(bobs, old));
    const grantedSse = await sseWatch(watchPath(bobs), await mintWatchToken(bobs, old));
    // Bob's turn waits on the tool: the user's chat resume on bob's session stays open.
    const sent = await call("POST", `/v1/sessions/${bobs}/conversations/root/inputs`, {
      token: bob,
      body: { input: '/call wait {"id":1}' },
    });
    expect(sent.status, await sent.clone().text()).toBe(201);
    await until(async () => (product.length > 0 ? true : undefined), "the tool call", 500);
    const controller = new AbortController();
    const chat = sseOf(
      await SELF.fetch(`${BASE}/v1/sessions/${bobs}/chat/root/stream`, {
        headers: { authorization: `Bearer ${old}` },
        signal: controller.signal,
      }),
      controller,
    );
    expect([ownSse.status, grantedWs.status, grantedSse.status, chat.status]).toEqual([200, 101, 200, 200]);
    await waitFor(
      () => [ownSse, grantedWs, grantedSse, chat].every((watch) => watch.received() > 0),
      "the watches' first messages",
    );
    // Bob's own watch stays open.
    const bobWs = await wsWatch(watchPath(bobs), await mintWatchToken(bobs, bob));
    await waitFor(() => bobWs.received() > 0, "bob's view");

    const started = await call("POST", `/v1/users/${sub}/erase`, { token: operator });
    expect(started.status).toBe(202);
    await waitFor(
      () => [ownSse, grantedWs, grantedSse, chat].every((watch) => watch.closed() !== undefined),
      "the user's watches to end",
      5_000,
    );
    expect(grantedWs.closed()).toEqual({ code: WATCH_CLOSE_CODE, reason: "the user's tokens were revoked" });
    expect(bobWs.closed()).toBeUndefined();
    // A new request with the old token is refused.
    expect((await call("GET", `/v1/sessions/${bobs}`, { token: old })).status).toBe(401);
    bobWs.close();
  }, 30_000);

  it("An erasure answers 404 erasure_not_found for an unknown id and 400 for a malformed one", async () => {
    const tenant = `erase-ids-${Date.now().toString(36)}`;
    const operator = await token(tenant, "operator");
    const unknown = await call("GET", `/v1/erasures/er_${"0".repeat(32)}`, { token: operator });
    expect(unknown.status).toBe(404);
    expect(await json(unknown)).toMatchObject({ code: "erasure_not_found" });
    const malformed = await call("GET", "/v1/erasures/nope", { token: operator });
    expect(malformed.status).toBe(400);
    expect(await json(malformed)).toMatchObject({ code: "invalid_id", field: "erasure" });
    const client = await token(tenant, "client");
    expect((await call("POST", "/v1/users/someone/erase", { token: client })).status).toBe(403);
    const bad = await call("POST", `/v1/users/${"x".repeat(129)}/erase`, { token: operator });
    expect(bad.status).toBe(400);
    expect(await json(bad)).toMatchObject({ code: "invalid_id", field: "sub" });
  });
});
