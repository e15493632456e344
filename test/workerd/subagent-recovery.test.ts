/**
 * Subagent recovery in a session Durable Object (§8.5 "recover: the child exists; drive it again with
 * the fresh Call", §5.3): the object is killed with abortAllDurableObjects at each point of a
 * `run` and of a `wait` — after the creation commit (the child's first generation has not started its
 * request), mid-child-turn (the child's generation is streaming), and after the child answered but
 * before the parent's result entry (the call is inside after_tool) — and the alarm that reopens it
 * recovers. Every case ends with one child, one answer and one result entry for the call.
 *
 * The turn kit is registered through the test seam (src/worker/session/kinds.ts) over a faux model that answers
 * like the built-in echo model; the points are held by hooks of that kit. After the kill a fresh gate
 * is installed and the old one is never released, so nothing of the killed instance runs on.
 *
 * Also eviction after a `run` delegated (§8.3 blocking budget, on the manual clock): the call settled
 * with the child's id while the child was mid-turn; the kill and reopen finish the child, and the call
 * keeps its one result entry.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { createModels, fauxProvider, type FauxResponseStep } from "@earendil-works/pi-ai";
import { afterEach, describe, expect, it } from "vitest";
import { invocationOf } from "../../src/core/driver.js";
import { generationConfig } from "../../src/kinds/config.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import { subagentTool } from "../../src/tools/subagent.js";
import { echoReply } from "../../src/worker/platform/echo-model.js";
import { registerTestKinds, resetTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { deferred, type Deferred } from "../core/driver-fixtures.js";
import { echoTool } from "../kinds/turn-fixtures.js";
import { call, clockOf, harnessOf, installSeams, resetSeams, TestSession, until } from "./session-fixtures.js";

afterEach(async () => {
  await abortAllDurableObjects();
  resetTestKinds();
  resetSeams();
});

/** Where a subagent flow is held for the kill. */
type Point = "created" | "mid-turn" | "answered";

interface Gate {
  point: Point | null;
  readonly reached: Deferred<void>;
  /** Never resolved for a killed instance. */
  readonly release: Deferred<void>;
}

let gate: Gate = { point: null, reached: deferred(), release: deferred() };

function arm(point: Point | null): Gate {
  gate = { point, reached: deferred(), release: deferred() };
  return gate;
}

async function hold(point: Point): Promise<void> {
  const current = gate;
  if (current.point !== point) return;
  current.reached.resolve();
  await current.release.promise;
}

/** A session whose turn kinds answer like the echo model and hold at the armed point. */
async function open(label: string, budgetMs?: number): Promise<{ session: TestSession; root: Id }> {
  const faux = fauxProvider();
  const step: FauxResponseStep = (context) => echoReply(context);
  faux.setResponses(Array.from({ length: 100 }, () => step));
  const models = createModels();
  models.setProvider(faux.provider);
  const model = faux.getModel();
  const kit = createTurnKit({ models, tools: [subagentTool, echoTool], options: { flushMs: 0, retryBaseMs: 10 } });
  let rootId: Id = 0;
  // after the creation commit: the child's first generation prepares its request (still pending).
  kit.hooks.on(kit.generation, "system_instructions", async (input) => {
    if (input.conversationId !== rootId) await hold("created");
  });
  // mid-child-turn: the child's generation has committed streaming and is about to request.
  kit.hooks.on(kit.generation, "before_request", async (_input, c) => {
    if (invocationOf(c)?.conversationId !== rootId) await hold("mid-turn");
  });
  // after the child answered: the subagent call is done driving and runs after_tool before settling.
  kit.hooks.on(kit.tool, "after_tool", async (input) => {
    if ((input.output.details as { command?: string } | null)?.command !== "spawn") await hold("answered");
  });
  registerTestKinds(kit.kinds);
  const session = new TestSession(label);
  await session.rpc.create();
  const root = await runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const r = await h.root(call);
    await r.commit((tx) => {
      tx.value(generationConfig.model).set(`${model.provider}/${model.id}`);
      tx.value(generationConfig.selectedTools).set(["subagent", "echo"]);
      if (budgetMs !== undefined) tx.value(generationConfig.budgetMs).set(budgetMs);
    }, call);
    return r.id;
  });
  rootId = root;
  return { session, root };
}

function accept(session: TestSession, input: string): Promise<Id> {
  return runInDurableObject(
    session.stub,
    async (instance: SessionObject) => (await (await harnessOf(instance).root(call)).accept({ input }, call)).inputId,
  );
}

interface Outcome {
  readonly tools: readonly Task[];
  readonly conversations: number;
  readonly owned: Map<Id, Id[]>;
  readonly results: readonly Entry[];
  readonly childAnswers: readonly Entry[];
  readonly rootAnswers: readonly Entry[];
}

async function outcome(session: TestSession, root: Id): Promise<Outcome> {
  return runInDurableObject(session.stub, async (instance: SessionObject) => {
    const h = harnessOf(instance);
    const tools = (await h.storage.scanTasks({ kind: "tool", conversationIds: [root], limit: 100 })).items;
    const conversations = (await h.storage.scanConversations({ limit: 100 })).items;
    const owned = new Map<Id, Id[]>();
    for (const tool of tools)
      owned.set(
        tool.id,
        (await h.storage.scanConversations({ ownedFrom: tool.id, limit: 100 })).items.map((c) => c.id),
      );
    const child = conversations.find((c) => c.owner !== undefined)?.id;
    const entries = async (id: Id, kind: string) => (await h.entries(id, { limit: 100, kind }, call)).items;
    return {
      tools,
      conversations: conversations.length,
      owned,
      results: await entries(root, "tool_result"),
      childAnswers: child === undefined ? [] : await entries(child, "assistant"),
      rootAnswers: await entries(root, "assistant"),
    };
  });
}

