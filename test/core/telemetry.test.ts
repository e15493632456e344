/**
 * Telemetry (§6.5): the driver starts one span per execute/recover/abort invocation through the tracer
 * the host injects, with the session, conversation, task, kind, method, phase and invocation number, and
 * ends it exactly once with the outcome, on every way an invocation ends: settled, progressed, failed
 * (fail-stop), contract violation, marked (cancelled, then the abort handler) and a crash (the dying
 * process ends its span as closed; the reopened one recovers under a new span).
 */
import { describe, expect, it } from "vitest";
import { PicoError } from "../../src/core/errors.js";
import type { Harness } from "../../src/core/harness.js";
import {
  currentSpan,
  type Span,
  type SpanAttributes,
  type SpanAttributeValue,
  type Tracer,
} from "../../src/core/telemetry.js";
import { coreBackends } from "./backends.js";
import {
  addStep,
  call,
  cancellable,
  deferred,
  GateStorage,
  openWith,
  outcome,
  patchStep,
  settleStep,
  stepKind,
  until,
} from "./driver-fixtures.js";

interface Recorded {
  readonly name: string;
  readonly attributes: Record<string, SpanAttributeValue>;
  status: { status: "ok" | "error"; message?: string } | undefined;
  readonly errors: unknown[];
  ends: number;
}

class FakeTracer implements Tracer {
  readonly spans: Recorded[] = [];

  startSpan(name: string, attributes: SpanAttributes): Span {
    const rec: Recorded = { name, attributes: { ...attributes }, status: undefined, errors: [], ends: 0 };
    this.spans.push(rec);
    return {
      setAttribute: (key, value) => void (rec.attributes[key] = value),
      setStatus: (status, message) => void (rec.status = message === undefined ? { status } : { status, message }),
      recordError: (error) => void rec.errors.push(error),
      end: () => void (rec.ends += 1),
    };
  }

  /** name, task, method-level outcome and invocation number of each span, in start order. */
  summary(): [
    string,
    SpanAttributeValue | undefined,
    SpanAttributeValue | undefined,
    SpanAttributeValue | undefined,
  ][] {
    return this.spans.map((s) => [
      s.name,
      s.attributes["pico.task.id"],
      s.attributes["pico.outcome"],
      s.attributes["pico.invocation"],
    ]);
  }
}

/** Wait until `n` spans started and each ended (a drive resolves on the line before the last span ends). */
function allEnded(h: Harness, tracer: FakeTracer, n: number): Promise<void> {
  return until(h, () => tracer.spans.length === n && tracer.spans.every((s) => s.ends > 0), `${n} ended spans`);
}

