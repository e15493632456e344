/**
 * Generation outcomes and bookkeeping found missing by review (§4.6, §8.2): the provider stream is
 * cancelled and joined on an early exit, an interrupted attempt with no frames still gets its usage row,
 * and pi-ai's silent and length-stop overflow (an answer that filled the context window) takes the
 * overflow path, on memory and SQLite with the faux provider.
 */
import { describe, expect, it } from "vitest";
import { watchSession, type SessionEvent } from "../../src/core/watch.js";
import type { CommitBatch, Id } from "../../src/storage/records.js";
import { StorageError } from "../../src/storage/storage.js";
import { coreBackends } from "../core/backends.js";
import { FakeClock, flush, until } from "../core/driver-fixtures.js";
import {
  answerNewest,
  call,
  crashAndReopen,
  fauxAssistantMessage,
  GateStorage,
  heldStream,
  lateStream,
  openRig,
  resultOf,
  taskOf,
  tasksOfKind,
  usageRows,
} from "./turn-race-fixtures.js";

/**
 * Scratch commits are refused (definitely, nothing written: an uncertain failure would fail-stop the
 * session at once, §3.3): the frame flusher throws inside the stream loop.
 */
class ScratchFails extends GateStorage {
  override async commit(batch: CommitBatch): Promise<{ first: number; last: number }> {
    if (batch.kind === "scratch") throw new StorageError("too_large", "disk full: the scratch batch is refused");
    return super.commit(batch);
  }
}

