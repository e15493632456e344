/**
 * The OTLP/HTTP JSON trace exporter (§6.5, docs/operations.md "Stats and traces"): our own small code, no
 * OpenTelemetry SDK. Configured by the standard environment variables, set as wrangler vars or secrets:
 *
 *   OTEL_EXPORTER_OTLP_ENDPOINT         base URL; spans are POSTed to `{base}/v1/traces`
 *   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the full traces URL (wins over the base)
 *   OTEL_EXPORTER_OTLP_HEADERS          `key=value,key2=value2`, values percent-decoded (an API key: a secret)
 *   OTEL_SERVICE_NAME                   the resource's `service.name` (default `pico-edge`)
 *
 * A bad value is a `misconfigured` problem naming the var, so a session refuses to open rather than run
 * with traces silently going nowhere. The payload is an `ExportTraceServiceRequest` in OTLP's JSON
 * encoding (hex ids, enums as numbers, 64-bit integers and nanosecond times as decimal strings).
 */
import { GENAI_SCHEMA_URL } from "../../core/telemetry-genai.js";
import type { SpanAttributes, SpanAttributeValue } from "../../core/telemetry.js";
import { Problem } from "../problems.js";
import type { FinishedSpan, SpanExporter, SpanStatusCode } from "./span-recorder.js";
import { TRACER_NAME } from "./telemetry.js";

export const OTLP_VARS = [
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_SERVICE_NAME",
] as const;
export type OtlpVar = (typeof OTLP_VARS)[number];

export const DEFAULT_SERVICE_NAME = "pico-edge";

export interface OtlpConfig {
  /** Where batches are POSTed. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly serviceName: string;
}

/** The exporter's configuration from these bindings; undefined when no endpoint is set. Throws Problem. */
export function otlpConfig(bindings: Readonly<Partial<Record<OtlpVar, unknown>>>): OtlpConfig | undefined {
  const traces = text(bindings, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const base = text(bindings, "OTEL_EXPORTER_OTLP_ENDPOINT");
  let url: string;
  if (traces !== undefined) url = httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces);
  else if (base !== undefined) url = `${httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", base).replace(/\/+$/, "")}/v1/traces`;
  else return undefined;
  return {
    url,
    headers: headerList(text(bindings, "OTEL_EXPORTER_OTLP_HEADERS")),
    serviceName: text(bindings, "OTEL_SERVICE_NAME") ?? DEFAULT_SERVICE_NAME,
  };
}

/** An exporter POSTing each batch as OTLP/HTTP JSON; a non-2xx answer rejects with its status. */
export function otlpHttpExporter(config: OtlpConfig, send: (request: Request) => Promise<Response>): SpanExporter {
  return {
    async export(spans) {
      const response = await send(
        new Request(config.url, {
          method: "POST",
          headers: { ...config.headers, "content-type": "application/json" },
          body: JSON.stringify(otlpTracesRequest(spans, config.serviceName)),
        }),
      );
      // The body is not needed; reading it frees the connection.
      await response.body?.cancel();
      if (!response.ok) throw new Error(`OTLP export to ${config.url} answered ${response.status}`);
    },
  };
}

type OtlpAnyValue =
  | { readonly stringValue: string }
  | { readonly boolValue: boolean }
  | { readonly intValue: string }
  | { readonly doubleValue: number }
  | { readonly arrayValue: { readonly values: readonly OtlpAnyValue[] } };

export interface OtlpKeyValue {
  readonly key: string;
  readonly value: OtlpAnyValue;
}

export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  /** SPAN_KIND_INTERNAL (1) for every span pico makes. */
  readonly kind: 1;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: readonly OtlpKeyValue[];
  readonly events: readonly {
    readonly timeUnixNano: string;
    readonly name: string;
    readonly attributes: readonly OtlpKeyValue[];
  }[];
  /** STATUS_CODE_UNSET 0, OK 1, ERROR 2. */
  readonly status: { readonly code: 0 | 1 | 2; readonly message?: string };
}

