/**
 * Events out (docs/integrations.md "Events out"): the tenant's webhook endpoints, kept in its
 * DirectoryObject (directory/endpoints.ts), and each session's deliveries (outbox/outbox.ts).
 *
 *   POST   /v1/webhook-endpoints                    (operator) { url, events, sessions?, description? } -> 201 with
 *   secret
 *   GET    /v1/webhook-endpoints                    (operator) { items } (never a secret)
 *   GET    /v1/webhook-endpoints/:id                (operator)
 *   PATCH  /v1/webhook-endpoints/:id                (operator) { url?, events?, sessions?, description?, enabled? }
 *   DELETE /v1/webhook-endpoints/:id                (operator)
 *   POST   /v1/webhook-endpoints/:id/rotate-secret  (operator) -> the new secret; the old one signs too for 24 h
 *   GET    /v1/sessions/:session/deliveries         (operator) ?status=pending|dead|done&endpoint=&limit=
 *   POST   /v1/sessions/:session/deliveries/:id/retry (operator)
 *
 * A refused request writes nothing: bodies are checked (422 `invalid_endpoint` naming the field) before
 * the directory is called. The secret is generated here, sealed for the tenant and endpoint, and answered
 * once. Sessions learn of changes within ENDPOINTS_TTL_MS (outbox/outbox.ts).
 */
