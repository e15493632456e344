/**
 * How an MCP tool's remote call leaves the session object (src/kinds/remote-call.ts; docs/mcp.md
 * "Calling MCP tools"): one `tools/call` per attempt, over a client opened for that attempt alone.
 *
 *   endpoint    the server's current URL and opened headers, looked up per attempt (a deleted server:
 *               the call is not sent)
 *   initialize  a fresh MCP client (withMcpClient): initialize, no stored MCP session id, so a woken
 *               object needs no reconnect and a server that forgot its sessions changes nothing
 *   tools/call  { name: the server's own tool name, arguments }, asking for progress; each progress
 *               notification moves the deadline to now + timeoutMs, never past the call's cap
 *
 * Replies: a `CallToolResult` is the output `{ content, structuredContent? }` with its `isError`; a
 * JSON-RPC error answer is a tool error result naming its code; HTTP 4xx is a refusal, 5xx a failure
 * with its status (the kind may retry an idempotent tool); a network failure once `tools/call` was sent
 * may have reached the server (the kind settles a non-idempotent call `outcome_unknown`); no answer in
 * time is `timed_out` (the server is sent `notifications/cancelled`). Anything that fails before
 * `tools/call` is sent (no endpoint, an initialize that never connected) throws: nothing was sent.
 *
 * The deadline runs on the host clock (never AbortSignal.timeout); the SDK's own request timeout is
 * given the same values (`timeout`, `resetTimeoutOnProgress`, `maxTotalTimeout`) as a backstop on real
 * time. Elicitation is declined: the client does not advertise it, and a server that asks anyway gets a
 * JSON-RPC error while the call ends as a tool error naming the request.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  type CallToolResult,
  type JSONRPCRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../../core/host.js";
import type { RemoteReply, RemoteRequest, RemoteTarget, RemoteTransport } from "../../kinds/remote-call-state.js";
import type { JsonObject, JsonValue } from "../../storage/records.js";
import type { Env } from "../env.js";
import { withMcpClient, type McpEndpoint } from "./mcp-connect.js";
import { mcpEndpoint } from "./mcp-servers.js";
import { redactedDetail, redactor, redactReply, type Redactor } from "./redaction.js";

/** An MCP call's target. */
export type McpTarget = Extract<RemoteTarget, { type: "mcp" }>;

/** The longest one MCP call may run, however often it reports progress (at least its timeout). */
export const MCP_CALL_MAX_MS = 600_000;

/** The largest result an MCP call keeps (its JSON), as for an HTTP tool's response. */
export const MAX_MCP_RESULT_BYTES = 1_000_000;

/** Where a tenant's MCP server is now, with its opened headers; throws when it cannot be reached (nothing is sent). */
export type McpEndpointLookup = (tenant: string, target: McpTarget) => Promise<McpEndpoint>;

/**
 * How a session finds its tenant's MCP servers when it calls one: the registry's current URL and the
 * opened header secrets, read right before each attempt (remote/mcp-servers.ts). A server deleted since the
 * call was captured: nothing is sent.
 */
export function mcpEndpoints(env: Env): McpEndpointLookup {
  return async (tenant, target) => {
    const endpoint = await mcpEndpoint(env, tenant, target.server);
    if (endpoint === undefined) throw new NotSent(`MCP server "${target.server}" is no longer registered`);
    return endpoint;
  };
}

export interface McpTransportOptions {
  readonly clock: Clock;
  readonly endpoint: McpEndpointLookup;
  /** The cap of one call (default MCP_CALL_MAX_MS). */
  readonly maxTotalMs?: number;
}

class NotSent extends Error {}

export class McpTransport implements RemoteTransport {
  readonly #options: McpTransportOptions;

  constructor(options: McpTransportOptions) {
    this.#options = options;
  }

