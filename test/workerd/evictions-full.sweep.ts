/**
 * Eviction sweep, full (DESIGN §3): the 100-turn script of eviction-harness.ts killed right after every
 * commit boundary k, one run per k, each reopened by the alarm alone and compared with the uninterrupted
 * run. Long-running: `npm run test:evictions` (not part of `npm test`, which runs a sample).
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runScript, script } from "./eviction-harness.js";
import { installSeams, resetSeams, type Seams } from "./session-fixtures.js";

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

describe("eviction at every commit boundary (full sweep)", () => {
  it("a 100-turn script killed after each commit k reopens through the alarm and ends as the uninterrupted run", { timeout: 0 }, async () => {
    const steps = script(100);
    const baseline = await runScript(seams, "sweep-baseline", steps);
    let tried = 0;
    for (let k = 1; k <= baseline.commits; k++) {
      const run = await runScript(seams, `sweep-${k}`, steps, k);
      expect({ k, contexts: run.contexts, results: run.results }).toEqual({ k, contexts: baseline.contexts, results: baseline.results });
      tried += 1;
      // Progress, so a sweep cut short still reports how far it got.
      if (tried % 10 === 0) console.log(`eviction sweep: ${tried} of ${baseline.commits} boundaries passed`);
    }
    console.log(`eviction sweep: ${tried} boundaries tried of ${baseline.commits} commits`);
  });
});
