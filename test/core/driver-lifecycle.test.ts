/**
 * The driver beyond the §10.2 rows (§5.3, §5.4, §6.1-§6.4) on every core backend: reservation rules,
 * dependencies meaning terminal, fail-stop on contract errors, open with unregistered kinds, mutation
 * authority after a mark, shutdown, close, delete, waitForTask, sleep with a fake clock and the host's
 * quarantine hook.
 */
import { describe, expect, it } from "vitest";
import type { Call } from "../../src/core/call.js";
import { PicoError, TaskCancelled } from "../../src/core/errors.js";
import type { Harness } from "../../src/core/harness.js";
import type { FaultReport, InvocationMethod } from "../../src/core/host.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { conversationList, scratchValue, sessionValue } from "../../src/core/state.js";
import type { Id, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import {
  addStep,
  call,
  deferred,
  FakeClock,
  flush,
  GateStorage,
  openWith,
  outcome,
  patchStep,
  settleStep,
  stepKind,
  Trace,
  until,
  type Deferred,
  type StepKind,
  type StepTask,
  Gates,
  cancellable,
} from "./driver-fixtures.js";

function refs(task: Task | undefined): Id[] {
  return (task?.state as { refs?: Id[] } | undefined)?.refs ?? [];
}

async function stored(h: Harness, id: Id): Promise<Task> {
  return storedIn(h.storage, id);
}

async function storedIn(storage: Storage, id: Id): Promise<Task> {
  const task = (await storage.getTasks([id])).get(id);
  if (task === undefined) throw new Error(`task ${id} missing`);
  return task;
}

function codeOf(r: { ok: true } | { ok: false; error: unknown }): string | undefined {
  return r.ok ? undefined : (r.error as PicoError).code;
}

async function spawnChild(h: Harness, owner: StepTask, kind: StepKind, c: Call): Promise<[Id, Id]> {
  return h.commitBound(c, { conversationId: owner.conversationId }, (b) => {
    const conversation = b.createConversation({ owner: owner.id });
    const child = b.task(kind, conversation, {
      state: { status: "pending", tag: `${owner.state.tag}.child`, refs: [] },
    });
    b.push({
      type: "patch",
      id: owner.id,
      role: "inflight",
      state: { status: "running", tag: owner.state.tag, refs: [conversation, child] },
      owns: [conversation],
    });
    return [conversation, child] as [Id, Id];
  });
}

for (const backend of coreBackends) {
  describe(`driver reservation and dependencies (${backend.name})`, () => {
    it(`a marked task aborts irrespective of after; a start task executes only when every dependency is terminal (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const gates = new Gates();
        const depStatusAtStart = new Map<string, string[]>();
        let h: Harness | undefined;
        const k = stepKind("k", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            depStatusAtStart.set(
              task.state.tag,
              await Promise.all(task.after.map(async (d) => (await stored(h as Harness, d)).state.status)),
            );
            await gates.get(task.state.tag).promise;
            await settleStep(rt, task, "done", c);
          }),
          abort: trace.wrap("abort", (task, rt, c) => settleStep(rt, task, "aborted", c)),
        });
        h = await openWith(inner, [k]);
        await h.attach(call);
        const d = await addStep(h, k, h.rootId, { tag: "dep" });
        const a = await addStep(h, k, h.rootId, { tag: "a", after: [d] });
        const b = await addStep(h, k, h.rootId, { tag: "b", after: [d] });
        await flush(h);
        expect(trace.events).toEqual(["execute:start:dep"]);
        await h.abortTask(a, call);
        await until(h, () => trace.count("abort:end:a") === 1, "abort a");
        expect(trace.count("execute:start:a")).toBe(0);
        expect((await stored(h, a)).state.status).toBe("aborted");
        expect(trace.count("execute:start:b")).toBe(0);
        gates.open("dep");
        gates.open("b");
        expect(await h.drive(call)).toBe("idle");
        expect(depStatusAtStart.get("b")).toEqual(["done"]);
        expect((await stored(h, b)).state.status).toBe("done");
      }));

    it(`an inflight task recovers after reopen; reopen starts nothing until driven (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const k = stepKind("k", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            if (task.state.tag !== "r") return settleStep(rt, task, "done", c);
            await patchStep(rt, task, "running", c);
            await deferred().promise; // the process dies here
          }),
          recover: trace.wrap("recover", (task, rt, c) => settleStep(rt, task, "done", c)),
        });
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [k]);
        const t = await addStep(h1, k, h1.rootId, { tag: "r" });
        const pending = await addStep(h1, k, h1.rootId, { tag: "p", after: [t] });
        await h1.attach(call);
        await until(h1, () => h1.driver.liveTask(t)?.role === "inflight", "inflight");
        s1.crash();
        const invoked: [Id, InvocationMethod][] = [];
        const h2 = await openWith(s1.reopen(), [k], {
          host: { beforeInvoke: (task, method) => (invoked.push([task.id, method]), true) },
        });
        const seen = await h2.inspect(call);
        expect(seen.inflight.map((x) => x.id)).toEqual([t]);
        expect(seen.start.map((x) => x.id)).toEqual([pending]);
        await flush(h2);
        expect(invoked).toEqual([]);
        expect(await h2.drive(call)).toBe("idle");
        await until(h2, () => trace.count("execute:end:p") === 1, "p returns");
        expect(invoked[0]).toEqual([t, "recover"]);
        // p starts once r is terminal; r's slot may still be unwinding (§6.1), so only the prefix is ordered.
        expect(trace.events.slice(0, 2)).toEqual(["execute:start:r", "recover:start:r"]);
        expect([...trace.events].sort()).toEqual([
          "execute:end:p",
          "execute:start:p",
          "execute:start:r",
          "recover:end:r",
          "recover:start:r",
        ]);
        expect((await stored(h2, t)).state.status).toBe("done");
        expect((await stored(h2, pending)).state.status).toBe("done");
      }));

    it(`§5.4 dependencies mean terminal, not successful: a failed and an aborted dependency still start the dependent (${backend.name})`, () =>
      backend.run(async (inner) => {
        let h: Harness | undefined;
        const seen: string[] = [];
        const gate = deferred();
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            if (task.state.tag === "fails") return settleStep(rt, task, "failed", c);
            if (task.state.tag === "held") {
              await cancellable(gate.promise, c);
              return settleStep(rt, task, "done", c);
            }
            for (const d of task.after) seen.push((await stored(h as Harness, d)).state.status);
            await settleStep(rt, task, "done", c);
          },
        });
        h = await openWith(inner, [k]);
        const f = await addStep(h, k, h.rootId, { tag: "fails" });
        const held = await addStep(h, k, h.rootId, { tag: "held" });
        const dependent = await addStep(h, k, h.rootId, { tag: "dependent", after: [f, held] });
        const drive = h.drive(call);
        await until(h, () => h?.driver.liveTask(f) === undefined, "f fails");
        await h.abortTask(held, call);
        expect(await drive).toBe("idle");
        expect(seen).toEqual(["failed", "aborted"]);
        expect((await stored(h, dependent)).state.status).toBe("done");
      }));
  });

  describe(`driver fail-stop (${backend.name})`, () => {
    const cases: {
      name: string;
      method: InvocationMethod;
      body: (task: StepTask, rt: TaskRuntime, c: Call) => Promise<void>;
      error?: string;
    }[] = [
      { name: "returns without a status transition", method: "execute", body: async () => undefined },
      {
        name: "makes only a state-only patch in the same status",
        method: "execute",
        body: (task, rt, c) => rt.commit((tx) => tx.patch(task, "pending", { tag: task.state.tag, refs: [42] }), c),
      },
      {
        name: "whose transition commit failed",
        method: "execute",
        body: async (task, rt, c) => {
          await rt
            .commit((tx) => {
              tx.patch(task, "running", { tag: task.state.tag, refs: [] });
              throw new Error("builder changed its mind");
            }, c)
            .catch(() => undefined);
        },
      },
      {
        name: "throws",
        method: "execute",
        error: "provider exploded",
        body: async () => {
          throw new Error("provider exploded");
        },
      },
    ];
    for (const tc of cases) {
      it(`an execute that ${tc.name} fail-stops the session; the report names task, kind, method and error; drives reject; reopen starts nothing (${backend.name})`, () =>
        backend.run(async (inner) => {
          const bystanderGate = deferred();
          let bystanderSignalled = false;
          const broken = stepKind("broken", { execute: tc.body });
          const bystander = stepKind("bystander", {
            execute: async (task, rt, c) => {
              c.abortSignal?.addEventListener("abort", () => (bystanderSignalled = true));
              await bystanderGate.promise;
              await settleStep(rt, task, "done", c).catch(() => undefined);
            },
          });
          const faults: FaultReport[] = [];
          const s1 = new GateStorage(inner);
          const h1 = await openWith(s1, [broken, bystander], { host: { faulted: (r) => faults.push(r) } });
          const by = await addStep(h1, bystander, h1.rootId, { tag: "by" });
          const other = await h1.commit((tx) => tx.createConversation({}), call);
          const otherDrive = outcome((await h1.conversation(other, call))!.drive(call));
          await h1.attach(call);
          await flush(h1);
          const bad = await addStep(h1, broken, h1.rootId, { tag: "bad" });
          const drive = await outcome(h1.drive(call));
          expect(codeOf(drive)).toBe("faulted");
          expect(await otherDrive).toEqual({ ok: true, value: "idle" }); // an idle scope had already resolved
          expect(faults).toHaveLength(1);
          const report = faults[0] as FaultReport;
          expect(report).toMatchObject({ taskId: bad, kind: "broken", method: tc.method });
          expect(report.message).toContain(`task ${bad}`);
          expect(report.message).toContain("broken");
          expect(report.message).toContain(tc.method);
          if (tc.error !== undefined) {
            expect((report.error as Error).message).toBe(tc.error);
            expect(report.message).toContain(tc.error);
          }
          expect(h1.driver.phase).toBe("faulted");
          expect(codeOf(await outcome(h1.commit((tx) => tx.createConversation({}), call)))).toBe("faulted");
          expect(codeOf(await outcome(h1.abortTask(bad, call)))).toBe("faulted");
          expect(codeOf(await outcome(h1.shutdown(call)))).toBe("faulted");
          await flush(h1);
          expect(bystanderSignalled).toBe(true);
          expect(s1.closed).toBe(false);
          bystanderGate.resolve();
          await until(h1, () => s1.closed, "closed after joining");
          expect((await storedIn(inner, bad)).state.status).toBe("pending"); // no manufactured outcome

          // Reopen starts nothing: inspect, then drive with a kind that understands the state.
          const invoked: Id[] = [];
          const s2 = s1.reopen();
          const h2 = await openWith(s2, [broken, bystander], {
            host: { beforeInvoke: (task) => (invoked.push(task.id), true) },
          });
          const seen = await h2.inspect(call);
          expect(seen.start.map((t) => t.id)).toEqual([by, bad]);
          await flush(h2);
          expect(invoked).toEqual([]);
          expect(s2.batches).toHaveLength(0);
          await h2.replaceTaskKind(stepKind("broken") as never, call);
          await h2.replaceTaskKind(stepKind("bystander") as never, call);
          expect(await h2.drive(call)).toBe("idle");
          expect((await stored(h2, bad)).state.status).toBe("done");
          expect(h2.fault).toBeUndefined();
        }));
    }

    it(`a host whose invocation bookkeeping throws fail-stops the session and starts nothing (${backend.name})`, () =>
      backend.run(async (inner) => {
        let started = 0;
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            started += 1;
            await settleStep(rt, task, "done", c);
          },
        });
        const faults: FaultReport[] = [];
        const h = await openWith(inner, [k], {
          host: {
            beforeInvoke: () => {
              throw new Error("disk full");
            },
            faulted: (r) => faults.push(r),
          },
        });
        const t = await addStep(h, k, h.rootId);
        expect(codeOf(await outcome(h.drive(call)))).toBe("faulted");
        expect(started).toBe(0);
        expect(faults[0]).toMatchObject({ taskId: t, kind: "k", method: "execute" });
        expect(String(faults[0]?.message)).toContain("disk full");
        await h.close(call); // nothing reserved is left for close to wait on
      }));

    it(`a recover that returns without a transition fail-stops with method recover (${backend.name})`, () =>
      backend.run(async (inner) => {
        const k = stepKind("k", {
          execute: (task, rt, c) => patchStep(rt, task, "running", c),
          recover: async () => undefined,
        });
        const faults: FaultReport[] = [];
        const h = await openWith(inner, [k], { host: { faulted: (r) => faults.push(r) } });
        const t = await addStep(h, k, h.rootId);
        expect(codeOf(await outcome(h.drive(call)))).toBe("faulted");
        expect(faults[0]).toMatchObject({ taskId: t, kind: "k", method: "recover" });
      }));
  });

  describe(`driver open with unregistered kinds (${backend.name})`, () => {
    it(`open settles a live foreground task of an unregistered kind as orphaned and parks a background one until its kind returns (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const ghost = stepKind("ghost", {
          execute: async (task, rt, c) => {
            await patchStep(rt, task, "running", c);
            await deferred().promise; // crash while inflight
          },
          recover: trace.wrap("recover", (task, rt, c) => settleStep(rt, task, "done", c)),
        });
        const plain = stepKind("plain");
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [ghost, plain]);
        const fg = await addStep(h1, ghost, h1.rootId, { tag: "fg", refs: [7] });
        const bg = await addStep(h1, ghost, h1.rootId, { tag: "bg", background: true });
        await h1.attach(call);
        await until(
          h1,
          () => h1.driver.liveTask(fg)?.role === "inflight" && h1.driver.liveTask(bg)?.role === "inflight",
          "inflight",
        );
        s1.crash();

        const s2 = s1.reopen();
        const h2 = await openWith(s2, [plain]);
        const seen = await h2.inspect(call);
        expect(seen.orphaned.map((t) => [t.id, t.state.status, t.role])).toEqual([[fg, "orphaned", "terminal"]]);
        expect(seen.parked.map((t) => t.id)).toEqual([bg]);
        expect(seen.start).toEqual([]);
        expect(seen.inflight).toEqual([]);
        const orphan = await stored(h2, fg);
        expect(orphan.role).toBe("terminal");
        expect(orphan.state).toEqual({ status: "orphaned", tag: "fg", refs: [7] }); // keeps its fields
        // A dependent of the orphan starts; the parked task does not count for idleness.
        const dependent = await addStep(h2, plain, h2.rootId, { tag: "dep", after: [fg] });
        expect(await h2.drive(call)).toBe("idle");
        expect((await stored(h2, dependent)).state.status).toBe("done");
        expect(trace.events).toEqual([]);
        expect((await stored(h2, bg)).role).toBe("inflight");
        // Registering the kind resumes the parked task through recover.
        await h2.registerTaskKind(ghost as never, call);
        await until(h2, () => h2.driver.liveCount() === 0, "parked task recovers");
        expect(trace.events).toEqual(["recover:start:bg", "recover:end:bg"]);
        expect((await stored(h2, bg)).state.status).toBe("done");
      }));
  });

  describe(`driver cancellation (${backend.name})`, () => {
    it(`after the mark, an execute's main and scratch writes reject TaskCancelled before their builders run (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = deferred();
        const gate = deferred();
        const builderRan: string[] = [];
        const errors: unknown[] = [];
        const progress = scratchValue<number>("progress");
        let executeRuntime: TaskRuntime | undefined;
        let executeCall: Call | undefined;
        const staleErrors: unknown[] = [];
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            executeRuntime = rt;
            executeCall = c;
            await rt.scratch((sc) => sc.value(progress).set(1), c); // before the mark: authoritative
            started.resolve();
            await gate.promise;
            for (const attempt of [
              () => rt.commit((tx) => (builderRan.push("main"), tx.patch(task, "running", { tag: "x", refs: [] })), c),
              () => rt.scratch((sc) => (builderRan.push("scratch"), sc.value(progress).set(2)), c),
              () => rt.value(sessionValue<number>("v")).set(1, c),
              () => rt.abortTask(task.id, c),
            ]) {
              errors.push(
                await attempt().then(
                  () => "ok",
                  (e: unknown) => e,
                ),
              );
            }
          },
          abort: async (task, rt, c) => {
            // The fresh invocation may write; the stale execute identity may not.
            staleErrors.push(
              await (executeRuntime as TaskRuntime)
                .commit(() => undefined, executeCall as Call)
                .then(
                  () => "ok",
                  (e: unknown) => e,
                ),
            );
            staleErrors.push(
              await rt
                .commit(() => undefined, executeCall as Call)
                .then(
                  () => "ok",
                  (e: unknown) => e,
                ),
            );
            await rt.scratch((sc) => sc.value(progress).set(3), c);
            await settleStep(rt, task, "aborted", c);
          },
        });
        const h = await openWith(inner, [k]);
        const t = await addStep(h, k, h.rootId);
        const drive = h.drive(call);
        await started.promise;
        await h.abortTask(t, call);
        gate.resolve();
        expect(await drive).toBe("idle");
        expect(builderRan).toEqual([]);
        expect(errors.slice(0, 3).every((e) => e instanceof TaskCancelled)).toBe(true);
        expect(errors[3]).toBeInstanceOf(TaskCancelled); // a marked execute cannot mark either
        expect(staleErrors.map((e) => (e as PicoError).code)).toEqual(["contract", "contract"]);
        expect((await stored(h, t)).state.status).toBe("aborted");
        expect(h.fault).toBeUndefined();
      }));

    it(`a stale runtime cannot mark other tasks after its invocation returned (${backend.name})`, () =>
      backend.run(async (inner) => {
        let leaked: [TaskRuntime, Call] | undefined;
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            leaked = [rt, c];
            await settleStep(rt, task, "done", c);
          },
        });
        const idle = stepKind("idle");
        const h = await openWith(inner, [k, idle]);
        const other = await h.commit((tx) => tx.createConversation({}), call);
        const victim = await addStep(h, idle, other, { tag: "victim" });
        await addStep(h, k, h.rootId);
        await (await h.root(call)).drive(call);
        await until(h, () => !h.driver.busy, "the invocation returned");
        const [rt, c] = leaked as [TaskRuntime, Call];
        expect(codeOf(await outcome(rt.abortTask(victim, c)))).toBe("contract");
        expect(codeOf(await outcome(rt.markIfLive([victim], c)))).toBe("contract");
        expect(h.driver.liveTask(victim)?.abort).toBeUndefined();
      }));
  });

  describe(`driver lifecycle (${backend.name})`, () => {
    it(`shutdown commits one marking batch, runs abort handlers, then closes; it resolves only once storage is closed (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const started = new Gates();
        const k = stepKind("k", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            started.open(task.state.tag);
            await cancellable(deferred().promise, c);
          }),
          abort: trace.wrap("abort", (task, rt, c) => settleStep(rt, task, "aborted", c)),
        });
        const queued = conversationList<string>("test.queue", { rewind: false });
        const storage = new GateStorage(inner);
        const h = await openWith(storage, [k]);
        const root = await h.root(call);
        await root.list(queued).append("waiting", call);
        const a = await addStep(h, k, root.id, { tag: "a" });
        const b = await addStep(h, k, root.id, { tag: "b", background: true });
        const other = await h.commit((tx) => tx.createConversation({}), call);
        const c3 = await addStep(h, k, other, { tag: "c" }); // not attached: marked, aborted by shutdown's session serve
        void root.drive(call);
        await Promise.all([started.get("a").promise, started.get("b").promise]);
        const before = storage.batches.length;
        const sd = h.shutdown(call);
        expect(h.shutdown(call)).toBe(sd); // repeated lifecycle calls share completion
        await sd;
        expect(storage.closed).toBe(true);
        expect(h.driver.phase).toBe("closed");
        const batches = storage.batches.slice(before);
        expect(batches[0]?.writes.map((w) => (w.type === "patch" ? w.id : -1))).toEqual([a, b, c3]);
        expect(batches.slice(1).every((batch) => batch.writes.every((w) => w.type === "settle"))).toBe(true);
        for (const id of [a, b, c3]) expect((await storedIn(inner, id)).state.status).toBe("aborted");
        expect(trace.count("execute:start:c")).toBe(0);
        expect(
          (
            await inner.readList(
              { scope: { conversation: root.id }, namespace: "test.queue", rewind: false },
              { limit: 10 },
            )
          ).items.map((e) => e.value),
        ).toEqual(["waiting"]);
        expect(await h.drive(call)).toBe("closed");
      }));

    it(`an explicit close interrupts shutdown: shutdown rejects and the remaining marked task aborts after reopen (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const started = deferred();
        let holdAbort = true;
        const abortSeen = deferred();
        const k = stepKind("k", {
          execute: trace.wrap("execute", async (_task, _rt, c) => {
            started.resolve();
            await cancellable(deferred().promise, c);
          }),
          abort: trace.wrap("abort", async (task, rt, c) => {
            if (holdAbort) {
              abortSeen.resolve();
              await cancellable(deferred().promise, c); // only close/fault cancels an abort handler
            }
            await settleStep(rt, task, "aborted", c);
          }),
        });
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [k]);
        const t = await addStep(h1, k, h1.rootId);
        await h1.attach(call);
        await started.promise;
        const sd = outcome(h1.shutdown(call));
        await abortSeen.promise;
        await h1.close(call);
        const result = await sd;
        expect(codeOf(result)).toBe("closed");
        expect(s1.closed).toBe(true);
        expect(trace.events).toEqual(["execute:start:t", "execute:threw:t", "abort:start:t", "abort:threw:t"]);
        // No outcome was written; the mark survives and the abort runs after reopen.
        holdAbort = false;
        const h2 = await openWith(s1.reopen(), [k]);
        expect(h2.driver.liveTask(t)?.abort).toBe(true);
        expect(await h2.drive(call)).toBe("idle");
        expect((await stored(h2, t)).state.status).toBe("aborted");
      }));

    it(`a mark on a task nobody serves stays pending until a drive attaches its scope (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const k = stepKind("k", { abort: trace.wrap("abort", (task, rt, c) => settleStep(rt, task, "aborted", c)) });
        const h = await openWith(inner, [k]);
        const other = await h.commit((tx) => tx.createConversation({}), call);
        const t = await addStep(h, k, other);
        await (await h.root(call)).drive(call); // attaching the root does not serve an unrelated conversation
        await h.abortTask(t, call);
        await flush(h);
        expect(trace.events).toEqual([]);
        expect(h.driver.liveTask(t)?.abort).toBe(true);
        expect(await (await h.conversation(other, call))!.drive(call)).toBe("idle");
        expect(trace.events).toContain("abort:start:t");
      }));

    it(`a task that already settled may wait on itself or on its dependents while it unwinds (${backend.name})`, () =>
      backend.run(async (inner) => {
        const results: unknown[] = [];
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            const dependent = task.state.refs[0] as Id;
            await settleStep(rt, task, "done", c);
            results.push(await rt.waitForTask(task.id, undefined, c));
            results.push(await rt.waitForTask(dependent, undefined, c));
          },
        });
        const plain = stepKind("plain");
        const h = await openWith(inner, [k, plain]);
        await h.commit((tx) => {
          const next = (h.storage.lastSeq as Id) + 2;
          const w = tx.task(k, { conversationId: h.rootId, state: { status: "pending", tag: "w", refs: [next] } });
          tx.task(plain, { conversationId: h.rootId, state: { status: "pending", tag: "d", refs: [] }, after: [w] });
        }, call);
        expect(await h.drive(call)).toBe("idle");
        await until(h, () => results.length === 2, "waits");
        expect(results).toEqual([true, true]);
      }));

    it(`shutdown or close from inside a task rejects without poisoning the host's later shutdown (${backend.name})`, () =>
      backend.run(async (inner) => {
        let h: Harness | undefined;
        const attempts: unknown[] = [];
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            attempts.push(
              await (h as Harness).shutdown(c).then(
                () => "ok",
                (e: unknown) => e,
              ),
            );
            attempts.push(
              await (h as Harness).close(c).then(
                () => "ok",
                (e: unknown) => e,
              ),
            );
            attempts.push(
              await (h as Harness).drive(c).then(
                () => "ok",
                (e: unknown) => e,
              ),
            );
            await settleStep(rt, task, "done", c);
          },
        });
        const storage = new GateStorage(inner);
        h = await openWith(storage, [k]);
        await addStep(h, k, h.rootId);
        const drive = h.drive(call);
        await until(h, () => attempts.length === 3, "attempts");
        expect(attempts.map((e) => (e as PicoError).code)).toEqual(["contract", "contract", "contract"]);
        expect(await drive).toBe("idle");
        await h.shutdown(call);
        expect(storage.closed).toBe(true);
      }));

    it(`an execute that swallows its cancellation during shutdown is not a fault (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = deferred();
        const gate = deferred();
        const k = stepKind("k", {
          execute: async (task, rt, c) => {
            started.resolve();
            await gate.promise;
            await patchStep(rt, task, "running", c).catch(() => undefined); // rejected: swallowed, then returns
          },
        });
        const storage = new GateStorage(inner);
        const h = await openWith(storage, [k]);
        await addStep(h, k, h.rootId);
        await h.attach(call);
        await started.promise;
        // A host commit holds the line at the barrier; shutdown and the task's commit queue behind it.
        const atBarrier = storage.pause();
        const hostCommit = h.commit((tx) => tx.value(sessionValue<number>("x")).set(1), call);
        await atBarrier;
        const sd = outcome(h.shutdown(call));
        await new Promise((r) => setTimeout(r, 0));
        gate.resolve();
        await new Promise((r) => setTimeout(r, 0));
        storage.resume();
        await hostCommit;
        expect(await sd).toEqual({ ok: true, value: undefined });
        expect(h.fault).toBeUndefined();
      }));

    it(`Host fork with abort during shutdown is refused (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = deferred();
        const gate = deferred();
        const k = stepKind("k", {
          execute: async () => {
            started.resolve();
            await gate.promise; // ignores its cancellation, so shutdown stays in stopping until it returns
          },
        });
        const storage = new GateStorage(inner);
        const h = await openWith(storage, [k]);
        const root = await h.root(call);
        await addStep(h, k, root.id);
        await h.attach(call);
        await started.promise;
        const sd = outcome(h.shutdown(call));
        await until(h, () => h.driver.phase === "stopping", "stopping");
        const seq = storage.lastSeq;
        // §6.4: while stopping only abort cleanup commits; a fork that also marks creates a conversation.
        expect(codeOf(await outcome(root.fork({ at: "start", abort: true }, call)))).toBe("closed");
        expect(storage.lastSeq).toBe(seq);
        gate.resolve();
        expect(await sd).toEqual({ ok: true, value: undefined });
        expect(h.fault).toBeUndefined();
      }));

    it(`close joins running invocations, even ones ignoring the signal, and closes storage after (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = deferred();
        const gate = deferred();
        let signalled = false;
        const k = stepKind("k", {
          execute: async (_task, _rt, c) => {
            c.abortSignal?.addEventListener("abort", () => (signalled = true));
            started.resolve();
            await gate.promise;
          },
        });
        const storage = new GateStorage(inner);
        const h = await openWith(storage, [k]);
        await addStep(h, k, h.rootId);
        const drive = h.drive(call);
        await started.promise;
        let closed = false;
        const closing = h.close(call).then(() => (closed = true));
        expect(await drive).toBe("closed");
        await flush(h);
        expect(signalled).toBe(true);
        expect(closed).toBe(false);
        expect(storage.closed).toBe(false);
        expect(h.close(call)).toBe(h.close(call));
        gate.resolve();
        await closing;
        expect(storage.closed).toBe(true);
        expect(h.driver.phase).toBe("closed");
        expect(codeOf(await outcome(h.commit((tx) => tx.createConversation({}), call)))).toBe("closed");
      }));

    it(`delete rejects while the conversation's subtree has live tasks or outstanding invocations (${backend.name})`, () =>
      backend.run(async (inner) => {
        let h: Harness | undefined;
        const childSettled = deferred();
        const childReturn = deferred();
        const toolReturn = deferred();
        const child = stepKind("child", {
          execute: async (task, rt, c) => {
            await settleStep(rt, task, "done", c);
            childSettled.resolve();
            await childReturn.promise; // still unwinding after its settlement
          },
        });
        const tool = stepKind("tool", {
          execute: async (task, rt, c) => {
            const [conversation, x] = await spawnChild(h as Harness, task, child, c);
            await (await rt.conversation(conversation, c))?.drive(c);
            await settleStep(rt, task, "done", c, [conversation, x]);
            await toolReturn.promise;
          },
        });
        h = await openWith(inner, [tool, child]);
        const container = await h.commit((tx) => tx.createConversation({}), call);
        const t = await addStep(h, tool, container, { tag: "t" });
        void (await h.conversation(container, call))?.drive(call);
        await childSettled.promise;
        await until(
          h,
          () => h?.driver.liveTask(t)?.state.status === "done" || h?.driver.liveTask(t) === undefined,
          "tool settles",
        );
        const conversation = refs(await stored(h, t))[0] as Id;
        // The child task is terminal but its invocation still unwinds: its conversation is still busy.
        expect(codeOf(await outcome(h.deleteConversation(conversation, call)))).toBe("conflict");
        expect(codeOf(await outcome(h.deleteConversation(container, call)))).toBe("conflict");
        childReturn.resolve();
        await until(h, () => !h?.driver.subtreeBusy(conversation), "child returns");
        await h.deleteConversation(conversation, call);
        expect(await h.conversation(conversation, call)).toBeUndefined();
        expect(codeOf(await outcome(h.deleteConversation(container, call)))).toBe("conflict"); // tool still unwinding
        toolReturn.resolve();
        await until(h, () => !h?.driver.subtreeBusy(container), "tool returns");
        await h.deleteConversation(container, call);
      }));
  });

  describe(`driver waits and time (${backend.name})`, () => {
    it(`waitForTask honours its budget on the injected clock, resolves when the task is terminal, rejects known self and dependency-cycle waits (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock();
        const jobGate = deferred();
        const results: unknown[] = [];
        const waiting = deferred();
        let h: Harness | undefined;
        const job = stepKind("job", {
          execute: async (task, rt, c) => {
            await jobGate.promise;
            await settleStep(rt, task, "done", c);
          },
        });
        const waiter = stepKind("waiter", {
          execute: async (task, rt, c) => {
            const [jobId, dependentId] = task.state.refs as [Id, Id];
            results.push(
              await rt.waitForTask(task.id, undefined, c).then(String, (e: unknown) => (e as PicoError).code),
            );
            results.push(
              await rt.waitForTask(dependentId, undefined, c).then(String, (e: unknown) => (e as PicoError).code),
            );
            const budgeted = rt.waitForTask(jobId, { budgetMs: 1000 }, c);
            waiting.resolve();
            results.push(await budgeted);
            results.push(await rt.waitForTask(jobId, undefined, c));
            results.push(await rt.waitForTask(jobId, { budgetMs: 5 }, c)); // already terminal
            await settleStep(rt, task, "done", c);
          },
        });
        const plain = stepKind("plain");
        h = await openWith(inner, [job, waiter, plain], { host: { clock } });
        const j = await addStep(h, job, h.rootId, { tag: "job", background: true });
        // The waiter and its dependent are created together: the dependent waits for the waiter.
        const w = await h.commit((tx) => {
          const wid = tx.task(waiter, {
            conversationId: h?.rootId as Id,
            state: { status: "pending", tag: "w", refs: [j, (h?.storage.lastSeq as Id) + 2] },
          });
          tx.task(plain, {
            conversationId: h?.rootId as Id,
            state: { status: "pending", tag: "d", refs: [] },
            after: [wid],
          });
          return wid;
        }, call);
        const drive = h.drive(call);
        await waiting.promise;
        await flush(h);
        expect(results).toEqual(["contract", "contract"]);
        clock.advance(999);
        await flush(h);
        expect(results).toHaveLength(2);
        clock.advance(1);
        await until(h, () => results.length === 3, "budget expires");
        expect(results[2]).toBe(false);
        jobGate.resolve();
        expect(await drive).toBe("idle");
        expect(results.slice(3)).toEqual([true, true]);
        expect((await stored(h, w)).state.status).toBe("done");
      }));

    it(`waitForTask and drive after close do not hang: they reject or resolve closed (${backend.name})`, () =>
      backend.run(async (inner) => {
        let leaked: [TaskRuntime, Call] | undefined;
        const started = deferred();
        const gate = deferred();
        const k = stepKind("k", {
          execute: async (_task, rt, c) => {
            leaked = [rt, c];
            started.resolve();
            await gate.promise;
          },
        });
        const h = await openWith(inner, [k]);
        await addStep(h, k, h.rootId);
        const elsewhere = await h.commit((tx) => tx.createConversation({}), call);
        const unserved = await addStep(h, k, elsewhere); // live, never served
        await (await h.root(call)).commit(() => undefined, call);
        void (await h.root(call)).drive(call);
        await started.promise;
        const closing = h.close(call);
        await flush(h);
        const [rt, c] = leaked as [TaskRuntime, Call];
        expect(codeOf(await outcome(rt.waitForTask(unserved, undefined, c)))).toBe("closed");
        expect(await h.drive(call)).toBe("closed");
        gate.resolve();
        await closing;
      }));

    it(`sleep reports wake times to the host, wakes on the fake clock and is cancelled by a mark (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock(10_000);
        const wakes: (number | undefined)[] = [];
        const sleeping = new Gates();
        const outcomes: string[] = [];
        const k = stepKind("sleeper", {
          execute: async (task, rt, c) => {
            const wakeAt = rt.now() + (task.state.refs[0] as number);
            const slept = rt.sleep(wakeAt, c);
            sleeping.open(task.state.tag);
            try {
              await slept;
              outcomes.push(`${task.state.tag}:woke@${rt.now()}`);
            } catch (e) {
              outcomes.push(`${task.state.tag}:cancelled`);
              throw e;
            }
            await settleStep(rt, task, "done", c);
          },
        });
        const h = await openWith(inner, [k], { host: { clock, wakeChanged: (w) => wakes.push(w) } });
        await h.attach(call);
        await addStep(h, k, h.rootId, { tag: "long", refs: [5000] });
        await sleeping.get("long").promise;
        await until(h, () => wakes.length === 1, "wake reported");
        expect(wakes).toEqual([15_000]);
        const short = await addStep(h, k, h.rootId, { tag: "short", refs: [2000] });
        await sleeping.get("short").promise;
        await until(h, () => wakes.length === 2, "earlier wake reported");
        expect(wakes).toEqual([15_000, 12_000]);
        // Cancellation during sleep: the mark rejects the sleep; the abort handler settles.
        await h.abortTask(short, call);
        await until(h, () => h.driver.liveTask(short) === undefined, "short aborted");
        expect(outcomes).toEqual(["short:cancelled"]);
        expect(wakes.at(-1)).toBe(15_000);
        clock.advance(4999);
        await flush(h);
        expect(outcomes).toEqual(["short:cancelled"]);
        clock.advance(1);
        expect(await h.drive(call)).toBe("idle");
        expect(outcomes).toEqual(["short:cancelled", "long:woke@15000"]);
        expect(wakes.at(-1)).toBeUndefined();
        expect((await stored(h, short)).state.status).toBe("aborted");
      }));

    it(`an execute whose kind declares sleepsUntil is asleep from its dispatch: its wake is reported at once and it is never busy before it sleeps (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock(10_000);
        const wakes: (number | undefined)[] = [];
        const busy: boolean[] = [];
        const entered = new Gates();
        const proceed = new Gates();
        const execute = async (
          task: Task & { state: { tag: string; refs: number[] } },
          rt: TaskRuntime,
          c: Call,
        ): Promise<void> => {
          entered.open(task.state.tag);
          await proceed.get(task.state.tag).promise;
          await rt.sleep(task.state.refs[0] as number, c);
          await settleStep(rt, task as Parameters<typeof settleStep>[1], "done", c);
        };
        const parker = {
          ...stepKind("parker", { execute }),
          sleepsUntil: (state: { status: string; refs: number[] }) =>
            state.status === "pending" ? state.refs[0] : undefined,
        };
        const plain = stepKind("plain", { execute });
        const h = await openWith(inner, [parker, plain], {
          host: { clock, wakeChanged: (w) => wakes.push(w), busyChanged: (b) => busy.push(b) },
        });
        await h.attach(call);
        await addStep(h, parker, h.rootId, { tag: "p", refs: [15_000], background: true });
        await entered.get("p").promise;
        // Dispatched, not yet in its sleep: not busy, and its wake time is already known.
        expect(h.driver.busy).toBe(false);
        expect(h.driver.nextWake).toBe(15_000);
        expect(wakes).toEqual([15_000]);
        proceed.open("p");
        await flush(h);
        expect(wakes).toEqual([15_000]);
        expect(busy).toEqual([]);
        clock.advance(5_000);
        await until(h, () => h.driver.liveCount() === 0, "the parker ran");
        expect(busy).toEqual([true, false]);
        expect(wakes).toEqual([15_000, undefined]);
        // Without sleepsUntil the same execute is busy until it sleeps.
        await addStep(h, plain, h.rootId, { tag: "q", refs: [30_000], background: true });
        await entered.get("q").promise;
        expect(h.driver.busy).toBe(true);
        proceed.open("q");
        await until(h, () => h.driver.nextWake === 30_000, "the plain one asleep");
        expect(busy).toEqual([true, false, true, false]);
        // A wake that passed before the execute reached its sleep: the sleep returns at once and it runs.
        await addStep(h, parker, h.rootId, { tag: "late", refs: [20_000], background: true });
        await entered.get("late").promise;
        expect(h.driver.nextWake).toBe(20_000);
        clock.advance(10_000);
        proceed.open("late");
        await until(
          h,
          () => h.driver.liveCount() === 1 && wakes.at(-1) === 30_000,
          "the late one ran and only the plain one sleeps",
        );
        clock.advance(10_000);
        await until(h, () => h.driver.liveCount() === 0, "all ran");
      }));

    it(`sleep(Infinity) parks with no wake time until interruptSleep; an interrupt that comes before the sleep is not lost (${backend.name})`, () =>
      backend.run(async (inner) => {
        const clock = new FakeClock(10_000);
        const wakes: (number | undefined)[] = [];
        const entered = new Gates();
        const proceed = new Gates();
        const outcomes: string[] = [];
        const execute = async (
          task: Task & { state: { tag: string; refs: number[] } },
          rt: TaskRuntime,
          c: Call,
        ): Promise<void> => {
          entered.open(task.state.tag);
          await proceed.get(task.state.tag).promise;
          await rt.sleep(Number.POSITIVE_INFINITY, c);
          outcomes.push(`${task.state.tag}:woke@${rt.now()}`);
          await settleStep(rt, task as Parameters<typeof settleStep>[1], "done", c);
        };
        const parker = {
          ...stepKind("parker", { execute }),
          sleepsUntil: (state: { status: string }) =>
            state.status === "pending" ? Number.POSITIVE_INFINITY : undefined,
        };
        const h = await openWith(inner, [parker], { host: { clock, wakeChanged: (w) => wakes.push(w) } });
        await h.attach(call);
        // Parked from its dispatch with no wake time: not busy, no wake reported, no reason to wake.
        const a = await addStep(h, parker, h.rootId, { tag: "a", background: true });
        await entered.get("a").promise;
        expect(h.driver.busy).toBe(false);
        expect(h.driver.nextWake).toBeUndefined();
        expect(h.driver.hasLiveToWake).toBe(false);
        proceed.open("a");
        await flush(h);
        clock.advance(1_000_000_000);
        await flush(h);
        expect(outcomes).toEqual([]);
        expect(wakes).toEqual([]);
        // interruptSleep ends it.
        expect(await h.driver.interruptSleep(a)).toBe(true);
        await until(h, () => h.driver.liveTask(a) === undefined, "a woke and settled");
        expect(outcomes).toEqual(["a:woke@1000010000"]);
        // An interrupt while the invocation runs but has not reached its sleep: that sleep returns at once.
        const b = await addStep(h, parker, h.rootId, { tag: "b", background: true });
        await entered.get("b").promise;
        expect(await h.driver.interruptSleep(b)).toBe(false);
        proceed.open("b");
        await until(h, () => h.driver.liveTask(b) === undefined, "b did not sleep");
        expect(outcomes).toEqual(["a:woke@1000010000", "b:woke@1000010000"]);
        expect(h.driver.busy).toBe(false);
        expect(wakes).toEqual([]);
      }));

    it(`the host's beforeInvoke returning false withholds execute and recover but never abort; driver.release resumes a withheld task (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const k = stepKind("k", {
          execute: trace.wrap("execute", (task, rt, c) => settleStep(rt, task, "done", c)),
          abort: trace.wrap("abort", (task, rt, c) => settleStep(rt, task, "aborted", c)),
        });
        const quarantined = new Set<string>(["q", "r"]);
        const asked: string[] = [];
        const h = await openWith(inner, [k], {
          host: {
            beforeInvoke: (task, method) => {
              const tag = String(task.state["tag"]);
              asked.push(`${method}:${tag}`);
              return !quarantined.has(tag);
            },
          },
        });
        const q = await addStep(h, k, h.rootId, { tag: "q" });
        const r = await addStep(h, k, h.rootId, { tag: "r" });
        await h.attach(call);
        await flush(h);
        expect(trace.events).toEqual([]);
        const seen = await h.inspect(call);
        expect(seen.quarantined.map((t) => t.id)).toEqual([q, r]);
        await flush(h);
        expect(asked).toEqual(["execute:q", "execute:r"]); // withheld tasks are not reserved again
        // An operator's abort still runs the kind's abort handler.
        await h.abortTask(q, call);
        await until(h, () => trace.count("abort:end:q") === 1, "abort q");
        expect(asked).toContain("abort:q");
        // Release resumes the other one.
        quarantined.delete("r");
        await h.driver.release(r);
        expect(await h.drive(call)).toBe("idle");
        expect(trace.events).toEqual(["abort:start:q", "abort:end:q", "execute:start:r", "execute:end:r"]);
        expect((await h.inspect(call)).quarantined).toEqual([]);
      }));

    it(`known self-drives reject: a foreground task's own scope, the session, and a dependency path back to the caller (${backend.name})`, () =>
      backend.run(async (inner) => {
        let h: Harness | undefined;
        const results = new Map<string, string>();
        const gate = deferred();
        const codeOrResult = (p: Promise<unknown>) => p.then(String, (e: unknown) => (e as PicoError).code);
        const child = stepKind("child", {
          execute: async (task, rt, c) => {
            results.set(
              "child drives root",
              await codeOrResult((await rt.conversation((h as Harness).rootId, c))!.drive(c)),
            );
            await settleStep(rt, task, "done", c);
          },
        });
        const fg = stepKind("fg", {
          execute: async (task, rt, c) => {
            results.set(
              "own conversation",
              await codeOrResult((await rt.conversation(task.conversationId, c))!.drive(c)),
            );
            results.set("session", await codeOrResult((h as Harness).drive(c)));
            const [conversation] = await spawnChild(h as Harness, task, child, c);
            await (await rt.conversation(conversation, c))?.drive(c);
            await settleStep(rt, task, "done", c);
          },
        });
        const plain = stepKind("plain");
        const bg = stepKind("bg", {
          execute: async (task, rt, c) => {
            const target = task.state.refs[0] as Id;
            results.set(
              "background drives dependent",
              await codeOrResult((await rt.conversation(target, c))!.drive(c)),
            );
            await gate.promise;
            await settleStep(rt, task, "done", c);
          },
        });
        h = await openWith(inner, [fg, child, plain, bg]);
        await addStep(h, fg, h.rootId);
        expect(await h.drive(call)).toBe("idle");
        expect(results.get("own conversation")).toBe("contract");
        expect(results.get("session")).toBe("contract");
        expect(results.get("child drives root")).toBe("contract");
        // A background task T driving a conversation whose foreground D has after: [T]. D's conversation is
        // in T's ownership tree (owned by a task of the root), as dependencies must be (§5.4).
        const other = await h.commit((tx) => {
          const base = (h as Harness).storage.lastSeq; // ids are minted from lastSeq (§3.1): owner base+1, conversation base+2
          const owner = tx.task(plain, {
            conversationId: h?.rootId as Id,
            state: { status: "pending", tag: "owner", refs: [] },
            owns: [base + 2],
          });
          return tx.createConversation({ owner });
        }, call);
        await h.commit((tx) => {
          const t = tx.task(bg, {
            conversationId: h?.rootId as Id,
            state: { status: "pending", tag: "bg", refs: [other] },
            background: true,
          });
          tx.task(plain, { conversationId: other, state: { status: "pending", tag: "d", refs: [] }, after: [t] });
        }, call);
        await until(h, () => results.has("background drives dependent"), "bg drive");
        expect(results.get("background drives dependent")).toBe("contract");
        gate.resolve();
        expect(await (await h.conversation(other, call))!.drive(call)).toBe("idle");
      }));

    it(`Known dependency self-drive: a cycle-creating admission is refused (${backend.name})`, () =>
      backend.run(async (inner) => {
        let h: Harness | undefined;
        const driving = deferred();
        const gate = deferred();
        let driveResult: string | undefined;
        const plain = stepKind("plain");
        const blocker = stepKind("blocker", {
          execute: async (task, rt, c) => {
            await gate.promise;
            await settleStep(rt, task, "done", c);
          },
        });
        const bg = stepKind("bg", {
          execute: async (task, rt, c) => {
            const target = task.state.refs[0] as Id;
            const drive = (await rt.conversation(target, c))!.drive(c);
            driving.resolve();
            driveResult = await drive.then(String, (e: unknown) => (e as PicoError).code);
            await settleStep(rt, task, "done", c);
          },
        });
        h = await openWith(inner, [plain, blocker, bg]);
        const other = await h.commit((tx) => {
          const base = (h as Harness).storage.lastSeq;
          const owner = tx.task(plain, {
            conversationId: h?.rootId as Id,
            state: { status: "pending", tag: "owner", refs: [] },
            owns: [base + 2],
          });
          return tx.createConversation({ owner });
        }, call);
        await h.commit(
          (tx) => tx.task(blocker, { conversationId: other, state: { status: "pending", tag: "g", refs: [] } }),
          call,
        );
        const t = await h.commit(
          (tx) =>
            tx.task(bg, {
              conversationId: h?.rootId as Id,
              state: { status: "pending", tag: "bg", refs: [other] },
              background: true,
            }),
          call,
        );
        await h.attach(call);
        await driving.promise;
        await flush(h);
        // T waits for other's foreground; a new foreground task there that depends on T would never start.
        const seq = inner.lastSeq;
        const admitted = await outcome(
          h.commit(
            (tx) =>
              tx.task(plain, { conversationId: other, state: { status: "pending", tag: "d", refs: [] }, after: [t] }),
            call,
          ),
        );
        expect(codeOf(admitted)).toBe("contract");
        expect(inner.lastSeq).toBe(seq);
        expect(h.fault).toBeUndefined();
        gate.resolve();
        await until(h, () => driveResult !== undefined, "bg drive settles");
        expect(driveResult).toBe("idle");
      }));
  });
}
