/**
 * HTTP errors (DESIGN §6): RFC 9457 `application/problem+json` bodies with a stable `code`. One error
 * class (`Problem`), codes a string union, statuses from ONE exhaustive table (`STATUS`), and one place
 * that normalizes anything else (`toProblem`). Used by the Hono app (routes, middleware, error handler)
 * and by the session Durable Object, which returns problems to the Worker as plain data
 * (`Outcome`, because Workers RPC drops error classes and fields).
 */
import { StorageError } from "../storage/storage.js";
import { PicoError, type PicoErrorCode } from "../core/errors.js";
import { sessionErrorCode } from "./errors.js";

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
  | "invalid_signature"
  | "stale_webhook"
  // 404 / 405
  | "session_not_found"
  | "conversation_not_found"
  | "input_not_found"
  | "task_not_found"
  | "schedule_not_found"
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
  // 413 / 415 / 422
  | "payload_too_large"
  | "unsupported_media_type"
  | "unknown_model"
  | "unknown_tool"
  | "invalid_commit"
  // 5xx
  | "closed"
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
  session_not_found: 404,
  conversation_not_found: 404,
  input_not_found: 404,
  task_not_found: 404,
  schedule_not_found: 404,
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
  payload_too_large: 413,
  unsupported_media_type: 415,
  unknown_model: 422,
  unknown_tool: 422,
  invalid_commit: 422,
  closed: 503,
  misconfigured: 500,
  internal: 500,
};

const TITLES: Readonly<Record<ProblemCode, string>> = {
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
  session_not_found: "The session does not exist",
  conversation_not_found: "The conversation does not exist",
  input_not_found: "The input does not exist",
  task_not_found: "The task does not exist",
  schedule_not_found: "The schedule does not exist",
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
  payload_too_large: "The body is too large",
  unsupported_media_type: "The body must be application/json",
  unknown_model: "The model is not available",
  unknown_tool: "The tool is not registered",
  invalid_commit: "The operation would break a session rule",
  closed: "The session is closing",
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
}

/** The one error class of the HTTP layer. */
export class Problem extends Error {
  override readonly name = "Problem";
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly field?: string,
  ) {
    super(`${code}: ${detail}`);
  }

  get status(): number {
    return STATUS[this.code];
  }

  body(instance?: string): ProblemBody {
    return {
      type: `urn:pico-edge:problem:${this.code}`,
      title: TITLES[this.code],
      status: this.status,
      detail: this.detail,
      code: this.code,
      ...(this.field === undefined ? {} : { field: this.field }),
      ...(instance === undefined ? {} : { instance }),
    };
  }

  response(instance?: string): Response {
    return new Response(JSON.stringify(this.body(instance)), {
      status: this.status,
      headers: { "content-type": "application/problem+json" },
    });
  }
}

/** A problem as plain data, for the RPC boundary. */
export interface ProblemData {
  readonly code: ProblemCode;
  readonly detail: string;
  readonly field?: string;
}

/** What a session RPC returns: a value or a problem (RPC errors lose their class, so none is thrown). */
export type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: ProblemData };

const PICO: Readonly<Record<PicoErrorCode, ProblemCode>> = {
  invalid_commit: "invalid_commit",
  in_turn: "in_turn",
  not_found: "not_found",
  conflict: "conflict",
  task_cancelled: "conflict",
  closed: "closed",
  faulted: "faulted",
  contract: "internal",
};

/**
 * Normalize anything thrown into a problem, once. Unknown errors become `internal` with a generic
 * detail (their message may hold internals); `report` sees the original.
 */
export function toProblem(error: unknown, report?: (error: unknown) => void): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof PicoError) {
    const code = PICO[error.code];
    if (code === "internal") report?.(error);
    return new Problem(code, code === "internal" ? "an internal contract was broken" : error.message);
  }
  if (error instanceof StorageError) {
    if (error.code === "too_large") return new Problem("payload_too_large", error.message);
    if (error.code === "bad_query") return new Problem("invalid_cursor", error.message);
    if (error.code === "closed") return new Problem("closed", error.message);
    report?.(error);
    return new Problem("internal", "storage failed");
  }
  if (sessionErrorCode(error) === "not_found") return new Problem("session_not_found", "this session does not exist; create it with PUT first");
  report?.(error);
  return new Problem("internal", "an unexpected error occurred");
}

export function problemData(problem: Problem): ProblemData {
  return { code: problem.code, detail: problem.detail, ...(problem.field === undefined ? {} : { field: problem.field }) };
}

export function fromData(data: ProblemData): Problem {
  return new Problem(data.code, data.detail, data.field);
}

/** Unwrap an outcome on the Worker's side: a problem is thrown for the app's error handler. */
export function unwrap<T>(outcome: Outcome<T>): T {
  if (outcome.ok) return outcome.value;
  throw fromData(outcome.problem);
}
