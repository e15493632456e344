/**
 * The JSONL rows of §10.2 (torn final line, malformed complete line, unlink failure after retirement,
 * crash with live scratch beyond main, retired scratch left on disk), written once against the `Files`
 * interface and registered by test/workerd/jsonl.test.ts (MemoryFiles) and test/node/jsonl-fs.test.ts
 * (NodeFiles in a temp dir). "Crash" is dropping a JsonlStorage without close and reopening the files.
 */
import { expect, it } from "vitest";
import type { Files } from "../../src/storage/files.js";
import { JsonlStorage, type JsonlReport } from "../../src/storage/jsonl.js";
import type { Entry, List, MainWrite, Task } from "../../src/storage/records.js";
import { StorageError } from "../../src/storage/storage.js";

/** Fresh, empty files plus a way to write raw text behind the backend's back. */
export interface FilesRig {
  readonly files: Files;
  setRaw(name: string, text: string): Promise<void>;
}

/** Wraps a rig's files so unlink can be made to fail, the same way for every implementation. */
class FaultyUnlink implements Files {
  failUnlink = false;
  constructor(readonly inner: Files) {}
  list(): Promise<string[]> {
    return this.inner.list();
  }
  read(name: string): Promise<string | undefined> {
    return this.inner.read(name);
  }
  append(name: string, text: string): Promise<void> {
    return this.inner.append(name, text);
  }
  truncate(name: string, length: number): Promise<void> {
    return this.inner.truncate(name, length);
  }
  async unlink(name: string): Promise<void> {
    if (this.failUnlink) throw new Error(`injected unlink failure on ${name}`);
    return this.inner.unlink(name);
  }
}

const MAIN = "session.jsonl";
const scratchFile = (task: number): string => `session.scratch/${task}`;
const frames = (task: number): List<string> => ({ scope: { scratch: task }, namespace: "frames", rewind: false });
const conv = (id: number): MainWrite => ({ type: "createConversation", conversation: { id } });
const entry = (id: number, conversationId: number, extra: Partial<Entry> = {}): MainWrite => ({
  type: "entry",
  entry: { id, conversationId, kind: "user", ...extra },
});
const task = (id: number, conversationId: number, extra: Partial<Task> = {}): MainWrite => ({
  type: "task",
  task: { id, conversationId, kind: "generation", role: "start", state: { status: "pending" }, after: [], ...extra },
});

async function open(files: Files, reports: JsonlReport[] = []): Promise<JsonlStorage> {
  return JsonlStorage.open(files, { onReport: (r) => reports.push(r) });
}

async function frameValues(s: JsonlStorage, taskId: number): Promise<string[]> {
  return (await s.readList(frames(taskId), { limit: 1000 })).items.map((e) => e.value);
}

async function openError(files: Files): Promise<StorageError> {
  const error = await JsonlStorage.open(files).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StorageError);
  return error as StorageError;
}

