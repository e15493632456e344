/**
 * Signed webhooks (Standard Webhooks): a valid delivery queues input; a redelivery of the same id runs
 * once; a bad signature, another tenant's secret, missing headers and a timestamp outside the clock
 * skew are refused and write nothing; webhook delivery ids and Idempotency-Keys are separate namespaces.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { signWebhook, webhookSecret, WEBHOOK_SKEW_SECONDS } from "../../src/worker/crypto/webhooks.js";
import { call, client, json, lastSeq, uniqueSession } from "./http-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
});

/** The endpoint's signing secret, derived from the master secret for (tenant, session). */
function endpointSecret(tenant: string, session: string): Promise<string> {
  return webhookSecret(env.WEBHOOK_MASTER_SECRET, tenant, session);
}

async function deliver(
  tenant: string,
  session: string,
  payload: unknown,
  options: { id?: string; timestamp?: number; secretTenant?: string; signature?: string; omit?: string } = {},
): Promise<Response> {
  const id = options.id ?? `msg_${crypto.randomUUID()}`;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const body = JSON.stringify(payload);
  const secret = await endpointSecret(options.secretTenant ?? tenant, session);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": options.signature ?? (await signWebhook(secret, id, timestamp, body)),
  };
  if (options.omit !== undefined) delete headers[options.omit];
  return call("POST", `/v1/webhooks/${tenant}/${session}/root`, { rawBody: body, headers });
}

describe("webhooks", () => {
  it("a delivery signed for one session and replayed to another session of the same tenant is refused and writes nothing", async () => {
    const tenant = "hooks";
    const first = uniqueSession("wh-a");
    const second = uniqueSession("wh-b");
    const api = await client(tenant);
    await api.session(first).create({});
    await api.session(second).create({});
    const body = JSON.stringify({ input: "meant for the first session" });
    const id = `msg_${crypto.randomUUID()}`;
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = await signWebhook(await endpointSecret(tenant, first), id, timestamp, body);
    const headers = {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signature,
    };
    const delivered = await call("POST", `/v1/webhooks/${tenant}/${first}/root`, { rawBody: body, headers });
    expect(delivered.status).toBe(202);
    const before = await lastSeq(tenant, second);
    const replayed = await call("POST", `/v1/webhooks/${tenant}/${second}/root`, { rawBody: body, headers });
    expect(replayed.status).toBe(401);
    expect(await json(replayed)).toMatchObject({ code: "invalid_signature" });
    expect(await lastSeq(tenant, second)).toBe(before);
  });

  it("a signed delivery queues input that runs; its redelivery returns the first acceptance and runs once", async () => {
    const tenant = "hooks";
    const session = uniqueSession("wh");
    const api = await client(tenant);
    await api.session(session).create({});
    const first = await deliver(tenant, session, { input: "from a webhook" }, { id: "msg_1" });
    expect(first.status).toBe(202);
    const accepted = await json<{ inputId: number; duplicate: boolean }>(first);
    expect(accepted.duplicate).toBe(false);
    const again = await deliver(tenant, session, { input: "different payload" }, { id: "msg_1" });
    expect(again.status).toBe(200);
    expect(await json(again)).toMatchObject({ inputId: accepted.inputId, duplicate: true });
    // It ran once: one user entry with the webhook's text, answered.
    const result = await api.session(session).conversation("root").accept("after", { wait: 10 });
    expect(result.status).toBe("done");
    const entries = await api.session(session).conversation("root").entries({ limit: 100 });
    const users = entries.items.filter((e) => e.kind === "user");
    expect(users.length).toBe(2);
    expect(JSON.stringify(users[0])).toContain("from a webhook");
    expect(JSON.stringify(entries.items)).not.toContain("different payload");
  });

  it("delivery ids and Idempotency-Keys are separate namespaces", async () => {
    const tenant = "hooks";
    const session = uniqueSession("ns");
    const api = await client(tenant);
    await api.session(session).create({});
    const viaKey = await api
      .session(session)
      .conversation("root")
      .accept("by key", { idempotencyKey: "same", wait: 10 });
    const viaHook = await json<{ inputId: number; duplicate: boolean }>(
      await deliver(tenant, session, { input: "by hook", mode: "followUp" }, { id: "same" }),
    );
    expect(viaHook.duplicate).toBe(false);
    expect(viaHook.inputId).not.toBe(viaKey.inputId);
    expect((await api.session(session).acceptance("same")).inputId).toBe(viaKey.inputId);
  });

  it("a bad signature, another tenant's secret, a missing header, or a timestamp outside the skew is refused and writes nothing", async () => {
    const tenant = "hooks";
    const session = uniqueSession("bad");
    const api = await client(tenant);
    await api.session(session).create({});
    const before = await lastSeq(tenant, session);
    const now = Math.floor(Date.now() / 1000);
    const cases: [string, Promise<Response>, number, string][] = [
      [
        "forged signature",
        deliver(tenant, session, { input: "x" }, { signature: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" }),
        401,
        "invalid_signature",
      ],
      [
        "other tenant's secret",
        deliver(tenant, session, { input: "x" }, { secretTenant: "someone-else" }),
        401,
        "invalid_signature",
      ],
      [
        "too old",
        deliver(tenant, session, { input: "x" }, { timestamp: now - WEBHOOK_SKEW_SECONDS - 60 }),
        401,
        "stale_webhook",
      ],
      [
        "from the future",
        deliver(tenant, session, { input: "x" }, { timestamp: now + WEBHOOK_SKEW_SECONDS + 60 }),
        401,
        "stale_webhook",
      ],
      ["no webhook-id", deliver(tenant, session, { input: "x" }, { omit: "webhook-id" }), 401, "invalid_signature"],
      [
        "no webhook-timestamp",
        deliver(tenant, session, { input: "x" }, { omit: "webhook-timestamp" }),
        401,
        "invalid_signature",
      ],
      [
        "no webhook-signature",
        deliver(tenant, session, { input: "x" }, { omit: "webhook-signature" }),
        401,
        "invalid_signature",
      ],
      ["signed but malformed body", deliver(tenant, session, { input: 5 }), 400, "invalid_body"],
      ["signed but unknown field", deliver(tenant, session, { input: "x", extra: true }), 400, "invalid_body"],
    ];
    for (const [name, pending, status, code] of cases) {
      const response = await pending;
      expect(response.status, name).toBe(status);
      expect((await json(response))["code"], name).toBe(code);
    }
    expect(await lastSeq(tenant, session)).toBe(before);
  });

  it("a signed delivery for a session that was never created is 404 and creates nothing", async () => {
    const session = uniqueSession("nosuch");
    const response = await deliver("hooks", session, { input: "x" });
    expect(response.status).toBe(404);
    expect((await json(response))["code"]).toBe("session_not_found");
    expect(await lastSeq("hooks", session)).toBe(0);
  });
});
