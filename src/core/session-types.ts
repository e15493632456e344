/**
 * What one durable commit looks like to the parts of a session that observe it (§6.1, §9.2): who made
 * it (`CommitOrigin`), the batch as listeners see it after persistence (`CommittedBatch`), and the
 * reports the harness makes without failing. They live below the harness, the transactions, the driver
 * and the watches, so each of those imports them here instead of importing the others.
 */
import type { CommitBatch, Id, MainWrite } from "../storage/records.js";
import type { TxBuilder } from "./tx-builder.js";

/** Who commits: the invocation's task, if any (§5.8's inTurn rule needs it). */
export interface CommitOrigin {
  readonly taskId: Id;
  readonly turn: boolean;
}

/** One durable batch, as commit listeners see it: after persistence, never half. */
export interface CommittedBatch {
  readonly first: Id;
  readonly last: Id;
  readonly batch: CommitBatch;
  readonly origin: CommitOrigin | undefined;
}

export type CommitListener = (commit: CommittedBatch) => void;

/** A main batch as its plan left it, before validation and persistence (`HarnessOptions.observeBatch`). */
export interface BatchView {
  /** A copy of the plan's writes: what the observer itself adds is not in it. */
  readonly writes: readonly MainWrite[];
  /** The seq the batch's first write gets (the storage's lastSeq plus one). */
  readonly first: Id;
  readonly origin: CommitOrigin | undefined;
}

/**
 * Sees every non-empty main batch before it is frozen and may add writes of its own through `b`; they
 * are validated and persisted with the batch, so they exist exactly when the batch does. A throw
 * rejects the commit.
 */
export type BatchObserver = (batch: BatchView, b: TxBuilder) => void | Promise<void>;

/** Reports the harness makes without failing (§6.4: open reports unregistered entry kinds). */
export type HarnessReport =
  | { readonly type: "unregistered_entry_kinds"; readonly kinds: readonly string[] }
  | { readonly type: "listener_error"; readonly error: unknown };
