/**
 * Eviction at every commit boundary of a short subagent script (§8.5): the turn script of
 * eviction-script.ts on the harness of eviction-harness.ts (kill right after commit k, reopen by the
 * alarm alone, check the invariants, finish, compare with the uninterrupted run) over prompts that make the echo model
 * call `subagent`
 * (run, spawn, run with inherited context). The session's built-in turn kit is replaced through the
 * test seam by the same kit plus a system_instructions handler that also offers `subagent`, because
 * the harness creates its sessions with the default selection (echo). Contexts of every conversation
 * (children included) and every input's result must equal the uninterrupted run's, with the child ids
 * that a spawn reports normalized (a recovery may number later records differently).
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { createModels } from "@earendil-works/pi-ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTurnKit, selectedDefinitions } from "../../src/kinds/turns.js";
import { echoTool } from "../../src/tools/echo.js";
import { subagentTool } from "../../src/tools/subagent.js";
import { echoProvider } from "../../src/worker/platform/echo-model.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import { runScript, type RunOutcome, type Step } from "./eviction-script.js";
import { installSeams, resetSeams, type Seams } from "./session-fixtures.js";

let seams: Seams;

beforeEach(() => {
  seams = installSeams();
  const models = createModels();
  models.setProvider(echoProvider());
  const kit = createTurnKit({ models, tools: [echoTool, subagentTool] });
  kit.hooks.on(kit.generation, "system_instructions", ({ config }) => ({
    tools: selectedDefinitions(kit.tools, [...new Set([...config.tools, "subagent"])]),
  }));
  registerTestKinds(kit.kinds);
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

const call = (args: Record<string, unknown>): string => `/call subagent ${JSON.stringify(args)}`;

const steps: readonly Step[] = [
  { type: "prompt", key: "s0", input: call({ command: "run", prompt: "child one" }) },
  { type: "prompt", key: "s1", input: call({ command: "spawn", prompt: "child two" }) },
  { type: "prompt", key: "s2", input: call({ command: "run", prompt: "child three", context: "inherit" }) },
];

function normalized(outcome: RunOutcome): { contexts: string[]; results: Record<string, string> } {
  const strip = (s: string): string => s.replace(/subagent \d+/g, "subagent N").replace(/id \d+/g, "id N");
  return {
    contexts: outcome.contexts.map(strip),
    results: Object.fromEntries(Object.entries(outcome.results).map(([k, v]) => [k, strip(v)])),
  };
}

describe("eviction at every commit boundary of a subagent script", () => {
  it(
    "a subagent run, spawn and inheriting run killed after every commit reopen through the alarm and end as the uninterrupted run",
    { timeout: 120_000 },
    async () => {
      const baseline = await runScript(seams, "subagents-baseline", steps);
      expect(baseline.contexts.length).toBe(4); // root and three children
      expect(baseline.results["s0"]).toContain("child one");
      for (let k = 1; k <= baseline.commits; k++) {
        const run = await runScript(seams, `subagents-${k}`, steps, k);
        expect({ k, ...normalized(run) }).toEqual({ k, ...normalized(baseline) });
      }
      console.log(`subagent eviction sweep: ${baseline.commits} boundaries`);
    },
  );
});
