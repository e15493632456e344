/**
 * Inbound endpoints (docs/integrations.md "Events in"): an operator points a sender that speaks its own
 * format (GitHub, Slack, Stripe, or Standard Webhooks) at a session with `PUT .../inbound/{name}`; the
 * sender posts to `POST /v1/inbound/{tenant}/{session}/{name}`. Signatures are computed here with
 * WebCrypto exactly as each platform documents them, independently of the server's verifier. A refused
 * request (bad signature, unknown endpoint, form-encoded Slack payload, bad config) writes nothing.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { signWebhook, webhookSecret } from "../../src/worker/crypto/webhooks.js";
import { setHostSeams } from "../../src/worker/platform/host-config.js";
import { REPLAY_NAMESPACE, REPLAY_WINDOW_MS } from "../../src/worker/session/replays.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { call, client, json, lastSeq, stubOf, token, uniqueSession, until } from "./http-fixtures.js";
import { clockOf, ManualClock, ManualTime } from "./session-fixtures.js";

afterEach(async () => {
  setHostSeams({});
  await abortAllDurableObjects();
});

const TENANT = "inbound";
const encoder = new TextEncoder();

async function hmacHex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
  return [...mac].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** A session with the echo model, and an operator's raw PUT of one inbound endpoint. */
async function sessionWith(label: string): Promise<string> {
  const session = uniqueSession(label);
  await (await client(TENANT)).session(session).create({});
  return session;
}

async function putInbound(
  session: string,
  name: string,
  body: unknown,
  role: "operator" | "client" = "operator",
): Promise<Response> {
  return call("PUT", `/v1/sessions/${session}/inbound/${name}`, { token: await token(TENANT, role), body });
}

function deliveryPath(session: string, name: string, tenant = TENANT): string {
  return `/v1/inbound/${tenant}/${session}/${name}`;
}

async function github(
  session: string,
  name: string,
  secret: string,
  event: string,
  payload: unknown,
  options: { delivery?: string; signWith?: string } = {},
): Promise<Response> {
  const body = JSON.stringify(payload);
  return call("POST", deliveryPath(session, name), {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "user-agent": "GitHub-Hookshot/0000000",
      "x-github-event": event,
      "x-github-delivery": options.delivery ?? crypto.randomUUID(),
      "x-github-hook-id": "123456",
      "x-hub-signature-256": `sha256=${await hmacHex(options.signWith ?? secret, body)}`,
    },
  });
}

async function slack(
  session: string,
  name: string,
  secret: string,
  body: string,
  options: { contentType?: string; signature?: string } = {},
): Promise<Response> {
  const timestamp = String(nowSeconds());
  return call("POST", deliveryPath(session, name), {
    rawBody: body,
    headers: {
      "content-type": options.contentType ?? "application/json",
      "x-slack-request-timestamp": timestamp,
      "x-slack-signature": options.signature ?? `v0=${await hmacHex(secret, `v0:${timestamp}:${body}`)}`,
    },
  });
}

async function stripe(session: string, name: string, secret: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  const t = nowSeconds();
  return call("POST", deliveryPath(session, name), {
    rawBody: body,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "stripe-signature": `t=${t},v1=${await hmacHex(secret, `${t}.${body}`)}`,
    },
  });
}

/** A Standard Webhooks delivery signed by the `standardwebhooks` library, as a real sender signs it. */
async function standard(
  session: string,
  name: string,
  secret: string,
  payload: unknown,
  id = `msg_${crypto.randomUUID()}`,
): Promise<Response> {
  const body = JSON.stringify(payload);
  const seconds = nowSeconds();
  return call("POST", deliveryPath(session, name), {
    rawBody: body,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(seconds),
      "webhook-signature": new Webhook(secret).sign(id, new Date(seconds * 1000), body),
    },
  });
}

/** The text parts of the session root's user entries, oldest first. */
async function userTexts(session: string): Promise<string[][]> {
  const entries = await (await client(TENANT)).session(session).conversation("root").entries({ limit: 100 });
  return entries.items
    .filter((entry) => entry.kind === "user")
    .map((entry) => {
      const message = (entry.model as readonly { content: string | readonly { type: string; text?: string }[] }[])[0];
      const content = message?.content ?? "";
      return typeof content === "string" ? [content] : content.map((part) => part.text ?? "");
    });
}

