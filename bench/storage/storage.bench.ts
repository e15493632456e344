/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * Storage benchmark in workerd (pico v3 §10.3; docs/performance.md): per backend (memory, JSONL over in-memory
 * files, SQLite inside a Durable Object) and history depth (1,000 and 100,000 entries), a typical
 * six-write turn commit, newestHead and a 50-entry page, with SQLite rows read/written per call and bytes
 * on disk per entry. Prints a table; asserts nothing about time.
 *
 * Times: workerd's clock advances only on I/O and is coarse, so each figure is the mean over many
 * iterations (200 turns, 1,000 reads) and is indicative only. Rows read/written are exact and
 * deterministic; they are the figures to compare.
 *
 * Run: npm run bench:storage
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, it } from "vitest";
import { MemoryFiles } from "../../src/storage/files.js";
import { JsonlStorage } from "../../src/storage/jsonl.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { type Figures, measure, table } from "./workload.js";

const DEPTHS = [1_000, 100_000];
const results: Figures[] = [];

afterAll(() => {
  console.log(`\nstorage benchmark (means per call; rows = SQLite rows read/written per call)\n${table(results)}\n`);
});

for (const depth of DEPTHS) {
  it(`storage bench: memory at ${depth} entries`, async () => {
    results.push(await measure("memory", new MemoryStorage(), depth));
  });

  it(`storage bench: jsonl (memory files) at ${depth} entries`, async () => {
    const files = new MemoryFiles();
    const storage = await JsonlStorage.open(files);
    const bytes = async () => {
      let total = 0;
      for (const name of await files.list()) total += new TextEncoder().encode((await files.read(name)) ?? "").length;
      return total;
    };
    results.push(await measure("jsonl", storage, depth, { bytes }));
    await storage.close();
  });

  it(`storage bench: sqlite (Durable Object) at ${depth} entries`, async () => {
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-storage-${depth}-${Date.now()}`));
    await runInDurableObject(stub, async (_instance, state) => {
      const storage = SqliteStorage.open(state.storage);
      results.push(
        await measure("sqlite", storage, depth, {
          rows: () => ({ ...storage.stats }),
          bytes: () => state.storage.sql.databaseSize,
        }),
      );
    });
  });
}
