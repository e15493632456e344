/**
 * How an HTTP tool's remote call leaves the session object (src/kinds/remote-call.ts): one signed POST per
 * attempt, and the session's `RemoteCallServices`.
 *
 *   POST <url>
 *   content-type: application/json
 *   idempotency-key: {session}:{incarnation}:{taskId}   the same on every attempt (the product de-duplicates
 *                                                        by it); the incarnation (src/kinds/incarnation.ts)
 *                                                        keeps a re-created session's keys new
 *   webhook-id: the same key                 Standard Webhooks, signed with the tool's secret (toolSecret)
 *   webhook-timestamp, webhook-signature
 *   { session, conversationId, taskId, toolCallId, name, arguments }
 *
 * The product answers 200 `{ output, isError? }`, or 202 and later posts the same body, signed, to
 * `/v1/tool-results/{tenant}/{session}/{taskId}` under the same webhook-id. 4xx is a refusal (its problem detail is kept); 5xx, a
 * network error or no answer within the tool's timeout is a failure the kind may retry. The timeout runs
 * on the host's clock (never AbortSignal.timeout), and a body is read counting its bytes: over 1 MB is
 * `too_large`. A transport that throws has sent nothing (a missing master secret). Every reply is redacted
 * (remote/redaction.ts): the tool's secret and URL never reach a result, a detail or a problem, and a
 * detail is cut to 500 characters.
 */
import type { Clock } from "../../core/host.js";
import { remoteCallKey } from "../../kinds/incarnation.js";
import type { RemoteCallServices, RemoteReply, RemoteRequest, RemoteTransport } from "../../kinds/remote-call-state.js";
import type { JsonObject, JsonValue } from "../../storage/records.js";
import type { Env } from "../env.js";
import { hostFetch } from "../platform/host-config.js";
import { mcpEndpoints, McpTransport } from "./mcp-transport.js";
import { redactor, redactReply } from "./redaction.js";
import { masterSecret, signWebhook, toolSecret } from "../crypto/webhooks.js";

/** The largest response body a remote call reads. */
export const MAX_REMOTE_RESPONSE_BYTES = 1_000_000;

class TooLarge extends Error {}
class TimedOut extends Error {}

export interface HttpTransportOptions {
  readonly fetch: (request: Request) => Promise<Response>;
  readonly clock: Clock;
  /** The signing secret of a tenant's tool at a generation; throws when it cannot be derived (nothing is sent). */
  secret(tenant: string, tool: string, generation: number): Promise<string>;
  /** Unix seconds for `webhook-timestamp` (the receiver compares it with its own clock). */
  readonly timestamp?: () => number;
}

/** A target's secret generation (absent, from a call captured before rotations existed: 1). */
function generationOf(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 1 ? value : 1;
}

export class HttpTransport implements RemoteTransport {
  readonly #options: HttpTransportOptions;

  constructor(options: HttpTransportOptions) {
    this.#options = options;
  }

