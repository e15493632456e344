/**
 * Inbound endpoints (docs/integrations.md "Events in"): a sender that speaks its own format (GitHub,
 * Slack, Stripe, or Standard Webhooks) posts to a URL that carries the tenant, so it needs no token.
 *
 *   PUT    /v1/sessions/:session/inbound/:name   (operator) { format, conversation?, mode?, template?, secret?,
 *                                                            events?, when?, ignore?, self?, fields? }
 *   GET    /v1/sessions/:session/inbound         (operator) { items } (never a secret)
 *   GET    /v1/sessions/:session/inbound/:name   (operator)
 *   DELETE /v1/sessions/:session/inbound/:name   (operator)
 *   POST   /v1/inbound/:tenant/:session/:name    (the sender's signature)
 *
 * The Worker seals an endpoint's secret before the session stores it and opens it to verify a
 * delivery (crypto/sealed-secrets.ts); the session never holds it in the clear. A delivery is verified exactly as
 * its platform documents (inbound/verify.ts), then accepted with the request key
 * `inbound:{name}:{delivery id}`, so a redelivery answers the first acceptance and writes nothing, and
 * two endpoints' ids never collide. A GitHub delivery is also de-duplicated on its signature for 7 days
 * (session/replays.ts), because GitHub signs no timestamp and not the delivery id. It answers as soon as the input is accepted (the turn runs after),
 * well inside Slack's 3 s. An endpoint that does not exist is 401 `invalid_signature`, like a bad
 * signature: the URL reveals nothing.
 *
 * The tenant's endpoints (http/routes/inbound-endpoints.ts) verify, filter and describe a delivery with the same
 * functions (`verifiedDelivery`, `filtered`, `deliverySource`, `acceptMode`) before they route it.
 */
import { Hono } from "hono";
import { inboundBody, inboundName, type InboundFormatName } from "../../../api/inbound.js";
import type { InboundResponse } from "../../../api/responses.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { inboundData, inboundInput } from "../../inbound/template.js";
import {
  eventOf,
  fieldValues,
  filtersOf,
  ignoredBecause,
  sendersOf,
  type InboundFilters,
} from "../../inbound/filters.js";
import type { JsonObject, JsonValue } from "../../../storage/records.js";
import { INBOUND_FORMATS, verifyInbound, type InboundFormat, type InboundVerdict } from "../../inbound/verify.js";
import type { InboundConfig, InboundMode } from "../../session/inbound-ops.js";
import { Problem, unwrap } from "../../problems.js";
import { noQuery, parse, sessionName, tenantName } from "../../schemas.js";
import { openSecret, sealSecret, type SealContext } from "../../crypto/sealed-secrets.js";
import type { AcceptRequest } from "../../session/input-ops.js";
import { base64 } from "../../crypto/base64.js";
import { body, query, run, session, sessionStub, type AppContext } from "./shared.js";
import { acceptedBy } from "./accepting.js";

