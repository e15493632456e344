/**
 * Inbound signature verification (src/worker/inbound/verify.ts) against the platforms' documented
 * examples: GitHub's X-Hub-Signature-256, Slack's v0 signature, Stripe's Stripe-Signature, and
 * Standard Webhooks; plus tampered bodies, wrong secrets, stale timestamps and missing headers. Replayed
 * delivery ids are de-duplicated by the delivery route (its own tests).
 */
import { describe, expect, it } from "vitest";
import {
  githubSignature,
  INBOUND_FORMATS,
  slackSignature,
  stripeSignature,
  verifyInbound,
  type InboundFormat,
  type InboundVerdict,
} from "../../src/worker/inbound/verify.js";
import { Problem, type ProblemCode } from "../../src/worker/problems.js";
import { signWebhook } from "../../src/worker/crypto/webhooks.js";

const JSON_TYPE = "application/json";

/** A header reader over a plain record (names compared case-insensitively, as Request headers are). */
function headers(values: Record<string, string>): (name: string) => string | undefined {
  const map = new Headers(values);
  return (name) => map.get(name) ?? undefined;
}

async function refused(
  promise: Promise<InboundVerdict>,
): Promise<{ readonly code: ProblemCode; readonly status: number; readonly field: string | undefined }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof Problem) return { code: error.code, status: error.status, field: error.field };
    throw error;
  }
  throw new Error("expected a Problem");
}

// GitHub's documented example ("Validating webhook deliveries"): this secret and payload give this signature.
const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_PAYLOAD = "Hello, World!";
const GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

// Slack's documented example ("Verifying requests from Slack"): a slash command, form-encoded.
const SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TIMESTAMP = 1531420618;
const SLACK_BODY =
  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

// Stripe's documented scheme ("Verify webhook signatures manually"): v1 = hex HMAC-SHA256(secret, `${t}.${payload}`).
const STRIPE_SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv";

const NOW_MS = 1_735_689_600_000; // 2025-01-01T00:00:00Z
const NOW = NOW_MS / 1000;

