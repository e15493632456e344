/**
 * Inbound endpoints inside the session Durable Object (docs/integrations.md "Events in"): the operations
 * behind `PUT/GET/DELETE /v1/sessions/{session}/inbound/{name}` and the endpoint lookup the delivery
 * route (http/routes/inbound.ts) makes. An endpoint is one session value (`edge.inbound`, keyed by its name)
 * holding its format, target conversation, mode, template and its signing secret SEALED
 * (crypto/sealed-secrets.ts). The Worker seals and opens the secret; this side never sees it in the clear.
 *
 * A PUT replaces the endpoint's config whole. A standard endpoint keeps the secret it was given when it
 * was created (the Worker offers a freshly generated one on every PUT; it is stored only when the
 * endpoint is new or was of another format, and `secretStored` tells the Worker whether to answer it).
 */
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import { bind, sessionValue, withKey, type ValueSpec } from "../../core/state.js";
import type { Id } from "../../storage/records.js";
import type { InboundFormat } from "../inbound/verify.js";
import { Problem } from "../problems.js";
import type { SealedSecret } from "../crypto/sealed-secrets.js";
import type { ConversationRef, SessionApi } from "./api.js";
import { filtersOf, type InboundFilters } from "../inbound/filters.js";

/**
 * What a delivery does when the conversation is busy: followUp (default) and steer as an accept's `whenBusy`; nextRun
 * is queued for the next explicit input.
 */
export type InboundMode = "followUp" | "steer" | "nextRun";

/** An endpoint as stored. */
export interface InboundRecord extends InboundFilters {
  readonly format: InboundFormat;
  readonly conversationId: Id;
  readonly mode: InboundMode;
  readonly template?: string;
  readonly secret: SealedSecret;
}

/** An endpoint as an operator sees it (never its secret). */
export interface InboundConfig extends InboundFilters {
  readonly name: string;
  readonly format: InboundFormat;
  readonly conversationId: Id;
  readonly mode: InboundMode;
  readonly template?: string;
}

/** A PUT, validated by the Worker; `secret` sealed, `generated` when the Worker made it (standard). */
export interface InboundPut extends InboundFilters {
  readonly format: InboundFormat;
  readonly conversation: ConversationRef;
  readonly mode: InboundMode;
  readonly template?: string;
  readonly secret: SealedSecret;
  readonly generated: boolean;
}

/** How many inbound endpoints one session may have. */
export const MAX_INBOUND_ENDPOINTS = 100;

/** The inbound operations of the session's op table (session/ops.ts): arguments and results. */
export interface InboundSessionOps {
  inboundPut: {
    readonly args: [name: string, request: InboundPut];
    readonly result: { readonly created: boolean; readonly secretStored: boolean; readonly config: InboundConfig };
  };
  inboundList: { readonly args: []; readonly result: InboundConfig[] };
  inboundGet: { readonly args: [name: string]; readonly result: InboundConfig };
  /** The stored endpoint with its sealed secret, for the delivery route; null when there is none. */
  inboundEndpoint: { readonly args: [name: string]; readonly result: InboundRecord | null };
  inboundDelete: { readonly args: [name: string]; readonly result: { readonly deleted: true } };
}

const NAMESPACE = "edge.inbound";
const inboundBase = sessionValue<InboundRecord>(NAMESPACE);
function inboundValue(name: string): ValueSpec<InboundRecord> {
  return withKey(inboundBase, name);
}

const call: Call = BACKGROUND_CONTEXT;

function present(name: string, record: InboundRecord): InboundConfig {
  const { format, conversationId, mode, template } = record;
  return { name, format, conversationId, mode, ...(template === undefined ? {} : { template }), ...filtersOf(record) };
}

function notFound(name: string): Problem {
  return new Problem("not_found", `this session has no inbound endpoint ${name}`, "name");
}

async function stored(api: SessionApi, name: string): Promise<InboundRecord | undefined> {
  return (await api.harness.storage.getValue(bind(inboundValue(name), {})))?.value;
}

async function put(
  api: SessionApi,
  name: string,
  request: InboundPut,
): Promise<InboundSessionOps["inboundPut"]["result"]> {
  const handle = await api.conversation(request.conversation);
  return api.harness.commit(async (tx) => {
    const value = tx.value(inboundValue(name));
    const prior = await value.get();
    if (prior === undefined) {
      const { items } = await api.harness.storage.scanValues({
        scope: { session: true },
        namespace: NAMESPACE,
        limit: MAX_INBOUND_ENDPOINTS,
      });
      if (items.length >= MAX_INBOUND_ENDPOINTS)
        throw new Problem(
          "conflict",
          `a session has at most ${MAX_INBOUND_ENDPOINTS} inbound endpoints; delete one first`,
          "name",
        );
    }
    // A standard endpoint keeps its secret across PUTs; a new one, or one of another format, takes the offered secret.
    const keep = request.generated && prior !== undefined && prior.format === request.format;
    const record: InboundRecord = {
      format: request.format,
      conversationId: handle.id,
      mode: request.mode,
      ...(request.template === undefined ? {} : { template: request.template }),
      ...filtersOf(request),
      secret: keep ? prior.secret : request.secret,
    };
    value.set(record);
    return { created: prior === undefined, secretStored: !keep, config: present(name, record) };
  }, call);
}

async function list(api: SessionApi): Promise<InboundConfig[]> {
  const { items } = await api.harness.storage.scanValues({
    scope: { session: true },
    namespace: NAMESPACE,
    limit: MAX_INBOUND_ENDPOINTS,
  });
  return items.map((item) => present(item.key, item.version.value as unknown as InboundRecord));
}

async function remove(api: SessionApi, name: string): Promise<{ readonly deleted: true }> {
  await api.harness.commit(async (tx) => {
    const value = tx.value(inboundValue(name));
    if ((await value.get()) === undefined) throw notFound(name);
    value.delete();
  }, call);
  return { deleted: true };
}

/** The inbound entries of the SessionObject's op table, over the open session's SessionApi. */
export function inboundOps<S extends { readonly api: SessionApi }>(): {
  readonly [K in keyof InboundSessionOps]: (
    session: S,
    ...args: InboundSessionOps[K]["args"]
  ) => Promise<InboundSessionOps[K]["result"]>;
} {
  return {
    inboundPut: (s, name, request) => put(s.api, name, request),
    inboundList: (s) => list(s.api),
    inboundGet: async (s, name) => {
      const record = await stored(s.api, name);
      if (record === undefined) throw notFound(name);
      return present(name, record);
    },
    inboundEndpoint: async (s, name) => (await stored(s.api, name)) ?? null,
    inboundDelete: (s, name) => remove(s.api, name),
  };
}
