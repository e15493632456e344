/**
 * Telemetry (§6.5): the driver starts one span per execute/recover/abort invocation through a tracer the
 * host injects, under one `invoke_agent` span per turn (driver-turn-spans.ts); kinds start child spans of
 * their invocation's span (`startChildSpan`: a model call, a tool call, a wait for an answer). This is the
 * whole contract: core has no telemetry dependency, stores no spans in session data, and a host without a
 * tracer gets the no-op one. The span names and attributes of the GenAI conventions are plain data
 * (telemetry-genai.ts). The worker adapts it to `@opentelemetry/api` or its own OTLP exporter
 * (src/worker/platform/telemetry.ts, src/worker/platform/otlp.ts).
 *
 * @example
 * const tracer: Tracer = { startSpan: (name, attributes) => mySpan(name, attributes) };
 * await Harness.open(storage, { host: { telemetry: { tracer, session: "demo" } } }, call);
 */
import { createContextKey, type Call } from "./call.js";

export type SpanAttributeValue = string | number | boolean | readonly string[];
export type SpanAttributes = Readonly<Record<string, SpanAttributeValue>>;

/** One span. `end` is called exactly once by whoever started it. */
export interface Span {
  setAttribute(key: string, value: SpanAttributeValue): void;
  setStatus(status: "ok" | "error", message?: string): void;
  recordError(error: unknown): void;
  end(): void;
}

export interface Tracer {
  /** A span; with `parent` (a span this tracer started), its child, otherwise a root of its own. */
  startSpan(name: string, attributes: SpanAttributes, parent?: Span): Span;
}

/** What a host supplies: its tracer and the session name the spans carry. */
export interface Telemetry {
  readonly tracer: Tracer;
  readonly session?: string;
  /**
   * The session's incarnation (minted by its creating commit, never reused), once known: it prefixes the
   * conversation ids spans carry, so a session deleted and created again under the same name is told apart.
   */
  readonly incarnation?: () => string | undefined;
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
const tracerKey = createContextKey<Tracer>("pico.tracer");

/** The span of the invocation a call belongs to (the telemetry parent nested work may annotate). */
export function currentSpan(call: Call): Span | undefined {
  return call.value(spanKey);
}

/** For the driver: the context key its invocation calls carry their span under. */
export const invocationSpanKey = spanKey;

/** For the driver: the context key its invocation calls carry the host's tracer under. */
export const invocationTracerKey = tracerKey;

/**
 * A child of the call's invocation span, through the host's tracer (no-op outside an invocation or
 * without a tracer). A throwing tracer degrades to no-op: telemetry never fails a task. The caller ends it.
 */
export function startChildSpan(call: Call, name: string, attributes: SpanAttributes): Span {
  const tracer = call.value(tracerKey);
  if (tracer === undefined) return noopSpan;
  try {
    return tracer.startSpan(name, attributes, currentSpan(call));
  } catch {
    return noopSpan;
  }
}

/** Ends a span after `run` settles: status ok, or error with the error recorded when it throws. */
export async function withChildSpan<T>(
  call: Call,
  name: string,
  attributes: SpanAttributes,
  run: (span: Span) => Promise<T>,
): Promise<T> {
  const span = startChildSpan(call, name, attributes);
  try {
    const value = await run(span);
    span.setStatus("ok");
    return value;
  } catch (error) {
    span.recordError(error);
    span.setStatus("error", error instanceof Error ? error.message : String(error));
    throw error;
  } finally {
    span.end();
  }
}
