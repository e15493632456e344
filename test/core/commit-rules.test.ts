/**
 * Commit rules found missing by review, on every backend (memory, JSONL over in-memory files,
 * SQLite inside a Durable Object): forks outlive their deleted source (§2.4, §6.4), every delete path
 * checks the busy subtree (§6.4), abort handlers cannot queue future work (§6.3), and dependencies stay
 * inside one ownership tree (§5.4, §5.7).
 */
import { describe, expect, it } from "vitest";
import { defineEntryKind, summaryEntry, summaryKind, userEntry, userKind } from "../../src/core/entries.js";
import { PicoError } from "../../src/core/errors.js";
import type { Harness } from "../../src/core/harness.js";
import { inbox } from "../../src/core/inbox.js";
import { bindTo } from "../../src/core/state.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import { MemoryFiles } from "../../src/storage/files.js";
import { JsonlStorage } from "../../src/storage/jsonl.js";
import { everyBackend } from "./backends.js";
import {
  addStep,
  call,
  cancellable,
  Gates,
  openWith,
  outcome,
  settleStep,
  stepKind,
  until,
  type StepKind,
} from "./driver-fixtures.js";

const noteKind = defineEntryKind<Entry>("note");

function codeOf(result: { ok: true } | { ok: false; error: unknown }): string | undefined {
  if (result.ok) return undefined;
  return result.error instanceof PicoError ? result.error.code : `not a PicoError: ${String(result.error)}`;
}

async function stored(h: Harness, id: Id): Promise<Task> {
  const task = (await h.storage.getTasks([id])).get(id);
  if (task === undefined) throw new Error(`task ${id} missing`);
  return task;
}

/** A step kind whose execute appends one model-visible entry in its conversation and settles done. */
function writerKind(): StepKind {
  return stepKind("writer", {
    execute: (task, rt, c) =>
      rt.commit((tx) => {
        tx.entry(userKind, userEntry(`from task ${task.state.tag}`, 0));
        tx.settle(task, "done", { tag: task.state.tag, refs: task.state.refs });
      }, c),
  });
}

/** Create a conversation owned by host-created task `owner` (owner and owns in one commit, §5.7). */
function ownedChild(h: Harness, owner: Id): Promise<Id> {
  return h.commit((tx) => {
    const child = tx.createConversation({ owner });
    tx.builder.push({
      type: "patch",
      id: owner,
      role: "start",
      state: { status: "pending", tag: "owner", refs: [] },
      owns: [child],
    });
    return child;
  }, call);
}

