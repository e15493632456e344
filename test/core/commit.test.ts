/**
 * The core's transactions and commit line (§3, §9.2), task records (§5.1, §5.2), validation on the line
 * (§2.1, §5.8) and handles (§9.1), on every core backend.
 */
import { describe, expect, it } from "vitest";
import { PicoError } from "../../src/core/errors.js";
import {
  assistantEntry,
  assistantKind,
  defineEntryKind,
  handoffEntry,
  handoffKind,
  resetKind,
  summaryKind,
  systemKind,
  toolResultEntry,
  toolResultKind,
  userEntry,
  userKind,
  type EntryKind,
} from "../../src/core/entries.js";
import { ConversationHandle } from "../../src/core/conversation.js";
import { initialValue } from "../../src/core/harness.js";
import { commitWithOrigin } from "../../src/core/origin-commit.js";
import { conversationTx } from "../../src/core/tx.js";
import { conversationList, conversationValue, sessionValue } from "../../src/core/state.js";
import type { Entry } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import {
  assistant,
  call,
  fillTo,
  openHarness,
  PausableStorage,
  toolResult,
  turnKind,
  user,
  workKind,
} from "./fixtures.js";

const planMode = conversationValue<boolean>("plugin.plan", { rewind: true });
const model = conversationValue<string>("pi.model", { rewind: true });
const expanded = conversationValue<boolean>("ui.expanded", { rewind: false });
const moves = conversationList<string>("game.moves", { rewind: true });

async function expectNothingWritten(
  storage: Storage,
  lastSeq: number,
  attempt: () => Promise<unknown>,
  code?: string,
): Promise<unknown> {
  const error = await attempt().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  if (code !== undefined) expect((error as PicoError).code).toBe(code);
  expect(storage.lastSeq).toBe(lastSeq);
  return error;
}