import { Hono } from "hono";
import {
  deliveriesQuery,
  endpointBody,
  endpointId,
  endpointPatchBody,
  EVENT_TYPE_NAMES,
  type EndpointResponse,
} from "../../../api/webhook-endpoints.js";
import { refuseOutsideClaim, requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import { Problem } from "../../problems.js";
import { isDevelopment } from "../../env.js";
import { noQuery, parse } from "../../schemas.js";
import { sealSecret } from "../../crypto/sealed-secrets.js";
import { base64 } from "../../crypto/base64.js";
import { endpointSealContext, MAX_ENDPOINTS, type EndpointRecord, type EventType } from "../../directory/endpoints.js";
import { body, query, run, session, type AppContext } from "./shared.js";
import { z } from "zod";

/** The wire's event types are the outbox's (a compile-time check: the two lists cannot drift apart). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const eventTypesAgree: Same<EventType, (typeof EVENT_TYPE_NAMES)[number]> = true;

/** `whsec_` and 32 random bytes in base64 (what Standard Webhooks libraries take). */
function newSecret(): string {
  return `whsec_${base64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

function newId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  return `we_${Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => alphabet[byte % 32]).join("")}`;
}

const iso = (ms: number): string => new Date(ms).toISOString();

function view(record: EndpointRecord, secret?: string): EndpointResponse {
  const { disabledAt, createdAt, updatedAt, previousSecretExpiresAt, events, sessions, ...rest } = record;
  return {
    ...rest,
    events: [...events],
    ...(sessions === undefined ? {} : { sessions: [...sessions] }),
    ...(disabledAt === undefined ? {} : { disabledAt: iso(disabledAt) }),
    createdAt: iso(createdAt),
    updatedAt: iso(updatedAt),
    ...(previousSecretExpiresAt === undefined ? {} : { previousSecretExpiresAt: iso(previousSecretExpiresAt) }),
    ...(secret === undefined ? {} : { secret }),
  };
}

/** An endpoint's URL is https:, or http: when ENVIRONMENT is development (unset counts as production). */
export function checkEndpointUrl(url: string | undefined, environment: string | undefined): void {
  if (url === undefined) return;
  if (new URL(url).protocol === "http:" && !isDevelopment(environment))
    throw new Problem(
      "invalid_endpoint",
      "url must be https: (plain http: only when ENVIRONMENT is development)",
      "url",
    );
}

function checkUrl(c: AppContext, url: string | undefined): void {
  checkEndpointUrl(url, c.env.ENVIRONMENT);
}

async function endpointBodyOf<S extends z.ZodType>(c: AppContext, schema: S): Promise<z.output<S>> {
  return parse(schema, await body(c, z.unknown()), "invalid_endpoint");
}

function idOf(c: AppContext): string {
  const id = c.req.param("endpointId") ?? "";
  if (!endpointId.safeParse(id).success)
    throw new Problem("endpoint_not_found", `the tenant has no webhook endpoint ${id}`, "id");
  return id;
}

function notFound(id: string): Problem {
  return new Problem("endpoint_not_found", `the tenant has no webhook endpoint ${id}`, "id");
}

export const webhookEndpointRoutes = new Hono<AppEnv>();

webhookEndpointRoutes.post("/", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const b = await endpointBodyOf(c, endpointBody);
  checkUrl(c, b.url);
  // A token naming its sessions registers endpoints for those only (no filter would mean every session).
  refuseOutsideClaim(c.get("claims"), b.sessions);
  const tenant = c.get("claims").tenant;
  const id = newId();
  const secret = newSecret();
  const sealed = await sealSecret(c.env, endpointSealContext(tenant, id), secret);
  const created = await directoryStub(c.env, tenant).createEndpoint(
    id,
    {
      url: b.url,
      events: b.events,
      ...(b.sessions === undefined ? {} : { sessions: b.sessions }),
      ...(b.description === undefined ? {} : { description: b.description }),
    },
    sealed,
  );
  if (created === undefined)
    throw new Problem("conflict", `a tenant has at most ${MAX_ENDPOINTS} webhook endpoints; delete one first`);
  return c.json(view(created, secret), 201);
});

webhookEndpointRoutes.get("/", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const items = await directoryStub(c.env, c.get("claims").tenant).listEndpoints();
  return c.json({ items: items.map((record) => view(record)) });
});

webhookEndpointRoutes.get("/:endpointId", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const id = idOf(c);
  const record = await directoryStub(c.env, c.get("claims").tenant).getEndpoint(id);
  if (record === undefined) throw notFound(id);
  return c.json(view(record));
});

webhookEndpointRoutes.patch("/:endpointId", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const id = idOf(c);
  const b = await endpointBodyOf(c, endpointPatchBody);
  checkUrl(c, b.url);
  if (b.sessions !== undefined) refuseOutsideClaim(c.get("claims"), b.sessions ?? undefined);
  const record = await directoryStub(c.env, c.get("claims").tenant).patchEndpoint(id, {
    ...(b.url === undefined ? {} : { url: b.url }),
    ...(b.events === undefined ? {} : { events: b.events }),
    ...(b.sessions === undefined ? {} : { sessions: b.sessions }),
    ...(b.description === undefined ? {} : { description: b.description }),
    ...(b.enabled === undefined ? {} : { enabled: b.enabled }),
  });
  if (record === undefined) throw notFound(id);
  return c.json(view(record));
});

webhookEndpointRoutes.delete("/:endpointId", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const id = idOf(c);
  if (!(await directoryStub(c.env, c.get("claims").tenant).deleteEndpoint(id))) throw notFound(id);
  return c.json({ id, deleted: true as const });
});

webhookEndpointRoutes.post("/:endpointId/rotate-secret", requires("webhooks"), async (c) => {
  query(c, noQuery);
  const id = idOf(c);
  const tenant = c.get("claims").tenant;
  const directory = directoryStub(c.env, tenant);
  if ((await directory.getEndpoint(id)) === undefined) throw notFound(id);
  const secret = newSecret();
  const record = await directory.rotateEndpointSecret(
    id,
    await sealSecret(c.env, endpointSealContext(tenant, id), secret),
  );
  if (record === undefined) throw notFound(id);
  return c.json(view(record, secret));
});

/** Mounted under /v1/sessions, before the session routes. */
export const deliveryRoutes = new Hono<AppEnv>();

deliveryRoutes.get("/:session/deliveries", requires("webhooks"), async (c) => {
  const stub = session(c);
  const q = query(c, deliveriesQuery);
  const items = await run(
    stub.op("deliveries", {
      limit: q.limit ?? 50,
      ...(q.status === undefined ? {} : { status: q.status }),
      ...(q.endpoint === undefined ? {} : { endpoint: q.endpoint }),
    }),
  );
  return c.json({ items });
});

deliveryRoutes.post("/:session/deliveries/:deliveryId/retry", requires("webhooks"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  return c.json(await run(stub.op("retryDelivery", c.req.param("deliveryId"))));
});