function text(entry: Entry | undefined): string {
  const content = (entry?.model?.[0] as { content?: unknown } | undefined)?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content)
    ? content.map((p: { type?: string; text?: string }) => (p.type === "text" ? (p.text ?? "") : "")).join("")
    : "";
}

/** Kill the object, re-arm nothing, reopen it with its alarm, and wait until every task settled. */
async function killAndRecover(session: TestSession): Promise<void> {
  await abortAllDurableObjects();
  arm(null);
  expect(await runDurableObjectAlarm(session.stub)).toBe(true);
  await until(
    () =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        return (await h.storage.scanTasks({ live: true, limit: 10 })).items.length === 0;
      }),
    "every task settled after the reopen",
  );
}

const POINTS: readonly [Point, string][] = [
  ["created", "after the creation commit"],
  ["mid-turn", "mid-child-turn"],
  ["answered", "after the child answered"],
];

describe("subagent recovery in a session Durable Object", () => {
  for (const [point, name] of POINTS) {
    it(`Subagent run survives eviction ${name}`, async () => {
      const { session, root } = await open(`subagent-run-${point}`);
      const held = arm(point);
      await accept(session, `/call subagent ${JSON.stringify({ command: "run", prompt: "the child's task" })}`);
      await held.reached.promise;
      await killAndRecover(session);
      const o = await outcome(session, root);
      expect(o.tools).toHaveLength(1);
      expect(o.tools[0]?.state.status).toBe("done");
      expect(o.conversations).toBe(2);
      expect(o.owned.get(o.tools[0]!.id)).toHaveLength(1);
      expect(o.childAnswers.map(text)).toEqual(["the child's task"]);
      expect(o.results.map(text)).toEqual(["the child's task"]);
      expect(o.rootAnswers.map(text).at(-1)).toBe("the child's task");
    });

    it(`Subagent wait survives eviction ${name}`, async () => {
      const { session, root } = await open(`subagent-wait-${point}`);
      // The spawned child is held at the point (or, for "answered", runs to its answer).
      const held = arm(point === "answered" ? null : point);
      await accept(session, `/call subagent ${JSON.stringify({ command: "spawn", prompt: "the spawned task" })}`);
      if (point !== "answered") await held.reached.promise;
      const child = await runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        await until(
          async () => (await h.storage.scanTasks({ kind: "tool", role: "terminal", limit: 10 })).items.length === 1,
          "spawn settled",
        );
        return (await h.storage.scanConversations({ limit: 10 })).items.find((c) => c.owner !== undefined)?.id as Id;
      });
      const holdWait = point === "answered" ? arm("answered") : held;
      await accept(session, `/call subagent ${JSON.stringify({ command: "wait", id: child })}`);
      // The wait call is running (driving the child) when the object dies.
      await runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        await until(
          async () => (await h.storage.scanTasks({ kind: "tool", role: "inflight", limit: 10 })).items.length === 1,
          "wait running",
        );
      });
      await holdWait.reached.promise;
      await killAndRecover(session);
      const o = await outcome(session, root);
      expect(o.tools.map((t) => t.state.status)).toEqual(["done", "done"]);
      expect(o.conversations).toBe(2);
      expect([...o.owned.values()].flat()).toEqual([child]);
      expect(o.childAnswers.map(text)).toEqual(["the spawned task"]);
      expect(o.results.map(text)).toEqual([expect.stringMatching(/^spawned subagent \d+/), "the spawned task"]);
      expect(o.rootAnswers.map(text).at(-1)).toBe("the spawned task");
    });
  }

  it("Subagent run survives eviction after delegation", async () => {
    installSeams();
    const { session, root } = await open("subagent-run-delegated", 1000);
    const held = arm("mid-turn");
    await accept(session, `/call subagent ${JSON.stringify({ command: "run", prompt: "the delegated task" })}`);
    await held.reached.promise;
    // The budget runs out on the object's clock: the call settles with the child's id, the parent's
    // turn ends, and the child is still held mid-turn.
    await until(
      () =>
        runInDurableObject(session.stub, async (instance: SessionObject) => {
          const clock = clockOf(instance);
          clock.advanceTo(clock.now() + 1000);
          const h = harnessOf(instance);
          const settled = (await h.storage.scanTasks({ kind: "tool", role: "terminal", limit: 10 })).items.length === 1;
          const answered = (await h.entries(root, { limit: 100, kind: "assistant" }, call)).items.length === 2;
          return settled && answered;
        }),
      "the run call delegated and the parent answered",
    );
    const before = await outcome(session, root);
    expect(before.results).toHaveLength(1);
    const child = [...before.owned.values()].flat()[0] as Id;
    expect((before.results[0]?.data as { delegated?: Id }).delegated).toBe(child);
    expect(before.childAnswers).toHaveLength(0);
    await abortAllDurableObjects();
    arm(null);
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    // The interrupted child generation retries after a delay on the manual clock: move time along.
    await until(
      () =>
        runInDurableObject(session.stub, async (instance: SessionObject) => {
          const clock = clockOf(instance);
          clock.advanceTo(clock.now() + 1000);
          return (await harnessOf(instance).storage.scanTasks({ live: true, limit: 10 })).items.length === 0;
        }),
      "every task settled after the reopen",
    );
    const o = await outcome(session, root);
    expect(o.tools).toHaveLength(1);
    expect(o.tools[0]?.state.status).toBe("done");
    expect(o.conversations).toBe(2);
    expect(o.owned.get(o.tools[0]!.id)).toEqual([child]);
    expect(o.childAnswers.map(text)).toEqual(["the delegated task"]);
    expect(o.results).toHaveLength(1);
    expect(text(o.results[0])).toContain(`still running as subagent ${child}`);
  });
});
