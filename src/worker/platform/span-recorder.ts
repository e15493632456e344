/**
 * A small tracer of our own (§6.5): core's `Tracer` recording finished spans with W3C trace and span ids
 * and parentage, handed in batches to a `SpanExporter` (the OTLP/HTTP exporter of otlp.ts, or the
 * in-memory one tests read). A batch leaves when a root span ends (a turn's `invoke_agent`, or an
 * invocation of a task outside any turn), when a span whose parent already ended ends (a subagent's turn
 * that outlives the tool call that started it: nothing above it would send it), or when `MAX_BATCH` spans wait; the export promise is handed to
 * `schedule`, which the session object points at `ctx.waitUntil`, so the export outlives the event that
 * ended the span. A failed export is reported and its spans dropped: traces are best effort and never
 * hold a session's work (a span is never stored in session data). Spans an instance never ended (it was
 * evicted) are never sent.
 */
import type { Span, SpanAttributes, SpanAttributeValue, Tracer } from "../../core/telemetry.js";

export type SpanStatusCode = "unset" | "ok" | "error";

export interface SpanEvent {
  readonly name: string;
  readonly timeMs: number;
  readonly attributes: SpanAttributes;
}

/** A span as exporters receive it. Ids are lowercase hex: 32 digits for a trace, 16 for a span. */
export interface FinishedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly startTimeMs: number;
  readonly endTimeMs: number;
  readonly attributes: SpanAttributes;
  readonly status: { readonly code: SpanStatusCode; readonly message?: string };
  readonly events: readonly SpanEvent[];
}

export interface SpanExporter {
  /** Sends one batch; rejects when it could not. */
  export(spans: readonly FinishedSpan[]): Promise<void>;
}

/** An exporter that keeps what it is given (tests read `spans`). */
export class InMemorySpanExporter implements SpanExporter {
  readonly spans: FinishedSpan[] = [];

  export(spans: readonly FinishedSpan[]): Promise<void> {
    this.spans.push(...spans);
    return Promise.resolve();
  }
}

/** The most spans one batch waits for before it leaves without its root. */
export const MAX_BATCH = 64;

export interface RecordingTracerOptions {
  readonly exporter: SpanExporter;
  /** Where an export's promise goes (the object's `ctx.waitUntil`). */
  readonly schedule: (exported: Promise<void>) => void;
  /** A failed export (its spans are dropped). */
  readonly failed: (error: unknown) => void;
  readonly now?: () => number;
}

interface Identity {
  readonly traceId: string;
  readonly spanId: string;
}

export class RecordingTracer implements Tracer {
  readonly #options: RecordingTracerOptions;
  readonly #ids = new WeakMap<Span, Identity>();
  readonly #ended = new WeakSet<Span>();
  #batch: FinishedSpan[] = [];

  constructor(options: RecordingTracerOptions) {
    this.#options = options;
  }

  startSpan(name: string, attributes: SpanAttributes, parent?: Span): Span {
    const now = this.#options.now ?? Date.now;
    const parentIds = parent === undefined ? undefined : this.#ids.get(parent);
    const traceId = parentIds?.traceId ?? randomHex(16);
    const spanId = randomHex(8);
    const startTimeMs = now();
    const attrs: Record<string, SpanAttributeValue> = { ...attributes };
    const events: SpanEvent[] = [];
    let status: FinishedSpan["status"] = { code: "unset" };
    let ended = false;
    const span: Span = {
      setAttribute: (key, value) => {
        if (!ended) attrs[key] = value;
      },
      setStatus: (code, message) => {
        if (!ended) status = message === undefined || code === "ok" ? { code } : { code, message };
      },
      recordError: (error) => {
        if (ended) return;
        events.push({
          name: "exception",
          timeMs: now(),
          attributes: {
            "exception.type": error instanceof Error ? error.name : typeof error,
            "exception.message": error instanceof Error ? error.message : String(error),
          },
        });
      },
      end: () => {
        if (ended) return;
        ended = true;
        this.#ended.add(span);
        this.#finished(
          {
            traceId,
            spanId,
            ...(parentIds === undefined ? {} : { parentSpanId: parentIds.spanId }),
            name,
            startTimeMs,
            endTimeMs: now(),
            attributes: attrs,
            status,
            events,
          },
          parent === undefined || parentIds === undefined || this.#ended.has(parent),
        );
      },
    };
    this.#ids.set(span, { traceId, spanId });
    return span;
  }

  /** Sends what waits now (a no-op when nothing does). */
  flush(): Promise<void> {
    if (this.#batch.length === 0) return Promise.resolve();
    const batch = this.#batch;
    this.#batch = [];
    return Promise.resolve()
      .then(() => this.#options.exporter.export(batch))
      .catch((error: unknown) => this.#options.failed(error));
  }

  #finished(span: FinishedSpan, root: boolean): void {
    this.#batch.push(span);
    if (root || this.#batch.length >= MAX_BATCH) this.#options.schedule(this.flush());
  }
}

function randomHex(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  let hex = "";
  for (const byte of buffer) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
