/**
 * The worker's tracer (§6.5): core's `Tracer` (src/core/telemetry.ts) adapted to `@opentelemetry/api`.
 * The API's global tracer provider is a no-op until a deployment installs one (an OpenTelemetry SDK set
 * up in the worker's entry module calls `trace.setGlobalTracerProvider`), so by default a span costs one
 * non-recording object and nothing leaves the isolate. The tracer is looked up per span, so a provider
 * installed after a session opened is used from its next invocation on.
 */
import { SpanStatusCode, trace } from "@opentelemetry/api";
import type { Span, SpanAttributes, Tracer } from "../../core/telemetry.js";

/** The instrumentation scope name spans are reported under. */
export const TRACER_NAME = "pico-edge";

export function openTelemetryTracer(name = TRACER_NAME): Tracer {
  return {
    startSpan(spanName: string, attributes: SpanAttributes): Span {
      const span = trace.getTracer(name).startSpan(spanName, { attributes: { ...attributes } });
      return {
        setAttribute: (key, value) => void span.setAttribute(key, value),
        setStatus: (status, message) =>
          void span.setStatus(
            status === "ok"
              ? { code: SpanStatusCode.OK }
              : { code: SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) },
          ),
        recordError: (error) => void span.recordException(error instanceof Error ? error : String(error)),
        end: () => span.end(),
      };
    },
  };
}
