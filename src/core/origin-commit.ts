/**
 * Commits with an explicit origin (§5.8), internal to the core and deliberately not exported from the
 * core's index: host commits are host commits, so no host API can claim a turn or a task id. Tests of
 * the transcript rules use this to commit as a task without running one; it grants no task authority.
 */
import type { Call } from "./call.js";
import type { Binding } from "./state.js";
import type { CommitOrigin } from "./session-types.js";
import type { TxBuilder } from "./tx-builder.js";

/**
 * The Harness's private commit path with an explicit origin. The harness is typed as any object here so
 * this module sits below harness.ts (which fills the slot and alone can run it); pass a Harness.
 */
type OriginCommit = <T>(
  harness: object,
  origin: CommitOrigin,
  binding: Binding,
  plan: (b: TxBuilder) => T | Promise<T>,
  call: Call,
) => Promise<T>;

/** Filled by the Harness class (which alone reaches its private commit path) when its module loads. */
export const originCommitSlot: { run: OriginCommit | undefined } = { run: undefined };

/** Commit `plan` on `harness`'s line as if `origin` made it. Internal: tests of §5.8 only. */
export function commitWithOrigin<T>(
  harness: object,
  origin: CommitOrigin,
  binding: Binding,
  plan: (b: TxBuilder) => T | Promise<T>,
  call: Call,
): Promise<T> {
  const run = originCommitSlot.run;
  if (run === undefined) throw new Error("the Harness module is not loaded");
  return run(harness, origin, binding, plan, call);
}
