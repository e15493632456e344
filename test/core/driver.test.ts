/**
 * The driver's §10.2 failure and concurrency rows (§6.1-§6.4) on every core backend. Jobs and child
 * conversations are modelled with scripted test kinds: a background "job", and a "tool" that creates an
 * owned child conversation through spawn (owner + owns in the creation commit). Every race is run in
 * both orders with deferred promises and storage barriers; no wall-clock sleeps, no time assertions.
 */
import { describe, expect, it } from "vitest";
import { PicoError, TaskCancelled } from "../../src/core/errors.js";
import type { Harness } from "../../src/core/harness.js";
import type { FaultReport } from "../../src/core/host.js";
import { bindTo, conversationList, sessionValue } from "../../src/core/state.js";
import type { Call } from "../../src/core/call.js";
import type { Id, Task } from "../../src/storage/records.js";
import { coreBackends } from "./backends.js";
import {
  addStep,
  call,
  cancellableCall,
  deferred,
  flush,
  GateStorage,
  openWith,
  outcome,
  patchStep,
  settleStep,
  stepKind,
  ticks,
  Trace,
  until,
  type Deferred,
  type StepKind,
  type StepTask,
  Gates,
  cancellable,
  childTag,
  installStepTurns,
} from "./driver-fixtures.js";
import type { TaskRuntime } from "../../src/core/runtime.js";

const queue = conversationList<string>("test.queue", { rewind: false });

/** The refs of a stored step task. */
function refs(task: Task): Id[] {
  return (task.state as { refs?: Id[] }).refs ?? [];
}

async function stored(h: Harness, id: Id): Promise<Task> {
  const task = await h.storage.getTasks([id]).then((m) => m.get(id));
  if (task === undefined) throw new Error(`task ${id} missing`);
  return task;
}

/** Spawn a child through the public API (§4.3, §9.1) in the owner's commit, which also records the
 * child and its first task in the owner's refs (running). Needs `installStepTurns(h, kind)`. */
async function spawnThrough(
  rt: TaskRuntime,
  owner: StepTask,
  c: Call,
  queued: readonly string[] = [],
): Promise<[Id, Id]> {
  const from = await rt.conversation(owner.conversationId, c);
  if (from === undefined) throw new Error("owner conversation missing");
  return rt.commit(async (tx) => {
    const spawned = await from.spawnIn(tx.builder, {
      prompt: `work for ${owner.state.tag}`,
      values: { set: [[childTag, `${owner.state.tag}.child`]] },
    });
    for (const item of queued) tx.list(bindTo(queue, spawned.conversationId)).append(item);
    tx.patch(owner, "running", { tag: owner.state.tag, refs: [spawned.conversationId, spawned.generation] });
    return [spawned.conversationId, spawned.generation] as [Id, Id];
  }, c);
}

/**
 * A step kind named `name` whose execute (traced as "execute") opens `started` for its tag, waits for its tag's gate in
 * `gates`, then settles done.
 */
function gatedKind(name: string): { trace: Trace; started: Gates; gates: Gates; kind: StepKind } {
  const trace = new Trace();
  const started = new Gates();
  const gates = new Gates();
  const kind = stepKind(name, {
    execute: trace.wrap("execute", async (task, rt, c) => {
      started.open(task.state.tag);
      await gates.get(task.state.tag).promise;
      await settleStep(rt, task, "done", c);
    }),
  });
  return { trace, started, gates, kind };
}

