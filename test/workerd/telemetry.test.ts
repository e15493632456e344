/**
 * The worker's tracer (§6.5): `openTelemetryTracer` forwards core spans to the tracer provider a
 * deployment installs with `trace.setGlobalTracerProvider` (here a hand-written fake), and is a no-op
 * while none is installed; a session's turn reports one span per task invocation through it.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import {
  INVALID_SPAN_CONTEXT,
  type Context,
  SpanStatusCode,
  trace,
  type Span,
  type SpanAttributes,
  type SpanOptions,
  type SpanStatus,
  type Tracer,
  type TracerProvider,
} from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import { openTelemetryTracer, TRACER_NAME } from "../../src/worker/platform/telemetry.js";
import { client, uniqueSession, until } from "./http-fixtures.js";

interface FakeSpan {
  readonly scope: string;
  readonly name: string;
  readonly attributes: SpanAttributes;
  status: SpanStatus | undefined;
  readonly exceptions: unknown[];
  ends: number;
}

/** A TracerProvider that records spans in memory. */
class FakeProvider implements TracerProvider {
  readonly spans: FakeSpan[] = [];

  getTracer(scope: string): Tracer {
    const spans = this.spans;
    return {
      startSpan(name: string, options?: SpanOptions): Span {
        const rec: FakeSpan = {
          scope,
          name,
          attributes: { ...options?.attributes },
          status: undefined,
          exceptions: [],
          ends: 0,
        };
        spans.push(rec);
        const span: Span = {
          spanContext: () => INVALID_SPAN_CONTEXT,
          setAttribute: (key, value) => (((rec.attributes as Record<string, unknown>)[key] = value), span),
          setAttributes: (attributes) => (Object.assign(rec.attributes, attributes), span),
          addEvent: () => span,
          addLink: () => span,
          addLinks: () => span,
          setStatus: (status) => ((rec.status = status), span),
          updateName: () => span,
          end: () => void (rec.ends += 1),
          isRecording: () => true,
          recordException: (exception) => void rec.exceptions.push(exception),
        };
        return span;
      },
      startActiveSpan: (() => {
        throw new Error("the adapter starts no active spans");
      }) as Tracer["startActiveSpan"],
    };
  }
}

afterEach(async () => {
  trace.disable();
  await abortAllDurableObjects();
});

describe("§6.5 OpenTelemetry adapter", () => {
  it("§6.5 the OpenTelemetry adapter forwards to an installed tracer provider", () => {
    const provider = new FakeProvider();
    expect(trace.setGlobalTracerProvider(provider)).toBe(true);
    const span = openTelemetryTracer().startSpan("pico.task.execute", { "pico.task.id": 7, "pico.task.kind": "k" });
    span.setAttribute("pico.outcome", "failed");
    const boom = new Error("boom");
    span.recordError(boom);
    span.setStatus("error", "Error: boom");
    span.end();
    expect(provider.spans).toEqual([
      {
        scope: TRACER_NAME,
        name: "pico.task.execute",
        attributes: { "pico.task.id": 7, "pico.task.kind": "k", "pico.outcome": "failed" },
        status: { code: SpanStatusCode.ERROR, message: "Error: boom" },
        exceptions: [boom],
        ends: 1,
      },
    ]);
    const ok = openTelemetryTracer().startSpan("pico.task.recover", {});
    ok.setStatus("ok");
    ok.end();
    expect(provider.spans[1]!.status).toEqual({ code: SpanStatusCode.OK });
  });

  it("§6.5 the OpenTelemetry adapter is a no-op while no tracer provider is installed", () => {
    const provider = new FakeProvider();
    // Nothing installed: the API's own provider hands out non-recording spans, and nothing throws.
    const before = openTelemetryTracer();
    const span = before.startSpan("pico.task.execute", { "pico.task.id": 1 });
    span.setAttribute("pico.outcome", "settled");
    span.recordError(new Error("ignored"));
    span.setStatus("ok");
    span.end();
    expect(trace.getTracer(TRACER_NAME).startSpan("probe").isRecording()).toBe(false);
    // A provider installed later serves the same adapter from its next span on; earlier spans stay lost.
    trace.setGlobalTracerProvider(provider);
    before.startSpan("pico.task.abort", {}).end();
    expect(provider.spans.map((s) => s.name)).toEqual(["pico.task.abort"]);
    // Uninstalled again: back to no-op.
    trace.disable();
    before.startSpan("pico.task.execute", {}).end();
    expect(provider.spans).toHaveLength(1);
  });

  it("§6.5 the OpenTelemetry adapter passes a span's parent as the API's context", () => {
    const provider = new FakeProvider();
    const parents = new Map<string, string | undefined>();
    const names = new WeakMap<Span, string>();
    trace.setGlobalTracerProvider({
      getTracer: (scope) => {
        const inner = provider.getTracer(scope);
        return {
          ...inner,
          startSpan: (name: string, options?: SpanOptions, ctx?: Context) => {
            const parent = ctx === undefined ? undefined : trace.getSpan(ctx);
            parents.set(name, parent === undefined ? undefined : names.get(parent));
            const span = inner.startSpan(name, options, ctx);
            names.set(span, name);
            return span;
          },
        };
      },
    });
    const tracer = openTelemetryTracer();
    const root = tracer.startSpan("invoke_agent", {});
    const task = tracer.startSpan("pico.task.execute", {}, root);
    const chat = tracer.startSpan("chat echo", { "gen_ai.response.finish_reasons": ["stop"] }, task);
    // A span another tracer made is not ours to parent under: the child starts a root of its own.
    const foreign = tracer.startSpan("orphan", {}, { setAttribute() {}, setStatus() {}, recordError() {}, end() {} });
    for (const span of [foreign, chat, task, root]) span.end();
    expect(Object.fromEntries(parents)).toEqual({
      invoke_agent: undefined,
      "pico.task.execute": "invoke_agent",
      "chat echo": "pico.task.execute",
      orphan: undefined,
    });
    expect(provider.spans.find((s) => s.name === "chat echo")!.attributes).toEqual({
      "gen_ai.response.finish_reasons": ["stop"],
    });
  });

  it("§6.5 a session's turn reports one span per task invocation through the installed provider", async () => {
    const provider = new FakeProvider();
    trace.setGlobalTracerProvider(provider);
    const session = uniqueSession("otel");
    const api = await client("otel");
    await api.session(session).create({});
    await api.session(session).conversation("root").accept("hello", { wait: 10 });
    const spans = await until(async () => {
      const generation = provider.spans.filter((s) => s.attributes["pico.task.kind"] === "generation");
      return generation.length > 0 && generation.every((s) => s.ends === 1) ? generation : undefined;
    }, "an ended generation span");
    expect(spans[0]).toMatchObject({
      scope: TRACER_NAME,
      name: "pico.task.execute",
      attributes: { "pico.method": "execute", "pico.phase": "open", "pico.invocation": 1, "pico.outcome": "settled" },
      status: { code: SpanStatusCode.OK },
    });
    expect(typeof spans[0]!.attributes["pico.session"]).toBe("string");
    expect(typeof spans[0]!.attributes["pico.conversation"]).toBe("number");
  });
});
