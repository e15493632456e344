/**
 * Errors the session host reports to its callers (the HTTP layer and tests). One class with a
 * stable `code`; the HTTP layer turns a code into a problem (src/worker/problems.ts).
 *
 * Workers RPC serializes a thrown error as a plain `Error` carrying only its message (custom classes and
 * fields are lost through the stub), so the code is also the message's prefix: `sessionErrorCode` reads
 * it back on the caller's side.
 */
export type SessionErrorCode =
  /** The session was never created: nothing exists and nothing was written (create it first). */
  "not_found";

export class SessionError extends Error {
  override readonly name: string = "SessionError";
  constructor(
    readonly code: SessionErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export class SessionNotFound extends SessionError {
  override readonly name = "SessionNotFound";
  constructor() {
    super("not_found", "no session of this name");
  }
}

const CODES: ReadonlySet<string> = new Set<SessionErrorCode>(["not_found"]);

/** The code of a SessionError, on either side of an RPC boundary; undefined for anything else. */
export function sessionErrorCode(error: unknown): SessionErrorCode | undefined {
  if (error instanceof SessionError) return error.code;
  if (!(error instanceof Error)) return undefined;
  const prefix = error.message.split(":", 1)[0] ?? "";
  return CODES.has(prefix) ? (prefix as SessionErrorCode) : undefined;
}