for (const backend of coreBackends) {
  describe(`driver §10.2 (${backend.name})`, () => {
    it(`§10.2 Effect returns as abort starts (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const trace = new Trace();
        const started = new Gates();
        const effects = new Gates();
        const settleErrors = new Map<string, unknown>();
        const executeReturned = new Set<string>();
        const abortSawReturned = new Map<string, boolean>();
        const abortSignalAtStart = new Map<string, boolean | undefined>();
        const executeCalls = new Map<string, Call>();
        const effect = stepKind("effect", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            executeCalls.set(task.state.tag, c);
            try {
              await patchStep(rt, task, "running", c);
              started.open(task.state.tag);
              await effects.get(task.state.tag).promise; // the external effect ignores the signal
              await settleStep(rt, task, "done", c).catch((e: unknown) => {
                settleErrors.set(task.state.tag, e);
                throw e;
              });
            } finally {
              executeReturned.add(task.state.tag);
            }
          }),
          abort: trace.wrap("abort", async (task, rt, c) => {
            abortSawReturned.set(task.state.tag, executeReturned.has(task.state.tag));
            abortSignalAtStart.set(task.state.tag, c.abortSignal?.aborted);
            await settleStep(rt, task, "aborted", c);
          }),
        });
        const h = await openWith(storage, [effect]);
        await h.attach(call);

        // Order 1: the mark commits while the effect is still out; the effect then returns.
        const a = await addStep(h, effect, h.rootId, { tag: "a" });
        await started.get("a").promise;
        await h.abortTask(a, call);
        expect(executeCalls.get("a")?.abortSignal?.aborted).toBe(true);
        await flush(h);
        expect(trace.events).not.toContain("abort:start:a"); // no abort while execute still runs
        effects.open("a");
        expect(await h.drive(call)).toBe("idle");
        await until(h, () => trace.count("abort:end:a") === 1, "abort a returns");
        expect(settleErrors.get("a")).toBeInstanceOf(TaskCancelled);
        expect(trace.events.filter((e) => e.endsWith(":a"))).toEqual([
          "execute:start:a",
          "execute:threw:a",
          "abort:start:a",
          "abort:end:a",
        ]);
        expect(abortSawReturned.get("a")).toBe(true);
        expect(abortSignalAtStart.get("a")).toBe(false); // a fresh invocation with an active controller
        expect((await stored(h, a)).state.status).toBe("aborted");

        // Order 2: the effect returns and its settlement is on the line first; the later mark rejects.
        const b = await addStep(h, effect, h.rootId, { tag: "b" });
        await started.get("b").promise;
        const atBarrier = storage.pause();
        effects.open("b");
        await atBarrier; // b's settlement is being persisted
        const lateMark = outcome(h.abortTask(b, call));
        storage.resume();
        const marked = await lateMark;
        expect(marked.ok).toBe(false);
        expect(await h.drive(call)).toBe("idle");
        expect((await stored(h, b)).state.status).toBe("done");
        expect((await stored(h, b)).abort).toBeUndefined();
        expect(trace.events.filter((e) => e.endsWith(":b"))).toEqual(["execute:start:b", "execute:end:b"]);

        // Order 3: the effect returns, but the mark reached the line just before the settlement.
        const c3 = await addStep(h, effect, h.rootId, { tag: "c" });
        await started.get("c").promise;
        const markAtBarrier = storage.pause();
        const mark = h.abortTask(c3, call);
        await markAtBarrier;
        effects.open("c"); // settlement queues behind the mark
        await ticks();
        storage.resume();
        await mark;
        expect(await h.drive(call)).toBe("idle");
        await until(h, () => trace.count("abort:end:c") === 1, "abort c returns");
        expect(settleErrors.get("c")).toBeInstanceOf(TaskCancelled);
        expect(trace.events.filter((e) => e.endsWith(":c"))).toEqual([
          "execute:start:c",
          "execute:threw:c",
          "abort:start:c",
          "abort:end:c",
        ]);
        expect(abortSawReturned.get("c")).toBe(true);
        expect((await stored(h, c3)).state.status).toBe("aborted");
        expect(trace.maxConcurrent).toBe(1);
        expect(h.fault).toBeUndefined();
      }));

    it(`§10.2 Status cycle returns to initial status (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rounds = new Map<string, number>();
        const bump = (tag: string): number => {
          const n = (rounds.get(tag) ?? 0) + 1;
          rounds.set(tag, n);
          return n;
        };
        // planned -> running -> planned across commits, then within one batch, then done.
        const schedule = stepKind("schedule", {
          execute: async (task, rt, c) => {
            const n = bump(`${task.state.tag}:execute`);
            const payload = { tag: task.state.tag, refs: [n] };
            if (n === 1) {
              await patchStep(rt, task, "running", c);
              await patchStep(rt, task, "pending", c);
            } else if (n === 2) {
              await rt.commit((tx) => {
                tx.patch(task, "running", payload);
                tx.patch(task, "pending", payload);
              }, c);
            } else {
              await settleStep(rt, task, "done", c);
            }
          },
        });
        // inflight -> start -> inflight in one batch from recover, then settle.
        const looping = stepKind("looping", {
          execute: async (task, rt, c) => patchStep(rt, task, "running", c),
          recover: async (task, rt, c) => {
            const n = bump(`${task.state.tag}:recover`);
            if (n === 1) {
              await rt.commit((tx) => {
                tx.patch(task, "pending", { tag: task.state.tag, refs: [] });
                tx.patch(task, "running", { tag: task.state.tag, refs: [1] });
              }, c);
            } else {
              await settleStep(rt, task, "done", c);
            }
          },
        });
        const faults: FaultReport[] = [];
        const h = await openWith(inner, [schedule, looping], { host: { faulted: (r) => faults.push(r) } });
        const s = await addStep(h, schedule, h.rootId, { tag: "s" });
        const l = await addStep(h, looping, h.rootId, { tag: "l" });
        expect(await h.drive(call)).toBe("idle");
        expect(faults).toEqual([]);
        expect(h.fault).toBeUndefined();
        expect(rounds.get("s:execute")).toBe(3);
        expect(rounds.get("l:recover")).toBe(2);
        expect((await stored(h, s)).state.status).toBe("done");
        expect((await stored(h, l)).state.status).toBe("done");
      }));

    it(`§10.2 Host patches an owned task (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const started = new Gates();
        const gates = new Gates();
        const abortGates = new Gates();
        const siblingErrors: unknown[] = [];
        let ownedKind: StepKind | undefined;
        const owned = stepKind("owned", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            await patchStep(rt, task, "running", c);
            started.open(task.state.tag);
            await gates.get(task.state.tag).promise;
            await settleStep(rt, task, "done", c);
          }),
          abort: trace.wrap("abort", async (task, rt, c) => {
            started.open(`${task.state.tag}:abort`);
            await abortGates.get(task.state.tag).promise;
            await settleStep(rt, task, "aborted", c);
          }),
        });
        ownedKind = owned;
        const sibling = stepKind("sibling", {
          execute: async (task, rt, c) => {
            const target = task.state.refs[0] as Id;
            await rt
              .commit(async (tx) => {
                const other = await tx.getTask(ownedKind as StepKind, target);
                if (other === undefined) throw new Error("missing");
                tx.patch(other, "pending", { tag: "hijacked", refs: [] });
              }, c)
              .catch((e: unknown) => siblingErrors.push(e));
            await settleStep(rt, task, "done", c);
          },
        });
        const h = await openWith(inner, [owned, sibling]);
        await h.attach(call);

        const hostPatch = (id: Id) =>
          outcome(
            h.commit(async (tx) => {
              const t = await tx.getTask(owned, id);
              if (t === undefined) throw new Error("missing");
              tx.patch(t, "pending", { tag: "hijacked", refs: [] });
            }, call),
          );
        const hostSettle = (id: Id) =>
          outcome(
            h.commit(async (tx) => {
              const t = await tx.getTask(owned, id);
              if (t === undefined) throw new Error("missing");
              tx.settle(t, "done", { tag: "hijacked", refs: [] });
            }, call),
          );
        const expectContract = (r: { ok: boolean; error?: unknown }) => {
          expect(r.ok).toBe(false);
          expect((r as { error: unknown }).error).toBeInstanceOf(PicoError);
          expect((r as { error: PicoError }).error.code).toBe("contract");
        };

        // Order 1: host and sibling status writes while execute owns the task, then the host's mark.
        const a = await addStep(h, owned, h.rootId, { tag: "a" });
        await started.get("a").promise;
        expectContract(await hostPatch(a));
        expectContract(await hostSettle(a));
        await addStep(h, sibling, h.rootId, { tag: "sib", refs: [a] });
        await until(h, () => siblingErrors.length === 1, "sibling attempt");
        expect((siblingErrors[0] as PicoError).code).toBe("contract");
        expect((await stored(h, a)).state).toEqual({ status: "running", tag: "a", refs: [] });
        await h.abortTask(a, call); // abort marks remain allowed
        expect((await stored(h, a)).abort).toBe(true);
        expect((await stored(h, a)).state.status).toBe("running");
        gates.open("a");
        abortGates.open("a");
        await h.drive(call);
        expect((await stored(h, a)).state.status).toBe("aborted");

        // Order 2: the mark first; host status writes still reject while execute unwinds and while
        // the abort handler owns the task.
        const b = await addStep(h, owned, h.rootId, { tag: "b" });
        await started.get("b").promise;
        await h.abortTask(b, call);
        expectContract(await hostPatch(b));
        gates.open("b");
        await started.get("b:abort").promise;
        expectContract(await hostPatch(b));
        expectContract(await hostSettle(b));
        expect(await outcome(h.abortTask(b, call))).toEqual({ ok: true, value: undefined }); // repeated mark: no-op
        abortGates.open("b");
        await h.drive(call);
        expect((await stored(h, b)).state).toEqual({ status: "aborted", tag: "b", refs: [] });
        expect(trace.count("abort:start:b")).toBe(1);
        expect(h.fault).toBeUndefined();
      }));

    it(`§10.2 Repeated drive and cancelled waiter (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storageGate = new GateStorage(inner);
        const { trace, started, gates, kind: hold } = gatedKind("hold");
        const h = await openWith(storageGate, [hold]);
        const root = await h.root(call);

        // Order 1: one waiter cancels before idle; the other resolves; the attachment stays.
        const a = await addStep(h, hold, root.id, { tag: "a" });
        const w1 = cancellableCall();
        const w2 = cancellableCall();
        const d1 = outcome(root.drive(w1.call));
        const d2 = root.drive(w2.call);
        await started.get("a").promise;
        const reason = new Error("caller went away");
        w1.controller.abort(reason);
        expect(await d1).toEqual({ ok: false, error: reason });
        expect([w1.added(), w1.removed()]).toEqual([1, 1]);
        expect([w2.added(), w2.removed()]).toEqual([1, 0]);
        gates.open("a");
        expect(await d2).toBe("idle");
        expect([w2.added(), w2.removed()]).toEqual([1, 1]);
        expect(trace.count("execute:start:a")).toBe(1);
        expect((await stored(h, a)).state.status).toBe("done");
        // The attachment outlives both waiters: background work added later still runs.
        await addStep(h, hold, root.id, { tag: "bg", background: true });
        await started.get("bg").promise;
        gates.open("bg");

        // Order 2: idle first, then the caller cancels: nothing happens, the listener is already gone.
        await addStep(h, hold, root.id, { tag: "c" });
        const w3 = cancellableCall();
        const d3 = root.drive(w3.call);
        await started.get("c").promise;
        gates.open("c");
        expect(await d3).toBe("idle");
        w3.controller.abort(new Error("late"));
        await flush(h);
        expect([w3.added(), w3.removed()]).toEqual([1, 1]);

        // Order 3: the cancellation's removal is enqueued behind the settlement that makes it idle.
        await addStep(h, hold, root.id, { tag: "e" });
        const w4 = cancellableCall();
        const d4 = outcome(root.drive(w4.call));
        await started.get("e").promise;
        const atBarrier = storageGate.pause();
        gates.open("e");
        await atBarrier;
        w4.controller.abort(new Error("racing"));
        storageGate.resume();
        expect(await d4).toEqual({ ok: true, value: "idle" });
        expect([w4.added(), w4.removed()]).toEqual([1, 1]);
        expect(trace.maxConcurrent).toBe(1);
        expect(h.fault).toBeUndefined();
      }));

    it(`§10.2 Close vs task commit (${backend.name})`, () =>
      backend.run(async (inner) => {
        const events: string[] = [];
        const started = new Gates();
        const gates = new Gates();
        const mark = (tag: string, n: number) => sessionValue<number>(`test.close.${tag}.${n}`);
        const writer = stepKind("writer", {
          execute: async (task, rt, c) => {
            const tag = task.state.tag;
            started.open(tag);
            await gates.get(tag).promise;
            const first = await outcome(rt.value(mark(tag, 1)).set(1, c));
            events.push(`${tag}:first:${first.ok ? "ok" : (first.error as PicoError).code}`);
            const second = await outcome(rt.value(mark(tag, 2)).set(2, c));
            events.push(`${tag}:second:${second.ok ? "ok" : (second.error as PicoError).code}`);
            events.push(`${tag}:return`);
          },
        });

        // Order 1: the task's commit is being persisted when close arrives.
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [writer]);
        await addStep(h1, writer, h1.rootId, { tag: "a" });
        await h1.attach(call);
        await started.get("a").promise;
        const atBarrier = s1.pause();
        gates.open("a");
        await atBarrier;
        const closing1 = h1.close(call).then(() => events.push("a:closed"));
        await ticks();
        s1.resume();
        await closing1;
        expect(events).toEqual(["a:first:ok", "a:second:closed", "a:return", "a:closed"]);
        expect(
          (await inner.getValue({ scope: { session: true }, namespace: "test.close.a.1", rewind: false }))?.value,
        ).toBe(1);
        expect(
          await inner.getValue({ scope: { session: true }, namespace: "test.close.a.2", rewind: false }),
        ).toBeUndefined();
        expect(s1.closed).toBe(true);

        // Order 2: close first; the task's later commit rejects and close still joins its return.
        const s2 = s1.reopen();
        const h2 = await openWith(s2, [writer]);
        const other = await h2.commit((tx) => tx.createConversation({}), call);
        await addStep(h2, writer, other, { tag: "b" });
        const d = (await h2.conversation(other, call))?.drive(call);
        await started.get("b").promise;
        const closing2 = h2.close(call).then(() => events.push("b:closed"));
        await flush(h2, 2);
        expect(events).not.toContain("b:closed"); // close joins the running invocation
        expect(s2.closed).toBe(false);
        gates.open("b");
        await closing2;
        expect(await d).toBe("closed");
        expect(events.slice(4)).toEqual(["b:first:closed", "b:second:closed", "b:return", "b:closed"]);
        expect(
          await inner.getValue({ scope: { session: true }, namespace: "test.close.b.1", rewind: false }),
        ).toBeUndefined();
        expect(h2.fault).toBeUndefined();
      }));

    it(`§10.2 Shutdown crash before child cleanup (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const started = new Gates();
        let holdAborts = true; // the first process crashes with abort handlers still pending
        const abortGates = new Gates();
        let h: Harness | undefined;
        const markResults: Id[][] = [];
        const child = stepKind("child", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            started.open(task.state.tag);
            await cancellable(deferred().promise, c);
            await settleStep(rt, task, "done", c);
          }),
          abort: trace.wrap("abort", async (task, rt, c) => {
            if (holdAborts) await abortGates.get(task.state.tag).promise;
            await settleStep(rt, task, "aborted", c);
          }),
        });
        const tool = stepKind("tool", {
          execute: trace.wrap("execute", async (task, rt, c) => {
            const [conversation] = await spawnThrough(rt, task, c, ["q1", "q2"]);
            started.open(task.state.tag);
            const handle = await rt.conversation(conversation, c);
            await handle?.drive(c);
            await settleStep(rt, task, "done", c);
          }),
          abort: trace.wrap("abort", async (task, rt, c) => {
            if (holdAborts) await abortGates.get(task.state.tag).promise;
            // Built-in cleanup policy: mark the child's live foreground tasks only (§6.3).
            markResults.push(await rt.markIfLive([task.state.refs[1] as Id], c));
            await settleStep(rt, task, "aborted", c);
          }),
        });
        const rootQueue = async (hh: Harness) =>
          (await (await hh.root(call)).list(queue).read(undefined, call)).items.map((e) => e.value);
        const childQueue = async (hh: Harness, conversation: Id) =>
          (await hh.storage.readList(bindTo(queue, conversation), { limit: 100 })).items.map((e) => e.value);

        const run = async (storage: GateStorage, tag: string, crashAfterChildAbort: boolean) => {
          holdAborts = true;
          const h1 = await openWith(storage, [tool, child]);
          installStepTurns(h1, child);
          h = h1;
          await (await h1.root(call)).list(queue).append(`root-${tag}`, call);
          const t = await addStep(h1, tool, h1.rootId, { tag });
          await h1.attach(call);
          await started.get(`${tag}.child`).promise;
          const toolTask = await stored(h1, t);
          const [conversation, x] = refs(toolTask) as [Id, Id];
          const before = storage.batches.length;
          void h1.shutdown(call).catch(() => undefined);
          await started.get(tag).promise;
          await until(
            h1,
            () => trace.count(`abort:start:${tag}`) === 1 && trace.count(`abort:start:${tag}.child`) === 1,
            "abort handlers",
          );
          // Shutdown committed exactly one marking batch covering both live tasks.
          const marking = storage.batches.slice(before);
          expect(marking).toHaveLength(1);
          expect(marking[0]?.writes.map((w) => (w.type === "patch" ? [w.id, w.abort] : w.type))).toEqual([
            [t, true],
            [x, true],
          ]);
          if (crashAfterChildAbort) {
            abortGates.open(`${tag}.child`);
            await until(h1, () => trace.count(`abort:end:${tag}.child`) === 1, "child abort");
          }
          storage.crash(); // the process dies before the tool's cleanup ran
          const rootBefore = await rootQueue(h1).catch(() => undefined);
          expect(rootBefore).toBeUndefined(); // the crashed process can no longer read

          holdAborts = false;
          const s2 = storage.reopen();
          const h2 = await openWith(s2, [tool, child]);
          installStepTurns(h2, child);
          h = h2;
          const seen = await h2.inspect(call);
          const live = [...seen.start, ...seen.inflight];
          expect(live.find((task) => task.id === t)?.abort).toBe(true);
          if (!crashAfterChildAbort) expect(live.find((task) => task.id === x)?.abort).toBe(true);
          const startsBefore = trace.events.length;
          await flush(h2);
          expect(trace.events.length).toBe(startsBefore); // reopen starts nothing
          expect(await h2.drive(call)).toBe("idle");
          expect((await stored(h2, t)).state.status).toBe("aborted");
          expect((await stored(h2, x)).state.status).toBe("aborted");
          expect(markResults.at(-1)).toEqual([]); // the child was already marked or terminal
          // Queues untouched: cleanup marks tasks only, it never drains queues.
          expect(await childQueue(h2, conversation)).toEqual(["q1", "q2"]);
          expect(await rootQueue(h2)).toContain(`root-${tag}`);
          for (const batch of s2.batches) {
            for (const w of batch.writes) expect(["patch", "settle"]).toContain(w.type);
          }
          expect(trace.events.filter((e) => e.startsWith("execute:start") && e.endsWith(`:${tag}`))).toHaveLength(1);
          await h2.close(call);
          return s2;
        };
        // Order 1: crash while both abort handlers are pending.
        const after = await run(new GateStorage(inner), "a", false);
        // Order 2: crash after the child's abort settled, before the tool's cleanup.
        await run(after.reopen(), "b", true);
      }));

    it(`§10.2 Parent cleanup vs already-terminal job (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const started = new Gates();
        const jobGates = new Gates();
        const jobSettleErrors = new Map<string, unknown>();
        const cleanup = new Map<string, Id[]>();
        const job = stepKind("job", {
          execute: async (task, rt, c) => {
            await patchStep(rt, task, "running", c);
            started.open(task.state.tag);
            await jobGates.get(task.state.tag).promise; // ignores the signal
            await settleStep(rt, task, "done", c).catch((e: unknown) => {
              jobSettleErrors.set(task.state.tag, e);
              throw e;
            });
          },
        });
        const tool = stepKind("tool", {
          execute: async (task, rt, c) => {
            // The job id and the cancellation policy land on the tool's own task in the creating commit.
            await rt.commit((tx) => {
              const j = tx.task(job, {
                state: { status: "pending", tag: `${task.state.tag}.job`, refs: [] },
                background: true,
              });
              tx.patch(task, "running", { tag: task.state.tag, refs: [j] });
            }, c);
            started.open(task.state.tag);
            await cancellable(deferred().promise, c);
          },
          abort: async (task, rt, c) => {
            cleanup.set(task.state.tag, await rt.markIfLive([task.state.refs[0] as Id], c));
            await settleStep(rt, task, "aborted", c);
          },
        });
        const h = await openWith(storage, [tool, job]);
        await h.attach(call);

        // Order 1: the job's settlement is on the line before the cleanup's mark.
        const a = await addStep(h, tool, h.rootId, { tag: "a" });
        await Promise.all([started.get("a").promise, started.get("a.job").promise]);
        const jobA = refs(await stored(h, a))[0] as Id;
        const atBarrier = storage.pause();
        jobGates.open("a.job");
        await atBarrier;
        const markA = h.abortTask(a, call);
        storage.resume();
        await markA;
        expect(await h.drive(call)).toBe("idle");
        expect(cleanup.get("a")).toEqual([]); // already finished is successful cleanup
        expect((await stored(h, a)).state.status).toBe("aborted");
        expect(await stored(h, jobA)).toMatchObject({ state: { status: "done" } });
        expect((await stored(h, jobA)).abort).toBeUndefined();

        // Order 2: the cleanup marks the still-running job; the job's later settlement rejects.
        const b = await addStep(h, tool, h.rootId, { tag: "b" });
        await Promise.all([started.get("b").promise, started.get("b.job").promise]);
        const jobB = refs(await stored(h, b))[0] as Id;
        await h.abortTask(b, call);
        await until(h, () => cleanup.has("b"), "cleanup of b");
        expect(cleanup.get("b")).toEqual([jobB]);
        jobGates.open("b.job");
        await until(h, () => jobSettleErrors.has("b.job"), "job settlement attempt");
        expect(jobSettleErrors.get("b.job")).toBeInstanceOf(TaskCancelled);
        await h.drive(call);
        await until(h, () => h.driver.liveCount() === 0, "job abort");
        expect((await stored(h, b)).state.status).toBe("aborted");
        expect((await stored(h, jobB)).state.status).toBe("aborted");
        expect(h.fault).toBeUndefined();
      }));

    it(`§10.2 Broken abort handler (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = new Gates();
        const bystanderGate = deferred();
        const bystanderCommit: unknown[] = [];
        let bystanderSignalled = false;
        const broken = stepKind("broken", {
          execute: async (task, rt, c) => {
            await patchStep(rt, task, "running", c);
            started.open(task.state.tag);
            await cancellable(deferred().promise, c);
          },
          abort: async (task) => {
            if (task.state.tag === "throws") throw new Error("cleanup exploded");
            // returns without settling
          },
        });
        let holdBystander = true;
        const bystander = stepKind("bystander", {
          execute: async (task, rt, c) => {
            if (!holdBystander) return settleStep(rt, task, "done", c);
            started.open(task.state.tag);
            c.abortSignal?.addEventListener("abort", () => (bystanderSignalled = true));
            await bystanderGate.promise; // ignores the signal: close must join it
            const r = await outcome(settleStep(rt, task, "done", c));
            bystanderCommit.push(r.ok ? "ok" : (r.error as PicoError).code);
          },
        });
        const faults: FaultReport[] = [];

        // Order 1: the fault happens under a drive while another invocation runs.
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [broken, bystander], { host: { faulted: (r) => faults.push(r) } });
        const bad = await addStep(h1, broken, h1.rootId, { tag: "returns" });
        await addStep(h1, bystander, h1.rootId, { tag: "by" });
        const drive = outcome(h1.drive(call));
        await Promise.all([started.get("returns").promise, started.get("by").promise]);
        await h1.abortTask(bad, call);
        const driven = await drive;
        expect(driven.ok).toBe(false);
        expect((driven as { error: PicoError }).error.code).toBe("faulted");
        expect(faults).toHaveLength(1);
        expect(faults[0]).toMatchObject({ taskId: bad, kind: "broken", method: "abort" });
        expect(faults[0]?.message).toContain(String(bad));
        expect(h1.fault).toBe(faults[0]);
        await flush(h1);
        expect(bystanderSignalled).toBe(true);
        expect(s1.closed).toBe(false); // joining the bystander before closing
        const later = await outcome(h1.drive(call));
        expect((later as { error: PicoError }).error.code).toBe("faulted");
        expect(
          ((await outcome(h1.commit((tx) => tx.createConversation({}), call))) as { error: PicoError }).error.code,
        ).toBe("faulted");
        bystanderGate.resolve();
        await until(h1, () => s1.closed, "storage closed after join");
        expect(bystanderCommit).toEqual(["faulted"]);
        await h1.close(call);

        // Reopen starts nothing; the broken kind is replaced before recovery.
        holdBystander = false;
        const s2 = s1.reopen();
        const h2 = await openWith(s2, [broken, bystander]);
        const seen = await h2.inspect(call);
        expect(seen.inflight.find((t) => t.id === bad)?.abort).toBe(true);
        await flush(h2);
        expect(s2.batches).toHaveLength(0);
        await h2.replaceTaskKind(stepKind("broken") as never, call);
        expect(await h2.drive(call)).toBe("idle");
        expect((await stored(h2, bad)).state.status).toBe("aborted");
        await h2.close(call);

        // Order 2: the abort handler throws during shutdown; shutdown rejects with the fault.
        const s3 = s2.reopen();
        const faults3: FaultReport[] = [];
        const h3 = await openWith(s3, [broken, bystander], { host: { faulted: (r) => faults3.push(r) } });
        const bad3 = await addStep(h3, broken, h3.rootId, { tag: "throws" });
        await h3.attach(call);
        await started.get("throws").promise;
        const pending = outcome(h3.drive(call));
        const sd = await outcome(h3.shutdown(call));
        expect(sd.ok).toBe(false);
        expect((sd as { error: PicoError }).error.code).toBe("faulted");
        expect(((await pending) as { error: PicoError }).error.code).toBe("faulted");
        expect(faults3[0]).toMatchObject({ taskId: bad3, kind: "broken", method: "abort" });
        expect((faults3[0]?.error as Error).message).toBe("cleanup exploded");
        await until(h3, () => s3.closed, "closed after fault");
      }));

    it(`§10.2 Child finishes while its owning tool is marked (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = new Gates();
        const childGates = new Gates();
        const beforeSettle = new Gates();
        const abortGates = new Gates();
        const settleErrors = new Map<string, unknown>();
        const cleanup = new Map<string, Id[]>();
        let h: Harness | undefined;
        const child = stepKind("child", {
          execute: async (task, rt, c) => {
            started.open(task.state.tag);
            await childGates.get(task.state.tag).promise;
            await settleStep(rt, task, "done", c);
          },
        });
        const tool = stepKind("tool", {
          execute: async (task, rt, c) => {
            const [conversation, x] = await spawnThrough(rt, task, c);
            started.open(task.state.tag);
            await (await rt.conversation(conversation, c))?.drive(c);
            started.open(`${task.state.tag}:idle`);
            await beforeSettle.get(task.state.tag).promise;
            await settleStep(rt, task, "done", c, [conversation, x]).catch((e: unknown) => {
              settleErrors.set(task.state.tag, e);
              throw e;
            });
          },
          abort: async (task, rt, c) => {
            started.open(`${task.state.tag}:abort`);
            await abortGates.get(task.state.tag).promise;
            cleanup.set(task.state.tag, await rt.markIfLive([task.state.refs[1] as Id], c));
            await settleStep(rt, task, "aborted", c);
          },
        });
        h = await openWith(inner, [tool, child]);
        installStepTurns(h, child);
        const root = await h.root(call);

        // Order 1: the child finishes, then the tool is marked before its own settlement.
        const a = await addStep(h, tool, root.id, { tag: "a" });
        const d1 = root.drive(call);
        await started.get("a.child").promise;
        childGates.open("a.child");
        await started.get("a:idle").promise;
        await h.abortTask(a, call);
        beforeSettle.open("a");
        abortGates.open("a");
        expect(await d1).toBe("idle");
        expect(settleErrors.get("a")).toBeInstanceOf(TaskCancelled);
        expect(cleanup.get("a")).toEqual([]);
        const toolA = await stored(h, a);
        expect(toolA.state.status).toBe("aborted");
        expect((await stored(h, refs(toolA)[1] as Id)).state.status).toBe("done");

        // Order 2: the tool is marked first (its drive wait is cancelled); the child finishes while
        // the tool's cleanup is pending; the cleanup then finds it terminal.
        const b = await addStep(h, tool, root.id, { tag: "b" });
        const d2 = root.drive(call);
        await started.get("b.child").promise;
        await h.abortTask(b, call);
        await started.get("b:abort").promise;
        const toolB = await stored(h, b);
        const xb = refs(toolB)[1] as Id;
        expect((await stored(h, xb)).abort).toBeUndefined();
        childGates.open("b.child");
        await until(h, () => h?.driver.liveTask(xb) === undefined, "child settles");
        abortGates.open("b");
        expect(await d2).toBe("idle");
        expect(cleanup.get("b")).toEqual([]);
        expect((await stored(h, b)).state.status).toBe("aborted");
        expect((await stored(h, xb)).state.status).toBe("done");
        expect(h.fault).toBeUndefined();
      }));

    it(`§10.2 Two overlapping drives (${backend.name})`, () =>
      backend.run(async (inner) => {
        const { trace, started, gates, kind: counted } = gatedKind("counted");
        for (const tag of ["a", "b", "c"]) gates.open(tag);

        // Order 1: conversation drive, then session drive, same tick, over a dependency chain.
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [counted]);
        const root1 = await h1.root(call);
        const a = await addStep(h1, counted, root1.id, { tag: "a" });
        const b = await addStep(h1, counted, root1.id, { tag: "b", after: [a] });
        await addStep(h1, counted, root1.id, { tag: "c", after: [b] });
        const [r1, r2] = await Promise.all([root1.drive(call), h1.drive(call)]);
        expect([r1, r2]).toEqual(["idle", "idle"]);
        for (const tag of ["a", "b", "c"]) expect(trace.count(`execute:start:${tag}`)).toBe(1);
        await h1.close(call);

        // Order 2: session drive first, then a conversation drive arriving while the task runs.
        const s2 = s1.reopen();
        const h2 = await openWith(s2, [counted]);
        const other = await h2.commit((tx) => tx.createConversation({}), call);
        await addStep(h2, counted, other, { tag: "d" });
        const d1 = h2.drive(call);
        await started.get("d").promise;
        const d2 = (await h2.conversation(other, call))?.drive(call);
        const d3 = h2.drive(call);
        await flush(h2);
        gates.open("d");
        expect(await Promise.all([d1, d2, d3])).toEqual(["idle", "idle", "idle"]);
        expect(trace.count("execute:start:d")).toBe(1);
        expect(trace.maxConcurrent).toBe(1);
        expect(h2.fault).toBeUndefined();
      }));

    it(`§10.2 A drive caller cancels its wait (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const { trace, started, gates, kind: hold } = gatedKind("hold");
        const h = await openWith(storage, [hold]);
        const root = await h.root(call);

        // Order 1: caller 1 cancels while the work is running; caller 2 and the tasks are unaffected.
        const a = await addStep(h, hold, root.id, { tag: "a" });
        const job = await addStep(h, hold, root.id, { tag: "job", background: true });
        const w1 = cancellableCall();
        const d1 = outcome(root.drive(w1.call));
        const d2 = h.drive(call);
        await Promise.all([started.get("a").promise, started.get("job").promise]);
        w1.controller.abort(new Error("bye"));
        expect((await d1).ok).toBe(false);
        expect((await stored(h, a)).abort).toBeUndefined();
        gates.open("a");
        expect(await d2).toBe("idle");
        expect((await stored(h, a)).state.status).toBe("done");
        expect(h.driver.liveTask(job)?.abort).toBeUndefined(); // the background job keeps running
        gates.open("job");
        await until(h, () => h.driver.liveCount() === 0, "job finishes");

        // Order 2: caller 1 cancels while the settlement is already on the line: it resolves idle,
        // caller 2 too, and the task finished normally.
        const e = await addStep(h, hold, root.id, { tag: "e" });
        const w3 = cancellableCall();
        const d3 = outcome(root.drive(w3.call));
        const d4 = root.drive(call);
        await started.get("e").promise;
        const atBarrier = storage.pause();
        gates.open("e");
        await atBarrier;
        w3.controller.abort(new Error("too late"));
        storage.resume();
        expect(await d3).toEqual({ ok: true, value: "idle" });
        expect(await d4).toBe("idle");
        expect((await stored(h, e)).state.status).toBe("done");
        expect(trace.events.filter((x) => x.startsWith("abort"))).toEqual([]);
        expect(h.fault).toBeUndefined();
      }));
  });
}
