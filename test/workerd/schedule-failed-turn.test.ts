/**
 * A schedule aimed at a conversation whose last turn failed (§8.1; docs/api.md "Waiting input"): the failed group's
 * queued followUps stay queued and visibly waiting until a `continue`. The schedule's own input is one
 * of them, so it has a pending occurrence: later occurrences queue nothing (and do not restart the
 * failed conversation by placing the waiting items); they are counted in `skipped`. The turn fails by a
 * kill mid-stream under `onInterrupt: "fail"` (the turn-kill fixtures: a scripted faux model whose
 * stream is held).
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { createModels } from "@earendil-works/pi-ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bindInbox, bindResult } from "../../src/core/inbox.js";
import { bindTo } from "../../src/core/state.js";
import { generationConfig, turnPolicy } from "../../src/kinds/config.js";
import { newSchedule, scheduleDefinition, type ScheduleState } from "../../src/kinds/schedule.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import { waitingInputs } from "../../src/kinds/waiting.js";
import type { Id } from "../../src/storage/records.js";
import { registerTestKinds } from "../../src/worker/session/kinds.js";
import type { SessionObject } from "../../src/worker/session/object.js";
import { echoTool, fauxAssistantMessage, heldStream, ScriptedProvider } from "../kinds/turn-race-fixtures.js";
import {
  call,
  clockOf,
  harnessOf,
  installSeams,
  resetSeams,
  taskOf,
  TestSession,
  until,
  type Seams,
} from "./session-fixtures.js";

const MIN = 60_000;
let seams: Seams;

beforeEach(() => {
  seams = installSeams();
});

afterEach(async () => {
  await abortAllDurableObjects();
  resetSeams();
});

describe("a schedule into a failed conversation", () => {
  it("A schedule aimed at a conversation whose last turn failed keeps one pending input: later occurrences are counted skipped, nothing more is queued or placed", async () => {
    const provider = new ScriptedProvider();
    const stream = heldStream("the partial ", "answer");
    provider.push(stream);
    const models = createModels();
    models.setProvider(provider.provider());
    const model = provider.faux.getModel();
    const kit = createTurnKit({ models, tools: [echoTool], options: { flushMs: 0, retryBaseMs: 10 } });
    registerTestKinds(kit.kinds);

    const session = new TestSession("schedule-failed-turn");
    await session.rpc.create();
    const t0 = seams.time.now;
    const scheduleId = await runInDurableObject(session.stub, async (instance: SessionObject) => {
      const h = harnessOf(instance);
      const root = await h.root(call);
      await root.commit((tx) => {
        tx.value(generationConfig.model).set(`${model.provider}/${model.id}`);
        tx.value(generationConfig.selectedTools).set(["echo"]);
        tx.value(turnPolicy.onInterrupt).set("fail");
      }, call);
      await root.accept({ input: "tell me" }, call);
      const state = newSchedule(
        { conversationId: h.rootId, input: "tick", mode: "followUp", every: MIN, cron: null, timezone: null },
        t0,
        null,
      );
      return h.commit((tx) => tx.task(scheduleDefinition, { conversationId: h.rootId, background: true, state }), call);
    });
    await stream.streamed.promise;
    const schedule = async (): Promise<ScheduleState> => (await taskOf(session, scheduleId))?.state as ScheduleState;

    // The first occurrence queues its input behind the live turn.
    await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(t0 + MIN));
    await until(async () => (await schedule()).runs === 1, "the first occurrence");
    const pending = (await schedule()).lastInputId as Id;

    // The turn fails (a kill mid-stream, onInterrupt "fail"): the queued input waits for a continue.
    await abortAllDurableObjects();
    expect(await runDurableObjectAlarm(session.stub)).toBe(true);
    const waiting = () =>
      runInDurableObject(session.stub, async (instance: SessionObject) => {
        const h = harnessOf(instance);
        return {
          waiting: (await h.storage.getValue(bindTo(waitingInputs, h.rootId)))?.value ?? [],
          inbox: (await h.storage.readList(bindInbox(h.rootId), { limit: 100 })).items.map((item) => item.id),
          result: (await h.storage.getValue(bindResult(h.rootId, pending)))?.value?.status,
          generations: (await h.storage.scanTasks({ kind: "generation", limit: 10 })).items.length,
        };
      });
    await until(async () => (await waiting()).waiting.length === 1, "the schedule's input waits");
    expect(await waiting()).toMatchObject({ waiting: [pending], inbox: [pending], result: "queued", generations: 1 });

    // Later occurrences: the pending one is still queued, so they queue nothing and place nothing.
    provider.push(fauxAssistantMessage("answer"), fauxAssistantMessage("answer"), fauxAssistantMessage("answer"));
    for (let k = 2; k <= 4; k++) {
      await runInDurableObject(session.stub, (instance: SessionObject) => clockOf(instance).advanceTo(t0 + k * MIN));
      await until(async () => (await schedule()).nextRunAt === t0 + (k + 1) * MIN, `occurrence ${k}`);
    }
    expect(await schedule()).toMatchObject({
      status: "waiting",
      runs: 1,
      skipped: 3,
      lastRunAt: t0 + MIN,
      lastInputId: pending,
    });
    expect(await waiting()).toMatchObject({ waiting: [pending], inbox: [pending], result: "queued", generations: 1 });
  });
});
