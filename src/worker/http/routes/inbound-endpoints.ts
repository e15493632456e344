/**
 * A tenant's inbound endpoints, routed per thread (docs/integrations.md "Routing"): one endpoint of the tenant's
 * feeds many sessions and threads. Its `session` template rendered over a delivery's payload names the session
 * (created on first use from `sessionTemplate`, titled with the readable key, metadata `inbound.endpoint` and
 * `inbound.session`), its `route` template the thread: a chat of that session (session/chat-ops.ts), started on its
 * first delivery as a conversation of its own. Names outside their alphabet are hashed (inbound/routing.ts).
 *
 *   PUT    /v1/inbound-endpoints/:name                (operator) { format, session, route?, sessionTemplate?, mode?,
 *                                                                  template?, secret?, events?, when?, ignore?,
 *                                                                  self?, fields? }
 *   GET    /v1/inbound-endpoints                      (operator) { items } (never a secret)
 *   GET    /v1/inbound-endpoints/:name                (operator)
 *   DELETE /v1/inbound-endpoints/:name                (operator)
 *   POST   /v1/inbound-endpoints/:name/rotate-secret  (operator) { secret? } -> the new secret; the previous one
 *                                                                  verifies for 24 h
 *   POST   /v1/inbound/:tenant/:name                  (the sender's signature)
 *
 * A delivery is verified, filtered and rendered exactly as a session endpoint's (http/routes/inbound.ts), before
 * anything is written: one refused by its signature or filters, or whose templates render nothing, creates no
 * session and no thread; so does one refused when its input is admitted (a limit, busy): a thread's first delivery is
 * admitted before its fork is made (chatAccept), and a session it created is deleted again (destroyUnused). A
 * delivery goes only into a session its endpoint created (metadata `inbound.endpoint`): a
 * rendered name of another session is 409 `conflict`, and nothing is written. It is accepted with the request key `inbound:@{name}:{delivery id}` in the session it is
 * routed to; a redelivery renders the same session and thread from the same payload, so it answers the first
 * acceptance and runs once (and a concurrent first delivery of a thread finds the thread the other started).
 */
import { Hono } from "hono";
import { inboundName, rotateInboundBody, tenantInboundBody } from "../../../api/inbound.js";
import type { TenantInboundResponse } from "../../../api/inbound.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { directoryStub } from "../../directory/object.js";
import type { TenantInboundRecord } from "../../directory/inbound.js";
import { refuseProfileAtCreate, resolveTemplateForUser } from "../../directory/templates.js";
import { inboundData, inboundInput } from "../../inbound/template.js";
import { filtersOf, type InboundFilters } from "../../inbound/filters.js";
import { routedSession, routedThread, type Routed } from "../../inbound/routing.js";
import type { InboundFormat } from "../../inbound/verify.js";
import type { InboundMode } from "../../session/inbound-ops.js";
import type { SessionRpc } from "../../session/rpc.js";
import { openSecret, sealSecret, type SealContext } from "../../crypto/sealed-secrets.js";
import { base64 } from "../../crypto/base64.js";
import { Problem, unwrap } from "../../problems.js";
import { noQuery, parse, tenantName, type Claims } from "../../schemas.js";
import type { JsonObject } from "../../../storage/records.js";
import { body, query, run, sessionStub, type AppContext } from "./shared.js";
import { acceptedBy, acceptedOnFork } from "./accepting.js";
import type { AcceptResponse } from "../../../api/responses.js";
import type { AcceptRequest, RequestSource } from "../../session/input-ops.js";
import type { ChatFork } from "../../session/chat-ops.js";
import { acceptMode, deliverySource, filtered, verifiedDelivery } from "./inbound.js";

/** A tenant endpoint's config as stored (the directory keeps it as opaque JSON). */
interface TenantInboundConfig extends InboundFilters {
  readonly format: InboundFormat;
  readonly session: string;
  readonly route?: string;
  readonly sessionTemplate?: string;
  readonly mode: InboundMode;
  readonly template?: string;
}

/** The metadata key a routed session names its endpoint under (the endpoint routes only into its own sessions). */
const ENDPOINT_KEY = "inbound.endpoint";

