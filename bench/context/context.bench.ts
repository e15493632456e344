/// <reference types="@cloudflare/vitest-plugin/types" />
/// <reference path="../../test/env.d.ts" />
/**
 * Context benchmark in workerd: cold vs warm `contextEntries` on MemoryStorage and on SqliteStorage
 * inside a Durable Object (SQLite rows read from `SqliteStorage.stats`). Workload in context-bench.ts.
 * workerd's clock is coarse (about 1 ms), so times are means over many runs; context.node.bench.ts has
 * finer memory timings. Prints figures; asserts only row bounds, never wall-clock times.
 *
 * Run: npm run bench:context
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import { SqliteStorage } from "../../src/storage/sqlite.js";
import { measure, report } from "./context-bench.js";

it("context: cold vs warm on memory", async () => {
  const f = await measure(new MemoryStorage());
  report("memory", f);
  expect(f.coldRows).toBeLessThanOrEqual(f.rangeSinceHead + 1);
  expect(f.warmRows).toBe(0);
});

it("context: cold vs warm on SQLite in a Durable Object", async () => {
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(`bench-context-${Date.now()}`));
  await runInDurableObject(stub, async (_instance, state) => {
    const storage = SqliteStorage.open(state.storage);
    const f = await measure(storage, () => storage.stats.rowsRead);
    report("sqlite", f);
    expect(f.coldRows).toBeLessThanOrEqual(f.rangeSinceHead + 1);
    expect(f.warmRows).toBe(0);
    expect(f.warmSqlRows).toBe(0);
  });
}, 300_000);
