/**
 * Eviction sweep, full: the 100-turn script of eviction-script.ts killed right after every
 * commit boundary k, one run per k, each reopened by the alarm alone and compared with the uninterrupted
 * run. Long-running: `npm run test:evictions` (not part of `npm test`, which runs a sample).
 */
import { abortAllDurableObjects, env } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runScript, script } from "./eviction-script.js";
import { installSeams, resetSeams, type Seams } from "./session-fixtures.js";

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

// `SWEEP_SHARD=i/n` (read by vitest.evictions.config.ts) runs every n-th boundary starting at i + 1, so
// two processes can share a two-core machine; the default runs them all.
function shard(): { index: number; count: number } {
  const raw = (env as { SWEEP_SHARD?: string }).SWEEP_SHARD ?? "0/1";
  const match = /^(\d+)\/(\d+)$/.exec(raw);
  if (match === null || Number(match[2]) < 1 || Number(match[1]) >= Number(match[2]))
    throw new Error(`SWEEP_SHARD must be i/n with 0 <= i < n, got ${raw}`);
  return { index: Number(match[1]), count: Number(match[2]) };
}

describe("eviction at every commit boundary (full sweep)", () => {
  it(
    "a 100-turn script killed after each commit k reopens through the alarm and ends as the uninterrupted run",
    { timeout: 0 },
    async () => {
      const { index, count } = shard();
      const steps = script(100);
      const baseline = await runScript(seams, "sweep-baseline", steps);
      let tried = 0;
      const failed: number[] = [];
      for (let k = 1 + index; k <= baseline.commits; k += count) {
        const run = await runScript(seams, `sweep-${k}`, steps, k);
        // Every boundary runs even after a mismatch, so one report names all of them.
        if (
          JSON.stringify({ contexts: run.contexts, results: run.results }) !==
          JSON.stringify({ contexts: baseline.contexts, results: baseline.results })
        ) {
          failed.push(k);
          console.log(`eviction sweep: boundary ${k} differs from the uninterrupted run`);
        }
        tried += 1;
        // Progress, so a sweep cut short still reports how far it got.
        if (tried % 10 === 0)
          console.log(
            `eviction sweep (shard ${index}/${count}): ${tried} boundaries tried, ${failed.length} differ, of ${baseline.commits} commits`,
          );
      }
      console.log(
        `eviction sweep (shard ${index}/${count}): ${tried} boundaries tried of ${baseline.commits} commits; differing: ${failed.length === 0 ? "none" : failed.join(", ")}`,
      );
      expect(failed).toEqual([]);
    },
  );
});
