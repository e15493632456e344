/**
 * Context derivation (§2.2–§2.4, §8.2) and the handle's context cache, on every available backend.
 * Histories are committed straight through `storage.commit`, at the spec's exact ids.
 */
import type { Message } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import {
  ContextCache,
  deriveContext,
  MISSING_TOOL_RESULT,
  requestMessages,
  type DerivedContext,
} from "../../src/core/context.js";
import type { Entry, Id } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { coreBackends } from "./backends.js";
import { assistant, HistoryBuilder, system, toolResult, user, type EntrySpec } from "./context-fixtures.js";
import { CountingStorage } from "./counting-storage.js";

type Run = (fn: (storage: Storage) => Promise<void>) => Promise<void>;

/** Every backend of test/core/backends.ts: memory, and SQLite inside a Durable Object. */
const backends: [string, Run][] = coreBackends.map((backend) => [backend.name, (fn) => backend.run(fn)]);

/** Message texts of a context, per item, for compact assertions. */
function texts(context: DerivedContext): string[][] {
  return context.items.map((item) => item.messages.map(textOf));
}

function textOf(message: Message): string {
  switch (message.role) {
    case "user":
      return typeof message.content === "string" ? message.content : "(user)";
    case "system":
      return typeof message.content === "string" ? message.content : "(system)";
    case "assistant":
      return message.content
        .map((b) => (b.type === "text" ? b.text : b.type === "toolCall" ? `call:${b.id}` : ""))
        .join("|");
    case "toolResult":
      return `result:${message.toolCallId}:${message.content.map((b) => (b.type === "text" ? b.text : "")).join("")}`;
    default: {
      const _exhaustive: never = message;
      return String(_exhaustive);
    }
  }
}

/** A deep, plain copy for comparing a snapshot before and after later updates. */
function plain(context: DerivedContext): unknown {
  return JSON.parse(JSON.stringify(context));
}

/** A builder on `storage` and a fresh conversation holding `specs`. */
async function history(
  storage: Storage,
  specs: readonly (readonly [Id, EntrySpec])[],
): Promise<{ b: HistoryBuilder; conv: Id }> {
  const b = new HistoryBuilder(storage);
  const conv = await b.conversation();
  await b.appendAll(conv, specs);
  return { b, conv };
}

/** §8.2's head/baseline example (a fresh conversation of `b`), through 60 or through 81. */
async function section82(b: HistoryBuilder, through: 60 | 81): Promise<Id> {
  const conv = await b.conversation();
  await b.appendAll(conv, [
    [10, { model: [user("u10")] }],
    [11, { kind: "system", model: [system("baseline11")] }],
    [20, { model: [assistant("a20")] }],
    [30, { model: [user("u30")] }],
    [31, { kind: "system", model: [system("delta31")] }],
    [35, { kind: "notice", model: [user("notice35")] }],
    [40, { model: [assistant("a40")] }],
    [50, { model: [user("u50")] }],
    [60, { kind: "summary", model: [user("summary60")], head: 30 }],
  ]);
  if (through === 81) {
    await b.appendAll(conv, [
      [70, { model: [assistant("a70")] }],
      [80, { model: [user("u80")] }],
      [81, { kind: "system", model: [system("baseline81")], edits: [{ target: 31, action: "omit" }] }],
    ]);
  }
  return conv;
}

