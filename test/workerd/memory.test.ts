/**
 * Focused tests of the memory backend (§7.4) beyond the cross-backend contract suite: fork-aware list
 * reads with markers at several levels, tombstones across forks, historical-read rejection, scratch
 * retirement, the durable abort mark, empty and oversized batches, and the live-task index.
 */
import { describe, expect, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Address, Entry, List, MainWrite, Task, Value } from "../../src/storage/records.js";
import { MAX_PAYLOAD_BYTES } from "../../src/storage/shared.js";
import { StorageError } from "../../src/storage/storage.js";

const conv = (id: number, parent?: { conversationId: number; at: number }, owner?: number): MainWrite => ({
  type: "createConversation",
  conversation: { id, ...(parent ? { parent } : {}), ...(owner ? { owner } : {}) },
});
const entry = (id: number, conversationId: number, extra: Partial<Entry> = {}): MainWrite => ({
  type: "entry",
  entry: { id, conversationId, kind: "user", ...extra },
});
const task = (id: number, conversationId: number, extra: Partial<Task> = {}): MainWrite => ({
  type: "task",
  task: { id, conversationId, kind: "generation", role: "start", state: { status: "pending" }, after: [], ...extra },
});
const rewindList = (conversation: number): List<string> => ({
  scope: { conversation },
  namespace: "moves",
  rewind: true,
});
const rewindValue = (conversation: number): Value<string> => ({
  scope: { conversation },
  namespace: "plan",
  rewind: true,
});

async function filler(s: MemoryStorage, conversationId: number, through: number): Promise<void> {
  const writes: MainWrite[] = [];
  for (let id = s.lastSeq + 1; id <= through; id++) writes.push(entry(id, conversationId));
  await s.commit({ kind: "main", writes });
}

async function ids(s: MemoryStorage, addr: List<string>, at?: number): Promise<number[]> {
  const page = await s.readList(addr, { limit: 100, ...(at === undefined ? {} : { at }) });
  return page.items.map((e) => e.id);
}

async function rejects(p: Promise<unknown>, code: string): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StorageError);
  expect((error as StorageError).code).toBe(code);
}

