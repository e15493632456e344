/**
 * Eviction sweep, fast sample: the turn script of eviction-script.ts, killed right after
 * a sample of its commit boundaries, each reopened by the alarm alone and compared with the uninterrupted
 * run; the deploy drill does the same with a new deployed version id between kill and reopen. The full
 * sweep (every boundary of a 100-turn script) is `npm run test:evictions`.
 */
import { abortAllDurableObjects } from "cloudflare:test";
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

describe("eviction at commit boundaries (fast sample)", () => {
  it(
    "a 12-turn script killed after sampled commits reopens through the alarm and ends as the uninterrupted run",
    { timeout: 120_000 },
    async () => {
      const steps = script(12);
      const baseline = await runScript(seams, "evict-baseline", steps);
      expect(baseline.commits).toBeGreaterThan(20);
      const sample = [1, 2, 3, 5, 8, 13, 21, Math.floor(baseline.commits / 2), baseline.commits - 1].filter(
        (k, i, all) => k >= 1 && k <= baseline.commits && all.indexOf(k) === i,
      );
      for (const k of sample) {
        const run = await runScript(seams, `evict-${k}`, steps, k);
        expect({ k, contexts: run.contexts, results: run.results }).toEqual({
          k,
          contexts: baseline.contexts,
          results: baseline.results,
        });
      }
      console.log(`eviction sample: ${sample.length} boundaries tried of ${baseline.commits}`);
    },
  );

  it(
    "deploy drill: the same script killed after sampled commits reopens under a new deployed version and ends as the uninterrupted run",
    { timeout: 120_000 },
    async () => {
      const steps = script(12);
      const baseline = await runScript(seams, "deploy-baseline", steps);
      const sample = [1, 4, 9, Math.floor(baseline.commits / 2), baseline.commits - 1].filter(
        (k, i, all) => k >= 1 && k <= baseline.commits && all.indexOf(k) === i,
      );
      for (const k of sample) {
        const run = await runScript(seams, `deploy-${k}`, steps, k, `v-deploy-${k}`);
        expect({ k, contexts: run.contexts, results: run.results }).toEqual({
          k,
          contexts: baseline.contexts,
          results: baseline.results,
        });
        expect(seams.version).toBe("v1");
      }
      console.log(
        `deploy drill: ${sample.length} boundaries tried of ${baseline.commits}, each across a version change`,
      );
    },
  );
});
