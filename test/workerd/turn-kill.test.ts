/**
 * A kill mid-stream through a real session Durable Object (§8.2 "recover streaming", §5.5): the turn
 * kinds registered through the test seam run over a scripted faux model whose stream is held after a
 * few deltas; the object is killed with abortAllDurableObjects once frames reached scratch, and the
 * alarm that reopens it recovers the generation: the partial assistant entry is kept for display
 * (stopReason aborted, excluded from later requests), no tool task exists, the input is unanswered(failed).
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import type { Context } from "@earendil-works/pi-ai";
import { createModels } from "@earendil-works/pi-ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bindResult } from "../../src/core/inbox.js";
import { generationConfig, turnPolicy } from "../../src/kinds/config.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import type { Id } from "../../src/storage/records.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { echoTool, fauxAssistantMessage, heldStream, ScriptedProvider } from "../kinds/turn-race-fixtures.js";
import { call, harnessOf, installSeams, resetSeams, TestSession, until } from "./session-fixtures.js";

beforeEach(() => {
  installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

describe("turn kill mid-stream in a session Durable Object", () => {
  it('onInterrupt "fail": a kill mid-stream recovering the partial for display without tools: partial kept (aborted, excluded from requests), no tool tasks, input unanswered(failed)', async () => {
    const provider = new ScriptedProvider();
    const stream = heldStream("the partial ", "answer so far");
    provider.push(stream);
    const models = createModels();
    models.setProvider(provider.provider());
    const model = provider.faux.getModel();
    const modelId = `${model.provider}/${model.id}`;
    const kit = createTurnKit({ models, tools: [echoTool], options: { flushMs: 0, retryBaseMs: 10 } });
    registerTestKinds(kit.kinds);

    const session = new TestSession("turn-kill");
    await session.rpc.create();
    const { inputId, generation } = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const root = await h.root(call);
      await root.commit((tx) => {
        tx.value(generationConfig.model).set(modelId);
        tx.value(generationConfig.selectedTools).set(["echo"]);
        tx.value(turnPolicy.onInterrupt).set("fail");
      }, call);
      const receipt = await root.accept({ input: "tell me" }, call);
      const gen = (await h.storage.scanTasks({ kind: "generation", limit: 10 })).items[0]?.id as Id;
      return { inputId: receipt.inputId, generation: gen };
    });
    await stream.streamed.promise;
    // Frames reached scratch (the preview flush commits them with the scratch batch).
    await until(
      () =>
        runInDurableObject(session.stub, async (instance: SessionObject) => {
          const frames = await harnessOf(instance).storage.readList(
            { scope: { scratch: generation }, namespace: "frames", rewind: false },
            { limit: 100 },
          );
          return JSON.stringify(frames.items).includes("answer so far");
        }),
      "frames in scratch",
    );

    // The kill: in-flight work dies without warning; the alarm reopens the session and recovers.
    await abortAllDurableObjects();
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    await until(
      () =>
        runInDurableObject(session.stub, async (instance: SessionObject) => {
          const task = (await harnessOf(instance).storage.getTasks([generation])).get(generation);
          return task?.role === "terminal";
        }),
      "the generation recovered",
    );

    const seen: Context[] = [];
    provider.push((context) => {
      seen.push(context);
      return fauxAssistantMessage("next answer");
    });
    await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const task = (await h.storage.getTasks([generation])).get(generation);
      expect(task?.state).toMatchObject({ status: "failed", reason: "interrupted" });
      const partialId = (task?.state as unknown as { partial: Id }).partial;
      const partial = (await h.storage.getEntries([partialId])).get(partialId);
      expect(partial?.model).toMatchObject([
        { role: "assistant", stopReason: "aborted", content: [{ type: "text", text: "the partial answer so far" }] },
      ]);
      expect((await h.storage.scanTasks({ kind: "tool", limit: 10 })).items).toEqual([]);
      expect((await h.storage.getValue(bindResult(h.rootId, inputId)))?.value).toMatchObject({
        status: "unanswered",
        reason: "failed",
      });
      // Scratch retired with the settlement.
      expect(
        (
          await h.storage.readList(
            { scope: { scratch: generation }, namespace: "frames", rewind: false },
            { limit: 10 },
          )
        ).items,
      ).toEqual([]);
      // Excluded from later requests.
      const root = await h.root(call);
      const answer = await root.prompt({ input: "again" }, call);
      expect(answer?.kind).toBe("assistant");
    });
    expect(seen[0]?.messages.filter((m) => m.role === "assistant")).toEqual([]);
  });
});
