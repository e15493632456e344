/**
 * Context benchmark in Node: cold vs warm `contextEntries` on MemoryStorage with Node's
 * high-resolution clock. Workload in context-bench.ts. Prints figures; asserts only row bounds.
 *
 * Run: npm run bench:context
 */
import { expect, it } from "vitest";
import { MemoryStorage } from "../../src/storage/memory.js";
import { measure, report } from "./context-bench.js";

it("context: cold vs warm on memory (node clock)", async () => {
  const f = await measure(new MemoryStorage());
  report("memory, node", f);
  expect(f.coldRows).toBeLessThanOrEqual(f.rangeSinceHead + 1);
  expect(f.warmRows).toBe(0);
});
