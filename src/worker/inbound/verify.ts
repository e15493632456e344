/**
 * Inbound deliveries in the formats integrations already speak:
 * each platform's signature checked exactly as it documents it, with WebCrypto and no platform SDK.
 *
 *   - `standard`: Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`;
 *     src/worker/crypto/webhooks.ts); the delivery id is `webhook-id`.
 *   - `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`; the delivery id is
 *     `X-GitHub-Delivery`; an `X-GitHub-Event: ping` is answered and queues nothing. The signature comes back
 *     with the delivery: GitHub signs no timestamp and not the delivery id, so it is de-duplicated on too.
 *   - `slack`: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:" + X-Slack-Request-Timestamp + ":" + body)>`
 *     within 5 minutes; a `url_verification` body is answered with its `challenge`; otherwise the
 *     delivery id is the body's `event_id`.
 *   - `stripe`: `Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>...]` where a v1 is
 *     hex HMAC-SHA256(secret, t + "." + body), within 5 minutes; the delivery id is the event's `id`.
 *
 * The signature is checked first (401 `invalid_signature`, or `stale_webhook` for a genuine but old
 * delivery), then the body: only JSON is accepted (Slack's form-encoded slash commands and
 * interactivity payloads get 415 `unsupported_media_type`), a body that does not parse is 400
 * `invalid_json`, and a body without its delivery id is 400 `invalid_body`.
 */
import type { JsonObject, JsonValue } from "../../storage/records.js";
import { Problem } from "../problems.js";
import { verifyWebhook, WEBHOOK_SKEW_SECONDS } from "../crypto/webhooks.js";

export type InboundFormat = "standard" | "github" | "slack" | "stripe";

export const INBOUND_FORMATS: readonly InboundFormat[] = ["standard", "github", "slack", "stripe"];

/** What a verified request asks for: queue a delivery, or answer with a body and queue nothing. */
export type InboundVerdict =
  | {
      readonly type: "delivery";
      readonly deliveryId: string;
      readonly payload: JsonValue;
      /**
       * GitHub's signature, normalized: it signs the body but not the delivery id, so the session de-duplicates on it
       * too (session/replays.ts). The other formats sign their id, or a timestamp that bounds a replay.
       */
      readonly signature?: string;
    }
  | { readonly type: "reply"; readonly body: JsonValue };

/** How far a Slack or Stripe timestamp may be from the server's clock (the platforms' documented 5 minutes). */
export const INBOUND_TOLERANCE_SECONDS = WEBHOOK_SKEW_SECONDS;

const encoder = new TextEncoder();

