/**
 * Export and import benchmark (docs/performance.md "Session export and import"), in SQLite over node:sqlite, for two
 * sessions:
 *
 *   entries   50,000 entries (25,000 turns, each a user entry and a generation task in one commit, then the answer,
 *             the task's settlement and the input's result in the next)
 *   large     one session of about 20 MiB: 20 turns whose answers are 1 MiB each (each such write is a line alone)
 *
 * Export: `exportLines` (storage/sqlite-export.ts) the way the session's export route pulls it, one line at a time,
 * keeping none. Import: the export's bytes (header line and batches, written to a temporary file first, untimed)
 * streamed from the file into an empty storage through `stageImport` and the settling commit
 * (session/import-stage.ts), as the session object's import runs them. Prints, for each, the CPU time (user +
 * system), the wall time and the peak JS heap and RSS growth (sampled every 16 lines, and on every chunk the import
 * reads), lines and bytes. Asserts only that each is whole (the last sequence).
 *
 * With BENCH_IMPORT_DIR set (scripts/bench-export.ts sets it), it also writes two exports of about 64 MiB there (the
 * import body cap), for the workerd measurement of the import's CPU: `small.jsonl` (short turns, the most writes per
 * byte) and `large.jsonl` (answers of 1 MiB).
 *
 * Run: npm run bench:export (scripts/bench-export.ts: this file, then the 64 MiB imports in workerd;
 * BENCH_EXPORT_ENTRIES=N for another size of the first session)
 */
import { appendFileSync, createReadStream, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { expect, it } from "vitest";
import { NodeSqliteHost } from "../../src/storage/node-sqlite.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { exportLines } from "../../src/storage/sqlite-export.js";
import type { MainWrite } from "../../src/storage/records.js";
import { EXPORT_FORMAT, EXPORT_VERSION, MAX_IMPORT_BYTES, type ExportHeader } from "../../src/api/transfer.js";
import { settlingWrites, stageImport } from "../../src/worker/session/import-stage.js";

const ENTRIES = Number(process.env["BENCH_EXPORT_ENTRIES"] ?? 50_000);
const TEXT = "An answer of about three hundred characters, as a short chat reply would be. ".repeat(4);
const MIB = 1024 * 1024;

const mb = (n: number): string => (n / MIB).toFixed(1);

/** CPU, wall and peak memory growth over `run`, which calls `sample()` as it goes. */
async function measured<T>(
  run: (sample: () => void) => Promise<T> | T,
): Promise<{ value: T; cpuMs: number; wallMs: number; heap: number; rss: number; heap0: number; rss0: number }> {
  globalThis.gc?.();
  const before = process.memoryUsage();
  let heapPeak = before.heapUsed;
  let rssPeak = before.rss;
  const sample = (): void => {
    const m = process.memoryUsage();
    heapPeak = Math.max(heapPeak, m.heapUsed);
    rssPeak = Math.max(rssPeak, m.rss);
  };
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const value = await run(sample);
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - wall0;
  sample();
  return {
    value,
    cpuMs: (cpu.user + cpu.system) / 1000,
    wallMs,
    heap: heapPeak - before.heapUsed,
    rss: rssPeak - before.rss,
    heap0: before.heapUsed,
    rss0: before.rss,
  };
}

/** A session of `turns` turns whose answers are `answer`, in a new storage. */
async function session(turns: number, answer: string): Promise<{ host: NodeSqliteHost; lastSeq: number }> {
  const host = new NodeSqliteHost();
  const storage = SqliteStorage.open(host);
  await storage.commit({ kind: "main", writes: [{ type: "createConversation", conversation: { id: 1 } }] });
  for (let turn = 0; turn < turns; turn++) {
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
    const reply = storage.lastSeq + 1;
    const writes: MainWrite[] = [
      {
        type: "entry",
        entry: {
          id: reply,
          conversationId: 1,
          kind: "assistant",
          byTaskId: task,
          model: [{ role: "user", content: answer, timestamp: turn }],
        },
      },
      { type: "settle", id: task, role: "terminal", state: { status: "done" } },
      {
        type: "value.set",
        addr: { scope: { conversation: 1 }, namespace: "pi.inputResult", key: String(user), rewind: false },
        value: { status: "done", entry: user, answer: reply },
      },
    ];
    await storage.commit({ kind: "main", writes });
  }
  return { host, lastSeq: storage.lastSeq };
}

function header(lastSeq: number): ExportHeader {
  return {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    session: "bench-source",
    incarnation: "bench-source-incarnation",
    lastSeq,
    redacted: false,
    labels: [],
    metadata: {},
  };
}

async function exportAndImport(label: string, turns: number, answer: string): Promise<void> {
  const { host, lastSeq } = await session(turns, answer);

  // Export, streamed, keeping none.
  const exported = await measured((sample) => {
    let lines = 0;
    let bytes = 0;
    let last = "";
    for (const line of exportLines(host)) {
      lines++;
      bytes += line.length;
      last = line;
      if (lines % 16 === 0) sample();
    }
    return { lines, bytes, last };
  });
  const parsed = JSON.parse(exported.value.last) as { first: number; writes: unknown[] };
  expect(parsed.first + parsed.writes.length - 1).toBe(lastSeq);

  // The import's body: the export's bytes in a file (untimed), read back as a stream.
  const dir = mkdtempSync(join(tmpdir(), "pico-bench-export-"));
  const file = join(dir, "export.jsonl");
  writeFileSync(file, `${JSON.stringify(header(lastSeq))}\n`);
  for (const line of exportLines(host)) appendFileSync(file, line);
  host.close();

  const target = new NodeSqliteHost();
  const imported = await measured(async (sample) => {
    const source = Readable.toWeb(createReadStream(file, { highWaterMark: 64 * 1024 })) as ReadableStream<Uint8Array>;
    let bytes = 0;
    const body = source.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          bytes += chunk.byteLength;
          sample();
          controller.enqueue(chunk);
        },
      }),
    );
    const storage = SqliteStorage.open(target);
    const staged = await stageImport(storage, body, "bench-copy-incarnation");
    const settling = await settlingWrites(storage, staged, "bench-copy-incarnation", Date.now());
    if (settling.writes.length > 0) await storage.commit({ kind: "main", writes: [...settling.writes] });
    const seq = storage.lastSeq;
    await storage.close();
    return { bytes, lastSeq: seq };
  });
  rmSync(dir, { recursive: true, force: true });
  expect(imported.value.lastSeq).toBeGreaterThanOrEqual(lastSeq);

  console.log(
    [
      `${label} (lastSeq ${lastSeq})`,
      `export lines / bytes   ${exported.value.lines} / ${mb(exported.value.bytes)} MB`,
      `export CPU             ${exported.cpuMs.toFixed(0)} ms (wall ${exported.wallMs.toFixed(0)} ms)`,
      `export peak growth     JS heap ${mb(exported.heap)} MB, RSS ${mb(exported.rss)} MB (before: heap ${mb(exported.heap0)} MB, RSS ${mb(exported.rss0)} MB)`,
      `import bytes read      ${mb(imported.value.bytes)} MB`,
      `import CPU             ${imported.cpuMs.toFixed(0)} ms (wall ${imported.wallMs.toFixed(0)} ms)`,
      `import peak growth     JS heap ${mb(imported.heap)} MB, RSS ${mb(imported.rss)} MB (before: heap ${mb(imported.heap0)} MB, RSS ${mb(imported.rss0)} MB)`,
    ].join("\n"),
  );
}

