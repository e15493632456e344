/**
 * Ownership's public API (§4.3, §5.7, §9.1): ConversationHandle.spawn creates a child owned by the task
 * of the Call in one commit, and the commit line rejects an `owner` without the matching `owns` and the
 * reverse, on every core backend.
 */
import { describe, expect, it } from "vitest";
import type { PicoError } from "../../src/core/errors.js";
import { bindResult } from "../../src/core/inbox.js";
import { conversationList, conversationValue } from "../../src/core/state.js";
import type { CommitBatch, Id } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import {
  call,
  cancellable,
  childTag,
  deferred,
  installStepTurns,
  openWith,
  outcome,
  settleStep,
  stepKind,
} from "./driver-fixtures.js";

const model = conversationValue<string>("pi.model", { rewind: true });
const expanded = conversationValue<boolean>("ui.expanded", { rewind: false });
const planMode = conversationValue<boolean>("plugin.plan", { rewind: true });
const notes = conversationList<string>("test.notes", { rewind: false });

async function expectNothingWritten(storage: Storage, p: () => Promise<unknown>, code: string): Promise<void> {
  const seq = storage.lastSeq;
  const result = await outcome(p());
  expect(result.ok).toBe(false);
  expect((result as { error: PicoError }).error.code).toBe(code);
  expect(storage.lastSeq).toBe(seq);
}

