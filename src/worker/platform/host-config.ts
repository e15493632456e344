/**
 * What the session host takes from its surroundings: the clock, the deployed version, where it reports,
 * and its two timing constants. Each has a test seam, because workerd tests cannot move time or deploy:
 * in workerd `Date.now()` advances only on I/O and alarms are run by hand (`runDurableObjectAlarm`), and
 * a version change has to be simulated. In `@cloudflare/vitest-plugin` the Durable Objects of the main
 * worker run in the tests' isolate, so a test sets these module-level hooks and the next object instance
 * (every instance reads them when it is constructed) picks them up. Production code never sets them.
 */
import { systemClock, type Clock } from "../../core/host.js";
import type { Env } from "../env.js";
import type { SpanExporter } from "./span-recorder.js";

/** Consecutive kills of one task's execute/recover after which the host quarantines it (docs/operations.md). */
export const DEFAULT_KILL_BOUND = 3;

/** While invocations are in flight, an alarm about this often keeps the object from being evicted idle. */
export const HEARTBEAT_MS = 30_000;

/** Something the host noticed without failing: it never throws these at the runtime (a throw is retried). */
export type HostReport =
  | { readonly type: "alarm_failed"; readonly error: unknown }
  | { readonly type: "alarm_write_failed"; readonly error: unknown }
  | { readonly type: "directory_update_failed"; readonly error: unknown }
  /** A session's read of its tenant's tool catalog failed: it keeps its last copy (session/tool-catalog.ts). */
  | { readonly type: "catalog_read_failed"; readonly error: unknown }
  | { readonly type: "profile_read_failed"; readonly error: unknown }
  /** A schedule's occurrence could not ask the tenant's limits: it ran unadmitted (limits/admission.ts). */
  | { readonly type: "admission_failed"; readonly error: unknown }
  | {
      readonly type: "session_faulted";
      readonly taskId?: number;
      readonly kind?: string;
      readonly method?: string;
      readonly message: string;
    }
  | { readonly type: "quarantined"; readonly taskId: number; readonly kind: string; readonly kills: number }
  /** A batch of spans could not be sent to the OTLP endpoint: it is dropped (platform/span-recorder.ts). */
  | { readonly type: "trace_export_failed"; readonly error: unknown }
  | { readonly type: "harness"; readonly report: unknown };

export interface HostSeams {
  /** A clock for one object instance (each instance gets its own; sleepers are per instance). */
  readonly clock?: () => Clock;
  /** The deployed version, instead of the version-metadata binding. */
  readonly version?: () => string;
  readonly killBound?: number;
  readonly report?: (report: HostReport) => void;
  /** What remote calls (HTTP tools) send their requests with, instead of the global fetch. */
  readonly fetch?: (request: Request) => Promise<Response>;
  /** How long a session's copy of its tenant's tool catalog is used before it is read again, ms. */
  readonly catalogTtlMs?: number;
  /** How long an isolate's copy of a tenant's limits is used before it is read again, ms (limits/admission.ts). */
  readonly limitsTtlMs?: number;
  /** Runs right after a session's creating commit, before its template binding and directory link: a throw cuts the create there. */
  readonly afterCreateCommit?: () => void;
  /** Runs right after a delete wiped the session's storage, before its directory unlink: a throw cuts the delete there. */
  readonly afterDeleteWipe?: () => void;
  /** Runs after an import staged every line, before its settling commit: a throw cuts the import there, as a kill would. */
  readonly beforeImportSettle?: () => void;
  /** Runs after an import's settling transaction, before its directory row is sent: a throw cuts the import there. */
  readonly afterImportSettle?: () => void;
  /** How long a session's usage report waits to be batched before it is sent on its own, ms (limits/meter.ts). */
  readonly meterBatchMs?: number;
  /** Sees each call made on a tenant's LimitsObjects: its own (`shard` undefined) and its shards' (tests count them). */
  readonly limitsCall?: (tenant: string, method: string, shard: string | undefined) => void;
  /** Where a session's spans go instead of the configured tracer (tests collect them in memory). */
  readonly spanExporter?: () => SpanExporter;
}

let seams: HostSeams = {};

/** Test only: replace some seams (undefined fields keep the production default). */
export function setHostSeams(next: HostSeams): void {
  seams = next;
}

export function hostClock(): Clock {
  return seams.clock?.() ?? systemClock;
}

/**
 * The deployed version, from the version-metadata binding. Without the binding every kill counts, as if
 * one version were deployed forever (the conservative choice: quarantine still bounds the loop).
 */
export function deployedVersion(env: Env): string {
  return seams.version?.() ?? env.CF_VERSION_METADATA?.id ?? "unversioned";
}

/** The observer of LimitsObject calls, when a test set one. */
export function limitsCallSeam(): ((tenant: string, method: string, shard: string | undefined) => void) | undefined {
  return seams.limitsCall;
}

/** How long an isolate's copy of a tenant's limits is used (`fallback` unless a test set it). */
export function limitsTtlMs(fallback: number): number {
  return seams.limitsTtlMs ?? fallback;
}

/** How long a usage report waits for a reservation to carry it (limits/meter.ts). */
export function meterBatchMs(fallback: number): number {
  return seams.meterBatchMs ?? fallback;
}

/** The span exporter a test installed, if any. */
export function spanExporterSeam(): SpanExporter | undefined {
  return seams.spanExporter?.();
}

/** The fetch remote calls use. */
export function hostFetch(): (request: Request) => Promise<Response> {
  return seams.fetch ?? ((request) => fetch(request));
}

/** A session's copy of the tool catalog is read again after this long (docs/tools.md). */
export const DEFAULT_CATALOG_TTL_MS = 30_000;

export function catalogTtlMs(): number {
  return seams.catalogTtlMs ?? DEFAULT_CATALOG_TTL_MS;
}

/** The cut point of a create (test only; nothing in production). */
export function afterCreateCommit(): void {
  seams.afterCreateCommit?.();
}

/** The cut point of a delete (test only; nothing in production). */
export function afterDeleteWipe(): void {
  seams.afterDeleteWipe?.();
}

/** The cut point of an import (test only; nothing in production). */
export function beforeImportSettle(): void {
  seams.beforeImportSettle?.();
}

/** The cut point of an import after its settling transaction (test only; nothing in production). */
export function afterImportSettle(): void {
  seams.afterImportSettle?.();
}

export function killBound(): number {
  return seams.killBound ?? DEFAULT_KILL_BOUND;
}

/**
 * Where host reports go. Workers Logs collects console output, so the production default logs one
 * structured line; errors are flattened to their message because they do not serialize.
 */
export function hostReport(report: HostReport): void {
  if (seams.report !== undefined) {
    seams.report(report);
    return;
  }
  console.error(
    JSON.stringify(report, (_key, value: unknown) =>
      value instanceof Error ? `${value.name}: ${value.message}` : value,
    ),
  );
}
