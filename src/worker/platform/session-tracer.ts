/**
 * The tracer a session opens with (§6.5): spans recorded by our own tracer (span-recorder.ts) and exported
 * over OTLP/HTTP JSON (otlp.ts) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, or to
 * the exporter a test installed (host-config.ts `spanExporter`); otherwise the `@opentelemetry/api`
 * adapter (telemetry.ts), a no-op until a deployment installs a tracer provider.
 */
import type { Tracer } from "../../core/telemetry.js";
import { hostFetch, hostReport, spanExporterSeam } from "./host-config.js";
import { otlpConfig, otlpHttpExporter, type OtlpVar } from "./otlp.js";
import { RecordingTracer } from "./span-recorder.js";
import { openTelemetryTracer } from "./telemetry.js";

/** Each export is handed to `waitUntil`. A bad OTLP variable throws a `misconfigured` problem (otlp.ts). */
export function sessionTracer(
  env: Readonly<Partial<Record<OtlpVar, unknown>>>,
  waitUntil: (exported: Promise<void>) => void,
): Tracer {
  const seam = spanExporterSeam();
  const config = otlpConfig(env);
  const exporter = seam ?? (config === undefined ? undefined : otlpHttpExporter(config, hostFetch()));
  if (exporter === undefined) return openTelemetryTracer();
  return new RecordingTracer({
    exporter,
    schedule: waitUntil,
    failed: (error) => hostReport({ type: "trace_export_failed", error }),
  });
}