async function hmacHex(secret: string, message: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const mac = await crypto.subtle.sign("HMAC", key, encoder.encode(message));
  return Array.from(new Uint8Array(mac), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Constant-time comparison of two strings of signature text. */
function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** GitHub's `X-Hub-Signature-256` value for a body. */
export async function githubSignature(secret: string, body: string): Promise<string> {
  return `sha256=${await hmacHex(secret, body)}`;
}

/** Slack's `X-Slack-Signature` value for a timestamp (seconds) and body. */
export async function slackSignature(secret: string, timestamp: number | string, body: string): Promise<string> {
  return `v0=${await hmacHex(secret, `v0:${timestamp}:${body}`)}`;
}

/** One `v1` entry of Stripe's `Stripe-Signature` for a timestamp (seconds) and body (hex, without `v1=`). */
export async function stripeSignature(secret: string, timestamp: number | string, body: string): Promise<string> {
  return hmacHex(secret, `${timestamp}.${body}`);
}

function badSignature(detail: string, header: string): Problem {
  return new Problem("invalid_signature", detail, header);
}

function checkFresh(seconds: number, nowMs: number, header: string): void {
  if (Math.abs(nowMs / 1000 - seconds) > INBOUND_TOLERANCE_SECONDS) {
    throw new Problem(
      "stale_webhook",
      `the timestamp is more than ${INBOUND_TOLERANCE_SECONDS} s from the server's clock`,
      header,
    );
  }
}

const DELIVERY_ID = /^[\x21-\x7e]{1,190}$/;

function jsonPayload(contentType: string | undefined, body: string): JsonValue {
  if (contentType === undefined || !/^\s*application\/(?:[a-z0-9.+-]*\+)?json\s*(?:;|$)/i.test(contentType)) {
    const form = contentType !== undefined && /^\s*application\/x-www-form-urlencoded/i.test(contentType);
    throw new Problem(
      "unsupported_media_type",
      form
        ? "form-encoded deliveries (Slack slash commands and interactivity, GitHub's form content type) are not supported: send JSON (Content-Type: application/json)"
        : "send the body as Content-Type: application/json",
      "content-type",
    );
  }
  if (body.trim() === "") throw new Problem("invalid_body", "a JSON body is required");
  try {
    return JSON.parse(body) as JsonValue;
  } catch (error) {
    throw new Problem(
      "invalid_json",
      `the body is not JSON: ${error instanceof Error ? error.message : "parse error"}`,
    );
  }
}

function isObject(value: JsonValue): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function member(payload: JsonValue, key: string): JsonValue | undefined {
  return isObject(payload) && Object.hasOwn(payload, key) ? payload[key] : undefined;
}

function bodyId(payload: JsonValue, key: string): string {
  const id = member(payload, key);
  if (typeof id !== "string" || !DELIVERY_ID.test(id)) {
    throw new Problem("invalid_body", `the body has no delivery id (\`${key}\`: 1-190 visible ASCII characters)`, key);
  }
  return id;
}

async function github(
  secret: string,
  header: (name: string) => string | undefined,
  contentType: string | undefined,
  body: string,
): Promise<InboundVerdict> {
  const offered = header("x-hub-signature-256");
  if (offered === undefined || offered.trim() === "")
    throw badSignature("X-Hub-Signature-256 is required", "x-hub-signature-256");
  if (!equal(offered.trim().toLowerCase(), await githubSignature(secret, body))) {
    throw badSignature("X-Hub-Signature-256 does not match the body", "x-hub-signature-256");
  }
  const payload = jsonPayload(contentType, body);
  if (header("x-github-event") === "ping") return { type: "reply", body: { ok: true, event: "ping" } };
  const id = header("x-github-delivery");
  if (id === undefined || !DELIVERY_ID.test(id))
    throw new Problem(
      "invalid_header",
      "X-GitHub-Delivery must be 1-190 visible ASCII characters",
      "x-github-delivery",
    );
  return { type: "delivery", deliveryId: id, payload, signature: offered.trim().toLowerCase() };
}

async function slack(
  secret: string,
  header: (name: string) => string | undefined,
  contentType: string | undefined,
  body: string,
  nowMs: number,
): Promise<InboundVerdict> {
  const timestamp = header("x-slack-request-timestamp");
  const offered = header("x-slack-signature");
  if (timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) {
    throw badSignature("X-Slack-Request-Timestamp must be Unix seconds", "x-slack-request-timestamp");
  }
  if (offered === undefined || offered.trim() === "")
    throw badSignature("X-Slack-Signature is required", "x-slack-signature");
  if (!equal(offered.trim().toLowerCase(), await slackSignature(secret, timestamp, body))) {
    throw badSignature("X-Slack-Signature does not match the timestamp and body", "x-slack-signature");
  }
  checkFresh(Number(timestamp), nowMs, "x-slack-request-timestamp");
  const payload = jsonPayload(contentType, body);
  if (member(payload, "type") === "url_verification") {
    const challenge = member(payload, "challenge");
    if (typeof challenge !== "string")
      throw new Problem("invalid_body", "a url_verification body needs a string challenge", "challenge");
    return { type: "reply", body: { challenge } };
  }
  return { type: "delivery", deliveryId: bodyId(payload, "event_id"), payload };
}

/** The `t` and the `v1` entries of a `Stripe-Signature` header (other schemes, such as v0, are ignored). */
function stripeHeader(value: string): { readonly t: string | undefined; readonly v1: readonly string[] } {
  let t: string | undefined;
  const v1: string[] = [];
  for (const part of value.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    const key = part.slice(0, at).trim();
    const item = part.slice(at + 1).trim();
    if (key === "t" && t === undefined) t = item;
    else if (key === "v1") v1.push(item.toLowerCase());
  }
  return { t, v1 };
}

async function stripe(
  secret: string,
  header: (name: string) => string | undefined,
  contentType: string | undefined,
  body: string,
  nowMs: number,
): Promise<InboundVerdict> {
  const value = header("stripe-signature");
  if (value === undefined || value.trim() === "")
    throw badSignature("Stripe-Signature is required", "stripe-signature");
  const { t, v1 } = stripeHeader(value);
  if (t === undefined || !/^[0-9]{1,12}$/.test(t))
    throw badSignature("Stripe-Signature has no t=<Unix seconds>", "stripe-signature");
  if (v1.length === 0) throw badSignature("Stripe-Signature has no v1 signature", "stripe-signature");
  const expected = await stripeSignature(secret, t, body);
  if (!v1.some((candidate) => equal(candidate, expected)))
    throw badSignature("no v1 signature in Stripe-Signature matches", "stripe-signature");
  checkFresh(Number(t), nowMs, "stripe-signature");
  const payload = jsonPayload(contentType, body);
  return { type: "delivery", deliveryId: bodyId(payload, "id"), payload };
}

async function standard(
  secret: string,
  header: (name: string) => string | undefined,
  contentType: string | undefined,
  body: string,
  nowMs: number,
): Promise<InboundVerdict> {
  const id = await verifyWebhook(
    secret,
    { id: header("webhook-id"), timestamp: header("webhook-timestamp"), signature: header("webhook-signature") },
    body,
    nowMs,
  );
  return { type: "delivery", deliveryId: id, payload: jsonPayload(contentType, body) };
}

/**
 * Verify one request to an inbound endpoint of `format` with its `secret`; `header` reads a request
 * header by lower-case name. Throws a Problem (401, 415, 400; see the module comment) or returns what
 * to do.
 */
export async function verifyInbound(
  format: InboundFormat,
  secret: string,
  header: (name: string) => string | undefined,
  contentType: string | undefined,
  body: string,
  nowMs: number,
): Promise<InboundVerdict> {
  switch (format) {
    case "standard":
      return standard(secret, header, contentType, body, nowMs);
    case "github":
      return github(secret, header, contentType, body);
    case "slack":
      return slack(secret, header, contentType, body, nowMs);
    case "stripe":
      return stripe(secret, header, contentType, body, nowMs);
    default: {
      const never: never = format;
      return never;
    }
  }
}