for (const backend of everyBackend) {
  describe(`commit rules (${backend.name})`, () => {
    it(`Fork outlives its deleted source (${backend.name})`, () =>
      backend.run(async (storage) => {
        const writer = writerKind();
        const h = await openWith(storage, [writer]);
        const sourceId = await h.commit((tx) => tx.createConversation({}), call);
        const source = await h.conversation(sourceId, call);
        if (source === undefined) throw new Error("no source");
        const [u1, u2] = await source.commit(
          (tx) => [tx.entry(userKind, userEntry("one", 0)), tx.entry(userKind, userEntry("two", 0))],
          call,
        );
        const fork = await source.fork({ at: u1 }, call);
        await h.deleteConversation(sourceId, call);
        expect(await h.conversation(sourceId, call)).toBeUndefined();

        // Append, edit an inherited entry, and move the head: all read the chain through the deleted source.
        const own = await fork.commit((tx) => tx.entry(userKind, userEntry("three", 0)), call);
        const edit = await fork.commit((tx) => tx.entry(noteKind, { edits: [{ target: u1, action: "omit" }] }), call);
        const seq = storage.lastSeq;
        const hidden = await outcome(
          fork.commit((tx) => tx.entry(noteKind, { edits: [{ target: u2, action: "omit" }] }), call),
        );
        expect(codeOf(hidden)).toBe("invalid_commit"); // u2 is after the fork point: still not visible
        expect(storage.lastSeq).toBe(seq);
        const reset = await fork.commit((tx) => tx.entry(summaryKind, summaryEntry("summary", u1, u1, 0)), call);
        expect((await h.entries(fork.id, { limit: 10 }, call)).items.map((e) => e.id)).toEqual([u1, own, edit, reset]);

        // Forking the fork, at an inherited entry and at its own, and appending there.
        const atInherited = await fork.fork({ at: u1 }, call);
        const atOwn = await fork.fork({ at: own }, call);
        const g1 = await atInherited.commit((tx) => tx.entry(userKind, userEntry("g1", 0)), call);
        const g2 = await atOwn.commit((tx) => tx.entry(userKind, userEntry("g2", 0)), call);
        expect((await h.entries(atInherited.id, { limit: 10 }, call)).items.map((e) => e.id)).toEqual([u1, g1]);
        expect((await h.entries(atOwn.id, { limit: 10 }, call)).items.map((e) => e.id)).toEqual([u1, own, g2]);

        // A task writing there settles normally; the session does not fault.
        const task = await addStep(h, writer, fork.id, { tag: "w" });
        expect(await fork.drive(call)).toBe("idle");
        expect(h.fault).toBeUndefined();
        expect((await stored(h, task)).state.status).toBe("done");
        const last = (await h.entries(fork.id, { before: Number.MAX_SAFE_INTEGER, limit: 1 }, call)).items[0];
        expect(last?.byTaskId).toBe(task);
        expect((await fork.contextEntries(undefined, call)).ids).toContain(last?.id);
      }));

    it(`Delete through a transaction while a task is live (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gates = new Gates();
        const held = stepKind("held", {
          execute: async (task, rt, c) => {
            gates.open(`started:${task.state.tag}`);
            await cancellable(gates.get(task.state.tag).promise, c);
            await rt.commit((tx) => {
              tx.entry(userKind, userEntry(`late ${task.state.tag}`, 0));
              tx.settle(task, "done", { tag: task.state.tag, refs: task.state.refs });
            }, c);
          },
        });
        const h = await openWith(storage, [held]);
        const root = await h.root(call);
        const doomed = await h.commit((tx) => tx.createConversation({}), call);

        // A live task that nothing drives yet.
        const pending = await addStep(h, held, doomed, { tag: "p" });
        let seq = storage.lastSeq;
        expect(codeOf(await outcome(h.commit((tx) => tx.deleteConversation(doomed), call)))).toBe("conflict");
        expect(storage.lastSeq).toBe(seq);

        // The same task running: its next entry must still land.
        const conversation = await h.conversation(doomed, call);
        if (conversation === undefined) throw new Error("no conversation");
        const driving = conversation.drive(call);
        await gates.get("started:p").promise;
        expect(codeOf(await outcome(root.commit((tx) => tx.builder.deleteConversation(doomed), call)))).toBe(
          "conflict",
        );
        expect(storage.lastSeq).toBe(seq);

        // A live task in the conversation's ownership subtree (an owned child) keeps it busy too.
        const ownerTask = await addStep(h, held, root.id, { tag: "o" });
        const child = await ownedChild(h, ownerTask);
        await addStep(h, held, child, { tag: "c" });
        seq = storage.lastSeq;
        expect(codeOf(await outcome(h.commit((tx) => tx.deleteConversation(root.id), call)))).toBe("conflict");
        expect(storage.lastSeq).toBe(seq);

        // A task created in the same batch counts as well.
        const empty = await h.commit((tx) => tx.createConversation({}), call);
        seq = storage.lastSeq;
        const sameBatch = await outcome(
          h.commit((tx) => {
            tx.task(held, { conversationId: empty, state: { status: "pending", tag: "x", refs: [] } });
            tx.deleteConversation(empty);
          }, call),
        );
        expect(codeOf(sameBatch)).toBe("conflict");
        expect(storage.lastSeq).toBe(seq);

        gates.open("p");
        expect(await driving).toBe("idle");
        expect(h.fault).toBeUndefined();
        expect((await stored(h, pending)).state.status).toBe("done");
        await until(h, () => !h.driver.busy, "the invocation slot is released");
        await h.commit((tx) => tx.deleteConversation(doomed), call);
        expect(await h.conversation(doomed, call)).toBeUndefined();
      }));

    it(`Abort handler cannot queue input (${backend.name})`, () =>
      backend.run(async (storage) => {
        const gates = new Gates();
        const refused: unknown[] = [];
        let seqBefore = -1;
        let wrote: Id | undefined;
        const queued = stepKind("queued", {
          execute: async (task, _rt, c) => {
            gates.open("started");
            await cancellable(gates.get("never").promise, c);
          },
          abort: async (task, rt, c) => {
            seqBefore = storage.lastSeq;
            for (const mode of ["nextRun", "followUp", "steer"] as const) {
              const result = await outcome(
                rt.commit((tx) => tx.queueInput({ mode, input: `after abort (${mode})` }), c),
              );
              refused.push(result.ok ? undefined : result.error);
            }
            // A queued write is a record, not work: cleanup may report what happened with one.
            seqBefore = storage.lastSeq;
            wrote = await rt.commit(
              (tx) => tx.queueInput({ mode: "write", kind: "notice", entry: { data: { cleanup: true } } }),
              c,
            );
            seqBefore += 2; // the write's inbox element and its queued result
            await settleStep(rt, task, "aborted", c);
            gates.open("aborted");
          },
        });
        const h = await openWith(storage, [queued]);
        const root = await h.root(call);
        const id = await addStep(h, queued, root.id, { tag: "q" });
        const driving = root.drive(call);
        await gates.get("started").promise;
        await h.abortTask(id, call);
        await gates.get("aborted").promise;
        expect(await driving).toBe("idle");
        expect(refused).toHaveLength(3);
        for (const error of refused) {
          expect(error).toBeInstanceOf(PicoError);
          expect((error as PicoError).code).toBe("contract");
          expect((error as PicoError).message).toMatch(/abort handler cannot queue input/);
        }
        // The refused commits wrote nothing: the settlement took the next sequence number.
        expect((await stored(h, id)).state.status).toBe("aborted");
        expect((await h.storage.readList(bindTo(inbox, root.id), { limit: 10 })).items.map((e) => e.id)).toEqual([
          wrote,
        ]);
        expect(storage.lastSeq).toBe(seqBefore + 1);
        expect(h.fault).toBeUndefined();
        await until(h, () => !h.driver.busy, "abort handler returned");
      }));

    it(`§5.4 dependencies reference tasks in the same ownership tree (${backend.name})`, () =>
      backend.run(async (storage) => {
        const step = stepKind("step");
        const h = await openWith(storage, [step]);
        const root = await h.root(call);
        const u = await root.commit((tx) => tx.entry(userKind, userEntry("u", 0)), call);
        const owner = await addStep(h, step, root.id, { tag: "owner" });
        const child = await ownedChild(h, owner);
        const inChild = await addStep(h, step, child, { tag: "child" });
        const grandOwner = await addStep(h, step, child, { tag: "grand-owner" });
        const grandchild = await ownedChild(h, grandOwner);

        // The same tree: root, its owned child and grandchild, in either direction.
        await addStep(h, step, child, { after: [owner] });
        await addStep(h, step, root.id, { after: [inChild] });
        await addStep(h, step, grandchild, { after: [owner, inChild] });
        // A conversation created in the same batch, owned by a task of the tree, joins the tree.
        await h.commit((tx) => {
          const fresh = tx.createConversation({ owner: inChild });
          tx.builder.push({
            type: "patch",
            id: inChild,
            role: "start",
            state: { status: "pending", tag: "child", refs: [] },
            owns: [fresh],
          });
          tx.task(step, { conversationId: fresh, state: { status: "pending", tag: "f", refs: [] }, after: [owner] });
        }, call);

        // Other trees: a fork (provenance is not ownership, §2.5), an unrelated conversation, and a
        // conversation created in the rejected batch itself.
        const fork = await root.fork({ at: u }, call);
        const unrelated = await h.commit((tx) => tx.createConversation({}), call);
        const forkTask = await addStep(h, step, fork.id, { tag: "fork" });
        const seq = storage.lastSeq;
        const attempts: [string, () => Promise<unknown>][] = [
          ["fork after root", () => addStep(h, step, fork.id, { after: [owner] })],
          ["fork after child", () => addStep(h, step, fork.id, { after: [inChild] })],
          ["root after fork", () => addStep(h, step, root.id, { after: [forkTask] })],
          ["unrelated after grandchild's owner", () => addStep(h, step, unrelated, { after: [grandOwner] })],
          ["one same-tree and one foreign dependency", () => addStep(h, step, child, { after: [owner, forkTask] })],
          [
            "new conversation in the batch",
            () =>
              h.commit((tx) => {
                const fresh = tx.createConversation({});
                tx.task(step, {
                  conversationId: fresh,
                  state: { status: "pending", tag: "n", refs: [] },
                  after: [owner],
                });
              }, call),
          ],
        ];
        for (const [what, attempt] of attempts) {
          const result = await outcome(attempt());
          expect(codeOf(result), what).toBe("invalid_commit");
          if (!result.ok) expect((result.error as Error).message, what).toMatch(/ownership tree/);
          expect(storage.lastSeq, what).toBe(seq);
        }
      }));
  });
}

describe("commit rules: uncertain persistence", () => {
  it("Uncertain persistence faults the session (jsonl); reopen continues after the last complete batch", async () => {
    const files = new MemoryFiles();
    const step = stepKind("step");
    const h = await openWith(await JsonlStorage.open(files), [step]);
    const root = await h.root(call);
    await root.commit((tx) => tx.entry(userKind, userEntry("kept", 0)), call);
    // Every byte lands, then the append rejects: the batch may be durable, so the session fail-stops.
    files.failNextAppendAfter = Number.MAX_SAFE_INTEGER;
    const failed = await outcome(root.commit((tx) => tx.entry(userKind, userEntry("uncertain", 0)), call));
    expect(failed.ok).toBe(false);
    await until(h, () => h.fault !== undefined, "the fault");
    expect(h.fault?.message).toMatch(/persistence is uncertain/);
    expect(codeOf(await outcome(root.commit((tx) => tx.entry(userKind, userEntry("after", 0)), call)))).toBe("faulted");
    expect(codeOf(await outcome(h.drive(call)))).toBe("faulted");
    // Reopen recovers the uncertain batch (it was complete) and continues after it.
    const reopened = await openWith(await JsonlStorage.open(files), [step]);
    const texts = (await reopened.entries(reopened.rootId, { limit: 10 }, call)).items.map(
      (e) => (e.model?.[0] as { content: string }).content,
    );
    expect(texts).toEqual(["kept", "uncertain"]);
    await (await reopened.root(call)).commit((tx) => tx.entry(userKind, userEntry("next", 0)), call);
    expect(reopened.fault).toBeUndefined();
  });
});