  async send(request: RemoteRequest, signal: AbortSignal | undefined): Promise<RemoteReply> {
    const { target } = request;
    if (target.type !== "mcp") throw new NotSent(`the MCP transport does not send ${target.type} calls`);
    const endpoint = await this.#options.endpoint(request.tenant, target);
    // What the server may echo (its header values, its URL) never reaches a result or an error's text.
    const clean = redactor({ secrets: Object.values(endpoint.headers), urls: [endpoint.url, target.url] });
    signal?.throwIfAborted();
    const { clock } = this.#options;
    const timeoutMs = target.timeoutMs;
    const capMs = Math.max(timeoutMs, this.#options.maxTotalMs ?? MCP_CALL_MAX_MS);
    const capAt = clock.now() + capMs;
    let sent = false;
    let timedOut: string | undefined;
    let elicited: string | undefined;

    // Before tools/call the connection's requests end at the deadline; after it, the call's own signal
    // does, so the SDK can still send `notifications/cancelled` over an open connection.
    const connecting = new AbortController();
    const calling = new AbortController();
    // One sleep on the clock until the deadline; moving the deadline replaces it.
    let timer = new AbortController();
    const arm = (at: number): void => {
      timer.abort();
      timer = new AbortController();
      const mine = timer.signal;
      clock.sleep(at, mine).then(
        () => {
          if (mine.aborted) return;
          timedOut =
            at >= capAt ? `still running after its cap of ${capMs} ms` : `no answer or progress within ${timeoutMs} ms`;
          (sent ? calling : connecting).abort(new McpError(ErrorCode.RequestTimeout, timedOut));
        },
        () => undefined,
      );
    };
    arm(Math.min(clock.now() + timeoutMs, capAt));
    const onprogress = (): void => arm(Math.min(clock.now() + timeoutMs, capAt));

    const connection = signal === undefined ? connecting.signal : AbortSignal.any([signal, connecting.signal]);
    const callSignal = signal === undefined ? calling.signal : AbortSignal.any([signal, calling.signal]);
    try {
      const result = await withMcpClient(
        endpoint,
        async (client) => {
          declineElicitation(client, (method) => {
            elicited = method;
            calling.abort(new McpError(ErrorCode.InvalidRequest, `the server asked for ${method}`));
          });
          sent = true;
          arm(Math.min(clock.now() + timeoutMs, capAt));
          return client.callTool({ name: target.remoteTool, arguments: request.arguments }, CallToolResultSchema, {
            onprogress,
            resetTimeoutOnProgress: true,
            timeout: timeoutMs,
            maxTotalTimeout: capMs,
            signal: callSignal,
          });
        },
        connection,
      );
      return redactReply(resultReply(result as CallToolResult), clean);
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      if (elicited !== undefined) {
        return {
          type: "result",
          output: `The MCP server "${target.server}" asked for user input during the call (${redactedDetail(elicited, clean, 100)}), which this service declines; the call was cancelled.`,
          isError: true,
        };
      }
      if (timedOut !== undefined) return { type: "timed_out", detail: timedOut };
      return redactReply(errorReply(error, sent, target, clean), clean);
    } finally {
      timer.abort();
    }
  }
}

/** The output of a `CallToolResult`: its content and structured content (its `isError` goes beside it). */
function resultReply(result: CallToolResult): RemoteReply {
  const output: JsonObject = {
    content: (result.content ?? []) as JsonValue[],
    ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent as JsonObject }),
  };
  if (JSON.stringify(output).length > MAX_MCP_RESULT_BYTES) return { type: "too_large" };
  return { type: "result", output, isError: result.isError === true };
}

/** What a failure means, by where it happened: before `tools/call` nothing was sent. */
function errorReply(error: unknown, sent: boolean, target: McpTarget, clean: Redactor): RemoteReply {
  if (error instanceof StreamableHTTPError && typeof error.code === "number" && error.code >= 400) {
    const detail = error.message.replace(/^Streamable HTTP error: /, "");
    if (error.code < 500) return { type: "rejected", status: error.code, detail };
    return { type: "failed", status: error.code, detail: `HTTP ${error.code}: ${detail}` };
  }
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return { type: "timed_out", detail: error.message };
    if (error.code !== ErrorCode.ConnectionClosed) {
      if (!sent) return { type: "bad_response", detail: `initialize failed: ${error.message}` };
      // A code and a bounded, redacted detail: never the server's raw text.
      const detail = redactedDetail(error.message.replace(/^(MCP error -?\d+: )+/, ""), clean);
      return {
        type: "result",
        output: `The MCP server "${target.server}" answered with an error (code ${error.code}): ${detail}`,
        isError: true,
      };
    }
  }
  const detail = error instanceof Error ? error.message : String(error);
  // A result that is not a CallToolResult (the SDK's schema refused it).
  if (sent && error instanceof Error && error.name === "ZodError")
    return { type: "bad_response", detail: `not a tool result: ${detail}` };
  if (!sent) throw new NotSent(redactedDetail(`could not connect to MCP server "${target.server}": ${detail}`, clean));
  return { type: "failed", detail: `the call failed: ${detail}` };
}

/**
 * Answer any request the server sends (the client advertises no capability, so a well-behaved server
 * sends none; elicitation is the one that matters) with a JSON-RPC error, and tell `onRequest`.
 */
function declineElicitation(client: Client, onRequest: (method: string) => void): void {
  client.fallbackRequestHandler = (request: JSONRPCRequest) => {
    onRequest(request.method);
    return Promise.reject(
      new McpError(
        ErrorCode.MethodNotFound,
        `this client does not support ${request.method} (elicitation is declined)`,
      ),
    );
  };
}