  async send(request: RemoteRequest, signal: AbortSignal | undefined): Promise<RemoteReply> {
    const { target } = request;
    const id = remoteCallKey(request.session, request.incarnation, request.taskId);
    const body = JSON.stringify({
      session: request.session,
      conversationId: request.conversationId,
      taskId: request.taskId,
      toolCallId: request.toolCallId,
      name: request.name,
      arguments: request.arguments,
    });
    // The generation the call captured with its definition: a rotation after it does not change what it signs with.
    const secret = await this.#options.secret(request.tenant, target.tool, generationOf(target.secretGeneration));
    // A product may echo its secret or the tool's URL (an operator's setting, perhaps with a key in its query).
    const clean = redactor({ secrets: [secret], urls: [target.url] });
    const timestamp = this.#options.timestamp?.() ?? Math.floor(Date.now() / 1000);
    const signature = await signWebhook(secret, id, timestamp, body);
    signal?.throwIfAborted();

    // One controller ends the request: the caller's cancellation or the attempt's timeout on the clock.
    const controller = new AbortController();
    const timer = new AbortController();
    let timedOut = false;
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    this.#options.clock.sleep(this.#options.clock.now() + target.timeoutMs, timer.signal).then(
      () => {
        timedOut = true;
        controller.abort(new TimedOut(`no answer within ${target.timeoutMs} ms`));
      },
      () => undefined,
    );
    try {
      const response = await this.#options.fetch(
        new Request(target.url, {
          method: "POST",
          redirect: "manual",
          headers: {
            "content-type": "application/json",
            "idempotency-key": id,
            "webhook-id": id,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signature,
          },
          body,
          signal: controller.signal,
        }),
      );
      return redactReply(await reply(response, controller.signal), clean);
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      if (timedOut) return { type: "failed", detail: `no answer within ${target.timeoutMs} ms` };
      if (error instanceof TooLarge) return { type: "too_large" };
      const detail = `the request failed: ${error instanceof Error ? error.message : String(error)}`;
      return redactReply({ type: "failed", detail }, clean);
    } finally {
      timer.abort();
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** What one response means (its details whole: `redactReply` redacts, then bounds them). */
async function reply(response: Response, signal: AbortSignal): Promise<RemoteReply> {
  const status = response.status;
  if (status === 202) {
    await response.body?.cancel().catch(() => undefined);
    return { type: "accepted" };
  }
  if (status >= 200 && status < 300) {
    const text = await readCapped(response, signal);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { type: "bad_response", detail: `HTTP ${status} with a body that is not JSON` };
    }
    if (json === null || typeof json !== "object" || Array.isArray(json) || !("output" in json)) {
      return { type: "bad_response", detail: `HTTP ${status}: the body must be an object { output, isError? }` };
    }
    const { output, isError } = json as { output: JsonValue; isError?: unknown };
    if (isError !== undefined && typeof isError !== "boolean")
      return { type: "bad_response", detail: `HTTP ${status}: isError must be a boolean` };
    return { type: "result", output, isError: isError === true };
  }
  if (status >= 400 && status < 500) {
    const text = await readCapped(response, signal);
    const problem = objectOf(text);
    const detail =
      typeof problem?.["detail"] === "string"
        ? problem["detail"]
        : typeof problem?.["title"] === "string"
          ? problem["title"]
          : text;
    return { type: "rejected", status, detail, ...(problem === undefined ? {} : { problem }) };
  }
  if (status >= 500) {
    const text = await readCapped(response, signal).catch(() => "");
    const problem = objectOf(text);
    const detail = typeof problem?.["detail"] === "string" ? problem["detail"] : text;
    return { type: "failed", status, detail: `HTTP ${status}${detail === "" ? "" : `: ${detail}`}` };
  }
  await response.body?.cancel().catch(() => undefined);
  return { type: "bad_response", detail: `unexpected HTTP ${status}` };
}

/** The body as text, counting bytes as they arrive: over the limit stops reading. */
async function readCapped(response: Response, signal: AbortSignal): Promise<string> {
  if (response.body === null) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    signal.throwIfAborted();
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_REMOTE_RESPONSE_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw new TooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

function objectOf(text: string): JsonObject | undefined {
  try {
    const json: unknown = JSON.parse(text);
    return json !== null && typeof json === "object" && !Array.isArray(json) ? (json as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A session's remote-call services: HTTP targets through `hostFetch()` with the tenant's tool secrets,
 * MCP targets over a fresh MCP client per attempt (remote/mcp-transport.ts), and the session's tenant and name
 * from its directory link (none: a session not created over HTTP, whose remote calls settle `no_tenant`).
 */
export function remoteCallServices(
  env: Env,
  clock: Clock,
  where: () => { readonly tenant: string; readonly session: string; readonly incarnation?: string } | undefined,
): RemoteCallServices {
  const transport = new HttpTransport({
    fetch: (request) => hostFetch()(request),
    clock,
    secret: (tenant, tool, generation) => toolSecret(masterSecret(env), tenant, tool, generation),
  });
  const mcp = new McpTransport({ clock, endpoint: mcpEndpoints(env) });
  return {
    transport: (target) => {
      switch (target.type) {
        case "http":
          return transport;
        case "mcp":
          return mcp;
        default: {
          const never: never = target;
          throw new Error(`unknown remote target ${JSON.stringify(never)}`);
        }
      }
    },
    where,
  };
}
