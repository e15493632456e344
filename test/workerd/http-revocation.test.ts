/**
 * A user's open watches and revocation (docs/users.md "Revocation"): a watch opened with a user's watch
 * token closes at the token's expiry, which is never later than the user token that minted it, over
 * WebSocket (close code 4401, also after hibernation: the object's alarm closes it) and SSE (the stream
 * ends); `POST /v1/users/{sub}/revoke` refuses that user's older tokens on every route and closes its
 * open watches at once, and no other user's.
 */
import { abortAllDurableObjects, evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { WATCH_CLOSE_CODE } from "../../src/worker/watch/guard.js";
import { call, json, token, uniqueSession } from "./http-fixtures.js";
import { mintWatchToken, sseWatch, waitFor, wsWatch } from "./watch-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

/** A template users may create sessions from, and a session `sub` created from it. */
async function userSession(tenant: string, sub: string, userToken?: string): Promise<string> {
  await call("PUT", "/v1/templates/chat", { token: await token(tenant, "operator"), body: { model: "echo/echo" } });
  const name = uniqueSession(`${sub}-session`);
  const created = await call("PUT", `/v1/sessions/${name}`, {
    token: userToken ?? (await token(tenant, "user", { sub })),
    body: { template: "chat" },
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
  return name;
}

function stubOf(tenant: string, session: string): DurableObjectStub {
  return env.SESSIONS.get(env.SESSIONS.idFromName(`${tenant}:${session}`));
}

describe("user watches", () => {
  it("Open watch closes at expiry and on revocation", async () => {
    const tenant = uniqueSession("watch-expiry");
    const now = Math.floor(Date.now() / 1000);
    const watchPath = (session: string): string => `/v1/sessions/${session}/conversations/root/watch`;

    // Expiry: a user token that lives 3 s mints a watch token asking for 10 minutes; it gets at most the
    // user token's remaining life, and both watches close when it ends, the hibernated socket by the alarm.
    const shortLived = await token(tenant, "user", { sub: "dana", iat: now, exp: now + 3 });
    const expiring = await userSession(tenant, "dana", shortLived);
    const quiet = await userSession(tenant, "dana", shortLived);
    const shortWatchToken = await mintWatchToken(expiring, shortLived, 600);
    const ws = await wsWatch(watchPath(expiring), shortWatchToken);
    // On `quiet` nothing but the hibernated socket remains: only the object's alarm can close it.
    const quietWs = await wsWatch(watchPath(quiet), await mintWatchToken(quiet, shortLived, 600));
    expect([ws.status, quietWs.status]).toEqual([101, 101]);
    await waitFor(() => ws.received() > 0 && quietWs.received() > 0, "the WebSockets' views");
    // The sockets hibernate: from now on the objects know them from their attachments alone.
    await evictDurableObject(stubOf(tenant, expiring), { webSockets: "hibernate" });
    await evictDurableObject(stubOf(tenant, quiet), { webSockets: "hibernate" });
    const sse = await sseWatch(watchPath(expiring), shortWatchToken);
    expect(sse.status).toBe(200);
    await waitFor(() => sse.received() > 0, "the SSE stream's view");
    await waitFor(() => ws.closed() !== undefined && sse.closed() !== undefined, "the expired watches to close");
    expect(ws.closed()).toEqual({ code: WATCH_CLOSE_CODE, reason: "the watch token expired" });
    await waitFor(() => quietWs.closed() !== undefined, "the hibernated watch to close");
    expect(quietWs.closed()).toEqual({ code: WATCH_CLOSE_CODE, reason: "the watch token expired" });
    expect(sse.closed()?.reason).toBe("ended");
    const again = await wsWatch(watchPath(expiring), shortWatchToken);
    expect(again.status).toBe(401);
    expect(await runInDurableObject(stubOf(tenant, expiring), (_instance, state) => state.getWebSockets().length)).toBe(
      0,
    );

    // Revocation: bob's watches (WebSocket and SSE, on two sessions) close at once; carol's on the same
    // session stays open; bob's older tokens are refused everywhere, a new one works.
    const bob = await token(tenant, "user", { sub: "bob" });
    const first = await userSession(tenant, "bob", bob);
    // Carol reaches bob's session by a grant (she does not own it): her watch there is not bob's.
    const carol = await token(tenant, "user", { sub: "carol", sessions: [first] });
    const second = await userSession(tenant, "bob", bob);
    const bobWatchToken = await mintWatchToken(first, bob);
    const bobWs = await wsWatch(watchPath(first), bobWatchToken);
    const bobSse = await sseWatch(watchPath(first), bobWatchToken);
    const bobSecond = await wsWatch(watchPath(second), await mintWatchToken(second, bob));
    const carolWs = await wsWatch(watchPath(first), await mintWatchToken(first, carol));
    await waitFor(() => [bobWs, bobSse, bobSecond, carolWs].every((w) => w.received() > 0), "the first views");
    await evictDurableObject(stubOf(tenant, second), { webSockets: "hibernate" });

    const revoked = await call("POST", "/v1/users/bob/revoke", { token: await token(tenant, "operator") });
    expect(revoked.status).toBe(200);
    const body = await json<{ sub: string; revokedAt: number; sessions: number; unreached: string[] }>(revoked);
    expect(body).toMatchObject({ sub: "bob", sessions: 2, unreached: [] });
    await waitFor(
      () => bobWs.closed() !== undefined && bobSse.closed() !== undefined && bobSecond.closed() !== undefined,
      "bob's watches to close",
    );
    expect(bobWs.closed()).toEqual({ code: WATCH_CLOSE_CODE, reason: "the user's tokens were revoked" });
    expect(bobSecond.closed()).toEqual({ code: WATCH_CLOSE_CODE, reason: "the user's tokens were revoked" });
    expect(carolWs.closed()).toBeUndefined();

    for (const [method, path, jwt] of [
      ["GET", `/v1/sessions/${first}`, bob],
      ["POST", `/v1/sessions/${first}/watch-token`, bob],
    ] as const) {
      const response = await call(method, path, { token: jwt });
      expect(response.status, `${method} ${path}`).toBe(401);
      expect((await json(response))["code"]).toBe("unauthorized");
    }
    expect((await wsWatch(watchPath(first), bobWatchToken)).status).toBe(401);
    // Tokens issued within the revocation's second are refused too: a new one is issued from revokedAt on
    // (and no token may claim an issue time in the future).
    await waitFor(() => Date.now() >= body.revokedAt * 1000, "the revocation's second to pass");
    const fresh = await token(tenant, "user", { sub: "bob", iat: body.revokedAt });
    const sameSecond = await token(tenant, "user", { sub: "bob", iat: body.revokedAt - 1 });
    expect((await call("GET", `/v1/sessions/${first}`, { token: sameSecond })).status).toBe(401);
    expect((await call("GET", `/v1/sessions/${first}`, { token: fresh })).status).toBe(200);
    const reopened = await wsWatch(watchPath(first), await mintWatchToken(first, fresh));
    expect(reopened.status).toBe(101);
    await waitFor(() => reopened.received() > 0, "the new watch's view");
    expect(reopened.closed()).toBeUndefined();
    reopened.close();
    carolWs.close();
  }, 30_000);

  it("a revocation this isolate has not heard of still refuses a user's new watch, and the session refuses it after the directory told it", async () => {
    const tenant = uniqueSession("watch-stale");
    const erin = await token(tenant, "user", { sub: "erin" });
    const session = await userSession(tenant, "erin", erin);
    const watchToken = await mintWatchToken(session, erin);
    // Revoked in the directory alone (another isolate's revocation): this isolate's cache still says no.
    const directory = env.DIRECTORY.get(env.DIRECTORY.idFromName(tenant)) as unknown as {
      revokeUser(sub: string, at: number): Promise<unknown>;
    };
    await directory.revokeUser("erin", Math.floor(Date.now() / 1000) + 1);
    expect((await call("GET", `/v1/sessions/${session}`, { token: erin })).status).toBe(200);
    // Opening a watch asks the directory: refused.
    expect((await wsWatch(`/v1/sessions/${session}/conversations/root/watch`, watchToken)).status).toBe(401);
  });
});