/** Register the five §10.2 JSONL rows; test names end with `suffix`, e.g. " (jsonl, memory files)". */
export function jsonlRows(suffix: string, rig: () => Promise<FilesRig>): void {
  it(`§10.2 Torn final JSONL line: only that line is discarded and cut off before the next append${suffix}`, async () => {
    const { files, setRaw } = await rig();
    const s = await open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1), entry(3, 1, { data: { text: "héllo ✓ 😀" } })] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "ünï 😀" }] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f5" }] });
    const main = (await files.read(MAIN)) as string;
    const scratch = (await files.read(scratchFile(2))) as string;
    // A crash part-way through the next line of each file.
    await setRaw(MAIN, `${main}{"first":6,"writes":[{"type":"entry","entry":{"id":6,"conv é😀`);
    await setRaw(scratchFile(2), `${scratch}{"first":7,"task":2,"writes":[{"type":"list.app`);

    const reports: JsonlReport[] = [];
    const reopened = await open(files, reports);
    expect(
      reports
        .filter((r) => r.type === "torn_line_discarded")
        .map((r) => r.file)
        .sort(),
    ).toEqual([MAIN, scratchFile(2)].sort());
    expect(reopened.lastSeq).toBe(5);
    expect((await reopened.getEntries([3])).get(3)?.data).toEqual({ text: "héllo ✓ 😀" });
    expect(await frameValues(reopened, 2)).toEqual(["ünï 😀", "f5"]);
    // The torn suffixes are physically gone before anything is appended.
    expect(await files.read(MAIN)).toBe(main);
    expect(await files.read(scratchFile(2))).toBe(scratch);

    expect(await reopened.commit({ kind: "main", writes: [entry(6, 1)] })).toEqual({ first: 6, last: 6 });
    await reopened.commit({
      kind: "scratch",
      task: 2,
      writes: [{ type: "list.append", addr: frames(2), value: "f7" }],
    });
    await reopened.close();
    const again: JsonlReport[] = [];
    const third = await open(files, again);
    expect(again).toEqual([]);
    expect(third.lastSeq).toBe(7);
    expect((await third.scanEntries({ conversationId: 1, limit: 10 })).items.map((e) => e.id)).toEqual([3, 6]);
    expect(await frameValues(third, 2)).toEqual(["ünï 😀", "f5", "f7"]);
  });

  it(`§10.2 Malformed complete line: open fails naming file and line; no silent truncation${suffix}`, async () => {
    const { files, setRaw } = await rig();
    const s = await open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    await s.commit({ kind: "main", writes: [entry(3, 1)] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f4" }] });
    await s.close();
    const main = (await files.read(MAIN)) as string;
    const [line1, line2] = main.split("\n");

    // Not JSON, followed by a valid line and a torn tail: nothing is cut, open fails.
    const broken = `${line1}\n{"first":3,"writes":[oops]}\n${line2}\n{"first":5,"wri`;
    await setRaw(MAIN, broken);
    let error = await openError(files);
    expect(error.code).toBe("corrupt");
    expect(error.message).toContain(`${MAIN} line 2`);
    expect(await files.read(MAIN)).toBe(broken);

    // Valid JSON that breaks the batch rules (an entry id that is not its sequence).
    const wrongId = `${line1}\n{"first":3,"writes":[{"type":"entry","entry":{"id":9,"conversationId":1,"kind":"user"}}]}\n`;
    await setRaw(MAIN, wrongId);
    error = await openError(files);
    expect(error.code).toBe("corrupt");
    expect(error.message).toContain(`${MAIN} line 2`);
    expect(await files.read(MAIN)).toBe(wrongId);

    // A malformed complete line in a live task's scratch file fails the open too.
    await setRaw(MAIN, main);
    const scratch = (await files.read(scratchFile(2))) as string;
    const brokenScratch = `${scratch}not a batch\n`;
    await setRaw(scratchFile(2), brokenScratch);
    error = await openError(files);
    expect(error.code).toBe("corrupt");
    expect(error.message).toContain(`${scratchFile(2)} line 2`);
    expect(await files.read(scratchFile(2))).toBe(brokenScratch);
    expect(await files.read(MAIN)).toBe(main);
  });

  it(`§10.2 Retirement committed, unlink fails: old scratch is invisible, also after reopen${suffix}`, async () => {
    const { files: inner } = await rig();
    const files = new FaultyUnlink(inner);
    const reports: JsonlReport[] = [];
    const s = await open(files, reports);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1)] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f3" }] });
    files.failUnlink = true;
    expect(
      await s.commit({
        kind: "main",
        writes: [{ type: "settle", id: 2, role: "terminal", state: { status: "done" } }],
      }),
    ).toEqual({ first: 4, last: 4 });
    expect(reports).toEqual([expect.objectContaining({ type: "unlink_failed", file: scratchFile(2) })]);
    expect(await files.read(scratchFile(2))).toBeDefined();
    expect(await frameValues(s, 2)).toEqual([]);
    expect((await s.getTasks([2])).get(2)?.role).toBe("terminal");

    const reopenedReports: JsonlReport[] = [];
    const reopened = await open(files, reopenedReports);
    expect(reopened.lastSeq).toBe(4);
    expect(await frameValues(reopened, 2)).toEqual([]);
    expect(reopenedReports.map((r) => r.type)).toEqual(["unlink_failed"]);
    expect((await reopened.commit({ kind: "main", writes: [entry(5, 1)] })).first).toBe(5);
    await reopened.close();

    files.failUnlink = false;
    const third = await open(files);
    expect(third.lastSeq).toBe(5);
    expect(await frameValues(third, 2)).toEqual([]);
    expect(await files.read(scratchFile(2))).toBeUndefined();
  });

  it(`§10.2 Main 100, live scratch through 150, crash: reopen recovers lastSeq=150, next write=151${suffix}`, async () => {
    const { files } = await rig();
    const s = await open(files);
    const writes: MainWrite[] = [conv(1)];
    for (let id = 2; id <= 99; id++) writes.push(entry(id, 1));
    writes.push(task(100, 1));
    await s.commit({ kind: "main", writes });
    expect(s.lastSeq).toBe(100);
    // A fresh attempt clears, streams frames as small scratch commits, and the last write is a remove.
    await s.commit({ kind: "scratch", task: 100, writes: [{ type: "list.clear", addr: frames(100) }] }); // 101
    for (let seq = 102; seq <= 149; seq++) {
      await s.commit({
        kind: "scratch",
        task: 100,
        writes: [{ type: "list.append", addr: frames(100), value: `f${seq}` }],
      });
    }
    await s.commit({ kind: "scratch", task: 100, writes: [{ type: "list.remove", addr: frames(100), element: 102 }] }); // 150
    expect(s.lastSeq).toBe(150);
    const expected = await frameValues(s, 100);
    // Crash: no close; the instance is simply dropped.

    const reopened = await open(files);
    expect(reopened.lastSeq).toBe(150);
    expect((await reopened.getTasks([100])).get(100)?.role).toBe("start");
    expect((await reopened.scanTasks({ live: true, limit: 10 })).items.map((t) => t.id)).toEqual([100]);
    expect(await frameValues(reopened, 100)).toEqual(expected);
    expect(expected).toHaveLength(47);
    expect(await reopened.commit({ kind: "main", writes: [entry(151, 1)] })).toEqual({ first: 151, last: 151 });
    // The main log itself has nothing between 100 and 151: per-file gaps are normal.
    const lines = ((await files.read(MAIN)) as string).split("\n").filter((l) => l !== "");
    expect(lines.map((l) => (JSON.parse(l) as { first: number }).first)).toEqual([1, 151]);
  });

  it(`§10.2 Retired scratch still on disk: ignored even if malformed; main settlement covers its sequences${suffix}`, async () => {
    const { files, setRaw } = await rig();
    const s = await open(files);
    await s.commit({ kind: "main", writes: [conv(1), task(2, 1), task(3, 1)] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f4" }] });
    await s.commit({ kind: "scratch", task: 3, writes: [{ type: "list.append", addr: frames(3), value: "g5" }] });
    await s.commit({ kind: "scratch", task: 2, writes: [{ type: "list.append", addr: frames(2), value: "f6" }] });
    const oldScratch = (await files.read(scratchFile(2))) as string;
    await s.commit({ kind: "main", writes: [{ type: "settle", id: 2, role: "terminal", state: { status: "done" } }] }); // 7
    // Crash before the unlink: the old file is back on disk, with a malformed line and a torn tail.
    await setRaw(scratchFile(2), `${oldScratch}garbage that is not JSON\n{"first":99,"task":2,"wr`);

    const reports: JsonlReport[] = [];
    const reopened = await open(files, reports);
    expect(reopened.lastSeq).toBe(7);
    expect(await frameValues(reopened, 2)).toEqual([]);
    expect(await frameValues(reopened, 3)).toEqual(["g5"]);
    expect(reports.filter((r) => r.type === "torn_line_discarded")).toEqual([]);
    // Retired scratch is removed at open, best effort.
    expect(await files.read(scratchFile(2))).toBeUndefined();
    expect(await reopened.commit({ kind: "main", writes: [entry(8, 1)] })).toEqual({ first: 8, last: 8 });
  });
}
