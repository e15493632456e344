/**
 * The `remote_call` task kind's durable state: one background task for anything that leaves the object
 * (an HTTP tool's request; an MCP server's tool call). The request is marked `dispatched` in a commit
 * before it leaves, so a restart knows it may have been delivered: an idempotent target is sent again
 * under the same key, anything else settles `outcome_unknown` naming the task. The task id is the
 * request's identity everywhere with the session's incarnation (`Idempotency-Key: {session}:{incarnation}:{taskId}`,
 * incarnation.ts; the result route's path and webhook-id).
 */
import type { Id, JsonObject, JsonValue } from "../storage/records.js";

/** Where a remote call goes: a product's HTTP tool, or a tool of a registered MCP server. */
export type RemoteTarget =
  | ({
      readonly type: "http";
      /** The catalog tool and the version of its definition the call captured. */
      readonly tool: string;
      readonly version: number;
      readonly url: string;
      readonly timeoutMs: number;
      readonly idempotent: boolean;
      /** The generation of the tool's secret the request is signed with (absent: 1). */
      readonly secretGeneration?: number;
    } & JsonObject)
  | ({
      readonly type: "mcp";
      /** The selectable name (`{server}__{tool}`) and the catalog version the call captured. */
      readonly tool: string;
      readonly version: number;
      /** The registered server's name (its URL and sealed headers are read when the request is sent). */
      readonly server: string;
      /** The server's own name for the tool. */
      readonly remoteTool: string;
      readonly url: string;
      /** Reset by each progress notification; the §8.3 blocking budget still bounds the call. */
      readonly timeoutMs: number;
      /** The tool's `idempotentHint`: only then is a call cut by a restart sent again. */
      readonly idempotent: boolean;
      /** The content hash of the tool-list snapshot the call's schema came from. */
      readonly snapshot: string;
    } & JsonObject);

/** What creates a remote call: the target, the call, and the tool call it serves. */
export interface RemoteCallInput extends JsonObject {
  target: RemoteTarget;
  name: string;
  arguments: JsonObject;
  origin: { tool: string; task: Id; callId: string };
}

/** What a tool gives to start a remote call (the harness fills in the origin). */
export interface RemoteCallStart {
  readonly target: RemoteTarget;
  readonly name: string;
  readonly arguments: JsonObject;
}

export type RemoteErrorCode =
  "http_status" | "outcome_unknown" | "timeout" | "failed" | "too_large" | "bad_response" | "aborted" | "no_tenant";

/** How a remote call ended. */
export type RemoteOutcome =
  | { type: "output"; output: JsonValue; isError: boolean }
  | { type: "error"; code: RemoteErrorCode; message: string; status?: number; problem?: JsonObject };

export type RemoteCallState = RemoteCallInput &
  (
    | { status: "planned" }
    | { status: "dispatched"; attempt: number; firstSentAt: number; until: number }
    | { status: "retry_wait"; attempt: number; firstSentAt: number; until: number; nextAt: number; lastError: string }
    | { status: "accepted"; attempt: number; firstSentAt: number; until: number; acceptedAt: number }
    | { status: "settled"; outcome: RemoteOutcome & JsonObject; attempts: number }
    | { status: "aborted"; outcome: RemoteOutcome & JsonObject; attempts: number }
  );

export const remoteCallRoles = {
  planned: "start",
  dispatched: "inflight",
  retry_wait: "inflight",
  accepted: "inflight",
  settled: "terminal",
  aborted: "terminal",
} as const;

/** One attempt's request, as the transport sends it. */
export interface RemoteRequest {
  readonly taskId: Id;
  readonly attempt: number;
  readonly tenant: string;
  readonly session: string;
  /** The session's incarnation (incarnation.ts); undefined: a session created before incarnations. */
  readonly incarnation?: string;
  readonly conversationId: Id;
  readonly toolCallId: string;
  readonly target: RemoteTarget;
  readonly name: string;
  readonly arguments: JsonObject;
}

/** What one attempt got back. */
export type RemoteReply =
  | { readonly type: "result"; readonly output: JsonValue; readonly isError: boolean }
  | { readonly type: "accepted" }
  | { readonly type: "rejected"; readonly status: number; readonly detail: string; readonly problem?: JsonObject }
  | { readonly type: "failed"; readonly detail: string; readonly status?: number }
  | { readonly type: "too_large" }
  | { readonly type: "bad_response"; readonly detail: string }
  /**
   * No answer within the target's timeout (an MCP call: since the last progress) or its total cap: settles `timeout`,
   * never re-sent.
   */
  | { readonly type: "timed_out"; readonly detail: string };

/** Sends one attempt. Its timeout runs on the injected clock, never on `AbortSignal.timeout`. */
export interface RemoteTransport {
  send(request: RemoteRequest, signal: AbortSignal | undefined): Promise<RemoteReply>;
}

/** What the remote_call kind is built with (the host supplies it; none: remote calls settle `no_tenant`). */
export interface RemoteCallServices {
  transport(target: RemoteTarget): RemoteTransport | undefined;
  /**
   * The session's tenant, name and incarnation (undefined: a session without a directory entry; no incarnation: a
   * session created before incarnations).
   */
  where(): { readonly tenant: string; readonly session: string; readonly incarnation?: string } | undefined;
  /** Attempts of an idempotent call, the first included. Default 8. */
  readonly maxAttempts?: number;
}