for (const backend of coreBackends) {
  describe(`core commits (${backend.name})`, () => {
    it(`§3.1 ids are minted while building: batch [100-102], entry id 101 (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        await fillTo(h, 99);
        const root = await h.root(call);
        // A rejected commit consumes nothing: the next one starts at 100 again.
        await expectNothingWritten(storage, 99, () =>
          root.commit((tx) => {
            tx.value(planMode).set(true);
            tx.entry(userKind, userEntry("Inspect", 0));
            throw new Error("changed my mind");
          }, call),
        );
        const entryId = await root.commit((tx) => {
          tx.value(planMode).set(true);
          const id = tx.entry(userKind, userEntry("Inspect", 0));
          tx.task(workKind, { state: { status: "pending", input: id } });
          return id;
        }, call);
        expect(entryId).toBe(101);
        expect(storage.lastSeq).toBe(102);
        expect(
          (await storage.getValue({ scope: { conversation: root.id }, namespace: "plugin.plan", rewind: true }))?.seq,
        ).toBe(100);
        const task = await h.getTask(workKind, 102, call);
        expect(task?.state).toEqual({ status: "pending", input: 101 });
        expect(task?.role).toBe("start");
      }));

    it(`§3.2 rewindable state written after an entry throws before persistence and consumes no ids (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const before = storage.lastSeq;
        const error = await expectNothingWritten(storage, before, () =>
          root.commit((tx) => {
            tx.entry(userKind, userEntry("hi", 0));
            tx.value(planMode).set(true);
          }, call),
        );
        expect(String(error)).toContain("before entries");
        // Sticky and session state may follow entries.
        await root.commit((tx) => {
          tx.entry(userKind, userEntry("hi", 0));
          tx.value(expanded).set(true);
          tx.value(sessionValue<string>("pi.session.name")).set("s");
        }, call);
        expect(storage.lastSeq).toBe(before + 3);
      }));

    it(`§3.2 the fork at 301 has plan mode but not the later model (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        await fillTo(h, 299);
        await root.commit((tx) => {
          tx.value(planMode).set(true); // 300
          tx.entry(toolResultKind, toolResultEntry(toolResult("c1", "ok"), {})); // 301
        }, call);
        await root.value(model).set("claude-opus-5", call); // 302
        const b = await root.fork({ at: 301 }, call);
        expect(await b.value(planMode).get(call)).toBe(true);
        expect(await b.value(model).get(call)).toBeUndefined();
        expect(await root.value(model).get(call)).toBe("claude-opus-5");
        const transcript = await h.entries(b.id, { limit: 10 }, call);
        expect(transcript.items.map((e) => e.id)).toEqual([301]);
      }));

    it(`§3.3 a throwing or rejected builder writes nothing and the session keeps working (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const seq = storage.lastSeq;
        await expectNothingWritten(storage, seq, () =>
          root.commit(async (tx) => {
            tx.entry(userKind, userEntry("a", 0));
            await tx.getEntry(1);
            throw new Error("boom");
          }, call),
        );
        await expectNothingWritten(
          storage,
          seq,
          () =>
            root.commit(
              (tx) => tx.task(workKind, { state: { status: "running", input: 1, attempt: 1 } } as never),
              call,
            ),
          "invalid_commit",
        );
        const id = await root.commit((tx) => tx.entry(userKind, userEntry("b", 0)), call);
        expect(id).toBe(seq + 1);
      }));

    it(`an empty commit writes nothing and resolves with the builder's value (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const seq = storage.lastSeq;
        let published = 0;
        h.onCommit(() => published++);
        expect(await h.commit(() => "nothing", call)).toBe("nothing");
        expect(storage.lastSeq).toBe(seq);
        expect(published).toBe(0);
      }));

    it(`Harness.open creates the root and its initial values only on empty storage (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage, { rootValues: [initialValue(model, "faux-1")] });
        const root = await h.root(call);
        expect(root.id).toBe(1);
        expect(await root.value(model).get(call)).toBe("faux-1");
        expect(storage.lastSeq).toBe(2);
        const again = await openHarness(storage, { rootValues: [initialValue(model, "other")] });
        expect(storage.lastSeq).toBe(2);
        expect(await (await again.root(call)).value(model).get(call)).toBe("faux-1");
      }));

    it(`the commit line persists, then publishes whole batches in commit order (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const seen: { first: number; last: number; writes: number; lastSeqAtPublish: number }[] = [];
        h.onCommit((c) =>
          seen.push({ first: c.first, last: c.last, writes: c.batch.writes.length, lastSeqAtPublish: storage.lastSeq }),
        );
        const base = storage.lastSeq;
        await Promise.all([
          root.commit((tx) => {
            tx.entry(userKind, userEntry("one", 0));
            tx.entry(userKind, userEntry("two", 0));
          }, call),
          root.commit(async (tx) => {
            await tx.getEntry(1);
            tx.entry(userKind, userEntry("three", 0));
          }, call),
        ]);
        expect(seen).toEqual([
          { first: base + 1, last: base + 2, writes: 2, lastSeqAtPublish: base + 2 },
          { first: base + 3, last: base + 3, writes: 1, lastSeqAtPublish: base + 3 },
        ]);
      }));

    it(`§10.2 Persistence paused after construction (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = new PausableStorage(inner);
        const h = await openHarness(storage);
        const root = await h.root(call);
        const first = await root.commit((tx) => tx.entry(userKind, userEntry("old", 0)), call);
        storage.pause();
        const pending = root.commit((tx) => {
          tx.value(planMode).set(true);
          return tx.entry(userKind, userEntry("new", 0));
        }, call);
        await new Promise((r) => setTimeout(r, 5));
        // Readers see the old complete state: neither the value nor the entry of the paused batch.
        expect(storage.lastSeq).toBe(first);
        expect(await root.value(planMode).get(call)).toBeUndefined();
        expect((await h.entries(root.id, { limit: 10 }, call)).items.map((e) => e.id)).toEqual([first]);
        expect((await root.contextEntries(undefined, call)).ids).toEqual([first]);
        storage.resume();
        const second = await pending;
        expect(await root.value(planMode).get(call)).toBe(true);
        expect((await root.contextEntries(undefined, call)).ids).toEqual([first, second]);
      }));
  });

  describe(`core task records (${backend.name})`, () => {
    it(`role and turn are materialized on every write; patch and settle replace the state (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [work, turn] = await root.commit(
          (tx) => [
            tx.task(workKind, { state: { status: "pending", input: 0 } }),
            tx.task(turnKind, { state: { status: "pending", inputs: [] } }),
          ],
          call,
        );
        const t = (await h.getTask(workKind, work, call))!;
        expect(t.role).toBe("start");
        expect(t.turn).toBeUndefined();
        expect((await h.getTask(turnKind, turn, call))?.turn).toBe(true);
        await root.commit((tx) => {
          if (t.state.status !== "pending") throw new Error("narrowing");
          tx.patch(t, "running", { input: t.state.input, attempt: 1 });
        }, call);
        const running = (await h.getTask(workKind, work, call))!;
        expect(running.role).toBe("inflight");
        expect(running.state).toEqual({ status: "running", input: 0, attempt: 1 });
        await root.commit((tx) => tx.settle(running, "done", { input: 0, output: "ok" }), call);
        const done = (await h.getTask(workKind, work, call))!;
        expect(done.role).toBe("terminal");
        expect(done.state).toEqual({ status: "done", input: 0, output: "ok" });
      }));

    it(`patch to a terminal status, settle to a live one, orphaned and unknown statuses reject with nothing written (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const id = await root.commit((tx) => tx.task(workKind, { state: { status: "pending", input: 0 } }), call);
        const t = (await h.getTask(workKind, id, call))!;
        const seq = storage.lastSeq;
        const untyped = t as unknown as { id: number; kind: string };
        type Loose = {
          patch(task: unknown, status: string, payload: object): void;
          settle(task: unknown, status: string, payload: object): void;
        };
        for (const attempt of [
          (tx: Loose) => tx.patch(untyped, "done", { input: 0, output: "x" }),
          (tx: Loose) => tx.settle(untyped, "running", { input: 0, attempt: 1 }),
          (tx: Loose) => tx.settle(untyped, "orphaned", { input: 0 }),
          (tx: Loose) => tx.patch(untyped, "exploded", { input: 0 }),
          (tx: Loose) => tx.patch(untyped, "running", { status: "running", input: 0, attempt: 1 }),
        ]) {
          await expectNothingWritten(
            storage,
            seq,
            () => root.commit((tx) => attempt(tx as unknown as Loose), call),
            "invalid_commit",
          );
        }
        // A settled task never changes again (storage refuses the write whole).
        await root.commit((tx) => tx.settle(t, "failed", { input: 0, error: "x" }), call);
        const settledSeq = storage.lastSeq;
        await expectNothingWritten(storage, settledSeq, () =>
          root.commit((tx) => tx.settle(t, "done", { input: 0, output: "y" }), call),
        );
      }));

    it(`typed reads return undefined for another kind and batched typed reads omit it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [a, b] = await root.commit(
          (tx) => [
            tx.task(workKind, { state: { status: "pending", input: 0 } }),
            tx.task(turnKind, { state: { status: "pending", inputs: [] } }),
          ],
          call,
        );
        expect(await h.getTask(turnKind, a, call)).toBeUndefined();
        expect((await h.getTask(a, call))?.kind).toBe("work");
        const typed = await h.getTasks(workKind, [a, b], call);
        expect([...typed.keys()]).toEqual([a]);
        const both = await h.getTasks([a, b], call);
        expect([...both.keys()].sort()).toEqual([a, b]);
      }));
  });

  describe(`core entry kinds (${backend.name})`, () => {
    it(`typed getEntry of another kind is undefined; batched typed reads omit it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [u, a] = await root.commit(
          (tx) => [tx.entry(userKind, userEntry("q", 0)), tx.entry(assistantKind, assistantEntry(assistant("a")))],
          call,
        );
        expect(await h.getEntry(assistantKind, u, call)).toBeUndefined();
        expect((await h.getEntry(userKind, u, call))?.model[0]?.content).toBe("q");
        const any = await h.getEntry(a, call);
        expect(assistantKind.is(any)).toBe(true);
        expect([...(await h.getEntries(userKind, [u, a], call)).keys()]).toEqual([u]);
      }));

    it(`open reports unregistered entry kinds without rejecting (${backend.name})`, () =>
      backend.run(async (storage) => {
        const noteKind: EntryKind<Entry> = defineEntryKind("note");
        const first = await openHarness(storage, { entryKinds: [noteKind] });
        const root = await first.root(call);
        await root.commit((tx) => tx.entry(noteKind, { data: { text: "hello" } }), call);
        const reports: unknown[] = [];
        await openHarness(storage, { report: (r) => reports.push(r) });
        expect(reports).toEqual([{ type: "unregistered_entry_kinds", kinds: ["note"] }]);
      }));

    it(`entry kind registration: register rejects duplicates, replace needs an existing kind, remove forgets code only (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const noteKind = defineEntryKind<Entry>("note");
        await h.registerEntryKind(noteKind, call);
        await expect(h.registerEntryKind(noteKind, call)).rejects.toMatchObject({ code: "conflict" });
        await h.replaceEntryKind(defineEntryKind<Entry>("note"), call);
        await expect(h.replaceEntryKind(defineEntryKind<Entry>("other"), call)).rejects.toMatchObject({
          code: "not_found",
        });
        const root = await h.root(call);
        const id = await root.commit((tx) => tx.entry(noteKind, { data: 1 }), call);
        await h.removeEntryKind("note", call);
        expect(h.entryKinds.has("note")).toBe(false);
        expect((await h.getEntry(id, call))?.data).toBe(1);
      }));
  });

  describe(`core validation on the line (${backend.name})`, () => {
    it(`head "self" stores the entry's own id; a head may not move context backwards (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [u1, , u2] = await root.commit(
          (tx) => [
            tx.entry(userKind, userEntry("a", 0)),
            tx.entry(assistantKind, assistantEntry(assistant("b"))),
            tx.entry(userKind, userEntry("c", 0)),
          ],
          call,
        );
        const reset = await root.commit((tx) => tx.entry(resetKind, { head: "self" }), call);
        expect((await h.getEntry(reset, call))?.head).toBe(reset);
        const seq = storage.lastSeq;
        await expectNothingWritten(
          storage,
          seq,
          () =>
            root.commit(
              (tx) => tx.entry(summaryKind, { data: { summarizedThrough: u1 }, model: [user("s")], head: u2 }),
              call,
            ),
          "invalid_commit",
        );
        expect(u1).toBeLessThan(u2);
      }));

    it(`a head must be a visible entry and must not split a tool exchange (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const other = await h.commit((tx) => tx.createConversation({}), call);
        const foreign = await h.commit((tx) => tx.entry(userKind, other, userEntry("elsewhere", 0)), call);
        const [u, a, r1] = await root.commit(
          (tx) => [
            tx.entry(userKind, userEntry("q", 0)),
            tx.entry(assistantKind, assistantEntry(assistant("calling", ["c1", "c2"]))),
            tx.entry(toolResultKind, toolResultEntry(toolResult("c1", "one"), {})),
          ],
          call,
        );
        const seq = storage.lastSeq;
        const summary = (head: number) =>
          root.commit(
            (tx) => tx.entry(summaryKind, { data: { summarizedThrough: u }, model: [user("s")], head }),
            call,
          );
        await expectNothingWritten(storage, seq, () => summary(foreign), "invalid_commit");
        await expectNothingWritten(storage, seq, () => summary(r1), "invalid_commit"); // c2 has no result yet
        await expectNothingWritten(
          storage,
          seq,
          () => root.commit((tx) => tx.entry(resetKind, { head: "self" }), call),
          "invalid_commit",
        );
        const r2 = await root.commit(
          (tx) => tx.entry(toolResultKind, toolResultEntry(toolResult("c2", "two"), {})),
          call,
        );
        // Now the exchange is complete: a boundary at the assistant or after the results is fine.
        await summary(a);
        const after = await root.commit((tx) => tx.entry(userKind, userEntry("next", 0)), call);
        await summary(after);
        expect(r2).toBeGreaterThan(r1);
      }));

    it(`a head in a fork created by the same commit is checked against the source's heads and exchanges (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [u1, u2] = await root.commit(
          (tx) => [tx.entry(userKind, userEntry("a", 0)), tx.entry(userKind, userEntry("b", 0))],
          call,
        );
        const reset = await root.commit((tx) => tx.entry(resetKind, { head: "self" }), call);
        const [, a] = await root.commit(
          (tx) => [
            tx.entry(userKind, userEntry("q", 0)),
            tx.entry(assistantKind, assistantEntry(assistant("calling", ["c1"]))),
          ],
          call,
        );
        const seq = storage.lastSeq;
        const forkWithHead = (at: number, head: number) =>
          h.commit((tx) => {
            const fork = tx.createConversation({ parent: { conversationId: root.id, at } });
            return tx.entry(summaryKind, fork, { data: { summarizedThrough: u1 }, model: [user("s")], head });
          }, call);
        // The fork inherits the reset at `reset`: a head at u2 would move its context backwards.
        await expectNothingWritten(storage, seq, () => forkWithHead(reset, u2), "invalid_commit");
        // A boundary after the assistant's call but before its (missing) result splits the exchange.
        await expectNothingWritten(storage, seq, () => forkWithHead(a, a + 1), "invalid_commit");
        // Without the inherited reset (fork before it), the same head is fine.
        await forkWithHead(u2, u2);
      }));

    it(`edits target earlier visible entries; arbitrary edits of managed system entries reject (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const [u, baseline] = await root.commit(
          (tx) => [
            tx.entry(userKind, userEntry("q", 0)),
            tx.entry(systemKind, {
              data: { baseline: true, sections: [] },
              model: [{ role: "system", content: "be nice", timestamp: 0 }],
            }),
          ],
          call,
        );
        const seq = storage.lastSeq;
        const note = defineEntryKind<Entry>("note");
        await expectNothingWritten(storage, seq, () =>
          root.commit((tx) => tx.entry(note, { edits: [{ target: seq + 5, action: "omit" }] }), call),
        );
        await expectNothingWritten(
          storage,
          seq,
          () => root.commit((tx) => tx.entry(note, { edits: [{ target: baseline, action: "omit" }] }), call),
          "invalid_commit",
        );
        await expectNothingWritten(
          storage,
          seq,
          () =>
            root.commit(
              (tx) =>
                tx.entry(systemKind, {
                  data: { sections: [] },
                  model: [],
                  edits: [{ target: baseline, action: "omit" }],
                }),
              call,
            ),
          "invalid_commit",
        );
        // The sole exception: a fresh baseline omitting a superseded managed entry.
        await root.commit(
          (tx) =>
            tx.entry(systemKind, {
              data: { baseline: true, sections: [] },
              model: [],
              edits: [{ target: baseline, action: "omit" }],
            }),
          call,
        );
        await root.commit(
          (tx) => tx.entry(note, { edits: [{ target: u, action: "replace", messages: [user("shorter")] }] }),
          call,
        );
        const b = await root.fork({ at: u }, call);
        const later = await root.commit((tx) => tx.entry(userKind, userEntry("later", 0)), call);
        const forkSeq = storage.lastSeq;
        await expectNothingWritten(
          storage,
          forkSeq,
          () => b.commit((tx) => tx.entry(note, { edits: [{ target: later, action: "omit" }] }), call),
          "invalid_commit",
        );
      }));

    it(`inTurn: a model-visible entry from outside a live turn rejects naming tx.write; entries without model and turn tasks pass (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const turn = await root.commit((tx) => tx.task(turnKind, { state: { status: "pending", inputs: [] } }), call);
        const seq = storage.lastSeq;
        const error = await expectNothingWritten(
          storage,
          seq,
          () => root.commit((tx) => tx.entry(userKind, userEntry("interrupt", 0)), call),
          "in_turn",
        );
        expect(String(error)).toContain("tx.write");
        // An entry without model is never blocked.
        await root.commit((tx) => tx.entry(defineEntryKind<Entry>("note"), { data: "quiet" }), call);
        // The turn task itself writes its exchange.
        await commitWithOrigin(
          h,
          { taskId: turn, turn: true },
          { conversationId: root.id },
          (b) => conversationTx(b, root.id).entry(assistantKind, assistantEntry(assistant("answer"))),
          call,
        );
        // A non-turn task is blocked like the host.
        await expect(
          commitWithOrigin(
            h,
            { taskId: 99, turn: false },
            { conversationId: root.id },
            (b) => conversationTx(b, root.id).entry(userKind, userEntry("x", 0)),
            call,
          ),
        ).rejects.toMatchObject({ code: "in_turn" });
        // Another conversation is unaffected.
        const other = await root.fork({ at: "start" }, call);
        await other.commit((tx) => tx.entry(userKind, userEntry("free", 0)), call);
        // Once the turn settles, appends pass.
        const t = (await h.getTask(turnKind, turn, call))!;
        await root.commit((tx) => tx.settle(t, "done", { inputs: [] }), call);
        await root.commit((tx) => tx.entry(userKind, userEntry("now", 0)), call);
      }));

    it(`Host cannot claim a turn or a task id (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        // §5.8: host commits are host commits. Neither the harness nor a handle offers a way to name an origin.
        expect("commitAs" in root).toBe(false);
        expect("commitAs" in h).toBe(false);
        const turn = await root.commit((tx) => tx.task(turnKind, { state: { status: "pending", inputs: [] } }), call);
        const origins: unknown[] = [];
        h.onCommit((batch) => origins.push(batch.origin));
        // Every host path commits with no origin, so a model-visible entry during the turn is refused.
        const seq = storage.lastSeq;
        await expectNothingWritten(
          storage,
          seq,
          () => root.commit((tx) => tx.entry(assistantKind, assistantEntry(assistant("forged"))), call),
          "in_turn",
        );
        await expectNothingWritten(
          storage,
          seq,
          () => h.commit((tx) => tx.entry(assistantKind, root.id, assistantEntry(assistant("forged"))), call),
          "in_turn",
        );
        await root.commit((tx) => tx.entry(defineEntryKind<Entry>("note"), { data: `host while ${turn} runs` }), call);
        expect(origins).toEqual([undefined]);
      }));

    it(`a handoff head starts a context at itself (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        await root.commit((tx) => tx.entry(userKind, userEntry("old", 0)), call);
        const handoff = await root.commit((tx) => tx.entry(handoffKind, handoffEntry("carry on", 0)), call);
        const next = await root.commit((tx) => tx.entry(userKind, userEntry("new", 0)), call);
        expect((await root.contextEntries(undefined, call)).ids).toEqual([handoff, next]);
      }));
  });

  describe(`core state and forks (${backend.name})`, () => {
    it(`§4.2 list reads [A, B] at 55, [] at 65, [C] at 75 (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const note = defineEntryKind<Entry>("note");
        const at = async (seq: number, plan: Parameters<typeof root.commit>[0]) => {
          await fillTo(h, seq - 1);
          await root.commit(plan, call);
        };
        await at(40, (tx) => void tx.list(moves).append("A"));
        await at(50, (tx) => void tx.list(moves).append("B"));
        await at(55, (tx) => void tx.entry(note, { data: 55 }));
        await at(60, (tx) => tx.list(moves).clear());
        await at(65, (tx) => void tx.entry(note, { data: 65 }));
        await at(70, (tx) => void tx.list(moves).append("C"));
        await at(75, (tx) => void tx.entry(note, { data: 75 }));
        const read = async (position: number) =>
          (
            await storage.readList<string>(
              { scope: { conversation: root.id }, namespace: "game.moves", rewind: true },
              { at: position, limit: 10 },
            )
          ).items.map((e) => e.value);
        expect(await read(55)).toEqual(["A", "B"]);
        expect(await read(65)).toEqual([]);
        expect(await read(75)).toEqual(["C"]);
        // A fork at 55 keeps A and B even though the source cleared them later.
        const fork = await root.fork({ at: 55 }, call);
        expect((await fork.list(moves).read(undefined, call)).items.map((e) => e.value)).toEqual(["A", "B"]);
      }));

    it(`forks inherit rewindable history but not sticky state unless selected; owners are a different link (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        await root.value(expanded).set(true, call);
        await root.value(planMode).set(true, call);
        const u = await root.commit((tx) => tx.entry(userKind, userEntry("q", 0)), call);
        const plain = await root.fork({ at: u }, call);
        expect(await plain.value(planMode).get(call)).toBe(true);
        expect(await plain.value(expanded).get(call)).toBeUndefined();
        const selected = await root.fork({ at: u, values: { inherit: [expanded] } }, call);
        expect(await selected.value(expanded).get(call)).toBe(true);
        expect((await selected.snapshot(call)).parent).toEqual({ conversationId: root.id, at: u });
        // owner and owns are written together (§5.7): the task lists the id its next write mints.
        const [owner, child] = await root.commit((tx) => {
          const task = tx.task(workKind, { state: { status: "pending", input: 0 }, owns: [storage.lastSeq + 2] });
          return [task, tx.createConversation({ owner: task })];
        }, call);
        const record = (await h.conversation(child, call))!.record;
        expect(record.owner).toBe(owner);
        expect(record.parent).toBeUndefined();
        const start = await root.fork({ at: "start" }, call);
        expect((await h.entries(start.id, { limit: 10 }, call)).items).toEqual([]);
        await expect(root.fork({ at: 999_999 }, call)).rejects.toMatchObject({ code: "invalid_commit" });
      }));

    it(`a fork copies only sticky conversation values: selecting a rewindable one rejects, writing nothing (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const u = await root.commit((tx) => tx.entry(userKind, userEntry("q", 0)), call);
        await root.value(model).set("later", call); // after u: a fork at u must not see it (§3.2)
        const seq = storage.lastSeq;
        await expectNothingWritten(
          storage,
          seq,
          () => root.fork({ at: u, values: { inherit: [model] } }, call),
          "invalid_commit",
        );
        await expectNothingWritten(
          storage,
          seq,
          () => root.fork({ at: u, values: { inherit: [sessionValue<string>("s.name")] } }, call),
          "invalid_commit",
        );
        const fork = await root.fork({ at: u }, call);
        expect(await fork.value(model).get(call)).toBeUndefined();
      }));

    it(`config(kind) reads every declared value together and sets several in one commit (${backend.name})`, () =>
      backend.run(async (storage) => {
        const h = await openHarness(storage);
        const root = await h.root(call);
        const kind = {
          kind: "generation",
          config: { model, thinking: conversationValue<string>("pi.thinking", { rewind: true }) },
        };
        const seq = storage.lastSeq;
        await root.config(kind).set({ model: "m1", thinking: "high" }, call);
        expect(storage.lastSeq).toBe(seq + 2);
        expect(await root.config(kind).get(call)).toEqual({ model: "m1", thinking: "high" });
      }));
  });
}