describe("MemoryStorage", () => {
  it("reads a rewindable list as of an entry: appends 40, 50, clear 60, append 70 (§4.2) (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({ kind: "main", writes: [conv(1)] });
    const moves = rewindList(1);
    await filler(s, 1, 39);
    await s.commit({ kind: "main", writes: [{ type: "list.append", addr: moves, value: "A" }] }); // 40
    await filler(s, 1, 49);
    await s.commit({ kind: "main", writes: [{ type: "list.append", addr: moves, value: "B" }] }); // 50
    await filler(s, 1, 59);
    await s.commit({ kind: "main", writes: [{ type: "list.clear", addr: moves }] }); // 60
    await filler(s, 1, 69);
    await s.commit({ kind: "main", writes: [{ type: "list.append", addr: moves, value: "C" }] }); // 70
    const values = async (at?: number) =>
      (await s.readList(moves, { limit: 10, ...(at === undefined ? {} : { at }) })).items.map((e) => e.value);
    expect(await values(55)).toEqual(["A", "B"]);
    expect(await values(65)).toEqual([]);
    expect(await values(75)).toEqual(["C"]);
    expect(await values()).toEqual(["C"]);
    expect(await values(0)).toEqual([]);
  });

  it("honours clears and removes at every fork level, each capped at its fork point (memory)", async () => {
    const s = new MemoryStorage();
    const a = 1;
    await s.commit({ kind: "main", writes: [conv(a)] });
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.append", addr: rewindList(a), value: "a2" }, // 2
        { type: "list.append", addr: rewindList(a), value: "a3" }, // 3
        { type: "list.append", addr: rewindList(a), value: "a4" }, // 4
        entry(5, a),
      ],
    });
    // B forks A at 5; A later removes 2 and clears (invisible to B).
    await s.commit({ kind: "main", writes: [conv(6, { conversationId: a, at: 5 })] });
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.remove", addr: rewindList(a), element: 2 }, // 7
        { type: "list.clear", addr: rewindList(a) }, // 8
        { type: "list.append", addr: rewindList(a), value: "a9" }, // 9
      ],
    });
    expect(await ids(s, rewindList(a))).toEqual([9]);
    expect(await ids(s, rewindList(a), 7)).toEqual([3, 4]);
    expect(await ids(s, rewindList(6))).toEqual([2, 3, 4]);
    // B removes inherited 3 and appends its own; C forks B after the remove, D before it.
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.remove", addr: rewindList(6), element: 3 }, // 10
        { type: "list.append", addr: rewindList(6), value: "b11" }, // 11
        entry(12, 6),
        conv(13, { conversationId: 6, at: 12 }),
        conv(14, { conversationId: 6, at: 0 }),
      ],
    });
    expect(await ids(s, rewindList(6))).toEqual([2, 4, 11]);
    expect(await ids(s, rewindList(6), 9)).toEqual([2, 3, 4]);
    expect(await ids(s, rewindList(13))).toEqual([2, 4, 11]);
    expect(await ids(s, rewindList(14))).toEqual([]);
    // C clears: hides inherited elements from both ancestors, but not later local appends.
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.clear", addr: rewindList(13) }, // 15
        { type: "list.append", addr: rewindList(13), value: "c16" }, // 16
        { type: "list.append", addr: rewindList(6), value: "b17" }, // 17: after C's fork point
      ],
    });
    expect(await ids(s, rewindList(13))).toEqual([16]);
    expect(await ids(s, rewindList(13), 15)).toEqual([]);
    expect(await ids(s, rewindList(13), 14)).toEqual([2, 4, 11]);
    expect(await ids(s, rewindList(6))).toEqual([2, 4, 11, 17]);
    // Paging across segments: two at a time, forward and backward.
    const first = await s.readList(rewindList(6), { limit: 2 });
    expect(first.items.map((e) => e.id)).toEqual([2, 4]);
    expect(first.next).toBe(4);
    const second = await s.readList(rewindList(6), { limit: 2, after: 4 });
    expect(second.items.map((e) => e.id)).toEqual([11, 17]);
    expect(second.next).toBeUndefined();
    const back = await s.readList(rewindList(6), { limit: 2, before: 17 });
    expect(back.items.map((e) => e.id)).toEqual([4, 11]);
    expect(back.next).toBe(4);
  });

  it("keeps a deleted conversation as a tombstone that forks still read through (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({
      kind: "main",
      writes: [
        conv(1),
        entry(2, 1),
        { type: "value.set", addr: rewindValue(1), value: "v3" },
        entry(4, 1, { head: 2 }),
      ],
    });
    await s.commit({ kind: "main", writes: [conv(5, { conversationId: 1, at: 4 }), entry(6, 5)] });
    await s.commit({ kind: "main", writes: [{ type: "deleteConversation", id: 1 }] });
    expect((await s.getConversations([1, 5])).has(1)).toBe(false);
    expect((await s.scanConversations({ limit: 10 })).items.map((c) => c.id)).toEqual([5]);
    expect((await s.scanEntries({ conversationId: 5, limit: 10 })).items.map((e) => e.id)).toEqual([2, 4, 6]);
    expect((await s.newestHead(5, 6))?.id).toBe(4);
    expect((await s.getValue(rewindValue(5)))?.value).toBe("v3");
    expect((await s.getEntries([2])).get(2)?.conversationId).toBe(1);
    // Nothing new can reference the deleted conversation.
    await rejects(s.commit({ kind: "main", writes: [entry(8, 1)] }), "malformed_batch");
    await rejects(s.commit({ kind: "main", writes: [conv(8, { conversationId: 1, at: 4 })] }), "malformed_batch");
    // A fork of the fork still resolves the tombstoned root.
    await s.commit({ kind: "main", writes: [conv(8, { conversationId: 5, at: 6 })] });
    expect((await s.scanEntries({ conversationId: 8, limit: 10 })).items.map((e) => e.id)).toEqual([2, 4, 6]);
  });

  it("looks up rewindable values nearest segment first; a local delete stops the lookup (§4.4) (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({
      kind: "main",
      writes: [conv(1), { type: "value.set", addr: rewindValue(1), value: "a2" }, entry(3, 1)],
    });
    await s.commit({
      kind: "main",
      writes: [{ type: "value.set", addr: rewindValue(1), value: "a4" }, conv(5, { conversationId: 1, at: 3 })],
    });
    expect(await s.getValue(rewindValue(5))).toEqual({ seq: 2, value: "a2" });
    expect(await s.getValue(rewindValue(1))).toEqual({ seq: 4, value: "a4" });
    await s.commit({ kind: "main", writes: [{ type: "value.delete", addr: rewindValue(5) }, entry(7, 5)] });
    expect(await s.getValue(rewindValue(5))).toBeUndefined();
    expect(await s.getValue(rewindValue(5), 5)).toEqual({ seq: 2, value: "a2" });
    await s.commit({
      kind: "main",
      writes: [conv(8, { conversationId: 5, at: 7 }), conv(9, { conversationId: 5, at: 5 })],
    });
    expect(await s.getValue(rewindValue(8))).toBeUndefined();
    expect(await s.getValue(rewindValue(9))).toEqual({ seq: 2, value: "a2" });
    expect(await s.getValue(rewindValue(1), 3)).toEqual({ seq: 2, value: "a2" });
    expect(await s.getValue(rewindValue(1), 1)).toBeUndefined();
    // The tombstone is not a current value: scanValues skips it.
    expect((await s.scanValues({ scope: { conversation: 5 }, namespace: "plan", limit: 10 })).items).toEqual([]);
  });

  it("rejects historical reads of sticky, session and scratch state, leaving it untouched (memory)", async () => {
    const s = new MemoryStorage();
    const sticky: Value<string> = { scope: { conversation: 1 }, namespace: "ui", rewind: false };
    const session: Value<string> = { scope: { session: true }, namespace: "name", rewind: false };
    const stickyList: List<string> = { scope: { conversation: 1 }, namespace: "ui.list", rewind: false };
    await s.commit({
      kind: "main",
      writes: [
        conv(1),
        { type: "value.set", addr: sticky, value: "x" },
        { type: "value.set", addr: session, value: "n" },
        task(4, 1),
      ],
    });
    await s.commit({ kind: "main", writes: [{ type: "list.append", addr: stickyList, value: "e" }] });
    const scratch: Value<string> = { scope: { scratch: 4 }, namespace: "memo", rewind: false };
    await s.commit({ kind: "scratch", task: 4, writes: [{ type: "value.set", addr: scratch, value: "m" }] });
    await rejects(s.getValue(sticky, 3), "historical_read");
    await rejects(s.getValue(session, 3), "historical_read");
    await rejects(s.getValue(scratch, 6), "historical_read");
    await rejects(s.readList(stickyList, { limit: 5, at: 5 }), "historical_read");
    expect((await s.getValue(sticky))?.value).toBe("x");
    expect((await s.getValue(session))?.value).toBe("n");
    expect((await s.readList(stickyList, { limit: 5 })).items).toEqual([{ id: 5, value: "e" }]);
    // Sticky state of a fork is not inherited.
    await s.commit({ kind: "main", writes: [conv(7, { conversationId: 1, at: 0 })] });
    expect(await s.getValue({ ...sticky, scope: { conversation: 7 } })).toBeUndefined();
  });

  it("discards removed and cleared sticky list rows physically (memory)", async () => {
    const s = new MemoryStorage();
    const list: List<number> = { scope: { session: true }, namespace: "log", rewind: false };
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.append", addr: list, value: 1 },
        { type: "list.append", addr: list, value: 2 },
        { type: "list.remove", addr: list, element: 1 },
      ],
    });
    expect((await s.readList(list, { limit: 5 })).items).toEqual([{ id: 2, value: 2 }]);
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.clear", addr: list },
        { type: "list.append", addr: list, value: 5 },
      ],
    });
    expect((await s.readList(list, { limit: 5 })).items).toEqual([{ id: 5, value: 5 }]);
  });

  it("settle retires the task's scratch in the same commit; later scratch batches reject (§4.6) (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1), task(3, 1)] });
    const frames: List<string> = { scope: { scratch: 2 }, namespace: "frames", rewind: false };
    const memo: Value<string> = { scope: { scratch: 2 }, namespace: "memo", key: "k", rewind: false };
    const other: Value<string> = { scope: { scratch: 3 }, namespace: "memo", key: "k", rewind: false };
    await s.commit({
      kind: "scratch",
      task: 2,
      writes: [
        { type: "list.clear", addr: frames },
        { type: "list.append", addr: frames, value: "f1" },
        { type: "value.set", addr: memo, value: "m" },
      ],
    });
    await s.commit({ kind: "scratch", task: 3, writes: [{ type: "value.set", addr: other, value: "o" }] });
    expect((await s.readList(frames, { limit: 5 })).items.map((e) => e.value)).toEqual(["f1"]);
    expect(
      (await s.scanValues({ scope: { scratch: 2 }, namespace: "memo", limit: 5 })).items.map((i) => i.key),
    ).toEqual(["k"]);
    await s.commit({ kind: "main", writes: [{ type: "settle", id: 2, role: "terminal", state: { status: "done" } }] });
    expect((await s.readList(frames, { limit: 5 })).items).toEqual([]);
    expect(await s.getValue(memo)).toBeUndefined();
    expect((await s.scanValues({ scope: { scratch: 2 }, namespace: "memo", limit: 5 })).items).toEqual([]);
    expect((await s.getValue(other))?.value).toBe("o");
    const seq = s.lastSeq;
    await rejects(
      s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames, value: "late" }] }),
      "malformed_batch",
    );
    expect(s.lastSeq).toBe(seq);
    // A main batch never writes scratch.
    await rejects(
      s.commit({ kind: "main", writes: [{ type: "value.set", addr: other, value: "x" }] }),
      "malformed_batch",
    );
  });

  it("never clears the durable abort mark; owns is replaced only when given (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1), conv(3, undefined, 2)] });
    await s.commit({
      kind: "main",
      writes: [{ type: "patch", id: 2, role: "inflight", state: { status: "running" }, owns: [3] }],
    });
    await s.commit({
      kind: "main",
      writes: [{ type: "patch", id: 2, role: "inflight", state: { status: "running" }, abort: true }],
    });
    await s.commit({
      kind: "main",
      writes: [{ type: "patch", id: 2, role: "inflight", state: { status: "stopping" } }],
    });
    let t = (await s.getTasks([2])).get(2);
    expect(t?.abort).toBe(true);
    expect(t?.owns).toEqual([3]);
    expect(t?.state).toEqual({ status: "stopping" });
    expect((await s.scanTasks({ abort: true, limit: 5 })).items.map((x) => x.id)).toEqual([2]);
    await s.commit({
      kind: "main",
      writes: [{ type: "settle", id: 2, role: "terminal", state: { status: "aborted" } }],
    });
    t = (await s.getTasks([2])).get(2);
    expect(t?.abort).toBe(true);
    expect(t?.role).toBe("terminal");
    expect((await s.scanConversations({ ownedFrom: 2, limit: 5 })).items.map((c) => c.id)).toEqual([3]);
    await rejects(
      s.commit({ kind: "main", writes: [{ type: "patch", id: 2, role: "inflight", state: { status: "again" } }] }),
      "malformed_batch",
    );
  });

  it("scans live tasks through the live index, with filters before the limit (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({
      kind: "main",
      writes: [
        conv(1),
        conv(2),
        task(3, 1),
        task(4, 2),
        task(5, 1, { kind: "tool" }),
        task(6, 2, { role: "terminal", state: { status: "done" } }),
      ],
    });
    await s.commit({ kind: "main", writes: [{ type: "settle", id: 3, role: "terminal", state: { status: "done" } }] });
    const live = await s.scanTasks({ live: true, limit: 1 });
    expect(live.items.map((t) => t.id)).toEqual([4]);
    expect(live.next).toBe(4);
    expect((await s.scanTasks({ live: true, after: 4, limit: 1 })).items.map((t) => t.id)).toEqual([5]);
    expect((await s.scanTasks({ live: true, conversationIds: [2], limit: 5 })).items.map((t) => t.id)).toEqual([4]);
    expect((await s.scanTasks({ live: false, limit: 5 })).items.map((t) => t.id)).toEqual([3, 6]);
    expect(
      (await s.scanTasks({ conversationIds: [1, 2], kind: "generation", limit: 5 })).items.map((t) => t.id),
    ).toEqual([3, 4, 6]);
    expect((await s.scanTasks({ role: "start", before: 5, limit: 5 })).items.map((t) => t.id)).toEqual([4]);
    expect((await s.scanTasks({ conversationIds: [], limit: 5 })).items).toEqual([]);
  });

  it("an empty batch writes nothing and returns an empty range (memory)", async () => {
    const s = new MemoryStorage();
    expect(await s.commit({ kind: "main", writes: [] })).toEqual({ first: 1, last: 0 });
    await s.commit({ kind: "main", writes: [conv(1)] });
    expect(await s.commit({ kind: "main", writes: [] })).toEqual({ first: 2, last: 1 });
    expect(s.lastSeq).toBe(1);
  });

  it("too_large rejects the whole batch: nothing written, no ids consumed (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({ kind: "main", writes: [conv(1)] });
    const big = "x".repeat(MAX_PAYLOAD_BYTES);
    const addr: Value<string> = { scope: { conversation: 1 }, namespace: "big", rewind: true };
    await rejects(
      s.commit({ kind: "main", writes: [entry(2, 1), { type: "value.set", addr, value: big }] }),
      "too_large",
    );
    expect(s.lastSeq).toBe(1);
    expect((await s.getEntries([2])).size).toBe(0);
    expect(await s.getValue(addr)).toBeUndefined();
    expect(await s.commit({ kind: "main", writes: [entry(2, 1)] })).toEqual({ first: 2, last: 2 });
  });

  it("pages a fork-aware transcript with kind/key filters and from/through bounds (memory)", async () => {
    const s = new MemoryStorage();
    await s.commit({
      kind: "main",
      writes: [
        conv(1),
        entry(2, 1),
        entry(3, 1, { kind: "assistant", key: "k" }),
        entry(4, 1, { head: 2 }),
        entry(5, 1, { kind: "assistant" }),
      ],
    });
    await s.commit({
      kind: "main",
      writes: [
        conv(6, { conversationId: 1, at: 4 }),
        entry(7, 6, { kind: "assistant", key: "k" }),
        entry(8, 6, { head: 7 }),
      ],
    });
    const page = (q: Omit<Parameters<MemoryStorage["scanEntries"]>[0], "conversationId">) =>
      s.scanEntries({ conversationId: 6, ...q }).then((p) => ({ ids: p.items.map((e) => e.id), next: p.next }));
    expect(await page({ limit: 10 })).toEqual({ ids: [2, 3, 4, 7, 8], next: undefined });
    expect(await page({ limit: 2 })).toEqual({ ids: [2, 3], next: 3 });
    expect(await page({ limit: 2, before: 8 })).toEqual({ ids: [4, 7], next: 4 });
    expect(await page({ limit: 10, kind: "assistant" })).toEqual({ ids: [3, 7], next: undefined });
    expect(await page({ limit: 10, key: "k" })).toEqual({ ids: [3, 7], next: undefined });
    expect(await page({ limit: 10, kind: "user", key: "k" })).toEqual({ ids: [], next: undefined });
    expect(await page({ limit: 10, from: 3, through: 7 })).toEqual({ ids: [3, 4, 7], next: undefined });
    expect((await s.newestHead(6, 7))?.id).toBe(4);
    expect((await s.newestHead(6, 8))?.id).toBe(8);
    expect(await s.newestHead(6, 3)).toBeUndefined();
    expect(await s.entryKinds()).toEqual(["assistant", "user"]);
    await rejects(s.scanEntries({ conversationId: 99, limit: 1 }), "bad_query");
    await rejects(s.scanEntries({ conversationId: 6, limit: 0 }), "bad_query");
  });

  it("orders scanValues by key with an exclusive after, excluding deletions (memory)", async () => {
    const s = new MemoryStorage();
    const at = (key: string): Address => ({ scope: { session: true }, namespace: "n", key, rewind: false });
    await s.commit({
      kind: "main",
      writes: [
        { type: "value.set", addr: at("b"), value: 2 },
        { type: "value.set", addr: at("a"), value: 1 },
        { type: "value.set", addr: at("c"), value: 3 },
        { type: "value.delete", addr: at("b") },
        {
          type: "value.set",
          addr: { scope: { session: true }, namespace: "other", key: "a", rewind: false },
          value: 9,
        },
      ],
    });
    const page = await s.scanValues({ scope: { session: true }, namespace: "n", limit: 10 });
    expect(page.items).toEqual([
      { key: "a", version: { seq: 2, value: 1 } },
      { key: "c", version: { seq: 3, value: 3 } },
    ]);
    expect(page.next).toBeUndefined();
    expect(
      (await s.scanValues({ scope: { session: true }, namespace: "n", after: "a", limit: 1 })).items.map((i) => i.key),
    ).toEqual(["c"]);
  });

  it("returns frozen records and rejects reads and commits after close (memory)", async () => {
    const s = new MemoryStorage();
    const n = [1];
    await s.commit({ kind: "main", writes: [conv(1), entry(2, 1, { data: { n } })] });
    n.push(2);
    const e = (await s.getEntries([2])).get(2);
    expect(e?.data).toEqual({ n: [1] });
    expect(Object.isFrozen(e) && Object.isFrozen(e?.data)).toBe(true);
    await s.close();
    await rejects(s.getEntries([2]), "closed");
    await rejects(s.commit({ kind: "main", writes: [] }), "closed");
  });
});

describe("memory backend: uncertain writes", () => {
  it("Uncertain memory publish faults the handle", async () => {
    /** A memory backend whose in-memory apply fails part-way once (a bug, or memory exhaustion). */
    class BrokenPublish extends MemoryStorage {
      failNext = false;
      protected override publish(...args: Parameters<MemoryStorage["publish"]>): void {
        if (this.failNext) {
          this.failNext = false;
          throw new Error("injected publish failure");
        }
        super.publish(...args);
      }
    }
    const s = new BrokenPublish();
    await s.commit({ kind: "main", writes: [conv(1)] });
    s.failNext = true;
    expect(await s.commit({ kind: "main", writes: [entry(2, 1)] }).catch((e: unknown) => e)).toBeInstanceOf(Error);
    // A half-applied batch cannot be trusted: every later operation refuses with "faulted".
    const next = await s.commit({ kind: "main", writes: [entry(2, 1)] }).catch((e: unknown) => e);
    expect((next as StorageError).code).toBe("faulted");
    expect(((await s.getConversations([1]).catch((e: unknown) => e)) as StorageError).code).toBe("faulted");
  });
});