/** A GitHub `issues` delivery as GitHub sends it (trimmed to the fields a reader would notice). */
const ISSUE_OPENED = {
  action: "opened",
  issue: {
    url: "https://api.github.com/repos/octo/repo/issues/1347",
    html_url: "https://github.com/octo/repo/issues/1347",
    id: 1,
    number: 1347,
    title: "Found a bug",
    user: { login: "octocat", id: 1, type: "User" },
    labels: [{ id: 208045946, name: "bug", color: "f29513", default: true }],
    state: "open",
    locked: false,
    assignee: null,
    comments: 0,
    created_at: "2011-04-22T13:33:48Z",
    updated_at: "2011-04-22T13:33:48Z",
    closed_at: null,
    body: "I'm having a problem with this.",
  },
  repository: {
    id: 1296269,
    name: "repo",
    full_name: "octo/repo",
    private: false,
    owner: { login: "octo", id: 1, type: "Organization" },
    html_url: "https://github.com/octo/repo",
    default_branch: "main",
  },
  sender: { login: "octocat", id: 1, type: "User" },
};

describe("inbound endpoints", () => {
  it("Slack url_verification is answered", async () => {
    const session = await sessionWith("in-slack");
    const secret = "8f742231b10e8888abcd99yyyzzz85a5";
    expect((await putInbound(session, "slack", { format: "slack", secret })).status).toBe(201);
    const before = await lastSeq(TENANT, session);
    const challenge = JSON.stringify({
      token: "Jhj5dZrVaK7ZwHHjRyZWjbDl",
      challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
      type: "url_verification",
    });
    const answered = await slack(session, "slack", secret, challenge);
    expect(answered.status).toBe(200);
    expect(await json(answered)).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
    const unsigned = await call("POST", deliveryPath(session, "slack"), {
      rawBody: challenge,
      headers: { "content-type": "application/json" },
    });
    expect(unsigned.status).toBe(401);
    expect(await lastSeq(TENANT, session)).toBe(before);
    // An event callback queues input, its delivery id the event's event_id.
    const event = JSON.stringify({
      type: "event_callback",
      event_id: "Ev08MFMKH6",
      event: { type: "app_mention", text: "<@U0LAN0Z89> is it everything?" },
    });
    const queued = await slack(session, "slack", secret, event);
    expect(queued.status).toBe(200);
    expect(await json(queued)).toMatchObject({ duplicate: false });
  });

  it("A template renders a GitHub issue event", async () => {
    const session = await sessionWith("in-gh");
    const secret = "It's a Secret to Everybody";
    const put = await putInbound(session, "github", {
      format: "github",
      secret,
      template: "{{action}} on {{repository.full_name}}: {{issue.title}}",
    });
    expect(put.status).toBe(201);
    const delivered = await github(session, "github", secret, "issues", ISSUE_OPENED);
    expect(delivered.status).toBe(200);
    const accepted = await json<{ inputId: number; duplicate: boolean }>(delivered);
    expect(accepted.duplicate).toBe(false);
    expect(accepted.inputId).toBeGreaterThan(0);
    const users = await userTexts(session);
    expect(users).toHaveLength(1);
    // The model gets the rendered text alone; the payload is in the user entry's data.
    expect(users[0]).toEqual(["opened on octo/repo: Found a bug"]);
    // Accepted, answered 200, generated after: the input runs to its answer.
    const api = await client(TENANT);
    await until(
      async () => ((await api.session(session).input(accepted.inputId)).result.status === "done" ? true : undefined),
      "the delivery's answer",
    );
  });

  it("a GitHub ping answers 200 and queues nothing", async () => {
    const session = await sessionWith("in-ping");
    const secret = "ping-secret";
    await putInbound(session, "gh", { format: "github", secret });
    const before = await lastSeq(TENANT, session);
    const ping = await github(session, "gh", secret, "ping", {
      zen: "Design for failure.",
      hook_id: 123456,
      hook: { type: "Repository", events: ["issues"] },
    });
    expect(ping.status).toBe(200);
    expect(await json(ping)).toMatchObject({ ok: true, event: "ping" });
    expect(await lastSeq(TENANT, session)).toBe(before);
    expect(await userTexts(session)).toEqual([]);
  });

  it("a redelivered GitHub delivery (same X-GitHub-Delivery) is accepted once and writes nothing", async () => {
    const session = await sessionWith("in-redeliver");
    const secret = "redeliver-secret";
    await putInbound(session, "gh", { format: "github", secret });
    const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    const first = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh", secret, "issues", ISSUE_OPENED, { delivery }),
    );
    expect(first.duplicate).toBe(false);
    const api = await client(TENANT);
    await until(
      async () => ((await api.session(session).input(first.inputId)).result.status === "done" ? true : undefined),
      "the first delivery's answer",
    );
    const before = await lastSeq(TENANT, session);
    const again = await github(session, "gh", secret, "issues", ISSUE_OPENED, { delivery });
    expect(again.status).toBe(200);
    expect(await json(again)).toEqual({ inputId: first.inputId, duplicate: true });
    expect(await lastSeq(TENANT, session)).toBe(before);
    expect(await userTexts(session)).toHaveLength(1);
    // Delivery ids are per endpoint: the same id on another endpoint is another delivery.
    await putInbound(session, "gh2", { format: "github", secret });
    const other = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh2", secret, "issues", ISSUE_OPENED, { delivery }),
    );
    expect(other.duplicate).toBe(false);
    expect(other.inputId).not.toBe(first.inputId);
    // Nor does a Standard Webhooks delivery on the session's own webhook route whose id looks like
    // "<endpoint>:<id>": the two routes' request keys live in separate namespaces.
    const body = JSON.stringify({ input: "from the webhook route" });
    const timestamp = nowSeconds();
    const webhookId = `gh:${delivery}`;
    const signature = await signWebhook(
      await webhookSecret(env.WEBHOOK_MASTER_SECRET, TENANT, session),
      webhookId,
      timestamp,
      body,
    );
    const viaWebhook = await call("POST", `/v1/webhooks/${TENANT}/${session}/root`, {
      rawBody: body,
      headers: {
        "content-type": "application/json",
        "webhook-id": webhookId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature,
      },
    });
    expect(viaWebhook.status).toBe(202);
    expect((await json<{ inputId: number; duplicate: boolean }>(viaWebhook)).inputId).not.toBe(first.inputId);
  });

  it("a Stripe delivery and a standard one each queue input; without a template the payload is the input", async () => {
    const session = await sessionWith("in-stripe");
    const stripeSecret = "whsec_stripe_test_0123456789";
    expect((await putInbound(session, "stripe", { format: "stripe", secret: stripeSecret })).status).toBe(201);
    const charge = {
      id: "evt_1NG8Du2eZvKYlo2CUI79vXWy",
      object: "event",
      type: "charge.succeeded",
      created: 1686089970,
      data: { object: { id: "ch_3", amount: 2000, currency: "usd" } },
    };
    const viaStripe = await stripe(session, "stripe", stripeSecret, charge);
    expect(viaStripe.status).toBe(200);
    expect(await json(viaStripe)).toMatchObject({ duplicate: false });
    const created = await putInbound(session, "ci", { format: "standard" });
    const secret = (await json<{ secret: string }>(created)).secret;
    const viaStandard = await standard(session, "ci", secret, { build: 42, status: "green" });
    expect(viaStandard.status).toBe(200);
    expect(await json(viaStandard)).toMatchObject({ duplicate: false });
    const texts = (await userTexts(session)).flat().join("\n");
    expect(texts).toContain('"charge.succeeded"');
    expect(texts).toContain(JSON.stringify({ build: 42, status: "green" }, null, 2));
  });

  it("a bad signature, an unknown endpoint and a form-encoded Slack payload are refused and write nothing", async () => {
    const session = await sessionWith("in-bad");
    const secret = "bad-secret";
    await putInbound(session, "gh", { format: "github", secret });
    await putInbound(session, "slack", { format: "slack", secret });
    const before = await lastSeq(TENANT, session);
    const forged = await github(session, "gh", secret, "issues", ISSUE_OPENED, { signWith: "not the secret" });
    expect(forged.status).toBe(401);
    expect((await json(forged))["code"]).toBe("invalid_signature");
    const unknown = await github(session, "nosuch", secret, "issues", ISSUE_OPENED);
    expect(unknown.status).toBe(401);
    expect((await json(unknown))["code"]).toBe("invalid_signature");
    const noSession = await call("POST", deliveryPath(uniqueSession("never"), "gh"), {
      rawBody: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(noSession.status).toBe(401);
    expect((await json(noSession))["code"]).toBe("invalid_signature");
    const form = await slack(session, "slack", secret, "token=gIkuvaNzQIHg97ATvDxqgjtO&command=%2Fweather&text=94070", {
      contentType: "application/x-www-form-urlencoded",
    });
    expect(form.status).toBe(415);
    expect((await json(form))["code"]).toBe("unsupported_media_type");
    expect(await lastSeq(TENANT, session)).toBe(before);
  });

  it("config is validated: github without a secret, a bad name, a bad format, a missing conversation and a non-operator token are refused and write nothing", async () => {
    const session = await sessionWith("in-config");
    const before = await lastSeq(TENANT, session);
    const cases: [string, Promise<Response>, number, string, string | undefined][] = [
      ["github without a secret", putInbound(session, "gh", { format: "github" }), 400, "invalid_body", "secret"],
      [
        "standard with a secret",
        putInbound(session, "ci", { format: "standard", secret: "chosen" }),
        400,
        "invalid_body",
        "secret",
      ],
      ["bad name", putInbound(session, "Bad.Name", { format: "standard" }), 400, "invalid_id", "name"],
      ["bad format", putInbound(session, "x", { format: "gitlab", secret: "s" }), 400, "invalid_body", "format"],
      ["bad mode", putInbound(session, "x", { format: "standard", mode: "later" }), 400, "invalid_body", "mode"],
      [
        "template over 4 KB",
        putInbound(session, "x", { format: "standard", template: "x".repeat(4097) }),
        400,
        "invalid_body",
        "template",
      ],
      [
        "unknown field",
        putInbound(session, "x", { format: "standard", url: "https://example.com" }),
        400,
        "invalid_body",
        "url",
      ],
      [
        "missing conversation",
        putInbound(session, "x", { format: "standard", conversation: 999_999 }),
        404,
        "conversation_not_found",
        "conversation",
      ],
      ["client role", putInbound(session, "x", { format: "standard" }, "client"), 403, "forbidden", undefined],
    ];
    for (const [name, pending, status, code, field] of cases) {
      const response = await pending;
      const body = await json(response);
      expect(response.status, name).toBe(status);
      expect(body["code"], name).toBe(code);
      if (field !== undefined) expect(body["field"], name).toBe(field);
    }
    const clientToken = await token(TENANT, "client");
    for (const [method, path] of [
      ["GET", `/v1/sessions/${session}/inbound`],
      ["GET", `/v1/sessions/${session}/inbound/x`],
      ["DELETE", `/v1/sessions/${session}/inbound/x`],
    ] as const) {
      const response = await call(method, path, { token: clientToken });
      expect(response.status, `${method} ${path}`).toBe(403);
    }
    expect(await lastSeq(TENANT, session)).toBe(before);
    const missing = await call("GET", `/v1/sessions/${session}/inbound/x`, { token: await token(TENANT, "operator") });
    expect(missing.status).toBe(404);
    expect(await json(missing)).toMatchObject({ code: "not_found", field: "name" });
  });

  it("the standard secret is shown once; GET never shows a secret", async () => {
    const session = await sessionWith("in-secret");
    const operator = await token(TENANT, "operator");
    const created = await putInbound(session, "ci", { format: "standard", template: "build {{build}}" });
    expect(created.status).toBe(201);
    const first = await json<{
      name: string;
      url: string;
      format: string;
      conversationId: number;
      mode: string;
      template: string;
      secret: string;
    }>(created);
    expect(first.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(first).toMatchObject({ name: "ci", format: "standard", mode: "followUp", template: "build {{build}}" });
    expect(first.url).toBe(`https://pico.test/v1/inbound/${TENANT}/${session}/ci`);
    // A second PUT of the same standard endpoint changes its config and keeps its secret (not shown again).
    const replaced = await putInbound(session, "ci", { format: "standard", mode: "steer" });
    expect(replaced.status).toBe(200);
    const second = await json(replaced);
    expect(second).toMatchObject({ name: "ci", mode: "steer" });
    expect(second["secret"]).toBeUndefined();
    expect(second["template"]).toBeUndefined();
    expect((await standard(session, "ci", first.secret, { build: 7 })).status).toBe(200);
    await putInbound(session, "gh", { format: "github", secret: "never-shown" });
    const one = await call("GET", `/v1/sessions/${session}/inbound/ci`, { token: operator });
    expect(one.status).toBe(200);
    const list = await call("GET", `/v1/sessions/${session}/inbound`, { token: operator });
    const listed = await json<{ items: { name: string }[] }>(list);
    expect(listed.items.map((item) => item.name)).toEqual(["ci", "gh"]);
    const shown = JSON.stringify([await json(one), listed]);
    expect(shown).not.toContain(first.secret);
    expect(shown).not.toContain("never-shown");
    expect(shown).not.toContain('"secret"');
  });

  it("after DELETE, deliveries to the endpoint are 401 and write nothing", async () => {
    const session = await sessionWith("in-delete");
    const operator = await token(TENANT, "operator");
    const secret = "delete-secret";
    await putInbound(session, "gh", { format: "github", secret });
    expect((await github(session, "gh", secret, "issues", ISSUE_OPENED)).status).toBe(200);
    const deleted = await call("DELETE", `/v1/sessions/${session}/inbound/gh`, { token: operator });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ deleted: true });
    const before = await lastSeq(TENANT, session);
    const refused = await github(session, "gh", secret, "issues", ISSUE_OPENED);
    expect(refused.status).toBe(401);
    expect((await json(refused))["code"]).toBe("invalid_signature");
    expect(await lastSeq(TENANT, session)).toBe(before);
    const again = await call("DELETE", `/v1/sessions/${session}/inbound/gh`, { token: operator });
    expect(again.status).toBe(404);
  });
});