describe.each(backends)("context derivation (%s)", (_name, run) => {
  it("§2.3 compaction: context [50, 30, 40]", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      expect(conv).toBe(1);
      await b.appendAll(conv, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
        [40, { model: [assistant("a40")] }],
      ]);
      expect((await deriveContext(storage, conv, 40)).ids).toEqual([10, 20, 30, 40]);
      await b.append(conv, 50, { kind: "summary", model: [user("summary")], head: 30 });
      const context = await deriveContext(storage, conv, 50);
      expect(context.ids).toEqual([50, 30, 40]);
      expect(context.head?.id).toBe(50);
      expect(texts(context)).toEqual([["summary"], ["u30"], ["a40"]]);
      expect(requestMessages(context).map(textOf)).toEqual(["summary", "u30", "a40"]);
    }));

  it("§2.4 fork B at 20 sees [10, 20, 90, 100]", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const a = await b.conversation();
      await b.appendAll(a, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
        [40, { model: [assistant("a40")] }],
        [50, { model: [user("summary")], head: 30 }],
        [70, { model: [user("u70")] }],
      ]);
      const fork = await b.conversation({ id: 80, parent: { conversationId: a, at: 20 } });
      await b.appendAll(fork, [
        [90, { model: [user("u90")] }],
        [100, { model: [assistant("a100")] }],
      ]);
      const context = await deriveContext(storage, fork, 100);
      expect(context.ids).toEqual([10, 20, 90, 100]);
      expect(context.head).toBeUndefined(); // A's later head at 50 is not visible in B
      expect((await deriveContext(storage, a, 100)).ids).toEqual([50, 30, 40, 70]);
    }));

  it("§8.2 context at 60", () =>
    run(async (storage) => {
      const conv = await section82(new HistoryBuilder(storage), 60);
      const context = await deriveContext(storage, conv, 60);
      expect(context.ids).toEqual([60, 30, 31, 35, 40, 50]);
    }));

  it("§8.2 context at 81", () =>
    run(async (storage) => {
      const conv = await section82(new HistoryBuilder(storage), 81);
      const context = await deriveContext(storage, conv, 81);
      expect(context.ids).toEqual([60, 30, 35, 40, 50, 70, 80, 81]);
      // Historical cutoff before the baseline still shows the delta (the omission is not retroactive).
      expect((await deriveContext(storage, conv, 80)).ids).toEqual([60, 30, 31, 35, 40, 50, 70, 80]);
    }));

  it("edits fold in transcript order: the newest applicable edit per target wins", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { edits: [{ target: 10, action: "replace", messages: [user("first replacement")] }] }],
        [40, { edits: [{ target: 10, action: "omit" }] }],
        [50, { edits: [{ target: 10, action: "replace", messages: [user("second replacement")] }] }],
      ]);
      const at35 = await deriveContext(storage, conv, 35);
      expect(at35.ids).toEqual([10, 20, 30]);
      expect(texts(at35)[0]).toEqual(["first replacement"]);
      expect((await deriveContext(storage, conv, 45)).ids).toEqual([20, 30, 40]);
      const at50 = await deriveContext(storage, conv, 50);
      expect(at50.ids).toEqual([10, 20, 30, 40, 50]);
      expect(texts(at50)).toEqual([["second replacement"], ["a20"], [], [], []]);
    }));

  it("replace keeps the target's id and position and uses the replacement messages; the entry is unchanged", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20", { calls: ["c1"] })] }],
        [30, { model: [toolResult("c1", "long output")] }],
        [
          40,
          { model: [user("u40")], edits: [{ target: 30, action: "replace", messages: [toolResult("c1", "short")] }] },
        ],
      ]);
      const context = await deriveContext(storage, conv, 40);
      expect(context.ids).toEqual([10, 20, 30, 40]);
      const item = context.items[2];
      expect(item?.entry.id).toBe(30);
      expect(item?.messages.map(textOf)).toEqual(["result:c1:short"]);
      expect(item?.entry.model?.map(textOf)).toEqual(["result:c1:long output"]);
      expect(requestMessages(context).map(textOf)).toEqual(["u10", "a20|call:c1", "result:c1:short", "u40"]);
    }));

  it("an edit whose target is outside the selected range is a no-op", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const a = await b.conversation();
      await b.appendAll(a, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
        [40, { model: [user("summary")], head: 30 }],
        // Before the boundary: an omission of 20 and a replacement of 10 change nothing.
        [
          50,
          {
            model: [user("u50")],
            edits: [
              { target: 20, action: "omit" },
              { target: 10, action: "replace", messages: [user("x")] },
            ],
          },
        ],
      ]);
      expect((await deriveContext(storage, a, 50)).ids).toEqual([40, 30, 50]);
      // A fork at 20 that edits A's 30 (beyond its fork point): invisible, so a no-op.
      const fork = await b.conversation({ id: 60, parent: { conversationId: a, at: 20 } });
      await b.append(fork, 70, { model: [user("u70")], edits: [{ target: 30, action: "omit" }] });
      expect((await deriveContext(storage, fork, 70)).ids).toEqual([10, 20, 70]);
      expect((await deriveContext(storage, a, 50)).ids).toEqual([40, 30, 50]);
    }));

  it("heads are controls: only the newest head leads, older heads in its range are excluded", () =>
    run(async (storage) => {
      const { b, conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
        [40, { model: [assistant("a40")] }],
        [50, { model: [user("summary50")], head: 30 }],
        [55, { model: [user("u55")] }],
        [60, { model: [user("summary60")], head: 40 }],
      ]);
      expect((await deriveContext(storage, conv, 60)).ids).toEqual([60, 40, 55]);
      // A reset head without model: head = itself, no messages, still the context's first item.
      await b.append(conv, 70, { kind: "reset", head: 70 });
      const reset = await deriveContext(storage, conv, 70);
      expect(reset.ids).toEqual([70]);
      expect(requestMessages(reset)).toEqual([]);
      await b.append(conv, 80, { model: [user("u80")] });
      expect((await deriveContext(storage, conv, 80)).ids).toEqual([70, 80]);
    }));

  it("an edit of H replaces or omits H's messages while H still sets the boundary", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [user("u20")] }],
        [30, { model: [user("summary")], head: 20 }],
        [40, { edits: [{ target: 30, action: "replace", messages: [user("better summary")] }] }],
        [50, { edits: [{ target: 30, action: "omit" }] }],
      ]);
      const at40 = await deriveContext(storage, conv, 40);
      expect(at40.ids).toEqual([30, 20, 40]);
      expect(texts(at40)[0]).toEqual(["better summary"]);
      const at50 = await deriveContext(storage, conv, 50);
      expect(at50.ids).toEqual([20, 40, 50]);
      expect(at50.head?.id).toBe(30);
    }));

  it("an entry without model is a context item with no messages", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { kind: "system", model: [] }],
        [30, { kind: "plugin.note" }],
      ]);
      const context = await deriveContext(storage, conv, 30);
      expect(context.ids).toEqual([10, 20, 30]);
      expect(texts(context)).toEqual([["u10"], [], []]);
      expect(requestMessages(context).map(textOf)).toEqual(["u10"]);
    }));

  it("nested fork cutoffs: each level sees its source only through its fork point, heads included", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const a = await b.conversation();
      await b.appendAll(a, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [25, { model: [user("summaryA")], head: 20 }],
        [30, { model: [user("u30")] }],
        [40, { model: [user("summaryA2")], head: 30 }],
      ]);
      const bConv = await b.conversation({ id: 50, parent: { conversationId: a, at: 30 } });
      await b.appendAll(bConv, [
        [60, { model: [assistant("a60")] }],
        [65, { model: [user("summaryB")], head: 30 }],
        [70, { model: [user("u70")] }],
      ]);
      const c = await b.conversation({ id: 80, parent: { conversationId: bConv, at: 60 } });
      await b.append(c, 90, { model: [user("u90")] });
      await b.append(a, 95, { model: [user("u95")] });
      expect((await deriveContext(storage, c, 90)).ids).toEqual([25, 20, 30, 60, 90]);
      expect((await deriveContext(storage, bConv, 95)).ids).toEqual([65, 30, 60, 70]);
      expect((await deriveContext(storage, a, 95)).ids).toEqual([40, 30, 95]);
      // A target inside the inherited prefix: C at 20 is A's context at 20.
      expect((await deriveContext(storage, c, 20)).ids).toEqual([10, 20]);
    }));

  it("§2.2 normalization: a successful assistant cut by a fork gets synthetic results for the request only", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const a = await b.conversation();
      await b.appendAll(a, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20", { calls: ["c1", "c2"], timestamp: 7 })] }],
        [30, { model: [toolResult("c1")], key: "c1" }],
        [40, { model: [toolResult("c2")], key: "c2" }],
        [50, { model: [assistant("a50")] }],
      ]);
      const fork = await b.conversation({ id: 60, parent: { conversationId: a, at: 30 } });
      await b.append(fork, 70, { model: [user("u70")] });
      const context = await deriveContext(storage, fork, 70);
      expect(context.ids).toEqual([10, 20, 30, 70]);
      const messages = requestMessages(context);
      expect(messages.map(textOf)).toEqual([
        "u10",
        "a20|call:c1|call:c2",
        "result:c1:result c1",
        `result:c2:${MISSING_TOOL_RESULT}`,
        "u70",
      ]);
      const synthetic = messages[3];
      expect(synthetic).toMatchObject({
        role: "toolResult",
        toolCallId: "c2",
        toolName: "tool_c2",
        isError: true,
        timestamp: 7,
      });
      // Nothing stored changed: the context still has exactly the stored items.
      expect(context.items.flatMap((item) => item.messages).length).toBe(4);
      // A fork at the assistant itself: both results are synthetic.
      const atCall = await deriveContext(storage, a, 20);
      expect(requestMessages(atCall).map(textOf)).toEqual([
        "u10",
        "a20|call:c1|call:c2",
        `result:c1:${MISSING_TOOL_RESULT}`,
        `result:c2:${MISSING_TOOL_RESULT}`,
      ]);
    }));

  it("§2.2 normalization: existing results are placed with their call in call order", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20", { calls: ["c1", "c2", "c3"] })] }],
        [30, { model: [toolResult("c3")] }],
        [35, { kind: "notice", model: [user("notice")] }],
        [40, { model: [toolResult("c1")] }],
        [45, { kind: "system", model: [system("delta")] }],
        [50, { model: [toolResult("c2")] }],
        [60, { model: [assistant("a60")] }],
      ]);
      const messages = requestMessages(await deriveContext(storage, conv, 60));
      expect(messages.map(textOf)).toEqual([
        "u10",
        "a20|call:c1|call:c2|call:c3",
        "result:c1:result c1",
        "result:c2:result c2",
        "result:c3:result c3",
        "notice",
        "delta",
        "a60",
      ]);
    }));

  it("§2.2 normalization: error and aborted assistants are excluded and their calls get no results", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("failed", { calls: ["c9"], stopReason: "error" })] }],
        [30, { model: [user("u30")] }],
        [40, { model: [assistant("partial", { stopReason: "aborted" })] }],
        [50, { model: [user("u50")] }],
        [60, { model: [assistant("ok")] }],
      ]);
      const context = await deriveContext(storage, conv, 60);
      expect(context.ids).toEqual([10, 20, 30, 40, 50, 60]); // still context entries (for display, ids)
      expect(requestMessages(context).map(textOf)).toEqual(["u10", "u30", "u50", "ok"]);
    }));

  it("§2.2 normalization: results without their call in the context are dropped from the request", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20", { calls: ["c1"] })] }],
        [30, { model: [toolResult("c1")] }],
        [40, { model: [user("u40")], edits: [{ target: 20, action: "omit" }] }],
      ]);
      expect(requestMessages(await deriveContext(storage, conv, 40)).map(textOf)).toEqual(["u10", "u40"]);
    }));

  it("requestMessages returns a fresh array each time; the snapshot is untouched", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20", { calls: ["c1"] })] }],
      ]);
      const context = await deriveContext(storage, conv, 20);
      const before = plain(context);
      const first = requestMessages(context);
      first.length = 0;
      expect(requestMessages(context).length).toBe(3);
      expect(plain(context)).toEqual(before);
    }));

  it("derived contexts are frozen", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      await b.append(conv, 10, { model: [user("u10")] });
      const context = await deriveContext(storage, conv, 10);
      expect(Object.isFrozen(context)).toBe(true);
      expect(Object.isFrozen(context.items)).toBe(true);
      expect(Object.isFrozen(context.ids)).toBe(true);
      expect(Object.isFrozen(context.items[0])).toBe(true);
      expect(Object.isFrozen(context.items[0]?.messages)).toBe(true);
    }));

  it("cold derivation reads the newest head and the range since its boundary, not older history", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      for (let id = 10; id < 300; id += 10) await b.append(conv, id, { model: [user(`u${id}`)] });
      await b.append(conv, 300, { model: [user("summary")], head: 250 });
      await b.append(conv, 310, { model: [user("u310")] });
      storage.reset();
      const context = await deriveContext(storage, conv, 310);
      expect(context.ids).toEqual([300, 250, 260, 270, 280, 290, 310]);
      expect(storage.counts).toMatchObject({ newestHead: 1, scanEntries: 1, rows: 1 + 7 });
    }));
});

