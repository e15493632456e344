/**
 * Collapse inputs and bounds (§2.3, §8.2, §8.4): a repeated collapse summarizes the current
 * context (the previous summary and what it retained, nothing before), a declined or failed threshold
 * collapse lets the generation go ahead uncollapsed and is not retried until the context grew, and the
 * summarizer keeps the conversation's tools but is told not to call them (tool choice `none`).
 */
import type { Context, SimpleStreamOptions, SystemMessage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { coreBackends } from "../core/backends.js";
import {
  answerNewest,
  call,
  fauxAssistantMessage,
  openRig,
  resultOf,
  tasksOfKind,
  type Step,
} from "./turn-race-fixtures.js";

/** A summarizer step that records its request and options, answering `text`. */
function summarizer(seen: { context: Context; options: SimpleStreamOptions | undefined }[], text: string): Step {
  return (context, options) => {
    seen.push({ context: structuredClone(context), options });
    return fauxAssistantMessage(text);
  };
}

function requestText(context: Context | undefined): string {
  return JSON.stringify(context?.messages ?? []);
}

for (const backend of coreBackends) {
  describe(`collapse inputs and bounds (${backend.name})`, () => {
    it(`three collapses in a row: each summarizer request contains the previous summary and nothing before it (${backend.name})`, () =>
      backend.run(async (inner) => {
        const seen: { context: Context; options: SimpleStreamOptions | undefined }[] = [];
        const rig = await openRig(inner, [], { turn: { collapseKeepEntries: 2 } });
        const root = await rig.harness.root(call);
        const ask = async (word: string): Promise<void> => {
          rig.provider.push(answerNewest("re"));
          await root.prompt({ input: word }, call);
        };
        const collapse = async (text: string): Promise<void> => {
          rig.provider.push(summarizer(seen, text));
          await rig.harness.driver.waitForTask(await root.collapse(undefined, call), undefined, call);
        };
        for (const word of ["alpha", "bravo", "charlie"]) await ask(word);
        await collapse("SUMMARY-ONE"); // summarizes alpha and bravo; charlie's exchange is retained
        await ask("delta");
        await collapse("SUMMARY-TWO"); // summary one and charlie; delta retained
        await ask("echo1");
        await collapse("SUMMARY-THREE"); // summary two and delta; echo1 retained

        expect((await tasksOfKind(rig, "collapse")).map((t) => t.state.status)).toEqual(["done", "done", "done"]);
        expect(seen).toHaveLength(3);
        const [one, two, three] = seen.map((s) => requestText(s.context));
        expect(one).toContain("alpha");
        expect(one).toContain("bravo");
        expect(one).not.toContain("charlie");
        expect(two).toContain("SUMMARY-ONE");
        expect(two).toContain("charlie");
        for (const old of ["alpha", "bravo", "delta"]) expect(two).not.toContain(old);
        expect(three).toContain("SUMMARY-TWO");
        expect(three).toContain("delta");
        for (const old of ["SUMMARY-ONE", "alpha", "bravo", "charlie", "echo1"]) expect(three).not.toContain(old);
      }));

    it(`Old task ids remain queryable after compaction (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [], { turn: { collapseKeepEntries: 2 } });
        const root = await rig.harness.root(call);
        for (const word of ["alpha", "bravo", "charlie"]) {
          rig.provider.push(answerNewest("re"));
          await root.prompt({ input: word }, call);
        }
        const before = await tasksOfKind(rig, "generation");
        expect(before.length).toBeGreaterThanOrEqual(3);
        rig.provider.push(fauxAssistantMessage("SUMMARY"));
        const collapse = await root.collapse(undefined, call);
        await rig.harness.driver.waitForTask(collapse, undefined, call);
        expect((await rig.harness.getTask(collapse, call))?.state).toMatchObject({ status: "done" });
        // §10.2: the tasks whose exchanges the summary folded away are still there by id, unchanged.
        for (const task of before) expect(await rig.harness.getTask(task.id, call)).toEqual(task);
        const byId = await rig.harness.getTasks(
          before.map((t) => t.id),
          call,
        );
        expect([...byId.keys()].sort((a, b) => a - b)).toEqual(before.map((t) => t.id).sort((a, b) => a - b));
        const generations = (await tasksOfKind(rig, "generation")).map((t) => t.id);
        for (const task of before) expect(generations).toContain(task.id);
      }));

    it(`a declining before_collapse hook on a threshold collapse: the input is answered and at most one collapse ran (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [answerNewest("1"), answerNewest("2"), answerNewest("3")], {
          turn: { collapseKeepEntries: 2, collapseThresholdTokens: 1 },
        });
        let declines = 0;
        rig.kit.hooks.on(rig.kit.collapse, "before_collapse", () => {
          declines += 1;
          // Bound the failure mode: an unbounded loop would never return; supply a summary to end it.
          return declines > 3 ? { summary: "gave up declining" } : { decline: true };
        });
        const root = await rig.harness.root(call);
        // The third input is the first with a foldable prefix: its threshold collapse is declined.
        for (const input of ["first question", "second question", "third question"]) {
          const accepted = await root.accept({ input }, call);
          expect(await root.drive(call)).toBe("idle");
          expect(await resultOf(rig, accepted.inputId)).toMatchObject({ status: "done" });
        }
        const collapses = await tasksOfKind(rig, "collapse");
        expect(collapses.length).toBeLessThanOrEqual(1);
        expect(declines).toBeLessThanOrEqual(1);
      }));

    it(`a declined threshold collapse is retried once the context grew by collapseRetryGrowthTokens (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [answerNewest("1"), answerNewest("2"), answerNewest("3"), answerNewest("4")], {
          turn: { collapseKeepEntries: 2, collapseThresholdTokens: 1, collapseRetryGrowthTokens: 200 },
        });
        let declines = 0;
        rig.kit.hooks.on(rig.kit.collapse, "before_collapse", () => {
          declines += 1;
          return declines > 3 ? { summary: "gave up declining" } : { decline: true };
        });
        const root = await rig.harness.root(call);
        await root.prompt({ input: "one two three four" }, call);
        await root.prompt({ input: "short" }, call);
        await root.prompt({ input: "short again" }, call);
        expect(declines).toBe(1);
        // Grow the context by well over 200 estimated tokens (chars/4): the next turn tries again.
        await root.prompt({ input: "x".repeat(2000) }, call);
        expect(declines).toBe(2);
        expect((await tasksOfKind(rig, "collapse")).map((t) => t.state.status)).toEqual(["failed", "failed"]);
      }));

    it(`the summarizer keeps the conversation's tools in its request and is called with tool choice none (${backend.name})`, () =>
      backend.run(async (inner) => {
        const seen: { context: Context; options: SimpleStreamOptions | undefined }[] = [];
        const rig = await openRig(
          inner,
          [answerNewest("1"), answerNewest("2"), answerNewest("3"), summarizer(seen, "SUMMARY")],
          {
            turn: { collapseKeepEntries: 2 },
          },
        );
        const root = await rig.harness.root(call);
        for (const word of ["one", "two", "three"]) await root.prompt({ input: word }, call);
        await rig.harness.driver.waitForTask(await root.collapse(undefined, call), undefined, call);
        expect(seen).toHaveLength(1);
        const system = seen[0]?.context.messages.find((m) => m.role === "system") as SystemMessage | undefined;
        expect(system?.toolsAdded?.map((t) => t.name)).toEqual(["echo"]);
        expect(seen[0]?.options?.toolChoice).toBe("none");
      }));
  });
}
