/**
 * HTTP conventions clients expect (docs/api.md): the Idempotency-Key rule of the IETF draft (the same key
 * with the same body and conversation returns the original acceptance; a different body or conversation
 * is 422 `idempotency_key_reused` and writes nothing), dot-segment keys refused, 405 with `Allow` for a
 * wrong method on a known path, and the `Bearer` scheme matched case-insensitively (RFC 7235).
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import { call, client, json, lastSeq, token, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

const inputs = (session: string, conversation: string | number = "root"): string =>
  `/v1/sessions/${session}/conversations/${conversation}/inputs`;

describe("Idempotency-Key", () => {
  it("the same key with the same body returns the original acceptance and writes nothing", async () => {
    const tenant = "idem";
    const session = uniqueSession("same");
    const api = await client(tenant);
    await api.session(session).create({});
    const root = api.session(session).conversation("root");
    const first = await root.accept("hello", { idempotencyKey: "k-same", wait: 10 });
    const seq = await lastSeq(tenant, session);
    const again = await root.accept("hello", { idempotencyKey: "k-same" });
    expect(again).toMatchObject({ inputId: first.inputId, conversationId: first.conversationId, duplicate: true });
    expect(await lastSeq(tenant, session)).toBe(seq);
  });

  it("the same key with a different body is 422 idempotency_key_reused and writes nothing", async () => {
    const tenant = "idem";
    const session = uniqueSession("body");
    const api = await client(tenant);
    await api.session(session).create({});
    const root = api.session(session).conversation("root");
    await root.accept("hello", { idempotencyKey: "k-body", wait: 10 });
    const seq = await lastSeq(tenant, session);
    await expect(root.accept("something else", { idempotencyKey: "k-body" })).rejects.toMatchObject({
      status: 422,
      code: "idempotency_key_reused",
    });
    await expect(root.accept("hello", { idempotencyKey: "k-body", mode: "followUp" })).rejects.toMatchObject({
      status: 422,
      code: "idempotency_key_reused",
    });
    expect(await lastSeq(tenant, session)).toBe(seq);
  });

  it("the same key on another conversation is 422 idempotency_key_reused and writes nothing", async () => {
    const tenant = "idem";
    const session = uniqueSession("conv");
    const api = await client(tenant);
    await api.session(session).create({});
    const root = api.session(session).conversation("root");
    const first = await root.accept("hello", { idempotencyKey: "k-conv", wait: 10 });
    const fork = await root.fork({ at: "start" });
    const seq = await lastSeq(tenant, session);
    const response = await call("POST", inputs(session, fork.conversationId), {
      token: await token(tenant, "client"),
      body: { input: "hello" },
      headers: { "idempotency-key": "k-conv" },
    });
    expect(response.status).toBe(422);
    expect(await json(response)).toMatchObject({ code: "idempotency_key_reused", field: "idempotency-key" });
    expect(await lastSeq(tenant, session)).toBe(seq);
    expect((await api.session(session).acceptance("k-conv")).conversationId).toBe(first.conversationId);
  });

  it("dot-segment keys are refused (a URL path normalizes them away, so they could never be looked up)", async () => {
    const tenant = "idem";
    const session = uniqueSession("dots");
    const api = await client(tenant);
    await api.session(session).create({});
    const jwt = await token(tenant, "client");
    const seq = await lastSeq(tenant, session);
    for (const key of [".", ".."]) {
      const response = await call("POST", inputs(session), {
        token: jwt,
        body: { input: "x" },
        headers: { "idempotency-key": key },
      });
      expect(response.status, key).toBe(400);
      expect(await json(response)).toMatchObject({ code: "invalid_header", field: "idempotency-key" });
      expect(await lastSeq(tenant, session)).toBe(seq);
    }
    // Keys that merely contain dots are ordinary keys.
    const dotted = await call("POST", inputs(session), {
      token: jwt,
      body: { input: "x" },
      headers: { "idempotency-key": "..a.b" },
    });
    expect(dotted.status).toBe(201);
    const seqAfter = await lastSeq(tenant, session);
    expect((await api.session(session).acceptance("..a.b")).inputId).toBe(
      (await json<{ inputId: number }>(dotted)).inputId,
    );
    expect(seqAfter).toBeGreaterThan(seq);
  });
});

describe("methods and schemes", () => {
  it("a wrong method on a known path is 405 method_not_allowed with Allow", async () => {
    const session = uniqueSession("method");
    const jwt = await token("conv", "operator");
    const cases: readonly (readonly [string, string, string])[] = [
      ["DELETE", `/v1/sessions/${session}/conversations/root/inputs`, "POST"],
      ["POST", `/v1/sessions/${session}`, "DELETE, GET, PATCH, PUT"],
      ["PUT", `/v1/sessions/${session}/conversations/root/config`, "GET, PATCH"],
      ["GET", `/v1/sessions/${session}/conversations/root/fork`, "POST"],
    ];
    for (const [method, path, allow] of cases) {
      const response = await call(method, path, { token: jwt });
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.headers.get("allow")).toBe(allow);
      expect(await json(response)).toMatchObject({ code: "method_not_allowed" });
    }
    const unknown = await call("GET", `/v1/sessions/${session}/nothing-here`, { token: jwt });
    expect(unknown.status).toBe(404);
    expect(await lastSeq("conv", session)).toBe(0);
  });

  it("the Bearer scheme is case-insensitive", async () => {
    const session = uniqueSession("scheme");
    const jwt = await token("conv", "client");
    for (const scheme of ["bearer", "BEARER", "BeArEr"]) {
      const response = await call("PUT", `/v1/sessions/${session}`, {
        headers: { authorization: `${scheme} ${jwt}` },
        body: {},
      });
      expect(response.status, scheme).toBeLessThan(300);
      await response.body?.cancel();
    }
  });
});
