/**
 * Mutable registration (§9.6) on every backend: entry-kind, task-kind and section changes are Calls on
 * the commit line, ordered with commits and admitted like them; registering a missing entry kind or
 * section unparks the tasks whose kind needs it (§5.2 `needs`), as registering a missing task kind
 * unparks its parked tasks (§6.4), also after a crash and reopen.
 */
import { describe, expect, it } from "vitest";
import { defineEntryKind } from "../../src/core/entries.js";
import type { Harness } from "../../src/core/harness.js";
import type { SystemSection } from "../../src/core/registry.js";
import { erase } from "../../src/core/task-kind.js";
import type { Entry, Id } from "../../src/storage/records.js";
import { everyBackend } from "./backends.js";
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
  ticks,
  Trace,
  until,
  type StepKind,
} from "./driver-fixtures.js";

const noteKind = defineEntryKind<Entry>("note");
const policy: SystemSection<string> = { key: "plugin.policy", render: (text) => `<policy>${text}</policy>` };

/** A step kind that needs registrations besides its own. */
function needing(name: string, needs: { entryKinds?: string[]; sections?: string[] }, trace: Trace): StepKind {
  return {
    ...stepKind(name, {
      execute: trace.wrap("execute", async (task, rt, c) => {
        await patchStep(rt, task, "running", c);
        await settleStep(rt, task, "done", c);
      }),
      recover: trace.wrap("recover", (task, rt, c) => settleStep(rt, task, "done", c)),
    }),
    needs,
  };
}

async function statusOf(h: Harness, id: Id): Promise<string | undefined> {
  return (await h.getTask(id, call))?.state.status;
}