describe("signed routes without a token", () => {
  it("Unauthenticated signed routes answer alike for known and unknown names", async () => {
    const session = await sessionWith("in-alike");
    expect((await putInbound(session, "ci", { format: "standard" })).status).toBe(201);
    expect((await putInbound(session, "gh", { format: "github", secret: "a-github-secret-of-length" })).status).toBe(
      201,
    );
    const body = JSON.stringify({ hello: "world" });
    const fresh = String(nowSeconds());
    const variants: Record<string, Record<string, string>> = {
      "no signature headers": {},
      "a malformed timestamp": { "webhook-id": "msg_1", "webhook-timestamp": "yesterday", "webhook-signature": "v1,x" },
      "a wrong signature": { "webhook-id": "msg_1", "webhook-timestamp": fresh, "webhook-signature": "v1,AAAA" },
      "a stale timestamp": { "webhook-id": "msg_1", "webhook-timestamp": "1000", "webhook-signature": "v1,AAAA" },
      "a wrong GitHub signature": { "x-hub-signature-256": "sha256=00", "x-github-delivery": "d-1" },
    };
    /** The answer without its `instance` (the request's own path). */
    const answer = async (path: string, headers: Record<string, string>): Promise<unknown> => {
      const response = await call("POST", path, {
        rawBody: body,
        headers: { "content-type": "application/json", ...headers },
      });
      const { instance: _path, ...rest } = await json(response);
      return { status: response.status, ...rest };
    };
    for (const [what, headers] of Object.entries(variants)) {
      const known = [
        await answer(deliveryPath(session, "ci"), headers),
        await answer(deliveryPath(session, "gh"), headers),
      ];
      const unknown = [
        await answer(deliveryPath(session, "nope"), headers),
        await answer(deliveryPath(uniqueSession("never"), "ci"), headers),
      ];
      for (const one of [...known, ...unknown]) expect(one, what).toEqual(unknown[0]);
      expect(unknown[0], what).toMatchObject({ status: 401, code: "invalid_signature" });
    }
  });
});