/** The wire's formats are the verifier's (a compile-time check: the two lists cannot drift apart). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const inboundFormatsAgree: Same<InboundFormat, (typeof INBOUND_FORMATS)[number]> &
  Same<InboundFormat, InboundFormatName> = true;

/** A standard endpoint's secret: `whsec_` and 32 random bytes in base64 (what Standard Webhooks libraries take). */
function generatedSecret(): string {
  return `whsec_${base64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

function sealContext(tenant: string, session: string, name: string): SealContext {
  return { tenant, owner: `inbound:${session}/${name}`, field: "secret" };
}

function nameParam(c: AppContext): string {
  return parse(inboundName, c.req.param("name"), "invalid_id", "name");
}

/** The URL a sender posts to. */
function deliveryUrl(c: AppContext, session: string, name: string): string {
  const tenant = c.get("claims").tenant;
  return `${new URL(c.req.url).origin}/v1/inbound/${encodeURIComponent(tenant)}/${encodeURIComponent(session)}/${name}`;
}

function view(c: AppContext, session: string, config: InboundConfig, secret?: string): InboundResponse {
  const { name, format, conversationId, mode, template } = config;
  const filters = filtersOf(config);
  return {
    name,
    url: deliveryUrl(c, session, name),
    format,
    conversationId,
    mode,
    ...(template === undefined ? {} : { template }),
    ...(filters.self === undefined ? {} : { self: filters.self }),
    ...(filters.when === undefined ? {} : { when: filters.when.map((condition) => ({ ...condition })) }),
    ...(filters.events === undefined ? {} : { events: [...filters.events] }),
    ...(filters.ignore === undefined ? {} : { ignore: [...filters.ignore] }),
    ...(filters.fields === undefined ? {} : { fields: [...filters.fields] }),
    ...(secret === undefined ? {} : { secret }),
  };
}

export const inboundRoutes = new Hono<AppEnv>();

inboundRoutes.put("/:session/inbound/:name", requires("inbound"), async (c) => {
  const stub = session(c);
  const sessionId = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const name = nameParam(c);
  query(c, noQuery);
  const b = await body(c, inboundBody);
  const offered = b.secret ?? generatedSecret();
  const sealed = await sealSecret(c.env, sealContext(c.get("claims").tenant, sessionId, name), offered);
  const result = await run(
    stub.op("inboundPut", name, {
      format: b.format,
      conversation: b.conversation ?? "root",
      mode: b.mode ?? "followUp",
      ...(b.template === undefined ? {} : { template: b.template }),
      ...filtersOf(b),
      secret: sealed,
      generated: b.secret === undefined,
    }),
  );
  const shown = b.secret === undefined && result.secretStored ? offered : undefined;
  return c.json(view(c, sessionId, result.config, shown), result.created ? 201 : 200);
});

inboundRoutes.get("/:session/inbound", requires("inbound"), async (c) => {
  const stub = session(c);
  const sessionId = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  query(c, noQuery);
  const items = await run(stub.op("inboundList"));
  return c.json({ items: items.map((config) => view(c, sessionId, config)) });
});

inboundRoutes.get("/:session/inbound/:name", requires("inbound"), async (c) => {
  const stub = session(c);
  const sessionId = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const name = nameParam(c);
  query(c, noQuery);
  return c.json(view(c, sessionId, await run(stub.op("inboundGet", name))));
});

inboundRoutes.delete("/:session/inbound/:name", requires("inbound"), async (c) => {
  const stub = session(c);
  const name = nameParam(c);
  query(c, noQuery);
  return c.json(await run(stub.op("inboundDelete", name)));
});

/**
 * What an accept of a delivery asks for: nextRun is queued; followUp and steer say what to do when the conversation is
 * busy.
 */
export function acceptMode(mode: InboundMode): Pick<AcceptRequest, "mode" | "whenBusy"> {
  switch (mode) {
    case "nextRun":
      return { mode: "nextRun" };
    case "followUp":
    case "steer":
      return { whenBusy: mode };
    default: {
      const never: never = mode;
      return never;
    }
  }
}

/** The one answer to every request that does not authenticate, whether or not the endpoint exists. */
const unknownEndpoint = (): Problem =>
  new Problem("invalid_signature", "the signature does not verify for this endpoint");

/** What an unknown endpoint's signature is computed against (no delivery can match it). */
const STAND_IN_KEY = `whsec_${"A".repeat(43)}=`;

/**
 * Verify a request to an endpoint of `format` against its secrets in order (the current one, then a previous one a
 * rotation keeps verifying); `secrets` empty: the endpoint does not exist, and the signature is computed against a
 * stand-in key (so it costs what a known one does). Every failure to authenticate gives the one answer.
 */
export async function verifiedDelivery(
  c: AppContext,
  format: InboundFormat | undefined,
  secrets: readonly string[],
  text: string,
): Promise<InboundVerdict> {
  const keys = secrets.length === 0 ? [STAND_IN_KEY] : secrets;
  for (const [index, secret] of keys.entries()) {
    try {
      const verdict = await verifyInbound(
        format ?? "standard",
        secret,
        (header) => c.req.header(header),
        c.req.header("content-type"),
        text,
        Date.now(),
      );
      if (secrets.length === 0) break;
      return verdict;
    } catch (error) {
      if (!(error instanceof Problem && error.code === "invalid_signature")) throw error;
      if (index === keys.length - 1) break;
    }
  }
  throw unknownEndpoint();
}

/** What the filters make of a delivery: its event, and why it is ignored (undefined: it passes). */
export function filtered(
  c: AppContext,
  format: InboundFormat,
  filters: InboundFilters,
  payload: JsonValue,
): { readonly event: string | undefined; readonly ignored: string | undefined } {
  const event = eventOf(format, (header) => c.req.header(header), payload);
  return { event, ignored: ignoredBecause(filters, event, sendersOf(format, payload), payload) };
}

/** What the input's events carry back (`source`), kept with the payload in the user entry's data. */
export function deliverySource(
  format: InboundFormat,
  endpoint: string,
  deliveryId: string,
  event: string | undefined,
  filters: InboundFilters,
  payload: JsonValue,
  route?: { readonly route: string; readonly thread: string },
): JsonObject {
  return {
    kind: format,
    endpoint,
    deliveryId,
    ...(event === undefined ? {} : { event }),
    ...(route === undefined ? {} : { route: route.route, thread: route.thread }),
    fields: fieldValues(filters, payload),
  };
}

export const inboundDeliveryRoutes = new Hono<AppEnv>();

inboundDeliveryRoutes.post("/:tenant/:session/:name", async (c) => {
  const tenant = parse(tenantName, c.req.param("tenant"), "invalid_id", "tenant");
  const sessionId = parse(sessionName, c.req.param("session"), "invalid_id", "session");
  const name = parse(inboundName, c.req.param("name"), "invalid_id", "name");
  query(c, noQuery);
  const text = await c.req.text();
  const stub = sessionStub(c.env, tenant, sessionId);
  const found = await stub.op("inboundEndpoint", name);
  // A session that was never created has no endpoints: the same answer as a missing one.
  const endpoint = !found.ok && found.problem.code === "session_not_found" ? null : unwrap(found);
  // The signature is checked before anything is answered (an unknown name against a stand-in key).
  const secrets =
    endpoint === null ? [] : [await openSecret(c.env, sealContext(tenant, sessionId, name), endpoint.secret)];
  const verdict = await verifiedDelivery(c, endpoint?.format, secrets, text);
  if (endpoint === null) throw unknownEndpoint();
  if (verdict.type === "reply") return c.json(verdict.body, 200);
  // Filters and the loop guard (inbound/filters.ts): a delivery they leave out answers 200 and writes nothing.
  const { event, ignored } = filtered(c, endpoint.format, endpoint, verdict.payload);
  if (ignored !== undefined) return c.json({ ignored: true as const, reason: ignored }, 200);
  const source = deliverySource(endpoint.format, name, verdict.deliveryId, event, endpoint, verdict.payload);
  // Admitted by the tenant's limits like any input (429 with Retry-After: every platform retries it later).
  const accepted = await acceptedBy(c.env, { tenant }, stub, sessionId, endpoint.conversationId, {
    input: inboundInput(endpoint.template, verdict.payload),
    data: inboundData(source, verdict.payload),
    ...acceptMode(endpoint.mode),
    source: { type: "inbound", endpoint: name, id: verdict.deliveryId },
    ...(verdict.signature === undefined ? {} : { signature: verdict.signature }),
  });
  return c.json({ inputId: accepted.inputId, duplicate: accepted.duplicate }, 200);
});
