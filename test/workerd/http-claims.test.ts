/**
 * A token's claims hold on every route (docs/users.md, docs/api.md "Authentication and roles"): a token
 * naming its sessions lists only those, names no other in a body, creates none elsewhere, and mints user
 * tokens that reach no more than it does; a user token's `act` holds whatever route carries the action.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, client, json, token, uniqueSession, until } from "./http-fixtures.js";
import { putUserTemplate } from "./users-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

interface Listing {
  readonly items: readonly { readonly session: string }[];
}

describe("claims on every route", () => {
  it("A sessions claim holds on every route and bounds minting", async () => {
    const tenant = "claims";
    const operator = await token(tenant, "operator");
    const x = uniqueSession("claim-x");
    const y = uniqueSession("claim-y");
    for (const name of [x, y]) {
      expect((await call("PUT", `/v1/sessions/${name}`, { token: operator, body: {} })).status).toBe(201);
    }
    await until(async () => {
      const page = await json<Listing>(await call("GET", "/v1/sessions?limit=200", { token: operator }));
      return page.items.some((item) => item.session === y) ? true : undefined;
    }, "both sessions in the directory");

    const scoped = await token(tenant, "operator", { sessions: [x] });
    // The listing holds to the claim.
    const listed = await json<Listing>(await call("GET", "/v1/sessions?limit=200", { token: scoped }));
    expect(listed.items.map((item) => item.session)).toEqual([x]);
    // A body naming another session, or a create of a session outside the claim, is refused as a path is.
    const hook = await call("POST", "/v1/webhook-endpoints", {
      token: scoped,
      body: { url: "https://hooks.example.com/in", events: ["input.completed"], sessions: [y] },
    });
    expect(hook.status, await hook.clone().text()).toBe(401);
    expect((await json(hook))["field"]).toBe("token.sessions");
    expect((await call("POST", "/v1/sessions", { token: scoped, body: {} })).status).toBe(401);

    // Minting never grants more than the minting token has: a grant outside the claim is refused ...
    const outside = await call("POST", "/v1/tokens", { token: scoped, body: { sub: "u-1", sessions: [y] } });
    expect(outside.status).toBe(403);
    expect((await json(outside))["field"]).toBe("sessions");
    const pattern = await call("POST", "/v1/tokens", { token: scoped, body: { sub: "u-1", sessions: ["claim-*"] } });
    expect(pattern.status).toBe(403);
    // ... and a token minted without grants reaches only the minter's sessions, not every session of its user.
    await putUserTemplate(tenant);
    const minted = await json<{ token: string }>(
      await call("POST", "/v1/tokens", { token: scoped, body: { sub: "u-1" } }),
    );
    expect((await call("GET", `/v1/sessions/${x}`, { token: minted.token })).status).toBe(200);
    expect((await call("GET", `/v1/sessions/${y}`, { token: minted.token })).status).toBe(404);
    const created = await call("POST", "/v1/sessions", { token: minted.token, body: { template: "end-user" } });
    expect(created.status).toBe(403);
    const mintedList = await json<Listing>(await call("GET", "/v1/sessions", { token: minted.token }));
    expect(mintedList.items.every((item) => item.session === x)).toBe(true);

    // An unscoped operator still mints as before.
    const free = await call("POST", "/v1/tokens", { token: operator, body: { sub: "u-2", sessions: [y] } });
    expect(free.status).toBe(201);
  });

  it("A token without write cannot abort through fork", async () => {
    const tenant = "claims-fork";
    const api = await client(tenant);
    const name = uniqueSession("fork-abort");
    const s = api.session(name);
    await s.create({ model: "echo-slow" });
    const root = s.conversation("root");
    const accepted = await root.accept("a long answer that the paced echo model streams slowly, long enough to abort");
    expect(accepted.status).toBe("placed");

    const forkOnly = await token(tenant, "user", { sub: "viewer", sessions: [name], act: ["read", "fork"] });
    const refused = await call("POST", `/v1/sessions/${name}/conversations/root/fork`, {
      token: forkOnly,
      body: { at: "start", abort: true },
    });
    expect(refused.status).toBe(403);
    expect((await json(refused))["field"]).toBe("token.act");

    // The turn was not aborted: it runs to its answer.
    const result = await until(async () => {
      const r = (await s.input(accepted.inputId)).result;
      return r.status === "unanswered" || r.status === "done" ? r : undefined;
    }, "the input's result");
    expect(result.status).toBe("done");
  });
});
