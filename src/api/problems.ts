/**
 * The problem codes of the HTTP API (RFC 9457; docs/api.md "Errors"): the stable `code` union, its one exhaustive
 * status table (adding a code without a status does not compile), titles, and the wire form of a
 * problem. Part of the wire schema (src/api/): the server's `Problem` class (src/worker/problems.ts),
 * the typed client and the OpenAPI document all take them from here.
 */
import { z } from "zod";
import type { JsonValue } from "../storage/records.js";

export type ProblemCode =
  // 400: the request is malformed; the field or parameter is named
  | "invalid_json"
  | "invalid_body"
  | "invalid_query"
  | "invalid_header"
  | "invalid_id"
  | "invalid_cursor"
  // 401 / 403
  | "unauthorized"
  | "forbidden"
  | "origin_not_allowed"
  | "invalid_signature"
  | "stale_webhook"
  // 404 / 405
  | "session_not_found"
  | "conversation_not_found"
  | "input_not_found"
  | "task_not_found"
  | "acceptance_not_found"
  | "entry_not_found"
  | "not_found"
  | "route_not_found"
  | "method_not_allowed"
  // 409
  | "session_config_conflict"
  | "conflict"
  | "busy"
  | "input_not_queued"
  | "in_turn"
  | "faulted"
  // schedules, waiting input, the rig
  | "schedule_not_found"
  | "nothing_waiting"
  | "hook_conflict"
  | "bead_already_hooked"
  | "stale_attempt"
  | "agent_conflict"
  | "agent_terminated"
  | "precondition_failed"
  | "agent_not_found"
  | "mail_not_found"
  // a tenant's tools and the pending list
  | "tool_not_found"
  | "pending_not_found"
  | "already_answered"
  | "pending_closed"
  // webhook endpoints and deliveries (events out)
  | "endpoint_not_found"
  | "delivery_not_found"
  | "endpoint_disabled"
  | "mcp_server_not_found"
  | "template_not_found"
  | "profile_not_found"
  | "profile_in_use"
  | "erasure_not_found"
  | "user_erasing"
  | "issuer_not_found"
  // 429
  | "rate_limited"
  // 413 / 415 / 422
  | "payload_too_large"
  | "unsupported_media_type"
  | "unknown_model"
  | "unknown_tool"
  | "invalid_tool"
  | "invalid_endpoint"
  | "invalid_commit"
  | "idempotency_key_reused"
  | "unsupported_trigger"
  | "invalid_mcp_server"
  | "invalid_template"
  | "invalid_profile"
  | "unknown_profile"
  | "missing_variable"
  | "invalid_metadata"
  | "invalid_issuer"
  | "invalid_limits"
  | "invalid_retention"
  | "invalid_import"
  // 5xx
  | "mcp_server_unreachable"
  | "closed"
  | "metering_unavailable"
  | "misconfigured"
  | "internal";

/** The one status table: adding a code without a status does not compile. */
export const STATUS: Readonly<Record<ProblemCode, number>> = {
  invalid_json: 400,
  invalid_body: 400,
  invalid_query: 400,
  invalid_header: 400,
  invalid_id: 400,
  invalid_cursor: 400,
  unauthorized: 401,
  invalid_signature: 401,
  stale_webhook: 401,
  forbidden: 403,
  origin_not_allowed: 403,
  session_not_found: 404,
  conversation_not_found: 404,
  input_not_found: 404,
  task_not_found: 404,
  acceptance_not_found: 404,
  entry_not_found: 404,
  not_found: 404,
  route_not_found: 404,
  method_not_allowed: 405,
  session_config_conflict: 409,
  conflict: 409,
  busy: 409,
  input_not_queued: 409,
  in_turn: 409,
  faulted: 409,
  schedule_not_found: 404,
  nothing_waiting: 409,
  hook_conflict: 409,
  bead_already_hooked: 409,
  stale_attempt: 409,
  agent_conflict: 409,
  agent_terminated: 409,
  precondition_failed: 412,
  agent_not_found: 404,
  mail_not_found: 404,
  tool_not_found: 404,
  pending_not_found: 404,
  already_answered: 409,
  pending_closed: 409,
  endpoint_not_found: 404,
  delivery_not_found: 404,
  endpoint_disabled: 409,
  mcp_server_not_found: 404,
  template_not_found: 404,
  profile_not_found: 404,
  profile_in_use: 409,
  erasure_not_found: 404,
  user_erasing: 409,
  issuer_not_found: 404,
  rate_limited: 429,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unknown_model: 422,
  unknown_tool: 422,
  invalid_tool: 422,
  invalid_endpoint: 422,
  invalid_commit: 422,
  idempotency_key_reused: 422,
  unsupported_trigger: 422,
  invalid_mcp_server: 422,
  invalid_template: 422,
  invalid_profile: 422,
  unknown_profile: 422,
  missing_variable: 422,
  invalid_metadata: 422,
  invalid_issuer: 422,
  invalid_limits: 422,
  invalid_retention: 422,
  invalid_import: 422,
  mcp_server_unreachable: 502,
  closed: 503,
  metering_unavailable: 503,
  misconfigured: 500,
  internal: 500,
};