for (const backend of coreBackends) {
  describe(`§6.5 one span per invocation (${backend.name})`, () => {
    it(`§6.5 one span per invocation: settled and progressed invocations carry session, conversation, task, kind, phase, number and outcome (${backend.name})`, () =>
      backend.run(async (storage) => {
        const tracer = new FakeTracer();
        let seen: Span | undefined;
        const twoStep = stepKind("two", {
          execute: async (task, rt, c) => {
            seen = currentSpan(c);
            await patchStep(rt, task, "running", c); // still live: recover runs next
          },
          recover: (task, rt, c) => settleStep(rt, task, "done", c),
        });
        const h = await openWith(storage, [twoStep], { host: { telemetry: { tracer, session: "demo" } } });
        const t = await addStep(h, twoStep, h.rootId);
        expect(await h.drive(call)).toBe("idle");
        await allEnded(h, tracer, 2);
        expect(tracer.summary()).toEqual([
          ["pico.task.execute", t, "progressed", 1],
          ["pico.task.recover", t, "settled", 2],
        ]);
        expect(tracer.spans[0]!.attributes).toEqual({
          "pico.session": "demo",
          "pico.conversation": h.rootId,
          "pico.task.id": t,
          "pico.task.kind": "two",
          "pico.task.status": "pending",
          "pico.method": "execute",
          "pico.phase": "open",
          "pico.invocation": 1,
          "pico.outcome": "progressed",
        });
        expect(tracer.spans[1]!.attributes["pico.task.status"]).toBe("running");
        expect(tracer.spans.map((s) => [s.ends, s.status])).toEqual([
          [1, { status: "ok" }],
          [1, { status: "ok" }],
        ]);
        // The invocation's call carries its span (the telemetry parent of nested work).
        expect(seen).toBeDefined();
      }));

    it(`§6.5 one span per invocation: a marked execute ends cancelled and its abort handler gets its own span (${backend.name})`, () =>
      backend.run(async (storage) => {
        const tracer = new FakeTracer();
        const started = deferred();
        const slow = stepKind("slow", {
          execute: async (_task, _rt, c) => {
            started.resolve();
            await cancellable(deferred().promise, c);
          },
        });
        const h = await openWith(storage, [slow], { host: { telemetry: { tracer } } });
        const t = await addStep(h, slow, h.rootId);
        const driving = h.drive(call);
        await started.promise;
        await h.abortTask(t, call);
        expect(await driving).toBe("idle");
        await allEnded(h, tracer, 2);
        expect(tracer.summary()).toEqual([
          ["pico.task.execute", t, "cancelled", 1],
          ["pico.task.abort", t, "settled", 2],
        ]);
        expect(tracer.spans.every((s) => s.ends === 1 && s.status?.status === "ok")).toBe(true);
        expect(tracer.spans[0]!.errors).toEqual([]); // a cancellation is not an error
        expect("pico.session" in tracer.spans[0]!.attributes).toBe(false); // the host named no session
      }));

    it(`§6.5 one span per invocation: a throwing execute ends failed with the error recorded (${backend.name})`, () =>
      backend.run(async (storage) => {
        const tracer = new FakeTracer();
        const boom = new Error("boom");
        const broken = stepKind("broken", { execute: () => Promise.reject(boom) });
        const h = await openWith(storage, [broken], { host: { telemetry: { tracer } } });
        const t = await addStep(h, broken, h.rootId);
        const drive = await outcome(h.drive(call));
        expect(drive.ok).toBe(false);
        await allEnded(h, tracer, 1);
        expect(tracer.summary()).toEqual([["pico.task.execute", t, "failed", 1]]);
        expect(tracer.spans[0]!.errors).toEqual([boom]);
        expect(tracer.spans[0]!.status).toEqual({ status: "error", message: "Error: boom" });
      }));

    it(`§6.5 one span per invocation: an execute that returns without a transition ends as a contract violation (${backend.name})`, () =>
      backend.run(async (storage) => {
        const tracer = new FakeTracer();
        const lazy = stepKind("lazy", { execute: async () => undefined });
        const h = await openWith(storage, [lazy], { host: { telemetry: { tracer } } });
        const t = await addStep(h, lazy, h.rootId);
        expect((await outcome(h.drive(call))).ok).toBe(false);
        await allEnded(h, tracer, 1);
        expect(tracer.summary()).toEqual([["pico.task.execute", t, "contract", 1]]);
        expect(tracer.spans[0]!.status?.status).toBe("error");
      }));

    it(`§6.5 one span per invocation: a crash ends the dying process's span as closed, and the reopened process recovers under a new span (${backend.name})`, () =>
      backend.run(async (inner) => {
        const tracer = new FakeTracer();
        const running = deferred();
        const crashy = stepKind("crashy", {
          execute: async (task, rt, c) => {
            await patchStep(rt, task, "running", c);
            running.resolve();
            await cancellable(deferred().promise, c);
          },
          recover: (task, rt, c) => settleStep(rt, task, "done", c),
        });
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [crashy], { host: { telemetry: { tracer } } });
        const t = await addStep(h1, crashy, h1.rootId);
        await h1.attach(call);
        await running.promise;
        s1.crash();
        await h1.close(call);
        expect(tracer.summary()).toEqual([["pico.task.execute", t, "closed", 1]]);

        const h2 = await openWith(s1.reopen(), [crashy], { host: { telemetry: { tracer } } });
        expect(await h2.drive(call)).toBe("idle");
        await allEnded(h2, tracer, 2);
        expect(tracer.summary()).toEqual([
          ["pico.task.execute", t, "closed", 1],
          ["pico.task.recover", t, "settled", 1],
        ]);
        expect(tracer.spans.map((s) => s.ends)).toEqual([1, 1]);
      }));

    it(`§6.5 one span per invocation: a throwing tracer degrades to no spans and the task still runs (${backend.name})`, () =>
      backend.run(async (storage) => {
        const reports: unknown[] = [];
        const tracer: Tracer = {
          startSpan: () => {
            throw new PicoError("contract", "tracer down");
          },
        };
        const plain = stepKind("plain");
        const h = await openWith(storage, [plain], { host: { telemetry: { tracer } }, report: (r) => reports.push(r) });
        const t = await addStep(h, plain, h.rootId);
        expect(await h.drive(call)).toBe("idle");
        expect((await h.getTask(t, call))?.state.status).toBe("done");
        expect(reports).toHaveLength(1);
      }));
  });
}
