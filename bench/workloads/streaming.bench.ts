/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * §10.3 "large streaming output": one faux answer of 1 MB streamed in ~1 KB deltas on SQLite in a
 * Durable Object, with frames flushed on every delta (flushMs 0, the most scratch commits), only at
 * the end of the stream with no hook (the tail rides on the settlement: no scratch commit), and only at
 * the end with an after_response hook registered (the tail is written before the hook, one batch cut
 * at the budget). Prints scratch commits, scratch bytes (JSON of the scratch writes), whether the
 * scratch budget (maxScratchBytes, 1,000,000) stopped the frames, rows read and written, and database
 * bytes at the peak (scratch live) and after settlement (scratch retired).
 *
 * Run: npm run bench:streaming
 */
import { fauxAssistantMessage } from "@earendil-works/pi-ai";
import { expect, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { call, inObject, openSession, reading, since, table } from "./session.js";

const SIZE = 1_000_000;
const ANSWER = "0123456789abcdef".repeat(SIZE / 16);
/** The faux provider streams 256-token (1,024-char) text deltas. */
const DELTAS = Math.ceil(SIZE / 1024);

async function run(label: string, flushMs: number, hooked: boolean): Promise<(string | number)[]> {
  return inObject(`streaming-${flushMs}-${hooked}`, async (state) => {
    const storage = SqliteStorage.open(state.storage);
    const s = await openSession(storage, () => fauxAssistantMessage(ANSWER), {
      turn: { flushMs },
      tokenSize: { min: 256, max: 256 },
    });
    if (hooked) s.kit.hooks.on(s.kit.generation, "after_response", () => undefined);
    let scratchCommits = 0;
    let scratchBytes = 0;
    let frameBytes = 0;
    let peak = state.storage.sql.databaseSize;
    s.harness.onCommit((c) => {
      if (c.batch.kind !== "scratch") return;
      scratchCommits++;
      scratchBytes += JSON.stringify(c.batch.writes).length;
      for (const w of c.batch.writes)
        if (w.type === "list.append") frameBytes += JSON.stringify((w.value as { f: unknown }).f).length;
      peak = Math.max(peak, state.storage.sql.databaseSize);
    });
    const root = await s.harness.root(call);
    const b0 = state.storage.sql.databaseSize;
    const r0 = reading(storage, state);
    const entry = await root.prompt({ input: "write a megabyte" }, call);
    const d = since(r0, reading(storage, state));
    const text = entry?.kind === "assistant" ? JSON.stringify(entry.model ?? []).length : 0;
    await s.harness.close(call);
    // The budget counts frame bytes (maxScratchBytes, 1,000,000): frames stopped when they reached it.
    const stopped = frameBytes > 1_000_000 - 2_048;
    return [
      label,
      text >= SIZE ? "yes" : "no",
      `${scratchCommits} / ${DELTAS}`,
      scratchBytes,
      frameBytes,
      stopped ? "yes" : "no",
      d.rowsRead,
      d.rowsWritten,
      peak - b0,
      state.storage.sql.databaseSize - b0,
    ];
  });
}

it("streaming: a 1 MB answer in ~1 KB deltas (sqlite)", async () => {
  const every = await run("flush every delta (flushMs 0)", 0, false);
  const once = await run("flush at stream end, no hook", 3_600_000, false);
  const hooked = await run("flush at stream end, after_response hook", 3_600_000, true);
  table(
    `bench/workloads streaming — one ${SIZE.toLocaleString("en")}-char answer, SQLite in a Durable Object; rows exact`,
    [
      "run",
      "answer whole",
      "scratch commits / deltas",
      "scratch bytes",
      "frame bytes",
      "frames stopped by budget",
      "rows read",
      "rows written",
      "db bytes peak",
      "db bytes after",
    ],
    [every, once, hooked],
  );
  expect(every[1]).toBe("yes");
  expect(once[1]).toBe("yes");
  expect(hooked[1]).toBe("yes");
}, 600_000);
