/**
 * Exactly the stored shapes of the turn kinds' records, kept small (docs/performance.md "Cost per turn"), on every
 * backend (memory, SQLite, JSONL): a settled generation keeps no captured config (§8.2), a tool result's
 * data and a settled tool's output keep no default fields (§9.3, §8.3), a usage element keeps no zero
 * counts, zero costs or sums (§8.2). Readers fill the defaults back, and rows written whole by earlier
 * versions read the same.
 */
import type { Usage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { bind } from "../../src/core/state.js";
import type { StoredToolData, StoredUsageRow, ToolResultData, UsageRow } from "../../src/kinds/states.js";
import {
  compactToolData,
  compactUsageRow,
  presentEntry,
  presentTask,
  presentUsageEvent,
  readToolData,
  readUsageRow,
} from "../../src/kinds/stored.js";
import { usageList } from "../../src/kinds/usage.js";
import type { CommitBatch, JsonObject, MainWrite, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { everyBackend } from "../core/backends.js";
import { call, fauxAssistantMessage, fauxToolCall, openTurns, textOf } from "./turn-fixtures.js";
import { untruncatedToolData } from "./tool-data-fixtures.js";

/**
 * `inner` as an earlier version wrote it: every commit's settled generations keep their captured config
 * and retry budget, settled tools their whole call and output, tool result entries and usage elements
 * every field.
 */
function earlierWriter(inner: Storage): Storage {
  const created = new Map<number, JsonObject>();
  const whole = (w: MainWrite): MainWrite => {
    switch (w.type) {
      case "task":
        created.set(w.task.id, w.task.state);
        return w;
      case "settle": {
        const at = created.get(w.id);
        const state = w.state;
        if (state.status === "done" && "attempt" in state && at !== undefined) {
          const { attempt, ...rest } = state;
          const retry = { ...(at["retry"] as JsonObject), attempt };
          return { ...w, state: { ...rest, config: at["config"] ?? null, retry } };
        }
        if ("output" in state && at !== undefined)
          return {
            ...w,
            state: { ...state, call: at["call"] ?? null, output: readToolData(state["output"] as StoredToolData) },
          };
        return w;
      }
      case "entry":
        return w.entry.kind === "tool_result"
          ? { ...w, entry: { ...w.entry, data: readToolData(w.entry.data as StoredToolData) } }
          : w;
      case "list.append":
        return w.addr.namespace === "pi.usage" ? { ...w, value: readUsageRow(w.value as StoredUsageRow) } : w;
      default:
        return w;
    }
  };
  return new Proxy(inner, {
    get(target, key) {
      if (key === "commit")
        return (batch: CommitBatch) =>
          target.commit(batch.kind === "main" ? { ...batch, writes: batch.writes.map(whole) } : batch);
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** One turn: a call of echo("ping"), then the answer. */
async function oneToolTurn(storage: Parameters<Parameters<(typeof everyBackend)[number]["run"]>[0]>[0]) {
  const fixture = await openTurns(storage, {
    responses: [
      fauxAssistantMessage([fauxToolCall("echo", { text: "ping" }, { id: "c1" })], { stopReason: "toolUse" }),
      fauxAssistantMessage("done"),
    ],
  });
  const root = await fixture.harness.root(call);
  await root.prompt({ input: "go" }, call);
  const tasks: Task[] = [];
  for (let after: number | undefined; ;) {
    const page = await fixture.harness.storage.scanTasks({ limit: 100, ...(after === undefined ? {} : { after }) });
    tasks.push(...page.items);
    if (page.next === undefined) break;
    after = page.next;
  }
  const entries = (await fixture.harness.entries(root.id, { limit: 50 }, call)).items;
  return { ...fixture, root, tasks, entries };
}

for (const backend of everyBackend) {
  describe(`stored shapes (${backend.name})`, () => {
    it(`a settled generation stores no captured config and no retry budget, only the attempt that answered (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { tasks } = await oneToolTurn(storage);
        const gens = tasks.filter((t) => t.kind === "generation");
        expect(gens).toHaveLength(2);
        for (const g of gens) {
          expect(g.state.status).toBe("done");
          expect(Object.keys(g.state).sort()).toEqual([
            "assistant",
            "attempt",
            "inputs",
            "status",
            ...(g.state["successor"] === undefined ? [] : ["successor"]),
          ]);
          expect(g.state["attempt"]).toBe(1);
        }
      }));

    it(`a settled generation without a successor stores no successor field; one with a successor keeps it (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { tasks } = await oneToolTurn(storage);
        const [first, last] = tasks.filter((t) => t.kind === "generation");
        expect(typeof first?.state["successor"]).toBe("number");
        expect(last?.state["status"]).toBe("done");
        expect(last?.state).not.toHaveProperty("successor");
      }));

    it(`a tool result entry's data and the settled tool's output store no default fields (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { tasks, entries } = await oneToolTurn(storage);
        const result = entries.find((e) => e.kind === "tool_result");
        expect(result?.data).toEqual({ chars: 4 });
        const tool = tasks.find((t) => t.kind === "tool");
        expect(tool?.state).toMatchObject({ status: "done", output: { chars: 4 } });
        expect(Object.keys(tool?.state["output"] as JsonObject)).toEqual(["chars"]);
        expect(readToolData(result?.data as StoredToolData)).toEqual(untruncatedToolData(4));
      }));

    it(`a settled tool keeps its call without the arguments, which the assistant entry holds (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { tasks, entries } = await oneToolTurn(storage);
        const tool = tasks.find((t) => t.kind === "tool");
        expect(tool?.state["call"]).toEqual({ id: "c1", name: "echo" });
        const assistant = entries.find((e) => e.id === tool?.state["assistant"]);
        expect(assistant?.model?.[0]).toMatchObject({
          content: [{ type: "toolCall", id: "c1", name: "echo", arguments: { text: "ping" } }],
        });
      }));

    it(`a settled tool's call stores no type, which is always "toolCall" (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { tasks } = await oneToolTurn(storage);
        const tool = tasks.find((t) => t.kind === "tool");
        expect(tool?.state["status"]).toBe("done");
        expect(tool?.state["call"]).not.toHaveProperty("type");
      }));

    it(`a usage element is stored without its default kind, zero counts, zero costs or sums (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness, tasks, root, modelId } = await oneToolTurn(storage);
        const stored = (await harness.storage.readList(bind(usageList, {}), { limit: 10 })).items.map((e) => e.value);
        const gens = tasks.filter((t) => t.kind === "generation").map((t) => t.id);
        expect(stored.map((s) => s.taskId)).toEqual(gens);
        for (const s of stored) {
          expect(Object.keys(s).sort()).toEqual(["conversationId", "model", "taskId", "usage"]);
          expect(s).toMatchObject({ conversationId: root.id, model: modelId });
          expect(readUsageRow(s)).toMatchObject({ kind: "generation" });
          // The faux provider reports input and output tokens, nothing cached, no cost.
          expect(Object.keys(s.usage ?? {}).sort()).toEqual(["input", "output"]);
          const full = readUsageRow(s).usage;
          expect(full).toEqual({
            input: s.usage?.["input"],
            output: s.usage?.["output"],
            cacheRead: 0,
            cacheWrite: 0,
            totalTokens: (s.usage?.["input"] as number) + (s.usage?.["output"] as number),
            cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
          });
        }
      }));
  });
}

for (const backend of everyBackend) {
  describe(`stored shapes: rows written whole by an earlier version (${backend.name})`, () => {
    it(`a turn over rows written whole before: post_tools reads the whole tool outputs, the next turn runs, usage reads the same (${backend.name})`, () =>
      backend.run(async (inner) => {
        const storage = earlierWriter(inner);
        const { harness, root, faux } = await oneToolTurn(storage);
        const tasks = (await harness.storage.scanTasks({ limit: 100 })).items;
        // The rows are the earlier shapes.
        const gen = tasks.find((t) => t.kind === "generation");
        expect(gen?.state).toMatchObject({ status: "done", config: { tools: ["echo"] }, retry: { attempt: 1 } });
        const tool = tasks.find((t) => t.kind === "tool");
        expect(tool?.state).toMatchObject({
          status: "done",
          call: { arguments: { text: "ping" } },
          output: { terminate: false, truncation: { totalChars: 4 } },
        });
        const usage = (await harness.storage.readList(bind(usageList, {}), { limit: 10 })).items.map((e) => e.value);
        expect(usage.every((u) => u.kind === "generation" && u.usage?.["cacheRead"] === 0)).toBe(true);
        // ... and read: the turn answered (post_tools read the whole outputs), the next one does too.
        const entries = (await harness.entries(root.id, { limit: 50 }, call)).items;
        expect(entries.map((e) => e.kind).filter((k) => k !== "system")).toEqual([
          "user",
          "assistant",
          "tool_result",
          "assistant",
        ]);
        expect(readToolData(entries.find((e) => e.kind === "tool_result")?.data as StoredToolData).truncation).toEqual({
          totalChars: 4,
          retainedChars: 4,
          truncated: false,
        });
        expect(usage.map((u) => readUsageRow(u))).toEqual(usage);
        faux.setResponses([fauxAssistantMessage("again")]);
        expect(textOf(await root.prompt({ input: "more" }, call))).toBe("again");
      }));
  });
}

describe("stored shapes: readers accept rows written whole before (issue 15)", () => {
  const whole: ToolResultData = {
    details: { n: 1 },
    usage: null,
    addedTools: ["grep"],
    terminate: true,
    handoff: "next",
    delegated: 7,
    diags: [{ severity: "warn", message: "output truncated: showing the last 10 of 35 characters", code: "truncated" }],
    truncation: { totalChars: 35, retainedChars: 10, truncated: true },
    isError: true,
  };
  const defaults: ToolResultData = untruncatedToolData(0);

  it("readToolData reads an old whole tool result data unchanged, and a compact one back to the whole", () => {
    expect(readToolData(whole)).toEqual(whole);
    expect(readToolData(defaults)).toEqual(defaults);
    expect(readToolData({ ...defaults, truncation: { totalChars: 12, retainedChars: 12, truncated: false } })).toEqual({
      ...defaults,
      truncation: { totalChars: 12, retainedChars: 12, truncated: false },
    });
    const { usage: _usage, ...rest } = whole;
    expect(compactToolData(whole)).toEqual(rest); // every field but usage differs from its default
    expect(readToolData(compactToolData(whole))).toEqual(whole);
    expect(compactToolData(defaults)).toEqual({});
    expect(readToolData(compactToolData(defaults))).toEqual(defaults);
    expect(readToolData(compactToolData({ ...defaults, details: null }))).toEqual({ ...defaults, details: null });
  });

  it("presentEntry shows a tool result entry's data whole (§9.3): a compact row filled, an old whole row identical, other kinds and non-object data untouched", () => {
    const base = { id: 7, conversationId: 1, kind: "tool_result", key: "c1" };
    expect(presentEntry({ ...base, data: { chars: 12 } })).toEqual({
      ...base,
      data: { ...defaults, truncation: { totalChars: 12, retainedChars: 12, truncated: false } },
    });
    expect(presentEntry({ ...base, data: {} })).toEqual({ ...base, data: defaults });
    expect(JSON.stringify(presentEntry({ ...base, data: whole }))).toBe(JSON.stringify({ ...base, data: whole }));
    expect(presentEntry({ ...base, data: compactToolData(whole) })).toEqual({ ...base, data: whole });
    // A field this version does not know is kept; `chars` (the stored form's) is not shown.
    expect(presentEntry({ ...base, data: { chars: 3, extra: "kept" } }).data).toEqual({
      ...defaults,
      truncation: { totalChars: 3, retainedChars: 3, truncated: false },
      extra: "kept",
    });
    const user = { id: 8, conversationId: 1, kind: "user", data: { chars: 3 } };
    expect(presentEntry(user)).toBe(user);
    for (const data of [null, "text", [1, 2]]) {
      const odd = { ...base, data };
      expect(presentEntry(odd)).toBe(odd);
    }
    const none = { ...base };
    expect(presentEntry(none)).toBe(none);
  });

  it("presentTask shows a settled tool task's output whole (§9.3): done and aborted, compact or old whole, unknown fields kept; the call as stored; other tasks and states untouched", () => {
    const call = { id: "c1", name: "echo" };
    const base = { id: 5, conversationId: 1, kind: "tool", role: "terminal" as const, after: [] };
    const done: Task = { ...base, state: { status: "done", call, assistant: 4, output: { chars: 12 }, result: 6 } };
    expect(presentTask(done)).toEqual({
      ...done,
      state: {
        ...done.state,
        output: { ...defaults, truncation: { totalChars: 12, retainedChars: 12, truncated: false } },
      },
    });
    const aborted: Task = {
      ...base,
      state: { status: "aborted", call, assistant: 4, output: compactToolData(whole), result: 6 },
    };
    expect(presentTask(aborted)).toEqual({ ...aborted, state: { ...aborted.state, output: whole } });
    const old: Task = {
      ...base,
      state: {
        status: "done",
        call: { ...call, type: "toolCall", arguments: { text: "x" } },
        assistant: 4,
        output: whole,
        result: 6,
      },
    };
    expect(JSON.stringify(presentTask(old))).toBe(JSON.stringify(old));
    expect(
      presentTask({ ...done, state: { ...done.state, output: { chars: 3, extra: "kept" } } }).state["output"],
    ).toEqual({ ...defaults, truncation: { totalChars: 3, retainedChars: 3, truncated: false }, extra: "kept" });
    const running: Task = {
      ...base,
      role: "inflight",
      state: { status: "running", call, assistant: 4, args: {}, replay: "safe" },
    };
    expect(presentTask(running)).toBe(running);
    const other: Task = { ...base, kind: "job", state: { status: "done", output: { chars: 3 } } };
    expect(presentTask(other)).toBe(other);
    const odd: Task = { ...base, state: { status: "done", call, assistant: 4, output: "text", result: 6 } };
    expect(presentTask(odd)).toBe(odd);
  });

  it("presentUsageEvent shows a session watch usage row whole, as readUsageRow reads it; other events untouched", () => {
    const stored = { conversationId: 1, taskId: 9, model: "p/m", usage: { input: 3 } };
    const totals = { input: 3 };
    expect(presentUsageEvent({ type: "usage", row: stored, totals })).toEqual({
      type: "usage",
      row: readUsageRow(stored),
      totals,
    });
    expect(presentUsageEvent({ type: "usage", row: stored, totals })).toMatchObject({
      row: { kind: "generation", usage: { input: 3, output: 0, totalTokens: 3, cost: { total: 0 } } },
    });
    const closed = { type: "closed" as const };
    expect(presentUsageEvent(closed)).toBe(closed);
  });

  const usage = (over: Partial<Usage>, cost: Partial<Usage["cost"]> = {}): Usage & JsonObject =>
    ({
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      ...over,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0, ...cost },
    }) as Usage & JsonObject;
  const row = (u: (Usage & JsonObject) | null): UsageRow => ({
    conversationId: 1,
    taskId: 9,
    kind: "generation",
    model: "p/m",
    usage: u,
  });

  it("readUsageRow reads an old whole usage element unchanged, and every compact one back to what was recorded", () => {
    const cases: UsageRow[] = [
      row(null),
      row(usage({})),
      row(usage({ input: 10, output: 5, totalTokens: 15 })),
      // A provider's total that is not the sum, costs that do not add up exactly in floating point.
      row(
        usage(
          { input: 10, output: 5, cacheRead: 3, cacheWrite: 2, totalTokens: 99 },
          { input: 0.1, output: 0.2, total: 0.30000000000000004 },
        ),
      ),
      row(usage({ input: 1, output: 1, totalTokens: 2 }, { input: 0.1, output: 0.2, total: 0.3 })),
      // Optional fields as the provider reported them, zeros included.
      row(usage({ input: 4, output: 2, totalTokens: 6, reasoning: 0, cacheWrite1h: 0 }, { totalFromProvider: false })),
      row(usage({ input: 4, output: 2, totalTokens: 6 }, { total: 0.5, totalFromProvider: true })),
    ];
    for (const r of cases) {
      expect(readUsageRow(r)).toEqual(r); // an element written whole before
      expect(readUsageRow(compactUsageRow(r))).toEqual(r);
    }
    for (const r of cases) {
      const tool = { ...r, kind: "tool" };
      expect(readUsageRow(compactUsageRow(tool))).toEqual(tool);
    }
    expect(compactUsageRow(row(usage({ input: 10, output: 5, totalTokens: 15 })))).toEqual({
      conversationId: 1,
      taskId: 9,
      model: "p/m",
      usage: { input: 10, output: 5 },
    });
  });
});