for (const backend of everyBackend) {
  describe(`§9.6 registration on the line (${backend.name})`, () => {
    it(`Registering a missing entry kind unparks its waiter (${backend.name})`, () =>
      backend.run(async (storage) => {
        const trace = new Trace();
        const writer = needing("writer", { entryKinds: ["note"] }, trace);
        const h = await openWith(storage, [writer]);
        const t = await addStep(h, writer, h.rootId);
        // Parked: not started, not counted for idleness, reported by inspect.
        expect(await h.drive(call)).toBe("idle");
        expect((await h.inspect(call)).parked.map((task) => task.id)).toEqual([t]);
        expect(trace.events).toEqual([]);
        await h.entryKinds.register(noteKind, call);
        await until(h, () => h.driver.liveCount() === 0, "the waiter runs");
        expect(trace.events).toEqual(["execute:start:t", "execute:end:t"]);
        expect(await statusOf(h, t)).toBe("done");
        expect((await h.inspect(call)).parked).toEqual([]);
      }));

    it(`Registering a missing section kind unparks its waiter (${backend.name})`, () =>
      backend.run(async (storage) => {
        const trace = new Trace();
        const preparer = needing("preparer", { sections: ["plugin.policy"] }, trace);
        const h = await openWith(storage, [preparer]);
        const t = await addStep(h, preparer, h.rootId);
        expect(await h.drive(call)).toBe("idle");
        expect((await h.inspect(call)).parked.map((task) => task.id)).toEqual([t]);
        // An unrelated registration re-examines the parked task, which parks again.
        await h.entryKinds.register(noteKind, call);
        await h.drive(call);
        expect((await h.inspect(call)).parked.map((task) => task.id)).toEqual([t]);
        expect(trace.events).toEqual([]);
        const registered = await h.sections.register(policy, call);
        expect(registered).toBe(policy); // the typed token comes back
        await until(h, () => h.driver.liveCount() === 0, "the waiter runs");
        expect(trace.events).toEqual(["execute:start:t", "execute:end:t"]);
        expect(h.sections.get("plugin.policy")?.render("x")).toBe("<policy>x</policy>");
      }));

    it(`Registering a missing entry kind or section after a reopen unparks the waiter through recover (${backend.name})`, () =>
      backend.run(async (inner) => {
        const trace = new Trace();
        const running = deferred();
        const both = {
          ...stepKind("both", {
            execute: async (task, rt, c) => {
              await patchStep(rt, task, "running", c);
              running.resolve();
              await cancellable(deferred().promise, c); // the process dies while inflight
            },
            recover: trace.wrap("recover", (task, rt, c) => settleStep(rt, task, "done", c)),
          }),
          needs: { entryKinds: ["note"], sections: ["plugin.policy"] },
        };
        const s1 = new GateStorage(inner);
        const h1 = await openWith(s1, [both], { entryKinds: [noteKind] });
        await h1.sections.register(policy, call);
        const t = await addStep(h1, both, h1.rootId, { background: true });
        await h1.attach(call);
        await running.promise;
        s1.crash();

        // Reopened with the task kind but neither need registered: parked, not orphaned.
        const h2 = await openWith(s1.reopen(), [both]);
        await h2.attach(call);
        await h2.drive(call);
        expect((await h2.inspect(call)).parked.map((task) => task.id)).toEqual([t]);
        expect((await h2.inspect(call)).orphaned).toEqual([]);
        await h2.entryKinds.register(noteKind, call);
        await h2.drive(call);
        expect((await h2.inspect(call)).parked.map((task) => task.id)).toEqual([t]);
        expect(trace.events).toEqual([]);
        await h2.sections.register(policy, call);
        await until(h2, () => h2.driver.liveCount() === 0, "the waiter recovers");
        expect(trace.events).toEqual(["recover:start:t", "recover:end:t"]);
        expect(await statusOf(h2, t)).toBe("done");
      }));

    it(`Registry change is ordered on the line (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new GateStorage(inner);
        const late = stepKind("late");
        const h = await openWith(storage, []);
        const held = storage.pause();
        const commit = h.commit((tx) => tx.createConversation({}), call);
        await held;
        // Queued behind the held commit: nothing changes until it is durable.
        const before = outcome(addStep(h, late, h.rootId)); // queued before the kind's registration
        const entry = h.entryKinds.register(noteKind, call);
        const task = h.taskKinds.register(erase(late), call);
        const section = h.sections.register(policy, call);
        const after = addStep(h, late, h.rootId); // queued after it: the kind is there
        await ticks(5);
        expect([h.entryKinds.has("note"), h.taskKinds.has("late"), h.sections.has("plugin.policy")]).toEqual([
          false,
          false,
          false,
        ]);
        storage.resume();
        await commit;
        expect(await entry).toBe(noteKind);
        await task;
        await section;
        expect([h.entryKinds.has("note"), h.taskKinds.has("late"), h.sections.has("plugin.policy")]).toEqual([
          true,
          true,
          true,
        ]);
        const first = await before;
        expect(first.ok).toBe(false);
        expect((first as { error: unknown }).error).toMatchObject({ code: "not_found" });
        expect(await statusOf(h, await after)).toBe("pending");
        // Removal is a line change too, and a task kind with live tasks cannot be removed.
        await expect(h.taskKinds.remove("late", call)).rejects.toMatchObject({ code: "conflict" });
        await h.entryKinds.remove("note", call);
        await h.sections.replace({ key: "plugin.policy", render: (text: string) => text }, call);
        expect(h.entryKinds.has("note")).toBe(false);
        expect(h.sections.get("plugin.policy")?.render("x")).toBe("x");
      }));

    it(`Registry changes are admitted like commits: not from a stale invocation, not on a closed session (${backend.name})`, () =>
      backend.run(async (storage) => {
        const captured = deferred<{ c: Parameters<StepKind["execute"]>[2] }>();
        const quick = stepKind("quick", {
          execute: async (task, rt, c) => {
            captured.resolve({ c });
            await settleStep(rt, task, "done", c);
          },
        });
        const h = await openWith(storage, [quick]);
        await addStep(h, quick, h.rootId);
        expect(await h.drive(call)).toBe("idle");
        const { c } = await captured.promise;
        await until(h, () => !h.driver.busy, "the invocation returned");
        // The invocation returned: its call no longer carries authority.
        await expect(h.entryKinds.register(noteKind, c)).rejects.toMatchObject({ code: "contract" });
        expect(h.entryKinds.has("note")).toBe(false);
        await h.close(call);
        await expect(h.sections.register(policy, call)).rejects.toMatchObject({ code: "closed" });
        expect(h.sections.has("plugin.policy")).toBe(false);
      }));
  });
}