describe("GitHub replays", () => {
  it("A replayed GitHub delivery with a new delivery id is a duplicate", async () => {
    const session = await sessionWith("in-replay");
    const secret = "replay-secret";
    await putInbound(session, "gh", { format: "github", secret });
    const first = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh", secret, "issues", ISSUE_OPENED, { delivery: "d-first" }),
    );
    expect(first.duplicate).toBe(false);
    const api = await client(TENANT);
    await until(
      async () => ((await api.session(session).input(first.inputId)).result.status === "done" ? true : undefined),
      "the first delivery's answer",
    );
    const before = await lastSeq(TENANT, session);
    // A captured delivery posted again under a delivery id of the attacker's choosing: the signature gives it away.
    const replayed = await github(session, "gh", secret, "issues", ISSUE_OPENED, { delivery: "d-replayed" });
    expect(replayed.status).toBe(200);
    expect(await json(replayed)).toEqual({ inputId: first.inputId, duplicate: true });
    expect(await lastSeq(TENANT, session)).toBe(before);
    expect(await userTexts(session)).toHaveLength(1);
    // Signatures are per endpoint, as delivery ids are: the same signed body on another endpoint is another delivery.
    await putInbound(session, "gh2", { format: "github", secret });
    const other = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh2", secret, "issues", ISSUE_OPENED, { delivery: "d-other" }),
    );
    expect(other.duplicate).toBe(false);
    expect(other.inputId).not.toBe(first.inputId);
  });

  it("A GitHub replay is caught for 7 days, and its signature is pruned after them, by a delivery or the alarm", async () => {
    const time = new ManualTime();
    setHostSeams({ clock: () => new ManualClock(time) });
    const session = await sessionWith("in-replay-days");
    const secret = "replay-days-secret";
    await putInbound(session, "gh", { format: "github", secret });
    const stub = stubOf(TENANT, session) as unknown as DurableObjectStub<SessionObject>;
    const advance = (ms: number): Promise<void> =>
      runInDurableObject(stub, (instance: SessionObject) => clockOf(instance).advanceTo(ms));
    const recorded = (): Promise<number> =>
      runInDurableObject(stub, async (instance: SessionObject) => {
        const harness = instance.harness;
        if (harness === undefined) throw new Error("the session is not open");
        const { items } = await harness.storage.scanValues({
          scope: { session: true },
          namespace: REPLAY_NAMESPACE,
          limit: 100,
        });
        return items.length;
      });
    const alarmAt = (): Promise<number | null> =>
      runInDurableObject(stub, (_instance: SessionObject, state) => state.storage.getAlarm());
    const api = await client(TENANT);
    const settle = (inputId: number): Promise<true> =>
      until(
        async () => ((await api.session(session).input(inputId)).result.status === "done" ? true : undefined),
        "the delivery's answer",
      );
    const t0 = time.now;
    const first = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh", secret, "issues", ISSUE_OPENED),
    );
    expect(first.duplicate).toBe(false);
    await settle(first.inputId);
    expect(await recorded()).toBe(1);
    // Caught until the last moment of the seventh day.
    await advance(t0 + REPLAY_WINDOW_MS - 1);
    expect(await json(await github(session, "gh", secret, "issues", ISSUE_OPENED))).toEqual({
      inputId: first.inputId,
      duplicate: true,
    });
    // Seven days on, the next accepted delivery prunes the expired signature in its own commit.
    await advance(t0 + REPLAY_WINDOW_MS);
    expect(await recorded()).toBe(1);
    const t1 = time.now;
    const next = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh", secret, "issues", { ...ISSUE_OPENED, action: "closed" }),
    );
    expect(next.duplicate).toBe(false);
    await settle(next.inputId);
    expect(await recorded()).toBe(1);
    // A replay older than the window is not caught (GitHub signs no timestamp).
    const late = await json<{ inputId: number; duplicate: boolean }>(
      await github(session, "gh", secret, "issues", ISSUE_OPENED),
    );
    expect(late.duplicate).toBe(false);
    expect(late.inputId).not.toBe(first.inputId);
    await settle(late.inputId);
    expect(await recorded()).toBe(2);
    // Without traffic the alarm empties the table: it is set for the oldest expiry (once earlier reasons ran).
    for (let i = 0; i < 20; i++) {
      const at = await alarmAt();
      if (at === null || at >= t1 + REPLAY_WINDOW_MS) break;
      await advance(at);
      await runDurableObjectAlarm(stub);
    }
    expect(await alarmAt()).toBe(t1 + REPLAY_WINDOW_MS);
    await advance(t1 + REPLAY_WINDOW_MS);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await recorded()).toBe(0);
  });
});