export const TITLES: Readonly<Record<ProblemCode, string>> = {
  invalid_json: "The body is not valid JSON",
  invalid_body: "The body does not match the schema",
  invalid_query: "A query parameter is invalid",
  invalid_header: "A header is invalid",
  invalid_id: "A path parameter is not a valid id",
  invalid_cursor: "The paging cursor is invalid",
  unauthorized: "Authentication is required",
  invalid_signature: "The webhook signature does not verify",
  stale_webhook: "The webhook timestamp is outside the allowed clock skew",
  forbidden: "The token's role may not use this route",
  origin_not_allowed: "The request's Origin is not allowed (CORS)",
  session_not_found: "The session does not exist",
  conversation_not_found: "The conversation does not exist",
  input_not_found: "The input does not exist",
  task_not_found: "The task does not exist",
  acceptance_not_found: "No acceptance has this request key",
  entry_not_found: "The entry does not exist",
  not_found: "A named thing does not exist",
  route_not_found: "No such route",
  method_not_allowed: "The route does not accept this method",
  session_config_conflict: "The session exists with a different configuration",
  conflict: "The operation conflicts with the session's state",
  busy: "The conversation is busy",
  input_not_queued: "The input is no longer queued",
  in_turn: "The conversation is in a turn",
  faulted: "The session is faulted; an operator must clear the fault",
  schedule_not_found: "The schedule does not exist",
  nothing_waiting: "No queued input waits for a turn",
  hook_conflict: "The hook transition does not follow the lifecycle from the hook's status",
  bead_already_hooked: "The bead is pending or active on another agent",
  stale_attempt: "The request names an earlier assignment of this hook",
  agent_conflict: "The agent's registration or hook conflicts with the request",
  agent_terminated: "The agent is terminated",
  precondition_failed: "If-Match names another version (of a hook or a tool)",
  agent_not_found: "The agent is not registered",
  mail_not_found: "The message does not exist",
  tool_not_found: "The tool is not in the tenant's catalog",
  pending_not_found: "Nothing is pending under that id",
  already_answered: "The pending item was already answered",
  pending_closed: "The pending item is closed: its call was aborted or its deadline passed",
  payload_too_large: "The body, or a part of it, is too large",
  unsupported_media_type: "The body, or a part of it, has a media type this route does not take",
  unknown_model: "The model is not available",
  unknown_tool: "The tool is not registered",
  invalid_tool: "The tool definition is invalid",
  invalid_endpoint: "The webhook endpoint is invalid",
  endpoint_not_found: "The tenant has no such webhook endpoint",
  delivery_not_found: "The session has no such delivery",
  endpoint_disabled: "The webhook endpoint is disabled",
  mcp_server_not_found: "The tenant has no such MCP server",
  template_not_found: "The tenant has no such session template",
  profile_not_found: "The tenant has no such profile",
  profile_in_use: "A session template names the profile",
  erasure_not_found: "The tenant has no such erasure",
  user_erasing: "The user is being erased",
  issuer_not_found: "The tenant has no such identity provider",
  rate_limited: "A configured limit is reached",
  invalid_mcp_server: "The MCP server registration is invalid",
  invalid_template: "The session template is invalid",
  invalid_profile: "The profile is invalid",
  unknown_profile: "The tenant has no profile of that name",
  missing_variable: "The profile uses a variable the session gives no value",
  invalid_metadata: "The session metadata is invalid or over its limits",
  invalid_issuer: "The identity provider registration is invalid",
  invalid_limits: "The limits are invalid",
  invalid_retention: "The retention is invalid",
  invalid_import: "A line of the import is invalid",
  mcp_server_unreachable: "The MCP server did not answer as an MCP server",
  invalid_commit: "The operation would break a session rule",
  idempotency_key_reused: "The Idempotency-Key was used with a different request",
  unsupported_trigger: "This chat trigger is not supported",
  closed: "The session is closing",
  metering_unavailable: "The tenant's limits did not acknowledge the session's usage; nothing was deleted, retry",
  misconfigured: "The service is misconfigured",
  internal: "Internal error",
};

/** Wire form of a problem (RFC 9457 members plus `code` and, for input errors, `field`). */
export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: ProblemCode;
  /** The offending body field, query parameter, header or path parameter. */
  readonly field?: string;
  readonly instance?: string;
  /** Extension member of `already_answered`: the answer that was recorded first. */
  readonly answer?: JsonValue;
  /** Extension member of `pending_closed`: how the item closed (`timeout`, `aborted`). */
  readonly outcome?: string;
  /** Extension member of `rate_limited`: seconds until the limit may pass (also the Retry-After header). */
  readonly retryAfter?: number;
  /** Extension member of `invalid_import`: the 1-based number of the line that was refused. */
  readonly line?: number;
}

/** Every problem code, in table order. */
export const PROBLEM_CODES = Object.keys(STATUS) as readonly ProblemCode[];

/** The problem+json body as a schema (the OpenAPI document's `Problem`): exactly these members. */
export const problemBody = z.strictObject({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  code: z.enum(PROBLEM_CODES as [ProblemCode, ...ProblemCode[]]),
  field: z.string().optional(),
  instance: z.string().optional(),
  answer: z
    .custom<JsonValue>(() => true)
    .optional()
    .meta({ description: "already_answered: the answer that was recorded first" }),
  outcome: z.string().optional().meta({ description: "pending_closed: how the item closed (timeout, aborted)" }),
  retryAfter: z
    .number()
    .int()
    .optional()
    .meta({ description: "rate_limited: seconds until the limit may pass (also the Retry-After header)" }),
  line: z
    .number()
    .int()
    .optional()
    .meta({ description: "invalid_import: the 1-based number of the line that was refused" }),
});