it(`export and import: ${ENTRIES} entries`, async () => {
  await exportAndImport(`${ENTRIES} entries`, ENTRIES / 2, TEXT);
});

it("export and import: one 20 MiB session (20 answers of 1 MiB)", async () => {
  await exportAndImport("one 20 MiB session", 20, "x".repeat(MIB - 64));
});

const IMPORT_DIR = process.env["BENCH_IMPORT_DIR"] ?? "";

/** Write the export of `turns` turns answering `answer` to `file`, header first; its size in bytes. */
async function writeExport(file: string, turns: number, answer: string): Promise<number> {
  const { host, lastSeq } = await session(turns, answer);
  writeFileSync(file, `${JSON.stringify(header(lastSeq))}\n`);
  for (const line of exportLines(host)) appendFileSync(file, line);
  host.close();
  return statSync(file).size;
}

it.runIf(IMPORT_DIR !== "")("writes two exports of about 64 MiB for the workerd import measurement", async () => {
  // A short turn exports about 975 bytes; a 1 MiB answer about 1 MiB plus its turn.
  const small = await writeExport(join(IMPORT_DIR, "small.jsonl"), Math.floor((MAX_IMPORT_BYTES * 0.97) / 1000), TEXT);
  const large = await writeExport(join(IMPORT_DIR, "large.jsonl"), 62, "x".repeat(MIB - 64));
  console.log(`64 MiB exports written: small ${mb(small)} MB, large ${mb(large)} MB (cap ${mb(MAX_IMPORT_BYTES)} MB)`);
  expect(small).toBeLessThanOrEqual(MAX_IMPORT_BYTES);
  expect(large).toBeLessThanOrEqual(MAX_IMPORT_BYTES);
});
