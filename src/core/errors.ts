/**
 * One error class for the core with a stable `code`. Validation failures leave no writes and consume
 * no ids (§3.3); hosts map codes to their own statuses (the HTTP layer keeps one exhaustive table).
 */
export type PicoErrorCode =
  /** A commit broke a transcript rule (§2.1, §3.2, §5.8) or a task-kind rule (§5.1, §9.2). */
  | "invalid_commit"
  /** A model-visible entry from outside a turn while the conversation has a live turn task (§5.8). */
  | "in_turn"
  /** A name, id or kind that does not exist. */
  | "not_found"
  /** Registration conflicts (duplicate names, removing a kind with live tasks). */
  | "conflict"
  /** The invocation lost its mutation authority to a durable abort mark (§6.3). */
  | "task_cancelled"
  /** The harness is closing/closed or faulted and admits no such operation (§6.4). */
  | "closed"
  | "faulted"
  /** An operation that the task contract forbids (§5.3, §6.1). */
  | "contract";

export class PicoError extends Error {
  override readonly name: string = "PicoError";
  constructor(
    readonly code: PicoErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Normal control flow after a durable abort mark (§6.3): the driver recognizes it. */
export class TaskCancelled extends PicoError {
  override readonly name = "TaskCancelled";
  constructor(readonly taskId: number) {
    super("task_cancelled", `task ${taskId} is marked for abort; its execute/recover invocation may no longer mutate`);
  }
}

export function invalid(message: string): PicoError {
  return new PicoError("invalid_commit", message);
}

/**
 * Is `error` the invocation's cancellation (a durable abort mark, or the close of the invocation whose
 * signal is `signal`), rather than an ordinary failure of the work it ran?
 */
export function isInvocationCancellation(error: unknown, signal: AbortSignal | undefined): boolean {
  if (error instanceof TaskCancelled) return true;
  if (signal?.aborted !== true) return false;
  if (error === signal.reason) return true;
  if (error instanceof PicoError && (error.code === "closed" || error.code === "task_cancelled")) return true;
  return typeof error === "object" && error !== null && (error as { name?: unknown }).name === "AbortError";
}
