/**
 * A parked wait costs nothing (docs/design.md "Alarms and restarts"): a generation sleeping in retry_wait until a
 * durable wake time
 * is not busy, so no 30 s heartbeat keeps the object awake; the one alarm is set at the wake time, and
 * after an eviction that alarm alone reopens the session and brings the generation back (§5.3: execute
 * sleeps only the remainder). The turn kit runs over a scripted faux model through the test seam.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { createModels } from "@earendil-works/pi-ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bindResult } from "../../src/core/inbox.js";
import { generationConfig } from "../../src/kinds/config.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import type { Id } from "../../src/storage/records.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { answerNewest, echoTool, fauxAssistantMessage, ScriptedProvider } from "../kinds/turn-race-fixtures.js";
import { call, harnessOf, installSeams, resetSeams, TestSession, until, type Seams } from "./session-fixtures.js";

const TEN_MINUTES = 600_000;
let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

describe("a parked wait costs nothing", () => {
  it("a retry waiting 10 minutes lets the object be evicted, and the alarm brings the generation back", async () => {
    const provider = new ScriptedProvider([
      fauxAssistantMessage([], { stopReason: "error", errorMessage: "503 overloaded" }),
      answerNewest(),
    ]);
    const models = createModels();
    models.setProvider(provider.provider());
    const model = provider.faux.getModel();
    const kit = createTurnKit({
      models,
      tools: [echoTool],
      options: { flushMs: 0, retryBaseMs: TEN_MINUTES, retryMaxDelayMs: 2 * TEN_MINUTES, retryJitter: 0 },
    });
    registerTestKinds(kit.kinds);

    const session = new TestSession("parked-wait");
    await session.rpc.create();
    const t0 = seams.time.now;
    const { inputId, generation } = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const root = await h.root(call);
      await root.commit((tx) => tx.value(generationConfig.model).set(`${model.provider}/${model.id}`), call);
      const receipt = await root.accept({ input: "hello" }, call);
      const gen = (await h.storage.scanTasks({ kind: "generation", limit: 10 })).items[0]?.id as Id;
      return { inputId: receipt.inputId, generation: gen };
    });
    const stateOf = () =>
      runInDurableObject(
        session.stub,
        async (instance: SessionObject) =>
          (await harnessOf(instance).storage.getTasks([generation])).get(generation)?.state,
      );
    await until(async () => (await stateOf())?.status === "retry_wait", "retry_wait");
    expect(await stateOf()).toMatchObject({ status: "retry_wait", notBefore: t0 + TEN_MINUTES });
    // Sleeping is not busy: the alarm is the wake time, not a heartbeat 30 s ahead.
    await until(async () => !(await session.rpc.inspect()).busy, "not busy while parked");
    expect(await runInDurableObject(session.stub, (_instance, state) => state.storage.getAlarm())).toBe(
      t0 + TEN_MINUTES,
    );
    expect(provider.calls).toBe(1);

    // Evicted while parked; ten minutes later only the alarm runs.
    await abortAllDurableObjects();
    seams.time.now = t0 + TEN_MINUTES;
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    await until(async () => (await stateOf())?.status === "done", "the generation came back and answered");
    expect(provider.calls).toBe(2);
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      expect((await h.storage.getValue(bindResult(h.rootId, inputId)))?.value).toMatchObject({ status: "done" });
    });
  });
});
