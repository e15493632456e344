/**
 * The driver's shared vocabulary (§6): its lifecycle phase, the invocation record whose object identity
 * is the mutation authority (§6.5) and how a Call carries it, what `inspect` reports, and the two small
 * interfaces the driver is built on. `DriverSession` is what it reads and commits through its harness;
 * `DriverWiring` is what the harness plugs in at construction to run an invocation's method with its
 * runtime and to tell the watchers the session faulted or closed. The Harness implements the first and
 * passes the second, so the driver's files never import the harness, the runtime or the watches above.
 */
import type { Id, Task } from "../storage/records.js";
import type { Storage } from "../storage/storage.js";
import { createContextKey, type Call } from "./call.js";
import type { FaultReport, InvocationMethod } from "./host.js";
import type { CommitLine } from "./line.js";
import type { HarnessReport } from "./session-types.js";
import type { AnyTaskKind } from "./task-kind-types.js";
import type { TxBuilder } from "./tx-builder.js";

export type Phase = "open" | "stopping" | "closing" | "faulted" | "closed";

/** One execute/recover/abort call; its object identity is the mutation authority (§6.5). */
export interface Invocation {
  readonly taskId: Id;
  /** The task's conversation: the slot keeps its subtree busy until the method returns (§6.4 delete). */
  readonly conversationId: Id;
  readonly method: InvocationMethod;
  readonly controller: AbortController;
  readonly initialStatusEpoch: number;
  /** The task's nth invocation in this process (1-based), for telemetry. */
  readonly number: number;
  readonly kind: AnyTaskKind;
  /** The snapshot the method receives, taken when the slot was reserved. */
  readonly task: Task;
  /** Resolves once the method returned and its completion was processed on the line. Exists from
   * reservation on, so close/fault join a slot even before its dispatch ran. */
  readonly done: Promise<void>;
}

export interface InspectResult {
  readonly start: readonly Task[];
  readonly inflight: readonly Task[];
  readonly orphaned: readonly Task[];
  readonly parked: readonly Task[];
  readonly quarantined: readonly Task[];
}

/** Work to do after leaving the line. */
export type Action = () => void;

/** Private to core: only the driver installs invocation identity; the runtime and the kinds read it. */
export const invocationKey = createContextKey<Invocation>("pico.invocation");

/** For the runtime: the invocation a call carries (private to core). */
export function invocationOf(call: Call): Invocation | undefined {
  return call.value(invocationKey);
}

/** What the driver reads and commits through its harness (the Harness implements it). */
export interface DriverSession {
  readonly storage: Storage;
  readonly line: CommitLine;
  readonly taskKinds: { has(name: string): boolean; get(name: string): AnyTaskKind | undefined };
  readonly entryKinds: { has(name: string): boolean };
  readonly sections: { has(key: string): boolean };
  /** The driver's own writes (abort marks, orphaning at open): admitted in every open phase. */
  commitInternal<T>(plan: (b: TxBuilder) => T | Promise<T>, call: Call): Promise<T>;
  /** An internal commit from inside a driver line operation; the caller runs `after` once it leaves the line. */
  commitInternalOnLine<T>(
    plan: (b: TxBuilder) => T | Promise<T>,
    call: Call,
  ): Promise<{ result: T; after: (() => void) | undefined }>;
  /** Abort marks a caller requests, admitted as the caller's own commit (§6.3). */
  commitMarks<T>(plan: (b: TxBuilder) => T | Promise<T>, call: Call): Promise<T>;
  report(report: HarnessReport): void;
}

/** What the harness plugs into its driver at construction. */
export interface DriverWiring {
  /** Run the invocation's method with a runtime bound to it (runtime.ts); resolves or rejects as the method does. */
  invoke(inv: Invocation, call: Call): Promise<void>;
  /** The session fail-stopped: every watcher gets a fault event. */
  faulted(report: FaultReport): void;
  /** The session closed: every watcher gets `closed`. */
  closed(): void;
}

/** An error as one line, for fault messages and spans. */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
