/**
 * Signed webhooks (docs/api.md "Webhooks"): Standard Webhooks verification with WebCrypto. Headers `webhook-id`,
 * `webhook-timestamp` (Unix seconds) and `webhook-signature` (space-separated `v1,<base64>` entries);
 * the signed content is `${id}.${timestamp}.${body}`, HMAC-SHA256 with the endpoint's secret. Each
 * endpoint's (tenant and session) secret is derived from the one master secret, so nothing is stored:
 *
 *   endpoint secret = "whsec_" + base64(HMAC-SHA256(WEBHOOK_MASTER_SECRET, "pico-edge webhook:" + tenant + "/" +
 *   session))
 *
 * which is the format the `standardwebhooks` libraries take (`npm run webhook-secret -- --tenant T
 * --session S` prints it). A catalog tool's secret (`toolSecret`) is derived the same way from
 * "pico-edge tool:" + tenant + "/" + tool (generation 1; a rotated tool's generation g adds "#" + g). The delivery id becomes the request key `webhook:<id>`, so a redelivery runs
 * once.
 */
import type { Env } from "../env.js";
import { Problem } from "../problems.js";
import { base64, unbase64 } from "./base64.js";

/** How far a webhook's timestamp may be from the server's clock. */
export const WEBHOOK_SKEW_SECONDS = 5 * 60;

const encoder = new TextEncoder();

async function hmac(key: Uint8Array, message: string): Promise<ArrayBuffer> {
  const imported = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return crypto.subtle.sign("HMAC", imported, encoder.encode(message));
}

/**
 * The signing secret of one endpoint (tenant and session) in Standard Webhooks form (`whsec_...`). Per
 * endpoint, not per tenant: the signature does not cover the URL, so a delivery captured for one session
 * must not verify on another (delivery ids are de-duplicated per session).
 */
export async function webhookSecret(masterSecret: string, tenant: string, session: string): Promise<string> {
  return `whsec_${base64(await hmac(encoder.encode(masterSecret), `pico-edge webhook:${tenant}/${session}`))}`;
}

/**
 * The signing secret of one catalog tool of a tenant (`whsec_...`) at a generation: requests to the tool's endpoint
 * are signed with it, and a late result posted to `/v1/tool-results` must be. Per tool, so a tool's endpoint
 * cannot post results for another tool's calls; per generation, so a rotation (`POST /v1/tools/{tool}/rotate-secret`)
 * gives a new one. Generation 1 is the secret tools had before rotations existed (tool names hold no `#`).
 * `npm run tool-secret -- --tenant T --tool NAME --generation G` prints it.
 */
export async function toolSecret(masterSecret: string, tenant: string, tool: string, generation = 1): Promise<string> {
  const label =
    generation === 1 ? `pico-edge tool:${tenant}/${tool}` : `pico-edge tool:${tenant}/${tool}#${generation}`;
  return `whsec_${base64(await hmac(encoder.encode(masterSecret), label))}`;
}

export function masterSecret(env: Env): string {
  const secret = env.WEBHOOK_MASTER_SECRET;
  if (secret === undefined || secret.length < 16) {
    throw new Problem(
      "misconfigured",
      "WEBHOOK_MASTER_SECRET is not set (wrangler secret put WEBHOOK_MASTER_SECRET; .dev.vars in development)",
    );
  }
  return secret;
}

/** Sign a payload (senders, tests and the client): the `webhook-signature` header value. */
export async function signWebhook(
  secret: string,
  id: string,
  timestamp: number | string,
  body: string,
): Promise<string> {
  const key = unbase64(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret);
  return `v1,${base64(await hmac(key, `${id}.${timestamp}.${body}`))}`;
}

/** Constant-time comparison of two strings of signature text. */
function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

export interface WebhookHeaders {
  readonly id: string | undefined;
  readonly timestamp: string | undefined;
  readonly signature: string | undefined;
}

/**
 * Verify a delivery; returns its id. Everything that fails before the signature is known to be genuine (missing or
 * malformed headers, a signature that does not match) is 401 `invalid_signature`, so the answer tells an unsigned
 * sender nothing; only a genuine delivery with a timestamp outside the skew is 401 `stale_webhook`.
 */
export async function verifyWebhook(
  secret: string,
  headers: WebhookHeaders,
  body: string,
  nowMs: number,
): Promise<string> {
  const { id, timestamp, signature } = headers;
  const unsigned = new Problem(
    "invalid_signature",
    "webhook-id (1-190 visible ASCII characters), webhook-timestamp (Unix seconds) and a matching v1 webhook-signature are required",
    "webhook-signature",
  );
  if (id === undefined || !/^[\x21-\x7e]{1,190}$/.test(id)) throw unsigned;
  if (timestamp === undefined || !/^[0-9]{1,12}$/.test(timestamp)) throw unsigned;
  if (signature === undefined || signature.trim() === "") throw unsigned;
  const expected = await signWebhook(secret, id, timestamp, body);
  const offered = signature.split(" ").filter((part) => part.startsWith("v1,"));
  if (!offered.some((candidate) => equal(candidate, expected))) throw unsigned;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > WEBHOOK_SKEW_SECONDS) {
    throw new Problem(
      "stale_webhook",
      `webhook-timestamp is more than ${WEBHOOK_SKEW_SECONDS} s from the server's clock`,
      "webhook-timestamp",
    );
  }
  return id;
}
