/**
 * Request building grows only with new entries (src/kinds/request-cache.ts): one `ContextProjection`
 * fed a conversation's successive contexts answers exactly what the from-scratch functions answer
 * (`requestMessages`, `foldTools` over the items, `currentEpochBaseline`) after new entries, a fork
 * and a collapse, and folds only the new items when a context extends the previous one.
 */
import { describe, expect, it } from "vitest";
import type { FauxResponseFactory } from "@earendil-works/pi-ai";
import { requestMessages, type DerivedContext } from "../../src/core/context.js";
import { ContextProjection, estimateTokens, estimateTokensCached } from "../../src/kinds/request-cache.js";
import { SUMMARY_PROMPT } from "../../src/kinds/collapse.js";
import { currentEpochBaseline, foldTools } from "../../src/kinds/sections.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import { call, fauxAssistantMessage, fauxToolCall, openTurns } from "./turn-fixtures.js";

/** Answers from the newest message: a user prompt asks for two echoes, the summary prompt gets a summary. */
const answer: FauxResponseFactory = (context) => {
  const last = context.messages[context.messages.length - 1];
  if (last?.role !== "user") return fauxAssistantMessage("Both echoes came back.");
  const text =
    typeof last.content === "string"
      ? last.content
      : last.content.map((c) => (c.type === "text" ? c.text : "")).join("");
  if (text === SUMMARY_PROMPT) return fauxAssistantMessage("Summary: echoes.");
  return fauxAssistantMessage(
    [
      fauxToolCall("echo", { text: `${text} a` }, { id: `a-${text}` }),
      fauxToolCall("echo", { text: `${text} b` }, { id: `b-${text}` }),
    ],
    {
      stopReason: "toolUse",
    },
  );
};

function expectFresh(projection: ContextProjection, context: DerivedContext): void {
  expect(projection.requestMessages(context)).toEqual(requestMessages(context));
  expect([...projection.tools(context)]).toEqual([...foldTools(context.items.map((i) => i.messages))]);
  expect(projection.baseline(context)).toBe(currentEpochBaseline(context));
  expect(estimateTokensCached(projection.requestMessages(context))).toBe(estimateTokens(requestMessages(context)));
  expect(projection.estimateTokens(context)).toBe(estimateTokens(requestMessages(context)));
}

describe("request building (issue 15)", () => {
  it("the cached projection equals a fresh one after new entries, a fork and a collapse", async () => {
    const { harness, faux } = await openTurns(new MemoryStorage(), { turn: { collapseKeepEntries: 2 } });
    faux.setResponses(Array.from({ length: 64 }, () => answer));
    const root = await harness.root(call);
    const projection = new ContextProjection();

    // New entries: each turn extends the context; the projection folds only what is new.
    for (let turn = 1; turn <= 4; turn++) {
      await root.prompt({ input: `turn ${turn}` }, call);
      expectFresh(projection, await root.contextEntries(undefined, call));
    }
    expect(projection.stats.extended).toBeGreaterThanOrEqual(3);
    const rebuiltBeforeFork = projection.stats.rebuilt;

    // A fork: the child's context is derived on its own; the same projection rebuilds or extends, never answers stale.
    const context = await root.contextEntries(undefined, call);
    const at = context.ids[Math.floor(context.ids.length / 2)] as number;
    const child = await root.fork({ at }, call);
    expectFresh(projection, await child.contextEntries(undefined, call));
    await child.prompt({ input: "child turn" }, call);
    expectFresh(projection, await child.contextEntries(undefined, call));
    expect(projection.stats.rebuilt).toBeGreaterThan(rebuiltBeforeFork);

    // Back to the parent, then a collapse: a new head replaces the prefix.
    expectFresh(projection, await root.contextEntries(undefined, call));
    await harness.driver.waitForTask(await root.collapse(undefined, call), undefined, call);
    const collapsed = await root.contextEntries(undefined, call);
    expect(collapsed.head).toBeDefined();
    expectFresh(projection, collapsed);
    await root.prompt({ input: "after the collapse" }, call);
    expectFresh(projection, await root.contextEntries(undefined, call));
    // A historical target (older than the live cache) is answered too.
    expectFresh(projection, await root.contextEntries(at, call));
  });

  it("a context that repeats the previous one is reused, and the returned request is the caller's to change", async () => {
    const { harness, faux } = await openTurns(new MemoryStorage());
    faux.setResponses(Array.from({ length: 8 }, () => answer));
    const root = await harness.root(call);
    await root.prompt({ input: "one" }, call);
    const context = await root.contextEntries(undefined, call);
    const projection = new ContextProjection();
    const first = projection.requestMessages(context);
    first.length = 0;
    expect(projection.requestMessages(context)).toEqual(requestMessages(context));
    expect(projection.stats).toEqual({ reused: 1, extended: 0, rebuilt: 1 });
  });
});
