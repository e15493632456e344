/**
 * Telemetry (§6.5): the driver starts one span per execute/recover/abort invocation through a tracer the
 * host injects. This is the whole contract: core has no telemetry dependency, stores no spans in session
 * data, and a host without a tracer gets the no-op one. The worker adapts it to `@opentelemetry/api`
 * (src/worker/platform/telemetry.ts).
 *
 * @example
 * const tracer: Tracer = { startSpan: (name, attributes) => mySpan(name, attributes) };
 * await Harness.open(storage, { host: { telemetry: { tracer, session: "demo" } } }, call);
 */
import { createContextKey, type Call } from "./call.js";

export type SpanAttributeValue = string | number | boolean;
export type SpanAttributes = Readonly<Record<string, SpanAttributeValue>>;

/** One span. `end` is called exactly once by whoever started it. */
export interface Span {
  setAttribute(key: string, value: SpanAttributeValue): void;
  setStatus(status: "ok" | "error", message?: string): void;
  recordError(error: unknown): void;
  end(): void;
}

export interface Tracer {
  startSpan(name: string, attributes: SpanAttributes): Span;
}

/** What a host supplies: its tracer and the session name the spans carry. */
export interface Telemetry {
  readonly tracer: Tracer;
  readonly session?: string;
}

const noopSpan: Span = Object.freeze({
  setAttribute: () => undefined,
  setStatus: () => undefined,
  recordError: () => undefined,
  end: () => undefined,
});

export const noopTracer: Tracer = Object.freeze({ startSpan: () => noopSpan });

/**
 * How an invocation ended, as its span's `pico.outcome` says:
 * - `settled`: it returned and its task is terminal;
 * - `progressed`: it returned after a status transition and its task is still live (a waiting status);
 * - `cancelled`: its task was marked (or the session stopped) and it returned or threw the cancellation;
 * - `failed`: it threw, and the session fail-stopped;
 * - `contract`: it returned without a committed status transition, or an abort returned without settling
 *   (§5.3), and the session fail-stopped;
 * - `closed`: it returned while the session was closing, closed or already faulted.
 */
export type InvocationOutcome = "settled" | "progressed" | "cancelled" | "failed" | "contract" | "closed";

const spanKey = createContextKey<Span>("pico.span");

/** The span of the invocation a call belongs to (the telemetry parent nested work may annotate). */
export function currentSpan(call: Call): Span | undefined {
  return call.value(spanKey);
}

/** For the driver: the context key its invocation calls carry their span under. */
export const invocationSpanKey = spanKey;
