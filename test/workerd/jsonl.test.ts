/**
 * JSONL backend tests on `MemoryFiles`: the five §10.2 rows (shared with the Node fs run through
 * test/contract/jsonl-rows.ts) and JSONL-specific behaviour: failed appends publish nothing and are cut
 * off, replay merges main and scratch files by sequence, overlapping ranges fail the open.
 */
import { describe, expect, it } from "vitest";
import { MemoryFiles } from "../../src/storage/files.js";
import { JSONL_STORAGE_VERSION, JsonlStorage } from "../../src/storage/jsonl.js";
import { MEMORY_STORAGE_VERSION, MemoryStorage } from "../../src/storage/memory.js";
import type { Entry, List, MainWrite, Task, Value } from "../../src/storage/records.js";
import { MAX_PAYLOAD_BYTES } from "../../src/storage/shared.js";
import { StorageError } from "../../src/storage/storage.js";
import { jsonlRows } from "../contract/jsonl-rows.js";

const conv = (id: number, parent?: { conversationId: number; at: number }): MainWrite => ({
  type: "createConversation",
  conversation: { id, ...(parent ? { parent } : {}) },
});
const entry = (id: number, conversationId: number, extra: Partial<Entry> = {}): MainWrite => ({
  type: "entry",
  entry: { id, conversationId, kind: "user", ...extra },
});
const task = (id: number, conversationId: number, extra: Partial<Task> = {}): MainWrite => ({
  type: "task",
  task: { id, conversationId, kind: "generation", role: "start", state: { status: "pending" }, after: [], ...extra },
});
const frames = (t: number): List<string> => ({ scope: { scratch: t }, namespace: "frames", rewind: false });
const moves = (c: number): List<string> => ({ scope: { conversation: c }, namespace: "moves", rewind: true });
const plan = (c: number): Value<string> => ({ scope: { conversation: c }, namespace: "plan", rewind: true });

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("JsonlStorage over MemoryFiles", () => {
  jsonlRows(" (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    return { files, setRaw: async (name, text) => files.setRaw(name, text) };
  });

  it("a failed append publishes nothing; reopen cuts its torn bytes off before the next append (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    const before = await files.read("session.jsonl");
    files.failNextAppendAfter = 10;
    expect(await rejection(s.commit({ kind: "main", writes: [entry(3, 1)] }))).toBeInstanceOf(Error);
    expect(s.lastSeq).toBe(2);
    expect(await files.read("session.jsonl")).not.toBe(before);
    // The handle is faulted (see the next test); reopen cuts the torn prefix off and the retry gets the same id.
    const reports: string[] = [];
    const reopened = await JsonlStorage.open(files, { onReport: (r) => reports.push(`${r.type} ${r.file}`) });
    expect(reports).toEqual(["torn_line_discarded session.jsonl"]);
    expect(await files.read("session.jsonl")).toBe(before);
    expect(await reopened.commit({ kind: "main", writes: [entry(3, 1)] })).toEqual({ first: 3, last: 3 });
    // A first scratch append that fails leaves a torn file; the next open cuts it and the scratch goes on.
    files.failNextAppendAfter = 5;
    expect(
      await rejection(
        reopened.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "a" }] }),
      ),
    ).toBeInstanceOf(Error);
    const third = await JsonlStorage.open(files);
    expect(
      await third.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "b" }] }),
    ).toEqual({ first: 4, last: 4 });
    const last = await JsonlStorage.open(files);
    expect(last.lastSeq).toBe(4);
    expect((await last.readList(frames(2), { limit: 5 })).items).toEqual([{ id: 4, value: "b" }]);
  });

  it("Uncertain JSONL append faults the handle (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    // Every byte of the line lands, then the append rejects (a failed sync): the outcome is uncertain (§3.3).
    files.failNextAppendAfter = Number.MAX_SAFE_INTEGER;
    expect(await rejection(s.commit({ kind: "main", writes: [entry(3, 1)] }))).toBeInstanceOf(Error);
    // The handle stops: a scratch commit would otherwise reuse sequence 3 in another file; reads stop too.
    const refused = await rejection(
      s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "a" }] }),
    );
    expect((refused as StorageError).code).toBe("faulted");
    expect(((await rejection(s.getEntries([3]))) as StorageError).code).toBe("faulted");
    expect(await files.read("session.scratch/2")).toBeUndefined();
    await s.close();
    // Reopen recovers the last complete batch (here the uncertain one) and continues after it.
    const reopened = await JsonlStorage.open(files);
    expect(reopened.lastSeq).toBe(3);
    expect((await reopened.getEntries([3])).get(3)?.conversationId).toBe(1);
    expect(
      await reopened.commit({
        kind: "scratch",
        task: 2,
        writes: [{ type: "list.append", addr: frames(2), value: "b" }],
      }),
    ).toEqual({ first: 4, last: 4 });
    // A torn append (only some bytes landed) stops the handle as well; reopen discards the torn line.
    files.failNextAppendAfter = 10;
    expect(await rejection(reopened.commit({ kind: "main", writes: [entry(5, 1)] }))).toBeInstanceOf(Error);
    expect(((await rejection(reopened.commit({ kind: "main", writes: [entry(5, 1)] }))) as StorageError).code).toBe(
      "faulted",
    );
    const again = await JsonlStorage.open(files);
    expect(again.lastSeq).toBe(4);
    expect((await again.readList(frames(2), { limit: 5 })).items).toEqual([{ id: 4, value: "b" }]);
    expect(await again.commit({ kind: "main", writes: [entry(5, 1)] })).toEqual({ first: 5, last: 5 });
    expect((await JsonlStorage.open(files)).lastSeq).toBe(5);
  });

  it("empty and rejected batches write no bytes (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({ kind: "main", writes: [conv(1)] });
    const appends = files.log.length;
    expect(await s.commit({ kind: "main", writes: [] })).toEqual({ first: 2, last: 1 });
    const big = "x".repeat(MAX_PAYLOAD_BYTES);
    const error = await rejection(
      s.commit({ kind: "main", writes: [entry(2, 1), { type: "value.set", addr: plan(1), value: big }] }),
    );
    expect((error as StorageError).code).toBe("too_large");
    expect(((await rejection(s.commit({ kind: "main", writes: [entry(7, 1)] }))) as StorageError).code).toBe(
      "malformed_batch",
    );
    expect(files.log.length).toBe(appends);
    expect(s.lastSeq).toBe(1);
  });

  it("replays interleaved main and scratch files by sequence into the same state (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({
      kind: "main",
      writes: [conv(1), task(2, 1), task(3, 1), { type: "list.append", addr: moves(1), value: "m4" }, entry(5, 1)],
    });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f6" }] });
    await s.commit({
      kind: "main",
      writes: [conv(7, { conversationId: 1, at: 5 }), { type: "value.set", addr: plan(1), value: "p8" }],
    });
    await s.commit({
      kind: "scratch",
      task: 3,
      writes: [{ type: "value.set", addr: { scope: { scratch: 3 }, namespace: "memo", rewind: false }, value: "x" }],
    });
    await s.commit({
      kind: "scratch",
      task: 2,
      writes: [
        { type: "list.remove", addr: frames(2), element: 6 },
        { type: "list.append", addr: frames(2), value: "f11" },
      ],
    });
    await s.commit({
      kind: "main",
      writes: [
        { type: "list.clear", addr: moves(1) },
        { type: "patch", id: 3, role: "inflight", state: { status: "running" }, abort: true },
        { type: "settle", id: 3, role: "terminal", state: { status: "aborted" } },
        { type: "deleteConversation", id: 1 },
        entry(16, 7, { head: 5 }),
      ],
    });
    const snapshot = async (x: JsonlStorage) => ({
      lastSeq: x.lastSeq,
      conversations: (await x.scanConversations({ limit: 10 })).items,
      transcript: (await x.scanEntries({ conversationId: 7, limit: 10 })).items,
      head: await x.newestHead(7, 16),
      tasks: (await x.scanTasks({ limit: 10 })).items,
      live: (await x.scanTasks({ live: true, limit: 10 })).items.map((t) => t.id),
      frames: (await x.readList(frames(2), { limit: 10 })).items,
      memo: await x.scanValues({ scope: { scratch: 3 }, namespace: "memo", limit: 10 }),
      forkMoves: (await x.readList(moves(7), { limit: 10 })).items,
      moves: (await x.readList(moves(1), { limit: 10 })).items,
      movesAt5: (await x.readList(moves(1), { limit: 10, at: 5 })).items,
      plan: await x.getValue(plan(1)),
      forkPlan: await x.getValue(plan(7)),
      kinds: await x.entryKinds(),
    });
    const expected = await snapshot(s);
    expect(expected.frames).toEqual([{ id: 11, value: "f11" }]);
    expect(expected.forkMoves).toEqual([{ id: 4, value: "m4" }]);
    expect(expected.live).toEqual([2]);
    const reopened = await JsonlStorage.open(files);
    expect(await snapshot(reopened)).toEqual(expected);
    expect(await files.read("session.scratch/3")).toBeUndefined();
  });

  it("fails the open when batches of different files overlap (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    await s.commit({ kind: "main", writes: [entry(3, 1)] });
    files.setRaw(
      "session.scratch/2",
      `{"first":3,"task":2,"writes":[{"type":"list.clear","addr":{"scope":{"scratch":2},"namespace":"frames","rewind":false}}]}\n`,
    );
    const error = (await rejection(JsonlStorage.open(files))) as StorageError;
    expect(error).toBeInstanceOf(StorageError);
    expect(error.code).toBe("corrupt");
    expect(error.message).toContain("overlaps");
  });

  it("fails the open on a scratch file of a task the main log never created (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    await s.commit({ kind: "main", writes: [conv(1)] });
    files.setRaw("session.scratch/9", "");
    const error = (await rejection(JsonlStorage.open(files))) as StorageError;
    expect(error.code).toBe("corrupt");
    expect(error.message).toContain("session.scratch/9");
  });

  it("close lets an earlier commit finish and rejects later ones (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    const earlier = s.commit({ kind: "main", writes: [conv(1)] });
    const closing = s.close();
    const later = s.commit({ kind: "main", writes: [entry(2, 1)] });
    expect(await earlier).toEqual({ first: 1, last: 1 });
    await closing;
    expect(((await rejection(later)) as StorageError).code).toBe("closed");
    expect(((await rejection(s.getConversations([1]))) as StorageError).code).toBe("closed");
    expect((await JsonlStorage.open(files)).lastSeq).toBe(1);
  });

  it("JSONL records its storage version and refuses to open a newer one (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files);
    expect(s.storageVersion).toBe(JSONL_STORAGE_VERSION);
    await s.commit({ kind: "main", writes: [conv(1)] });
    expect(JSON.parse((await files.read("session.version")) ?? "null")).toEqual({
      storageVersion: JSONL_STORAGE_VERSION,
    });
    await s.close();
    expect((await JsonlStorage.open(files)).lastSeq).toBe(1);
    // Written by newer code: refused, and nothing is touched.
    const newer = `${JSON.stringify({ storageVersion: JSONL_STORAGE_VERSION + 1 })}\n`;
    files.setRaw("session.version", newer);
    const main = await files.read("session.jsonl");
    const error = await rejection(JsonlStorage.open(files));
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).code).toBe("version");
    expect(await files.read("session.version")).toBe(newer);
    expect(await files.read("session.jsonl")).toBe(main);
  });

  it("memory records its storage version and refuses a newer one (memory)", () => {
    expect(new MemoryStorage().storageVersion).toBe(MEMORY_STORAGE_VERSION);
    expect(() => new MemoryStorage({ storageVersion: MEMORY_STORAGE_VERSION + 1 })).toThrow(StorageError);
    expect(new MemoryStorage({ storageVersion: MEMORY_STORAGE_VERSION }).storageVersion).toBe(MEMORY_STORAGE_VERSION);
  });

  it("uses the configured main file name and a matching scratch directory (jsonl, memory files)", async () => {
    const files = new MemoryFiles();
    const s = await JsonlStorage.open(files, { mainFile: "abc.jsonl" });
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f" }] });
    expect((await files.list()).sort()).toEqual(["abc.jsonl", "abc.scratch/2", "abc.version"]);
    const reopened = await JsonlStorage.open(files, { mainFile: "abc.jsonl" });
    expect(reopened.lastSeq).toBe(3);
  });
});