/** Cold derivation at the cache's target, for comparing. */
async function cold(storage: Storage, conv: Id, through: Id): Promise<readonly Id[]> {
  return (await deriveContext(storage, conv, through)).ids;
}

describe.each(backends)("context cache (%s)", (_name, run) => {
  async function appendObserved(
    b: HistoryBuilder,
    cache: ContextCache,
    conv: Id,
    id: Id,
    spec: Parameters<HistoryBuilder["append"]>[2],
  ): Promise<Entry> {
    const { entry, last } = await b.append(conv, id, spec);
    cache.observe([entry], last);
    return entry;
  }

  it("loads once, then catches up from observed entries without reading storage", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const { b, conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
      ]);
      const cache = new ContextCache(storage, conv);
      storage.reset();
      expect((await cache.contextEntries()).ids).toEqual([10, 20]);
      expect(storage.counts.calls).toBe(2); // newestHead + one range page
      storage.reset();
      await appendObserved(b, cache, conv, 30, { model: [user("u30")] });
      await appendObserved(b, cache, conv, 40, { model: [assistant("a40")], edits: [{ target: 10, action: "omit" }] });
      const warm = await cache.contextEntries();
      expect(storage.counts.calls).toBe(0);
      expect(warm.ids).toEqual([20, 30, 40]);
      expect(warm.through).toBe(40);
      expect(warm.ids).toEqual(await cold(inner, conv, 40));
      expect(cache.stats).toMatchObject({ loads: 1, observed: 2, gapReads: 0 });
    }));

  it("slices at a new head: items before the boundary drop, its range stays", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const { b, conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
        [40, { model: [assistant("a40")], edits: [{ target: 30, action: "replace", messages: [user("u30'")] }] }],
      ]);
      const cache = new ContextCache(storage, conv);
      expect((await cache.contextEntries()).ids).toEqual([10, 20, 30, 40]);
      storage.reset();
      await appendObserved(b, cache, conv, 50, { model: [user("summary")], head: 30 });
      const sliced = await cache.contextEntries();
      expect(sliced.ids).toEqual([50, 30, 40]);
      expect(texts(sliced)).toEqual([["summary"], ["u30'"], ["a40"]]); // the retained edit still applies
      expect(sliced.head?.id).toBe(50);
      await appendObserved(b, cache, conv, 60, { model: [user("u60")] });
      await appendObserved(b, cache, conv, 70, { kind: "reset", head: 70 });
      expect((await cache.contextEntries()).ids).toEqual([70]);
      await appendObserved(b, cache, conv, 80, { model: [user("u80")] });
      expect((await cache.contextEntries()).ids).toEqual([70, 80]);
      expect(storage.counts.calls).toBe(0);
      expect(await cold(inner, conv, 80)).toEqual([70, 80]);
    }));

  it("a historical target is derived separately and does not rewind the cache", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const b = new HistoryBuilder(storage);
      const conv = await section82(b, 81);
      const cache = new ContextCache(storage, conv);
      const live = await cache.contextEntries();
      expect(live.ids).toEqual([60, 30, 35, 40, 50, 70, 80, 81]);
      const historical = await cache.contextEntries(51);
      expect(historical.ids).toEqual([10, 11, 20, 30, 31, 35, 40, 50]);
      expect(historical.through).toBe(51);
      expect(cache.cursor).toBe(81);
      expect(cache.stats).toMatchObject({ loads: 1, historical: 1 });
      storage.reset();
      const again = await cache.contextEntries();
      expect(again.ids).toEqual(live.ids);
      expect(storage.counts.calls).toBe(0);
    }));

  it("snapshots are immutable: later appends, edits and heads never change a published context", () =>
    run(async (storage) => {
      const { b, conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [assistant("a20")] }],
        [30, { model: [user("u30")] }],
      ]);
      const cache = new ContextCache(storage, conv);
      const snapshot = await cache.contextEntries();
      const saved = plain(snapshot);
      const savedItems = [...snapshot.items];
      await appendObserved(b, cache, conv, 40, {
        model: [assistant("a40")],
        edits: [{ target: 30, action: "replace", messages: [user("changed")] }],
      });
      await appendObserved(b, cache, conv, 50, { edits: [{ target: 20, action: "omit" }] });
      const mid = await cache.contextEntries();
      await appendObserved(b, cache, conv, 60, { model: [user("summary")], head: 30 });
      const after = await cache.contextEntries();
      expect(after.ids).toEqual([60, 30, 40, 50]);
      expect(plain(snapshot)).toEqual(saved);
      expect(snapshot.items.every((item, i) => item === savedItems[i])).toBe(true);
      expect(Object.isFrozen(snapshot.items) && Object.isFrozen(snapshot.ids) && Object.isFrozen(snapshot)).toBe(true);
      expect(mid.ids).toEqual([10, 30, 40, 50]);
      expect(texts(mid)[1]).toEqual(["changed"]);
      expect(texts(snapshot)[2]).toEqual(["u30"]);
      expect(() => (snapshot.ids as Id[]).push(99)).toThrow(TypeError);
    }));

  it("observe ignores other conversations and batches the cold load already read", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      const other = await b.conversation();
      const e10 = await b.append(conv, 10, { model: [user("u10")] });
      const cache = new ContextCache(storage, conv);
      await cache.contextEntries();
      cache.observe([e10.entry], e10.last); // late delivery of a batch the load saw
      const o20 = await b.append(other, 20, { model: [user("other")] });
      cache.observe([o20.entry], o20.last);
      expect((await cache.contextEntries()).ids).toEqual([10]);
      expect(cache.cursor).toBe(20);
      expect(cache.stats.observed).toBe(0);
    }));

  it("a delivery that lands while the cold load reads is applied after it", () =>
    run(async (inner) => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      class GatedStorage extends CountingStorage {
        override async newestHead(conversationId: Id, at: Id): Promise<Entry | undefined> {
          await gate;
          return super.newestHead(conversationId, at);
        }
      }
      const storage = new GatedStorage(inner);
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      await b.append(conv, 10, { model: [user("u10")] });
      const cache = new ContextCache(storage, conv);
      const loading = cache.contextEntries();
      await new Promise((resolve) => setTimeout(resolve, 0)); // the load has read lastSeq = 10 and waits
      const e20 = await b.append(conv, 20, { model: [user("u20")] });
      cache.observe([e20.entry], e20.last);
      release();
      expect((await loading).ids).toEqual([10, 20]);
      storage.reset();
      expect((await cache.contextEntries()).ids).toEqual([10, 20]);
      expect(storage.counts.calls).toBe(0);
      expect(cache.stats).toMatchObject({ loads: 1, observed: 1, gapReads: 0 });
    }));

  it("a committed target beyond the cursor reads only the undelivered entries; beyond lastSeq rejects", () =>
    run(async (inner) => {
      const storage = new CountingStorage(inner);
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      await b.append(conv, 10, { model: [user("u10")] });
      const cache = new ContextCache(storage, conv);
      await cache.contextEntries();
      await b.append(conv, 20, { model: [user("u20")] }); // not observed
      storage.reset();
      expect((await cache.contextEntries(20)).ids).toEqual([10, 20]);
      expect(storage.counts).toMatchObject({ scanEntries: 1, rows: 1 });
      expect(cache.stats.gapReads).toBe(1);
      await expect(cache.contextEntries(1000)).rejects.toThrow(RangeError);
      expect((await cache.contextEntries()).ids).toEqual([10, 20]);
    }));

  it("a head that moves the boundary backwards drops the cache and the next call derives cold", () =>
    run(async (storage) => {
      const { b, conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [user("u20")] }],
        [30, { model: [user("s30")], head: 20 }],
      ]);
      const cache = new ContextCache(storage, conv);
      expect((await cache.contextEntries()).ids).toEqual([30, 20]);
      // The commit line forbids this (§2.1); storage does not, so the cache must not answer wrongly.
      const bad = await b.append(conv, 40, { model: [user("s40")], head: 10 });
      cache.observe([bad.entry], bad.last);
      expect(cache.cursor).toBeUndefined();
      expect((await cache.contextEntries()).ids).toEqual([40, 10, 20]);
      expect(cache.stats).toMatchObject({ rewinds: 1, loads: 2 });
    }));

  it("a historical target on a cold cache derives without loading the live cache", () =>
    run(async (storage) => {
      const { conv } = await history(storage, [
        [10, { model: [user("u10")] }],
        [20, { model: [user("u20")] }],
      ]);
      const cache = new ContextCache(storage, conv);
      expect((await cache.contextEntries(10)).ids).toEqual([10]);
      expect(cache.cursor).toBeUndefined();
      expect(cache.stats).toMatchObject({ loads: 0, historical: 1 });
    }));

  it("the warm cache agrees with cold derivation after every append of a mixed history", () =>
    run(async (storage) => {
      const b = new HistoryBuilder(storage);
      const conv = await b.conversation();
      await b.append(conv, 2, { model: [user("start")] });
      const cache = new ContextCache(storage, conv);
      await cache.contextEntries();
      // Deterministic pseudo-random history: users, assistants, edits of recent entries, heads.
      let seed = 12345;
      const rand = (n: number): number => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed % n;
      };
      const ids: Id[] = [2];
      let boundary = 2;
      for (let step = 0; step < 120; step++) {
        const id = storage.lastSeq + 1 + rand(2);
        const pick = rand(10);
        const recent = ids.filter((x) => x >= boundary);
        const target = recent[rand(recent.length)] ?? boundary;
        if (pick === 0) {
          boundary = recent[Math.min(recent.length - 1, rand(3) + Math.max(0, recent.length - 4))] ?? boundary;
          await appendObserved(b, cache, conv, id, { model: [user(`summary${id}`)], head: boundary });
        } else if (pick === 1) {
          await appendObserved(b, cache, conv, id, {
            edits: [{ target: ids[rand(ids.length)] as Id, action: "omit" }],
          });
        } else if (pick === 2) {
          await appendObserved(b, cache, conv, id, {
            model: [user(`u${id}`)],
            edits: [{ target, action: "replace", messages: [user(`r${id}`)] }],
          });
        } else {
          await appendObserved(b, cache, conv, id, { model: [rand(2) === 0 ? user(`u${id}`) : assistant(`a${id}`)] });
        }
        ids.push(id);
        const warm = await cache.contextEntries();
        const coldContext = await deriveContext(storage, conv, warm.through);
        expect(plain(warm)).toEqual(plain(coldContext));
      }
      expect(cache.stats).toMatchObject({ loads: 1, gapReads: 0, rewinds: 0 });
    }));
});
