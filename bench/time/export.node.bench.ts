/**
 * Export benchmark (docs/performance.md "Session export"): a session of 50,000 entries (25,000 turns, each a user
 * entry and a generation task in one commit, then the answer, the task's settlement and the input's result in
 * the next) in SQLite over node:sqlite, exported with `exportLines` (storage/sqlite-export.ts) the way the
 * session's export route pulls it, one line at a time, keeping none. Prints the CPU time, the peak JS heap and
 * RSS growth over the export, lines and bytes. Asserts only that the export is whole (its last sequence).
 *
 * Run: npm run bench:export (BENCH_EXPORT_ENTRIES=N for another size; also part of npm run bench:node, which runs bench/time)
 */
import { expect, it } from "vitest";
import { NodeSqliteHost } from "../../src/storage/node-sqlite.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { exportLines } from "../../src/storage/sqlite-export.js";
import type { MainWrite } from "../../src/storage/records.js";

const ENTRIES = Number(process.env["BENCH_EXPORT_ENTRIES"] ?? 50_000);
const TEXT = "An answer of about three hundred characters, as a short chat reply would be. ".repeat(4);

it(`export: ${ENTRIES} entries from SQLite, streamed`, async () => {
  const host = new NodeSqliteHost();
  const storage = SqliteStorage.open(host);
  await storage.commit({ kind: "main", writes: [{ type: "createConversation", conversation: { id: 1 } }] });
  for (let turn = 0; turn < ENTRIES / 2; turn++) {
    const user = storage.lastSeq + 1;
    const task = user + 1;
    await storage.commit({
      kind: "main",
      writes: [
        {
          type: "entry",
          entry: {
            id: user,
            conversationId: 1,
            kind: "user",
            model: [{ role: "user", content: `question ${turn}`, timestamp: turn }],
          },
        },
        {
          type: "task",
          task: {
            id: task,
            conversationId: 1,
            kind: "generation",
            role: "start",
            state: { status: "pending" },
            after: [],
          },
        },
      ],
    });
    const answer = storage.lastSeq + 1;
    const writes: MainWrite[] = [
      {
        type: "entry",
        entry: {
          id: answer,
          conversationId: 1,
          kind: "assistant",
          byTaskId: task,
          model: [{ role: "user", content: TEXT, timestamp: turn }],
        },
      },
      { type: "settle", id: task, role: "terminal", state: { status: "done" } },
      {
        type: "value.set",
        addr: { scope: { conversation: 1 }, namespace: "pi.inputResult", key: String(user), rewind: false },
        value: { status: "done", entry: user, answer },
      },
    ];
    await storage.commit({ kind: "main", writes });
  }
  const lastSeq = storage.lastSeq;

  globalThis.gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  let heapPeak = heap0;
  let rssPeak = rss0;
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  let lines = 0;
  let bytes = 0;
  let last = "";
  for (const line of exportLines(host)) {
    lines++;
    bytes += line.length;
    last = line;
    if (lines % 16 === 0) {
      const m = process.memoryUsage();
      heapPeak = Math.max(heapPeak, m.heapUsed);
      rssPeak = Math.max(rssPeak, m.rss);
    }
  }
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - wall0;
  const m = process.memoryUsage();
  heapPeak = Math.max(heapPeak, m.heapUsed);
  rssPeak = Math.max(rssPeak, m.rss);

  const mb = (n: number): string => (n / 1024 / 1024).toFixed(1);
  console.log(
    [
      `export of ${ENTRIES} entries (lastSeq ${lastSeq})`,
      `lines / bytes          ${lines} / ${mb(bytes)} MB`,
      `CPU (user + system)    ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms (wall ${wall.toFixed(0)} ms)`,
      `peak JS heap growth    ${mb(heapPeak - heap0)} MB (heap before ${mb(heap0)} MB)`,
      `peak RSS growth        ${mb(rssPeak - rss0)} MB (RSS before ${mb(rss0)} MB)`,
    ].join("\n"),
  );
  const parsed = JSON.parse(last) as { first: number; writes: unknown[] };
  expect(parsed.first + parsed.writes.length - 1).toBe(lastSeq);
});