export interface OtlpTracesRequest {
  readonly resourceSpans: readonly {
    readonly resource: { readonly attributes: readonly OtlpKeyValue[] };
    readonly scopeSpans: readonly {
      readonly scope: { readonly name: string };
      readonly schemaUrl: string;
      readonly spans: readonly OtlpSpan[];
    }[];
  }[];
}

/** One batch as an OTLP `ExportTraceServiceRequest` (JSON encoding). */
export function otlpTracesRequest(spans: readonly FinishedSpan[], serviceName: string): OtlpTracesRequest {
  return {
    resourceSpans: [
      {
        resource: { attributes: keyValues({ "service.name": serviceName }) },
        scopeSpans: [{ scope: { name: TRACER_NAME }, schemaUrl: GENAI_SCHEMA_URL, spans: spans.map(otlpSpan) }],
      },
    ],
  };
}

function otlpSpan(span: FinishedSpan): OtlpSpan {
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    ...(span.parentSpanId === undefined ? {} : { parentSpanId: span.parentSpanId }),
    name: span.name,
    kind: 1,
    startTimeUnixNano: nanos(span.startTimeMs),
    endTimeUnixNano: nanos(span.endTimeMs),
    attributes: keyValues(span.attributes),
    events: span.events.map((e) => ({
      timeUnixNano: nanos(e.timeMs),
      name: e.name,
      attributes: keyValues(e.attributes),
    })),
    status: {
      code: statusCode(span.status.code),
      ...(span.status.message === undefined ? {} : { message: span.status.message }),
    },
  };
}

function statusCode(code: SpanStatusCode): 0 | 1 | 2 {
  switch (code) {
    case "unset":
      return 0;
    case "ok":
      return 1;
    case "error":
      return 2;
    default: {
      const never: never = code;
      throw new TypeError(`unknown span status ${String(never)}`);
    }
  }
}

function keyValues(attributes: SpanAttributes): OtlpKeyValue[] {
  return Object.entries(attributes).map(([key, value]) => ({ key, value: anyValue(value) }));
}

function anyValue(value: SpanAttributeValue): OtlpAnyValue {
  if (typeof value === "string") return { stringValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  if (typeof value === "number")
    return Number.isSafeInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  return { arrayValue: { values: value.map((v) => ({ stringValue: v })) } };
}

/** Milliseconds since the epoch as nanoseconds, a decimal string (exact: no float rounding). */
function nanos(ms: number): string {
  return (BigInt(Math.trunc(ms)) * 1_000_000n).toString();
}

function misconfigured(name: OtlpVar, detail: string): Problem {
  return new Problem("misconfigured", `${name} is invalid: ${detail}`);
}

/** The var's value, or undefined when unset or blank; a non-string is refused. */
function text(bindings: Readonly<Partial<Record<OtlpVar, unknown>>>, name: OtlpVar): string | undefined {
  const value = bindings[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw misconfigured(name, "expected a string");
  const trimmed = value.trim();
  return trimmed === "" ? undefined : trimmed;
}

function httpUrl(name: OtlpVar, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw misconfigured(name, `not a URL: ${JSON.stringify(value)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw misconfigured(name, "expected an http(s) URL");
  if (url.search !== "" || url.hash !== "") throw misconfigured(name, "expected a URL without query or fragment");
  return url.toString();
}

/** `key=value` pairs separated by commas (the OpenTelemetry exporter convention), values percent-decoded. */
function headerList(value: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  if (value === undefined) return headers;
  for (const [index, pair] of value.split(",").entries()) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf("=");
    const key = (at < 0 ? pair : pair.slice(0, at)).trim();
    if (at < 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key))
      throw misconfigured("OTEL_EXPORTER_OTLP_HEADERS", `pair ${index + 1} is not key=value with a header name`);
    let decoded: string;
    try {
      decoded = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      throw misconfigured("OTEL_EXPORTER_OTLP_HEADERS", `the value of ${key} is not percent-encoded correctly`);
    }
    headers[key.toLowerCase()] = decoded;
  }
  return headers;
}