for (const backend of coreBackends) {
  describe(`spawn and ownership (${backend.name})`, () => {
    it(`§4.3 spawn creates the child owned by the calling task in one commit: values copied and overridden, prompt appended, first generation created (${backend.name})`, () =>
      backend.run(async (storage) => {
        const batches: CommitBatch[] = [];
        const done = deferred<Id>();
        const child = stepKind("child", { execute: (_t, _rt, c) => cancellable(deferred().promise, c) });
        const tool = stepKind("tool", {
          execute: async (task, rt, c) => {
            try {
              const from = await rt.conversation(rt.conversationId, c);
              const before = batches.length;
              const id = await from!.spawn(
                {
                  prompt: "look around",
                  values: {
                    inherit: [model, expanded, conversationValue<string>("pi.thinking", { rewind: true })],
                    set: [
                      [planMode, false],
                      [childTag, "kid"],
                    ],
                  },
                },
                c,
              );
              expect(batches.length - before).toBe(1);
              await settleStep(rt, task, "done", c, [id]);
              done.resolve(id);
            } catch (e) {
              done.reject(e);
              throw e;
            }
          },
        });
        const h = await openWith(storage, [tool, child]);
        installStepTurns(h, child);
        h.onCommit((commit) => batches.push(commit.batch));
        const root = await h.root(call);
        await root.value(model).set("m1", call);
        await root.value(expanded).set(true, call);
        await root.value(planMode).set(true, call);
        await root.list(notes).append("not copied", call);
        const owner = await root.commit(
          (tx) => tx.task(tool, { state: { status: "pending", tag: "t", refs: [] } }),
          call,
        );
        await h.attach(call);
        const id = await done.promise;

        const creation = batches.find(
          (b) => b.kind === "main" && b.writes.some((w) => w.type === "createConversation" && w.conversation.id === id),
        );
        expect(creation?.writes.map((w) => w.type)).toEqual([
          "createConversation",
          "value.set", // model (copied)
          "value.set", // expanded (copied)
          "value.set", // planMode (override)
          "value.set", // childTag (override)
          "patch", // owner's owns
          "list.append", // the owner's conversation lists its child (pi.children)
          "list.append", // the prompt queued ...
          "value.set",
          "entry", // ... and placed
          "list.remove",
          "value.set",
          "task", // the first generation
        ]);
        const handle = (await h.conversation(id, call))!;
        expect(handle.record).toEqual({ id, owner });
        expect((await h.getTask(owner, call))?.owns).toEqual([id]);
        expect(await handle.value(model).get(call)).toBe("m1");
        expect(await handle.value(expanded).get(call)).toBe(true);
        expect(await handle.value(planMode).get(call)).toBe(false);
        // Unselected (and unset) values are absent, lists are not copied; the owned child has no parent (§4.4).
        expect(
          await handle.value(conversationValue<string>("pi.thinking", { rewind: true })).get(call),
        ).toBeUndefined();
        expect((await handle.list(notes).read(undefined, call)).items).toEqual([]);
        const entries = (await h.entries(id, { limit: 10 }, call)).items;
        expect(entries.map((e) => e.kind)).toEqual(["user"]);
        expect(entries[0]?.model?.[0]).toMatchObject({ role: "user", content: "look around" });
        const first = (await h.storage.scanTasks({ conversationIds: [id], limit: 10 })).items;
        expect(first.map((t) => [t.kind, t.state])).toEqual([
          ["child", { status: "pending", tag: "kid", refs: [expect.any(Number)] }],
        ]);
        const inputId = (first[0]?.state as unknown as { refs: Id[] }).refs[0] as Id;
        expect(await h.storage.getValue(bindResult(id, inputId)).then((v) => v?.value)).toEqual({
          status: "placed",
          entry: entries[0]?.id,
        });
        await h.close(call);
      }));

    it(`spawn refuses a call that carries no task and writes nothing (${backend.name})`, () =>
      backend.run(async (storage) => {
        const child = stepKind("child");
        const h = await openWith(storage, [child]);
        installStepTurns(h, child);
        const root = await h.root(call);
        await expectNothingWritten(storage, () => root.spawn({ prompt: "hi" }, call), "contract");
      }));

    it(`§5.7 the line rejects an owner without the matching owns, and the reverse, writing nothing (${backend.name})`, () =>
      backend.run(async (storage) => {
        const work = stepKind("work", { execute: () => new Promise<void>(() => undefined) });
        const h = await openWith(storage, [work]);
        const task = await h.commit(
          (tx) => tx.task(work, { conversationId: h.rootId, state: { status: "pending", tag: "w", refs: [] } }),
          call,
        );
        const other = await h.commit((tx) => tx.createConversation({}), call);
        const stored = async () => (await h.getTask(task, call))!;
        // owner without owns
        await expectNothingWritten(
          storage,
          () => h.commit((tx) => tx.createConversation({ owner: task }), call),
          "invalid_commit",
        );
        // owns of a conversation that names no owner, or another one, or already exists
        await expectNothingWritten(
          storage,
          () =>
            h.commitInternal(async (b) => {
              const c = b.createConversation({});
              const t = await stored();
              b.push({ type: "patch", id: task, role: t.role, state: t.state, owns: [c] });
            }, call),
          "invalid_commit",
        );
        await expectNothingWritten(
          storage,
          () =>
            h.commitInternal(async (b) => {
              const t = await stored();
              b.push({ type: "patch", id: task, role: t.role, state: t.state, owns: [other] });
            }, call),
          "invalid_commit",
        );
        await expectNothingWritten(
          storage,
          () =>
            h.commit(
              (tx) =>
                tx.task(work, {
                  conversationId: h.rootId,
                  state: { status: "pending", tag: "x", refs: [] },
                  owns: [other],
                }),
              call,
            ),
          "invalid_commit",
        );
        // Both written together are accepted, for a new task and an existing one.
        const fresh = await h.commitInternal((b) => {
          const id = b.task(work, h.rootId, {
            state: { status: "pending", tag: "n", refs: [] },
            owns: [h.storage.lastSeq + 2],
          });
          b.createConversation({ owner: id });
          return id;
        }, call);
        expect((await h.getTask(fresh, call))?.owns).toHaveLength(1);
        const owned = await h.commitInternal(async (b) => {
          const c = b.createConversation({ owner: task });
          const t = await stored();
          b.push({ type: "patch", id: task, role: t.role, state: t.state, owns: [c] });
          return c;
        }, call);
        expect((await stored()).owns).toEqual([owned]);
        // Ownership is immutable: owns never drops a conversation.
        await expectNothingWritten(
          storage,
          () =>
            h.commitInternal(async (b) => {
              const t = await stored();
              b.push({ type: "patch", id: task, role: t.role, state: t.state, owns: [] });
            }, call),
          "invalid_commit",
        );
      }));
  });
}
