/**
 * TaskRuntime authority (§6.1, §6.5): every runtime method rejects a call whose invocation is not the
 * runtime's current one (a host call, or the invocation's own call after it returned), and an
 * invocation's write authority ends at its task's settlement.
 */
import { describe, expect, it } from "vitest";
import type { Call } from "../../src/core/call.js";
import { PicoError } from "../../src/core/errors.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import { conversationList, conversationValue } from "../../src/core/state.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "./backends.js";
import { call, cancellable, deferred, openWith, outcome, settleStep, stepKind, until } from "./driver-fixtures.js";

const flag = conversationValue<boolean>("test.flag", { rewind: false });
const items = conversationList<string>("test.items", { rewind: false });

type Use = (rt: TaskRuntime, c: Call, other: Id) => Promise<unknown>;

const methods: readonly [string, Use][] = [
  ["value", (rt, c) => rt.value(flag).set(true, c)],
  ["value (read)", (rt, c) => rt.value(flag).get(c)],
  ["list", (rt, c) => rt.list(items).append("x", c)],
  ["list (read)", (rt, c) => rt.list(items).read(undefined, c)],
  ["abortTask", (rt, c, other) => rt.abortTask(other, c)],
  ["markIfLive", (rt, c, other) => rt.markIfLive([other], c)],
  ["waitForTask", (rt, c, other) => rt.waitForTask(other, { budgetMs: 0 }, c)],
  ["sleep", (rt, c) => rt.sleep(rt.now() + 60_000, c)],
  ["config", (rt, c) => rt.config({ kind: "k", config: { flag } }, c)],
];

for (const backend of coreBackends) {
  describe(`TaskRuntime authority (${backend.name})`, () => {
    for (const [name, use] of methods) {
      it(`§6.5 runtime.${name} rejects a call whose invocation is not current (${backend.name})`, () =>
        backend.run(async (storage) => {
          const captured = deferred<{ rt: TaskRuntime; c: Call }>();
          const release = deferred();
          const worker = stepKind("worker", {
            execute: async (task, rt, c) => {
              captured.resolve({ rt, c });
              await cancellable(release.promise, c);
              await settleStep(rt, task, "done", c);
            },
          });
          const idle = stepKind("idle", { execute: (_t, _rt, c) => cancellable(deferred().promise, c) });
          const h = await openWith(storage, [worker, idle]);
          // The other task lives in a conversation nobody drives, so it never runs.
          const other = await h.commit((tx) => {
            const elsewhere = tx.createConversation({});
            return tx.task(idle, {
              conversationId: elsewhere,
              state: { status: "pending", tag: "o", refs: [] },
              background: true,
            });
          }, call);
          await h.commit(
            (tx) => tx.task(worker, { conversationId: h.rootId, state: { status: "pending", tag: "w", refs: [] } }),
            call,
          );
          const driving = (await h.root(call)).drive(call);
          const { rt, c } = await captured.promise;
          // A host call (no invocation) while the invocation runs.
          const seq = storage.lastSeq;
          const asHost = await outcome(use(rt, call, other));
          expect(asHost.ok).toBe(false);
          expect((asHost as { error: PicoError }).error).toMatchObject({ code: "contract" });
          expect(storage.lastSeq).toBe(seq);
          release.resolve();
          expect(await driving).toBe("idle");
          await until(h, () => !h.driver.busy, "the invocation returned");
          // The invocation's own call after it returned.
          const after = storage.lastSeq;
          const stale = await outcome(use(rt, c, other));
          expect(stale.ok).toBe(false);
          expect((stale as { error: PicoError }).error).toMatchObject({ code: "contract" });
          expect(storage.lastSeq).toBe(after);
          expect((await h.getTask(other, call))?.abort).toBeUndefined();
          await h.close(call);
        }));
    }

    it(`§6.1 Execute after its own settlement (${backend.name})`, () =>
      backend.run(async (storage) => {
        const result = deferred<{ ok: boolean; error?: unknown }>();
        const worker = stepKind("worker", {
          execute: async (task, rt, c) => {
            await settleStep(rt, task, "done", c);
            // Authority ends at settlement: a later write by the same, still running invocation rejects.
            const r = await outcome(rt.commit((tx) => tx.value(flag).set(true), c));
            result.resolve(r.ok ? { ok: true } : { ok: false, error: r.error });
          },
        });
        const h = await openWith(storage, [worker]);
        await h.commit(
          (tx) => tx.task(worker, { conversationId: h.rootId, state: { status: "pending", tag: "w", refs: [] } }),
          call,
        );
        expect(await (await h.root(call)).drive(call)).toBe("idle");
        const r = await result.promise;
        expect(r.ok).toBe(false);
        expect(r.error).toBeInstanceOf(PicoError);
        expect((r.error as PicoError).code).toBe("contract");
        expect(await (await h.root(call)).value(flag).get(call)).toBeUndefined();
        expect(h.fault).toBeUndefined();
      }));
  });
}