for (const backend of coreBackends) {
  describe(`generation bookkeeping (${backend.name})`, () => {
    it(`§4.6 when the frame flusher throws, the provider stream is cancelled and joined before the invocation returns (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new ScratchFails(inner);
        // A provider that notices cancellation late: it finishes only when released.
        const stream = lateStream(["partial"], [" rest"]);
        const rig = await openRig(storage, [stream]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const driving = root.drive(call).catch((error: unknown) => error);
        await stream.streamed.promise;
        // The flusher's failure ends the stream loop: the producer is told to stop ...
        await until(rig.harness, () => rig.provider.signals[0]?.aborted === true, "the provider's signal aborted");
        // ... and joined: the invocation does not return (and fault the session) while it still runs.
        await flush(rig.harness, 20);
        expect(rig.harness.driver.fault).toBeUndefined();
        expect(stream.ended.settled).toBe(false);
        stream.release.resolve();
        expect(await stream.ended.promise).toBe("released");
        await until(rig.harness, () => rig.harness.driver.fault !== undefined, "the invocation returned");
        expect(rig.harness.driver.fault?.message).toMatch(/disk full/);
        await driving;
      }));

    it(`§8.2 a crash before any frame reached disk: the interrupted attempt gets its usage row (unknown), the retry another (${backend.name})`, () =>
      backend.run(async (inner) => {
        const stream = heldStream();
        const rig = await openRig(inner, [stream, answerNewest()]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        void root.drive(call).catch(() => undefined);
        await stream.streamed.promise;
        const again = await crashAndReopen(rig);
        stream.release.resolve();
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done" });
        const gen = (await tasksOfKind(again, "generation"))[0]?.id as Id;
        const rows = await usageRows(again);
        expect(rows.map((r) => [r.taskId, r.usage === null])).toEqual([
          [gen, true],
          [gen, false],
        ]);
      }));

    it(`§8.7 a failing fail-open hook is skipped and reported: session watchers get a report event naming the task, kind and point (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [answerNewest()]);
        rig.kit.hooks.on(rig.kit.generation, "after_response", () => {
          throw new Error("plugin boom");
        });
        const watch = await watchSession(rig.harness, call);
        const events: SessionEvent[] = [];
        watch.start((event) => events.push(event));
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        expect(await root.drive(call)).toBe("idle");
        await flush(rig.harness, 2);
        expect(await resultOf(rig, a.inputId)).toMatchObject({ status: "done" });
        const gen = (await tasksOfKind(rig, "generation"))[0]?.id as Id;
        expect(events.filter((e) => e.type === "report")).toEqual([
          { type: "report", task: gen, kind: "generation", method: "after_response", error: "Error: plugin boom" },
        ]);
        watch.unsubscribe();
      }));

    it(`§8.2 deferred: the task keeps the handle and cutoff in state, polls with sleeps from notBefore until final, records usage per attempt, and a restart resumes polling (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock();
        const model = { provider: "faux", modelId: "x", api: "faux" };
        const deferredAnswer = (id: string) => {
          const message = fauxAssistantMessage([], { stopReason: "deferred" });
          message.deferred = { ...model, id, pollAfterMs: 5000 };
          return { raw: message };
        };
        const rig = await openRig(inner, [deferredAnswer("h1"), deferredAnswer("h2")], { host: { clock } });
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const gen = (await tasksOfKind(rig, "generation"))[0]?.id as Id;
        void root.drive(call).catch(() => undefined);
        const start = clock.now();
        await until(
          rig.harness,
          () =>
            rig.commits.some(
              (c) =>
                c.batch.kind === "main" &&
                c.batch.writes.some((w) => w.type === "patch" && w.id === gen && w.state.status === "deferred"),
            ),
          "deferred",
        );
        const state = (await taskOf(rig, gen)).state as {
          status: string;
          handle: { id: string };
          notBefore: number;
          requestThrough: Id;
        };
        expect(state).toMatchObject({ status: "deferred", handle: { id: "h1" }, notBefore: start + 5000 });
        expect(state.requestThrough).toBeGreaterThan(0);
        await until(rig.harness, () => clock.pending > 0, "the sleep");
        expect(rig.provider.polls).toEqual([]);
        clock.advance(5000);
        // The first poll answers deferred again (a new handle): sleep again.
        await until(rig.harness, () => rig.provider.polls.length === 1, "the first poll");
        await until(
          rig.harness,
          () =>
            ((rig.commits.at(-1)?.batch.kind === "main" ? rig.commits.at(-1)?.batch.writes : []) ?? []).some(
              (w) => w.type === "patch" && w.id === gen,
            ),
          "deferred again",
        );
        expect(rig.provider.polls.map((h) => h.id)).toEqual(["h1"]);
        expect((await taskOf(rig, gen)).state).toMatchObject({
          status: "deferred",
          handle: { id: "h2" },
          requestThrough: state.requestThrough,
        });
        // A restart resumes polling from the stored handle (a start status: execute again).
        const again = await crashAndReopen(rig, { host: { clock } });
        again.provider.push({ raw: fauxAssistantMessage("the late answer") });
        const driving = (await again.harness.root(call)).drive(call);
        await until(again.harness, () => clock.pending > 0, "the sleep after reopen");
        clock.advance(5000);
        expect(await driving).toBe("idle");
        expect(again.provider.polls.map((h) => h.id)).toEqual(["h1", "h2"]);
        expect(await resultOf(again, a.inputId)).toMatchObject({ status: "done" });
        expect((await taskOf(again, gen)).state.status).toBe("done");
        expect((await usageRows(again)).map((r) => r.taskId)).toEqual([gen, gen, gen]);
        expect(again.provider.calls).toBe(1); // one request; the rest were polls
      }));

    for (const outcome of ["silent", "length-stop"] as const) {
      it(`§8.2 ${outcome} overflow (isContextOverflow on a ${outcome === "silent" ? "stop" : "length"} outcome) takes the overflow path: collapse, then the next generation answers (${backend.name})`, () =>
        backend.run(async (inner) => {
          const rig = await openRig(inner, [answerNewest("1"), answerNewest("2")], {
            turn: { collapseKeepEntries: 2 },
          });
          const window = rig.provider.faux.getModel().contextWindow;
          const overflowing = fauxAssistantMessage(outcome === "silent" ? "truncated nonsense" : [], {
            stopReason: outcome === "silent" ? "stop" : "length",
          });
          overflowing.usage = {
            ...overflowing.usage,
            input: window + (outcome === "silent" ? 10 : 0),
            output: 0,
            totalTokens: window + 10,
          };
          rig.provider.push({ raw: overflowing }, fauxAssistantMessage("SUMMARY"), answerNewest("after"));
          const root = await rig.harness.root(call);
          await root.prompt({ input: "one" }, call);
          await root.prompt({ input: "two" }, call);
          const c = await root.accept({ input: "three" }, call);
          expect(await root.drive(call)).toBe("idle");
          const gens = await tasksOfKind(rig, "generation");
          expect(gens.map((g) => g.state.status)).toEqual(["done", "done", "failed", "done"]);
          expect(gens[2]?.state).toMatchObject({ reason: "overflow" });
          expect((await tasksOfKind(rig, "collapse")).map((t) => t.state.status)).toEqual(["done"]);
          expect(await resultOf(rig, c.inputId)).toMatchObject({ status: "done" });
        }));
    }
  });
}