describe("inbound signatures", () => {
  it("GitHub, Slack and Stripe signatures verify exactly as documented", async () => {
    // GitHub: the documented signature, and verifyInbound accepting a JSON delivery signed the same way.
    expect(await githubSignature(GITHUB_SECRET, GITHUB_PAYLOAD)).toBe(GITHUB_SIGNATURE);
    const issue = JSON.stringify({
      action: "opened",
      issue: { number: 7, title: "Crash on start" },
      repository: { full_name: "acme/app" },
    });
    const issueSignature = await githubSignature(GITHUB_SECRET, issue);
    const github = await verifyInbound(
      "github",
      GITHUB_SECRET,
      headers({
        "X-Hub-Signature-256": issueSignature,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "X-GitHub-Event": "issues",
      }),
      "application/json",
      issue,
      NOW_MS,
    );
    expect(github).toEqual({
      type: "delivery",
      deliveryId: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      payload: JSON.parse(issue),
      // GitHub signs no timestamp and not the delivery id: the signature is de-duplicated on too.
      signature: issueSignature,
    });

    // Slack: the documented signature; the documented request itself is form-encoded (a slash command),
    // out of scope: verified, then 415. A JSON Events API delivery uses the same scheme and is queued.
    expect(await slackSignature(SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY)).toBe(SLACK_SIGNATURE);
    const slackHeaders = headers({
      "X-Slack-Request-Timestamp": String(SLACK_TIMESTAMP),
      "X-Slack-Signature": SLACK_SIGNATURE,
    });
    expect(
      await refused(
        verifyInbound(
          "slack",
          SLACK_SECRET,
          slackHeaders,
          "application/x-www-form-urlencoded",
          SLACK_BODY,
          SLACK_TIMESTAMP * 1000,
        ),
      ),
    ).toEqual({
      code: "unsupported_media_type",
      status: 415,
      field: "content-type",
    });
    const event = JSON.stringify({
      type: "event_callback",
      event_id: "Ev08MFMKH6",
      event: { type: "app_mention", text: "<@U1> hi" },
    });
    const slack = await verifyInbound(
      "slack",
      SLACK_SECRET,
      headers({
        "X-Slack-Request-Timestamp": String(NOW),
        "X-Slack-Signature": await slackSignature(SLACK_SECRET, NOW, event),
      }),
      "application/json; charset=utf-8",
      event,
      NOW_MS,
    );
    expect(slack).toEqual({ type: "delivery", deliveryId: "Ev08MFMKH6", payload: JSON.parse(event) });

    // Stripe: t and v1 per the documented scheme; any of several v1 entries may match; v0 is ignored.
    const charge = JSON.stringify({
      id: "evt_1NG8Du2eZvKYlo2CUI79vXWy",
      object: "event",
      type: "charge.succeeded",
      data: { object: { id: "ch_1" } },
    });
    const v1 = await stripeSignature(STRIPE_SECRET, NOW, charge);
    expect(v1).toMatch(/^[0-9a-f]{64}$/);
    const expectedHex = Array.from(
      new Uint8Array(
        await crypto.subtle.sign(
          "HMAC",
          await crypto.subtle.importKey(
            "raw",
            new TextEncoder().encode(STRIPE_SECRET),
            { name: "HMAC", hash: "SHA-256" },
            false,
            ["sign"],
          ),
          new TextEncoder().encode(`${NOW}.${charge}`),
        ),
      ),
      (byte) => byte.toString(16).padStart(2, "0"),
    ).join("");
    expect(v1).toBe(expectedHex);
    const stripe = (header: string): Promise<InboundVerdict> =>
      verifyInbound("stripe", STRIPE_SECRET, headers({ "Stripe-Signature": header }), JSON_TYPE, charge, NOW_MS);
    const delivered = { type: "delivery", deliveryId: "evt_1NG8Du2eZvKYlo2CUI79vXWy", payload: JSON.parse(charge) };
    expect(await stripe(`t=${NOW},v1=${v1}`)).toEqual(delivered);
    expect(await stripe(`t=${NOW},v1=${"0".repeat(64)},v1=${v1},v0=${"1".repeat(64)}`)).toEqual(delivered);
    expect(await refused(stripe(`t=${NOW},v0=${v1}`))).toMatchObject({ code: "invalid_signature", status: 401 });
    // Tolerance: 5 minutes either way.
    const at = async (seconds: number): Promise<InboundVerdict> => {
      const signed = await stripeSignature(STRIPE_SECRET, seconds, charge);
      return verifyInbound(
        "stripe",
        STRIPE_SECRET,
        headers({ "Stripe-Signature": `t=${seconds},v1=${signed}` }),
        JSON_TYPE,
        charge,
        NOW_MS,
      );
    };
    expect(await at(NOW - 299)).toEqual(delivered);
    expect(await at(NOW + 299)).toEqual(delivered);
    expect(await refused(at(NOW - 301))).toMatchObject({ code: "stale_webhook", status: 401 });
  });

  describe("GitHub", () => {
    const body = JSON.stringify({ action: "opened", issue: { title: "x" } });
    const deliver = async (
      options: { secret?: string; body?: string; omit?: string; event?: string; contentType?: string } = {},
    ): Promise<InboundVerdict> => {
      const values: Record<string, string> = {
        "X-Hub-Signature-256": await githubSignature(options.secret ?? GITHUB_SECRET, body),
        "X-GitHub-Delivery": "d-1",
        "X-GitHub-Event": options.event ?? "issues",
      };
      if (options.omit !== undefined) delete values[options.omit];
      return verifyInbound(
        "github",
        GITHUB_SECRET,
        headers(values),
        options.contentType ?? JSON_TYPE,
        options.body ?? body,
        NOW_MS,
      );
    };

    it("refuses a tampered body, a wrong secret and a missing signature with 401", async () => {
      expect(await deliver()).toMatchObject({ type: "delivery", deliveryId: "d-1" });
      expect(await refused(deliver({ body: body.replace("opened", "closed") }))).toEqual({
        code: "invalid_signature",
        status: 401,
        field: "x-hub-signature-256",
      });
      expect(await refused(deliver({ secret: "another secret" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ omit: "X-Hub-Signature-256" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(
        await refused(
          verifyInbound(
            "github",
            GITHUB_SECRET,
            headers({ "X-Hub-Signature-256": "sha256=", "X-GitHub-Delivery": "d-1" }),
            JSON_TYPE,
            body,
            NOW_MS,
          ),
        ),
      ).toMatchObject({ code: "invalid_signature" });
    });

    it("answers a ping and queues nothing; a delivery without X-GitHub-Delivery is 400; only JSON is accepted", async () => {
      expect(await deliver({ event: "ping" })).toEqual({ type: "reply", body: { ok: true, event: "ping" } });
      expect(await refused(deliver({ omit: "X-GitHub-Delivery" }))).toEqual({
        code: "invalid_header",
        status: 400,
        field: "x-github-delivery",
      });
      expect(await refused(deliver({ contentType: "application/x-www-form-urlencoded" }))).toMatchObject({
        code: "unsupported_media_type",
        status: 415,
      });
    });
  });

  describe("Slack", () => {
    const event = JSON.stringify({ type: "event_callback", event_id: "Ev1", event: { type: "message" } });
    const deliver = async (
      options: { secret?: string; body?: string; timestamp?: number; omit?: string; signed?: string } = {},
    ): Promise<InboundVerdict> => {
      const timestamp = options.timestamp ?? NOW;
      const signed = options.signed ?? event;
      const values: Record<string, string> = {
        "X-Slack-Request-Timestamp": String(timestamp),
        "X-Slack-Signature": await slackSignature(options.secret ?? SLACK_SECRET, timestamp, signed),
      };
      if (options.omit !== undefined) delete values[options.omit];
      return verifyInbound("slack", SLACK_SECRET, headers(values), JSON_TYPE, options.body ?? signed, NOW_MS);
    };

    it("refuses a tampered body, a wrong secret, a stale timestamp and missing headers with 401", async () => {
      expect(await deliver()).toMatchObject({ type: "delivery", deliveryId: "Ev1" });
      expect(await refused(deliver({ body: event.replace("Ev1", "Ev2") }))).toEqual({
        code: "invalid_signature",
        status: 401,
        field: "x-slack-signature",
      });
      expect(await refused(deliver({ secret: "another secret" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ timestamp: NOW - 301 }))).toEqual({
        code: "stale_webhook",
        status: 401,
        field: "x-slack-request-timestamp",
      });
      expect(await refused(deliver({ timestamp: NOW + 301 }))).toMatchObject({ code: "stale_webhook" });
      expect(await deliver({ timestamp: NOW - 299 })).toMatchObject({ type: "delivery" });
      expect(await refused(deliver({ omit: "X-Slack-Signature" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ omit: "X-Slack-Request-Timestamp" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
    });

    it("answers url_verification with its challenge after checking the signature; an event without event_id is 400", async () => {
      const challenge = JSON.stringify({
        token: "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        type: "url_verification",
      });
      expect(await deliver({ signed: challenge })).toEqual({
        type: "reply",
        body: { challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" },
      });
      expect(await refused(deliver({ signed: challenge, secret: "another secret" }))).toMatchObject({
        code: "invalid_signature",
      });
      expect(await refused(deliver({ signed: JSON.stringify({ type: "event_callback", event: {} }) }))).toEqual({
        code: "invalid_body",
        status: 400,
        field: "event_id",
      });
    });
  });

  describe("Stripe", () => {
    const body = JSON.stringify({ id: "evt_1", type: "invoice.paid" });
    const deliver = async (
      options: { secret?: string; body?: string; timestamp?: number; header?: string } = {},
    ): Promise<InboundVerdict> => {
      const t = options.timestamp ?? NOW;
      const value = options.header ?? `t=${t},v1=${await stripeSignature(options.secret ?? STRIPE_SECRET, t, body)}`;
      return verifyInbound(
        "stripe",
        STRIPE_SECRET,
        headers(value === "" ? {} : { "Stripe-Signature": value }),
        JSON_TYPE,
        options.body ?? body,
        NOW_MS,
      );
    };

    it("refuses a tampered body, a wrong secret, a stale timestamp and a missing or malformed header with 401", async () => {
      expect(await deliver()).toEqual({ type: "delivery", deliveryId: "evt_1", payload: JSON.parse(body) });
      expect(await refused(deliver({ body: body.replace("paid", "void") }))).toEqual({
        code: "invalid_signature",
        status: 401,
        field: "stripe-signature",
      });
      expect(await refused(deliver({ secret: "whsec_another" }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ timestamp: NOW - 301 }))).toEqual({
        code: "stale_webhook",
        status: 401,
        field: "stripe-signature",
      });
      expect(await refused(deliver({ header: "" }))).toMatchObject({ code: "invalid_signature", status: 401 });
      expect(await refused(deliver({ header: `v1=${await stripeSignature(STRIPE_SECRET, NOW, body)}` }))).toMatchObject(
        { code: "invalid_signature" },
      );
      expect(await refused(deliver({ header: `t=${NOW}` }))).toMatchObject({ code: "invalid_signature" });
    });

    it("an event without an id is 400; a body that is not JSON is 400", async () => {
      const noId = JSON.stringify({ type: "invoice.paid" });
      const signed = async (text: string): Promise<InboundVerdict> =>
        verifyInbound(
          "stripe",
          STRIPE_SECRET,
          headers({ "Stripe-Signature": `t=${NOW},v1=${await stripeSignature(STRIPE_SECRET, NOW, text)}` }),
          JSON_TYPE,
          text,
          NOW_MS,
        );
      expect(await refused(signed(noId))).toEqual({ code: "invalid_body", status: 400, field: "id" });
      expect(await refused(signed("{not json"))).toMatchObject({ code: "invalid_json", status: 400 });
    });
  });

  describe("standard (Standard Webhooks)", () => {
    const secret = `whsec_${btoa("test-only-inbound-standard-secret")}`;
    const body = JSON.stringify({ hello: "world" });
    const deliver = async (
      options: { secret?: string; body?: string; timestamp?: number; omit?: string } = {},
    ): Promise<InboundVerdict> => {
      const t = options.timestamp ?? NOW;
      const values: Record<string, string> = {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(t),
        "webhook-signature": await signWebhook(options.secret ?? secret, "msg_1", t, body),
      };
      if (options.omit !== undefined) delete values[options.omit];
      return verifyInbound("standard", secret, headers(values), JSON_TYPE, options.body ?? body, NOW_MS);
    };

    it("verifies signWebhook's signature; refuses tampering, a wrong secret, a stale timestamp and missing headers", async () => {
      expect(await deliver()).toEqual({ type: "delivery", deliveryId: "msg_1", payload: { hello: "world" } });
      expect(await refused(deliver({ body: JSON.stringify({ hello: "there" }) }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ secret: `whsec_${btoa("another")}` }))).toMatchObject({
        code: "invalid_signature",
        status: 401,
      });
      expect(await refused(deliver({ timestamp: NOW - 301 }))).toMatchObject({ code: "stale_webhook", status: 401 });
      // Missing headers: 400 naming the header, as on /v1/webhooks (src/worker/crypto/webhooks.ts).
      for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
        expect(await refused(deliver({ omit: name }))).toEqual({
          code: "invalid_signature",
          status: 401,
          field: "webhook-signature",
        });
      }
    });
  });

  it("every format refuses a request without signature headers", async () => {
    const formats: readonly InboundFormat[] = INBOUND_FORMATS;
    expect(formats).toEqual(["standard", "github", "slack", "stripe"]);
    for (const format of formats) {
      const problem = await refused(verifyInbound(format, STRIPE_SECRET, headers({}), JSON_TYPE, "{}", NOW_MS));
      expect([400, 401]).toContain(problem.status);
    }
  });
});
