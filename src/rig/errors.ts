/**
 * The rig's refusals: one error class with a stable code; the HTTP layer maps each code to its
 * status in its one table (src/worker/problems.ts). A refusal is thrown inside the commit's builder, so
 * nothing is written.
 */
export type RigErrorCode =
  /** The transition does not follow the lifecycle from the hook's current status (409). */
  | "hook_conflict"
  /** The bead is pending or active on another agent (409). */
  | "bead_already_hooked"
  /** The request names an earlier assignment than the hook's current one (409). */
  | "stale_attempt"
  /** `If-Match` names another version of the hook (412). */
  | "precondition_failed"
  /** The wrong role, or another agent's hook (403). */
  | "rig_forbidden"
  | "agent_not_found"
  /** A hook transition on a terminated agent other than the mayor's clear (409, naming the agent's state). */
  | "agent_terminated"
  /** Registering an agent id that exists with another role or conversation, or deregistering a hooked agent (409). */
  | "agent_conflict"
  | "mail_not_found"
  /** A request names something invalid that the wire schema cannot see (422). */
  | "rig_invalid";

export class RigError extends Error {
  override readonly name = "RigError";
  constructor(
    readonly code: RigErrorCode,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}
