/**
 * HTTP errors (docs/api.md "Errors"): RFC 9457 `application/problem+json` bodies with a stable `code`. One error
 * class (`Problem`), codes a string union, statuses from ONE exhaustive table (`STATUS`, in the wire
 * schema src/api/problems.ts), and one place
 * that normalizes anything else (`toProblem`). Used by the Hono app (routes, middleware, error handler)
 * and by the session Durable Object, which returns problems to the Worker as plain data
 * (`Outcome`, because Workers RPC drops error classes and fields).
 */
import { StorageError } from "../storage/storage.js";
import { PicoError, type PicoErrorCode } from "../core/errors.js";
import type { JsonValue } from "../storage/records.js";
import { STATUS, TITLES, type ProblemBody, type ProblemCode } from "../api/problems.js";
import { sessionErrorCode } from "./errors.js";
import { RigError, type RigErrorCode } from "../rig/errors.js";

export { STATUS, TITLES, type ProblemBody, type ProblemCode } from "../api/problems.js";

/** The one error class of the HTTP layer. */
export class Problem extends Error {
  override readonly name = "Problem";
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly field?: string,
    /** RFC 9457 extension members (`answer` of already_answered, `outcome` of pending_closed). */
    readonly extra: ProblemExtras = {},
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
      ...(this.extra.answer === undefined ? {} : { answer: this.extra.answer }),
      ...(this.extra.outcome === undefined ? {} : { outcome: this.extra.outcome }),
      ...(this.extra.retryAfter === undefined ? {} : { retryAfter: this.extra.retryAfter }),
      ...(this.extra.line === undefined ? {} : { line: this.extra.line }),
    };
  }

  response(instance?: string): Response {
    return new Response(JSON.stringify(this.body(instance)), {
      status: this.status,
      headers: {
        "content-type": "application/problem+json",
        ...(this.extra.retryAfter === undefined ? {} : { "retry-after": String(this.extra.retryAfter) }),
      },
    });
  }
}

/** A problem's extension members (docs/api.md "Errors"). */
export interface ProblemExtras {
  readonly answer?: JsonValue;
  readonly outcome?: string;
  /** rate_limited: seconds until the limit may pass (also the Retry-After header). */
  readonly retryAfter?: number;
  /** invalid_import: the 1-based number of the refused line. */
  readonly line?: number;
}

/** A problem as plain data, for the RPC boundary. */
export interface ProblemData extends ProblemExtras {
  readonly code: ProblemCode;
  readonly detail: string;
  readonly field?: string;
}

/** What a session RPC returns: a value or a problem (RPC errors lose their class, so none is thrown). */
export type Outcome<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: ProblemData };

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

const RIG: Readonly<Record<RigErrorCode, ProblemCode>> = {
  hook_conflict: "hook_conflict",
  bead_already_hooked: "bead_already_hooked",
  stale_attempt: "stale_attempt",
  precondition_failed: "precondition_failed",
  rig_forbidden: "forbidden",
  agent_not_found: "agent_not_found",
  agent_conflict: "agent_conflict",
  agent_terminated: "agent_terminated",
  mail_not_found: "mail_not_found",
  rig_invalid: "invalid_body",
};

/**
 * Normalize anything thrown into a problem, once. Unknown errors become `internal` with a generic
 * detail (their message may hold internals); `report` sees the original.
 */
export function toProblem(error: unknown, report?: (error: unknown) => void): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof RigError) return new Problem(RIG[error.code], error.message, error.field);
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
  if (sessionErrorCode(error) === "not_found") return new Problem("session_not_found", "no session of this name");
  report?.(error);
  return new Problem("internal", "an unexpected error occurred");
}

export function problemData(problem: Problem): ProblemData {
  return {
    code: problem.code,
    detail: problem.detail,
    ...(problem.field === undefined ? {} : { field: problem.field }),
    ...problem.extra,
  };
}

export function fromData(data: ProblemData): Problem {
  const { code, detail, field, ...extra } = data;
  return new Problem(code, detail, field, extra);
}

/** Unwrap an outcome on the Worker's side: a problem is thrown for the app's error handler. */
export function unwrap<T>(outcome: Outcome<T>): T {
  if (outcome.ok) return outcome.value;
  throw fromData(outcome.problem);
}
