/**
 * `POST /v1/webhooks/{tenant}/{session}/{conversation}`: queue input from a signed webhook (Standard
 * Webhooks; src/worker/crypto/webhooks.ts). No bearer token: the signature with the endpoint's derived secret
 * (tenant and session) authenticates the sender for this one session. The delivery id is the request key (namespace
 * `webhook:`), so a redelivery
 * returns the first acceptance (200) and writes nothing.
 */
import { Hono } from "hono";
import type { AppEnv } from "../../identity/auth.js";
import { conversationRef, parse, sessionName, tenantName, webhookBody, noQuery } from "../../schemas.js";
import { masterSecret, verifyWebhook, webhookSecret } from "../../crypto/webhooks.js";
import { parseBody, query, sessionStub } from "./shared.js";
import { acceptedBy } from "./accepting.js";

export const webhookRoutes = new Hono<AppEnv>();

webhookRoutes.post("/:tenant/:session/:conversation", async (c) => {
  const tenant = parse(tenantName, c.req.param("tenant"), "invalid_id", "tenant");
  const name = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const ref = parse(conversationRef, c.req.param("conversation"), "invalid_id", "conversation");
  query(c, noQuery);
  const text = await c.req.text();
  const secret = await webhookSecret(masterSecret(c.env), tenant, name);
  const deliveryId = await verifyWebhook(
    secret,
    {
      id: c.req.header("webhook-id"),
      timestamp: c.req.header("webhook-timestamp"),
      signature: c.req.header("webhook-signature"),
    },
    text,
    Date.now(),
  );
  const input = parseBody(c.req.header("content-type"), text, webhookBody);
  const stub = sessionStub(c.env, tenant, name);
  // Admitted by the tenant's limits like any input (429 with Retry-After: the sender retries later).
  const response = await acceptedBy(c.env, { tenant }, stub, name, ref, {
    input: input.input,
    ...(input.mode === undefined ? {} : { mode: input.mode }),
    source: { type: "webhook", id: deliveryId },
  });
  return c.json(response, response.duplicate ? 200 : 202);
});