/** The label a tenant endpoint's request keys carry (`@` is never in a session endpoint's name). */
function keyLabel(name: string): string {
  return `@${name}`;
}

function sealContext(tenant: string, name: string): SealContext {
  return { tenant, owner: `inbound-endpoint:${name}`, field: "secret" };
}

function generatedSecret(): string {
  return `whsec_${base64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

function nameParam(c: AppContext): string {
  return parse(inboundName, c.req.param("name"), "invalid_id", "name");
}

function configOf(record: TenantInboundRecord): TenantInboundConfig {
  return record.config as unknown as TenantInboundConfig;
}

function notFound(name: string): Problem {
  return new Problem("not_found", `the tenant has no inbound endpoint ${name}`, "name");
}

const iso = (ms: number): string => new Date(ms).toISOString();

function view(c: AppContext, record: TenantInboundRecord, secret?: string): TenantInboundResponse {
  const config = configOf(record);
  const filters = filtersOf(config);
  const tenant = c.get("claims").tenant;
  return {
    name: record.name,
    url: `${new URL(c.req.url).origin}/v1/inbound/${encodeURIComponent(tenant)}/${record.name}`,
    format: config.format,
    session: config.session,
    ...(config.route === undefined ? {} : { route: config.route }),
    ...(config.sessionTemplate === undefined ? {} : { sessionTemplate: config.sessionTemplate }),
    mode: config.mode,
    ...(config.template === undefined ? {} : { template: config.template }),
    ...(filters.events === undefined ? {} : { events: [...filters.events] }),
    ...(filters.when === undefined ? {} : { when: filters.when.map((condition) => ({ ...condition })) }),
    ...(filters.ignore === undefined ? {} : { ignore: [...filters.ignore] }),
    ...(filters.self === undefined ? {} : { self: filters.self }),
    ...(filters.fields === undefined ? {} : { fields: [...filters.fields] }),
    createdAt: iso(record.createdAt),
    updatedAt: iso(record.updatedAt),
    ...(record.previousSecretExpiresAt === undefined
      ? {}
      : { previousSecretExpiresAt: iso(record.previousSecretExpiresAt) }),
    ...(secret === undefined ? {} : { secret }),
  };
}

export const inboundEndpointRoutes = new Hono<AppEnv>();

inboundEndpointRoutes.put("/:name", requires("inbound"), async (c) => {
  const name = nameParam(c);
  query(c, noQuery);
  const b = await body(c, tenantInboundBody);
  const tenant = c.get("claims").tenant;
  const directory = directoryStub(c.env, tenant);
  if (b.sessionTemplate !== undefined && (await directory.getTemplate(b.sessionTemplate)) === undefined)
    throw new Problem(
      "template_not_found",
      `the tenant has no template ${JSON.stringify(b.sessionTemplate)}`,
      "sessionTemplate",
    );
  const { secret: given, ...fields } = b;
  const config: TenantInboundConfig = { ...fields, mode: b.mode ?? "followUp" };
  const offered = given ?? generatedSecret();
  const sealed = await sealSecret(c.env, sealContext(tenant, name), offered);
  const outcome = await directory.putInbound(name, config as unknown as JsonObject, sealed, given === undefined);
  if (outcome.type === "too_many")
    throw new Problem("conflict", `a tenant has at most ${outcome.limit} inbound endpoints; delete one first`, "name");
  const shown = given === undefined && outcome.secretStored ? offered : undefined;
  return c.json(view(c, outcome.record, shown), outcome.created ? 201 : 200);
});

inboundEndpointRoutes.get("/", requires("inbound"), async (c) => {
  query(c, noQuery);
  const items = await directoryStub(c.env, c.get("claims").tenant).listInbound();
  return c.json({ items: items.map((record) => view(c, record)) });
});

inboundEndpointRoutes.get("/:name", requires("inbound"), async (c) => {
  const name = nameParam(c);
  query(c, noQuery);
  const record = await directoryStub(c.env, c.get("claims").tenant).getInbound(name);
  if (record === undefined) throw notFound(name);
  return c.json(view(c, record));
});

inboundEndpointRoutes.delete("/:name", requires("inbound"), async (c) => {
  const name = nameParam(c);
  query(c, noQuery);
  if (!(await directoryStub(c.env, c.get("claims").tenant).deleteInbound(name))) throw notFound(name);
  return c.json({ deleted: true as const });
});

/**
 * A new secret: a standard endpoint's is generated and answered once; a github, slack or stripe endpoint is given the
 * one its platform now shows. The previous secret still verifies for 24 h, while the platform switches.
 */
inboundEndpointRoutes.post("/:name/rotate-secret", requires("inbound"), async (c) => {
  const name = nameParam(c);
  query(c, noQuery);
  const b = await body(c, rotateInboundBody, { optional: true });
  const tenant = c.get("claims").tenant;
  const directory = directoryStub(c.env, tenant);
  const prior = await directory.getInbound(name);
  if (prior === undefined) throw notFound(name);
  const format = configOf(prior).format;
  if (format === "standard" && b.secret !== undefined)
    throw new Problem(
      "invalid_body",
      "a standard endpoint's secret is generated and answered once; leave secret out",
      "secret",
    );
  if (format !== "standard" && b.secret === undefined)
    throw new Problem(
      "invalid_body",
      `a ${format} endpoint is given the new signing secret its platform shows (secret)`,
      "secret",
    );
  const secret = b.secret ?? generatedSecret();
  const rotated = await directory.rotateInbound(name, await sealSecret(c.env, sealContext(tenant, name), secret));
  if (rotated === undefined) throw notFound(name);
  return c.json(view(c, rotated, format === "standard" ? secret : undefined));
});

/** The secrets a delivery may be signed with: the current one, and the previous one while a rotation keeps it. */
async function secretsOf(c: AppContext, tenant: string, record: TenantInboundRecord | undefined): Promise<string[]> {
  if (record === undefined) return [];
  const context = sealContext(tenant, record.name);
  const secrets = [await openSecret(c.env, context, record.secret)];
  if (
    record.previousSecret !== undefined &&
    record.previousSecretExpiresAt !== undefined &&
    record.previousSecretExpiresAt > Date.now()
  )
    secrets.push(await openSecret(c.env, context, record.previousSecret));
  return secrets;
}

/** The routed session; `created`: this delivery created it. */
interface RoutedSession {
  readonly stub: SessionRpc;
  readonly created: boolean;
}

/**
 * The routed session, created on first use: from the endpoint's session template as an operator creates one, titled
 * with its readable key and carrying the endpoint's name and that key as metadata.
 */
async function ensureSession(
  c: AppContext,
  tenant: string,
  endpoint: string,
  config: TenantInboundConfig,
  session: Routed,
): Promise<RoutedSession> {
  const stub = sessionStub(c.env, tenant, session.name);
  if (await stub.exists()) {
    // Only a session this endpoint created: a payload value (an issue's title in a careless template) never routes a
    // delivery into another session of the tenant.
    const meta = await stub.directoryMeta();
    if (meta?.metadata[ENDPOINT_KEY] === endpoint) return { stub, created: false };
    throw new Problem(
      "conflict",
      `session ${session.name} exists and was not created by inbound endpoint ${endpoint}: a delivery goes only to the sessions its endpoint creates`,
      "session",
    );
  }
  // The tenant's own endpoint creates as its operator would (the template's fields, any profile it names).
  const operator: Claims = { tenant, role: "operator", exp: 0 };
  const resolved = await resolveTemplateForUser(c.env, operator, {
    ...(config.sessionTemplate === undefined ? {} : { template: config.sessionTemplate }),
    title: session.key,
    metadata: { [ENDPOINT_KEY]: endpoint, "inbound.session": session.key },
  });
  await refuseProfileAtCreate(c.env, tenant, resolved.config.profile, resolved.config.variables);
  const created = await run(
    stub.createSession(resolved.config, { tenant, session: session.name }, resolved.binding, resolved.retention),
  );
  return { stub, created: created.created };
}

/**
 * Accept a delivery into its thread: on the conversation its chat points at, or, on the thread's first delivery, on a
 * new conversation the chat moves to (session/chat-ops.ts `chatAccept`): admitted before the fork is made, so a
 * delivery refused at admission leaves the thread as it was. Two first deliveries at once: the later finds the chat
 * moved (409 `conflict`) and is accepted where it now points (a redelivery answers the first acceptance).
 */
async function acceptedOnThread(
  c: AppContext,
  tenant: string,
  stub: SessionRpc,
  session: string,
  thread: Routed,
  request: AcceptRequest & { readonly source: RequestSource },
): Promise<AcceptResponse> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const branch = (await run(stub.op("chatBranch", thread.name))).conversationId;
    if (branch !== undefined) return acceptedBy(c.env, { tenant }, stub, session, branch, request);
    const { source, ...rest } = request;
    const fork: ChatFork = {
      chatId: thread.name,
      source: "root",
      before: "start",
      expect: null,
      protocol: "chat",
      messageId: thread.name,
      rekey: false,
      requestSource: source,
      route: thread.key,
    };
    try {
      return await acceptedOnFork(c.env, { tenant }, stub, session, fork, rest);
    } catch (error) {
      // Another delivery started the thread first: accept where it points. Any other refusal is the answer.
      if (!(error instanceof Problem) || error.code !== "conflict") throw error;
    }
  }
  throw new Problem("conflict", `thread ${thread.name} kept moving while this delivery was routed; send it again`);
}

function ignoredAnswer(c: AppContext, reason: string): Response {
  return c.json({ ignored: true as const, reason }, 200);
}

export const tenantInboundDeliveryRoutes = new Hono<AppEnv>();

tenantInboundDeliveryRoutes.post("/:tenant/:name", async (c) => {
  const tenant = parse(tenantName, c.req.param("tenant"), "invalid_id", "tenant");
  const name = parse(inboundName, c.req.param("name"), "invalid_id", "name");
  query(c, noQuery);
  const text = await c.req.text();
  const record = await directoryStub(c.env, tenant).getInbound(name);
  const config = record === undefined ? undefined : configOf(record);
  // The signature first (an unknown endpoint against a stand-in key, with the one answer for every failure).
  const verdict = await verifiedDelivery(c, config?.format, await secretsOf(c, tenant, record), text);
  if (config === undefined) throw new Problem("invalid_signature", "the signature does not verify for this endpoint");
  if (verdict.type === "reply") return c.json(verdict.body, 200);
  const { event, ignored } = filtered(c, config.format, config, verdict.payload);
  if (ignored !== undefined) return ignoredAnswer(c, ignored);
  // Where it goes, rendered before anything is written: a template that renders nothing creates nothing.
  const session = await routedSession(config.session, verdict.payload);
  if (session === undefined) return ignoredAnswer(c, "the session template rendered nothing for this delivery");
  const thread = config.route === undefined ? undefined : await routedThread(config.route, verdict.payload);
  if (config.route !== undefined && thread === undefined)
    return ignoredAnswer(c, "the route template rendered nothing for this delivery");
  const { stub, created } = await ensureSession(c, tenant, name, config, session);
  const source = deliverySource(
    config.format,
    name,
    verdict.deliveryId,
    event,
    config,
    verdict.payload,
    thread === undefined ? undefined : { route: thread.key, thread: thread.name },
  );
  const request = {
    input: inboundInput(config.template, verdict.payload),
    data: inboundData(source, verdict.payload),
    ...acceptMode(config.mode),
    source: { type: "inbound" as const, endpoint: keyLabel(name), id: verdict.deliveryId },
    ...(verdict.signature === undefined ? {} : { signature: verdict.signature }),
  };
  let accepted: AcceptResponse;
  try {
    accepted =
      thread === undefined
        ? await acceptedBy(c.env, { tenant }, stub, session.name, "root", request)
        : await acceptedOnThread(c, tenant, stub, session.name, thread, request);
  } catch (error) {
    // Refused: the session this delivery created goes again, unless something committed in it since (another
    // delivery accepted into it). An undo that fails is an outage, and says so instead of the refusal.
    if (created) await run(stub.destroyUnused({ tenant, session: session.name }));
    throw error;
  }
  return c.json(
    {
      inputId: accepted.inputId,
      duplicate: accepted.duplicate,
      session: session.name,
      ...(thread === undefined ? {} : { thread: thread.name }),
    },
    200,
  );
});
