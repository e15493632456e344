/**
 * The inbox data model (§8.1), request keys (§3.4) and tx.write (§5.8) on every core backend.
 */
import { describe, expect, it } from "vitest";
import { userEntry, userKind } from "../../src/core/entries.js";
import { bindInbox, bindResult, inputResult } from "../../src/core/inbox.js";
import { bindTo } from "../../src/core/state.js";
import { coreBackends } from "./backends.js";
import { call, openHarness, turnKind, workKind } from "./fixtures.js";

for (const backend of coreBackends) {
  describe(`inbox and request keys (${backend.name})`, () => {
    it(`a second queueInput with the same request key writes nothing and returns the first inputId, whatever its payload (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const first = await root.queueInput({ mode: "followUp", input: "hello", requestId: "req-42" }, call);
        const seq = storage.lastSeq;
        const second = await root.queueInput({ mode: "steer", input: "something else", requestId: "req-42" }, call);
        expect(second.inputId).toBe(first.inputId);
        expect(storage.lastSeq).toBe(seq);
        expect(await h.acceptance("req-42", call)).toEqual({
          requestId: "req-42",
          conversationId: root.id,
          inputId: first.inputId,
        });
        expect(await h.acceptance("req-43", call)).toBeUndefined();
        expect(await root.result(first.inputId, call)).toEqual({ status: "queued", requestId: "req-42" });
        // §3.4: the inbox element, its result and the mapping land in one commit, in that order.
        expect(first.inputId).toBe(seq - 2);
      }));

    it(`a request key is never remapped: tx.queueInput with a used key, or twice in one commit, rejects and writes nothing (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const first = await root.queueInput({ mode: "followUp", input: "hello", requestId: "req-7" }, call);
        const seq = storage.lastSeq;
        const reuse = () =>
          root.commit((tx) => tx.queueInput({ mode: "nextRun", input: "other", requestId: "req-7" }), call);
        await expect(reuse()).rejects.toMatchObject({
          code: "invalid_commit",
          message: expect.stringContaining("req-7"),
        });
        const twice = () =>
          root.commit((tx) => {
            tx.queueInput({ mode: "nextRun", input: "a", requestId: "req-8" });
            tx.queueInput({ mode: "nextRun", input: "b", requestId: "req-8" });
          }, call);
        await expect(twice()).rejects.toMatchObject({ code: "invalid_commit" });
        expect(storage.lastSeq).toBe(seq);
        expect(await h.acceptance("req-7", call)).toEqual({
          requestId: "req-7",
          conversationId: root.id,
          inputId: first.inputId,
        });
        expect(await h.acceptance("req-8", call)).toBeUndefined();
      }));

    it(`without a request key no mapping is written (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const seq = storage.lastSeq;
        await root.queueInput({ mode: "nextRun", input: "later" }, call);
        expect(storage.lastSeq).toBe(seq + 2);
      }));

    it(`abortInput withdraws a queued input once: unanswered(aborted), then not_found (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const { inputId } = await root.queueInput({ mode: "followUp", input: "x", requestId: "r" }, call);
        expect(await root.abortInput(inputId, call)).toBe("aborted");
        expect(await root.result(inputId, call)).toEqual({ status: "unanswered", reason: "aborted", requestId: "r" });
        expect(await root.abortInput(inputId, call)).toBe("not_found");
        expect((await storage.readList(bindInbox(root.id), { limit: 10 })).items).toEqual([]);
      }));

    it(`tx.write appends at once when no turn is live and queues while one is (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const idle = await root.write(userKind, userEntry("note", 0), call);
        const idleResult = await root.result(idle.inputId, call);
        expect(idleResult?.status).toBe("done");
        const entryId = idleResult?.status === "done" ? idleResult.entry : -1;
        expect((await h.getEntry(userKind, entryId, call))?.model[0]?.content).toBe("note");
        expect((await storage.readList(bindInbox(root.id), { limit: 10 })).items).toEqual([]);

        await root.commit((tx) => tx.task(turnKind, { state: { status: "pending", inputs: [] } }), call);
        const busy = await root.write(userKind, userEntry("wait for the boundary", 0), call);
        expect(await root.result(busy.inputId, call)).toEqual({ status: "queued" });
        const queued = (await storage.readList(bindInbox(root.id), { limit: 10 })).items;
        expect(queued.map((e) => e.id)).toEqual([busy.inputId]);
        expect(queued[0]?.value).toMatchObject({ mode: "write", kind: "user" });
      }));

    it(`input results never leave a terminal status; an element leaves the inbox only with its result (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const { inputId } = await root.queueInput({ mode: "followUp", input: "x" }, call);
        const seq = storage.lastSeq;
        await expect(root.commit((tx) => tx.list(bindInbox(root.id)).remove(inputId), call)).rejects.toMatchObject({
          code: "invalid_commit",
        });
        expect(storage.lastSeq).toBe(seq);
        await root.commit((tx) => {
          tx.list(bindInbox(root.id)).remove(inputId);
          tx.value(inputResult(inputId)).set({ status: "unanswered", reason: "failed" });
        }, call);
        await expect(
          root.commit((tx) => tx.value(inputResult(inputId)).set({ status: "queued" }), call),
        ).rejects.toMatchObject({ code: "invalid_commit" });
        await expect(
          root.commit((tx) => tx.value(inputResult(inputId)).set({ status: "done", entry: 1 }), call),
        ).rejects.toMatchObject({ code: "invalid_commit" });
        expect(await root.value(bindTo(inputResult(inputId), root.id)).get(call)).toEqual({
          status: "unanswered",
          reason: "failed",
        });
        expect(bindResult(root.id, inputId).namespace).toBe("pi.inputResult");
      }));

    it(`conversation.abort marks the foreground closure and withdraws steer and followUp, keeping write and nextRun (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [fg, bg] = await root.commit(
          (tx) => [
            tx.task(turnKind, { state: { status: "pending", inputs: [] } }),
            tx.task(workKind, { state: { status: "pending", input: 0 }, background: true }),
          ],
          call,
        );
        const steer = await root.queueInput({ mode: "steer", input: "s" }, call);
        const follow = await root.queueInput({ mode: "followUp", input: "f" }, call);
        const next = await root.queueInput({ mode: "nextRun", input: "n" }, call);
        const write = await root.write(userKind, userEntry("w", 0), call);
        const seq = storage.lastSeq;
        await root.abort(call);
        expect(storage.lastSeq).toBe(seq + 5); // one mark, two removals, two results: one commit
        expect((await h.getTask(fg, call))?.abort).toBe(true);
        expect((await h.getTask(bg, call))?.abort).toBeUndefined();
        expect((await root.result(steer.inputId, call))?.status).toBe("unanswered");
        expect((await root.result(follow.inputId, call))?.status).toBe("unanswered");
        expect((await root.result(next.inputId, call))?.status).toBe("queued");
        expect((await root.result(write.inputId, call))?.status).toBe("queued");
      }));
  });
}
