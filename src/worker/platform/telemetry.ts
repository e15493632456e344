/**
 * The worker's tracer over `@opentelemetry/api` (§6.5): core's `Tracer` (src/core/telemetry.ts) adapted
 * to the API, used when no OTLP endpoint is configured (session-tracer.ts). The API's global tracer provider is a no-op until a deployment installs one (an
 * OpenTelemetry SDK set up in the worker's entry module calls `trace.setGlobalTracerProvider`), so by
 * default a span costs one non-recording object and nothing leaves the isolate. The tracer is looked up
 * per span, so a provider installed after a session opened is used from its next invocation on.
 */
import { context, ROOT_CONTEXT, SpanStatusCode, trace, type Span as OtelSpan } from "@opentelemetry/api";
import type { Span, SpanAttributes, Tracer } from "../../core/telemetry.js";

/** The instrumentation scope name spans are reported under. */
export const TRACER_NAME = "pico-edge";

export function openTelemetryTracer(name = TRACER_NAME): Tracer {
  // A parent span is found by the core span this adapter handed out; others (a foreign span) start a root.
  const otelSpans = new WeakMap<Span, OtelSpan>();
  return {
    startSpan(spanName: string, attributes: SpanAttributes, parent?: Span): Span {
      const parentSpan = parent === undefined ? undefined : otelSpans.get(parent);
      const ctx = parentSpan === undefined ? context.active() : trace.setSpan(ROOT_CONTEXT, parentSpan);
      const span = trace.getTracer(name).startSpan(spanName, { attributes: plain(attributes) }, ctx);
      const adapted: Span = {
        setAttribute: (key, value) => void span.setAttribute(key, typeof value === "object" ? [...value] : value),
        setStatus: (status, message) =>
          void span.setStatus(
            status === "ok"
              ? { code: SpanStatusCode.OK }
              : { code: SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) },
          ),
        recordError: (error) => void span.recordException(error instanceof Error ? error : String(error)),
        end: () => span.end(),
      };
      otelSpans.set(adapted, span);
      return adapted;
    },
  };
}

/** Attributes with mutable arrays, as the API's types want them. */
function plain(attributes: SpanAttributes): Record<string, string | number | boolean | string[]> {
  const out: Record<string, string | number | boolean | string[]> = {};
  for (const [key, value] of Object.entries(attributes)) out[key] = typeof value === "object" ? [...value] : value;
  return out;
}
