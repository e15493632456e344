/**
 * GUPP at the generation's final-answer boundary (seed 000 "GUPP Integration"; §8.1): the turn
 * kit's extension point (kinds/services.ts FinalAnswerBoundary) lets the rig, inside the commit that
 * records a final answer, accept a pending hook's work item ahead of the user's queued followUps and
 * activate the hook, and complete a hook in the commit that records its work item's `done` result. A
 * harness with the turn kit over the faux provider, without the host's commit-listening fallback (Gupp),
 * except where the conversation's activity touches `last_activity` (throttled, never per token).
 */
import {
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type AssistantMessage,
} from "@earendil-works/pi-ai";
import { afterEach, describe, expect, it } from "vitest";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, initialValue, type CommittedBatch } from "../../src/core/harness.js";
import { bindResult, INPUT_RESULT_NAMESPACE } from "../../src/core/inbox.js";
import { erase } from "../../src/core/task-kind.js";
import { generationConfig } from "../../src/kinds/config.js";
import { acceptInput } from "../../src/kinds/placement.js";
import { createTurnKit } from "../../src/kinds/turns.js";
import { createWitnessKind, guppRequestId, Gupp, Rig, type Actor } from "../../src/rig/index.js";
import { HOOK_NAMESPACE } from "../../src/rig/state.js";
import { MemoryStorage } from "../../src/storage/memory.js";
import type { Id, MainWrite } from "../../src/storage/records.js";
import { FakeClock, flush } from "../core/driver-fixtures.js";
import { echoTool } from "../kinds/turn-fixtures.js";

const call = BACKGROUND_CONTEXT;
const mayor: Actor = { role: "mayor" };
const open: Harness[] = [];

afterEach(async () => {
  for (const h of open.splice(0)) await h.close(call).catch(() => undefined);
});

async function fixture(answers: (string | AssistantMessage)[], options: { clock?: FakeClock; gupp?: boolean } = {}) {
  const faux = fauxProvider();
  const models = createModels();
  models.setProvider(faux.provider);
  const model = faux.getModel();
  faux.setResponses(answers.map((answer) => (typeof answer === "string" ? fauxAssistantMessage(answer) : answer)));
  let rig: Rig | undefined;
  const kit = createTurnKit({
    models,
    tools: [echoTool],
    finalAnswer: async (boundary) => rig?.atFinalAnswer(boundary),
  });
  const witness = createWitnessKind(() => rig);
  const harness = await Harness.open(
    new MemoryStorage(),
    {
      taskKinds: [...kit.kinds, erase(witness)],
      rootValues: [
        initialValue(generationConfig.model, `${model.provider}/${model.id}`),
        initialValue(generationConfig.selectedTools, ["echo"]),
      ],
      ...(options.clock === undefined ? {} : { host: { clock: options.clock } }),
    },
    call,
  );
  open.push(harness);
  kit.install(harness);
  rig = new Rig(harness, {
    witness,
    conversationValues: Object.values(generationConfig),
    accept: async (tx, conversationId, input, requestId) =>
      (await acceptInput(tx.builder, conversationId, { input, requestId }, kit.options, harness.now())).inputId,
  });
  const commits: CommittedBatch[] = [];
  harness.onCommit((commit) => commits.push(commit));
  if (options.gupp === true) await new Gupp(rig).open();
  const registered = await rig.register(mayor, "polecat-alpha", { role: "polecat", conversation: "new" });
  const conversationId = registered.agent.conversationId as Id;
  const handle = await harness.conversation(conversationId, call);
  if (handle === undefined) throw new Error("no agent conversation");
  return { harness, rig, commits, conversationId, handle };
}

function writesOf(commit: CommittedBatch): readonly MainWrite[] {
  return commit.batch.kind === "main" ? commit.batch.writes : [];
}

/** The input's result as this commit leaves it (its last write of it), if the commit writes it. */
function resultWrite(commit: CommittedBatch, inputId: Id): unknown {
  const write = writesOf(commit).findLast(
    (w) => w.type === "value.set" && w.addr.namespace === INPUT_RESULT_NAMESPACE && w.addr.key === String(inputId),
  );
  return write?.type === "value.set" ? write.value : undefined;
}

type HookWritten = { file: { status: string; last_activity: string }; input?: { inputId: Id } };

function hookWrite(commit: CommittedBatch): HookWritten | undefined {
  const write = writesOf(commit).find(
    (w) => w.type === "value.set" && w.addr.namespace === HOOK_NAMESPACE && w.addr.key === "polecat-alpha",
  );
  return write?.type === "value.set" ? (write.value as unknown as HookWritten) : undefined;
}

function userTexts(commits: readonly CommittedBatch[]): string[] {
  return commits.flatMap((c) =>
    writesOf(c).flatMap((w) =>
      w.type === "entry" && w.entry.kind === "user"
        ? [String((w.entry.model?.[0] as { content?: unknown } | undefined)?.content)]
        : [],
    ),
  );
}

describe("Pending hook goes ahead of queued followUps", () => {
  it("the commit that records the user's answer accepts the hook's work item as the next group and activates the hook; the follow-up waits for the work item's answer", async () => {
    const f = await fixture(["answer to the question", "the work is done", "answer to the follow-up"]);
    const question = await f.handle.accept({ input: "a user question" }, call);
    expect(question.status).toBe("placed");
    const set = await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-1", title: "short" } });
    expect(set.hook.status).toBe("pending");
    const followUp = await f.handle.accept({ input: "a queued follow-up" }, call);
    expect(followUp.status).toBe("queued");

    expect(await f.handle.drive(call)).toBe("idle");

    // One commit records the question's answer, accepts the work item first and activates the hook.
    const answered = f.commits.filter(
      (c) => (resultWrite(c, question.inputId) as { status?: string } | undefined)?.status === "done",
    );
    expect(answered).toHaveLength(1);
    const boundary = answered[0] as CommittedBatch;
    const activated = hookWrite(boundary);
    expect(activated?.file.status).toBe("active");
    const workInput = activated?.input?.inputId as Id;
    expect(resultWrite(boundary, workInput)).toMatchObject({
      status: "placed",
      requestId: guppRequestId("polecat-alpha", f.conversationId, 1),
    });
    expect(resultWrite(boundary, followUp.inputId)).toBeUndefined();
    expect(userTexts([boundary])).toEqual(["Work item gt-1: short"]);
    // The work item's group came before the follow-up's: the transcript's user entries in order.
    expect(userTexts(f.commits)).toEqual(["a user question", "Work item gt-1: short", "a queued follow-up"]);

    // The work item's answer completes the hook in the commit that records its `done` result, once;
    // that boundary places the follow-up as the next group.
    const done = f.commits.filter(
      (c) => (resultWrite(c, workInput) as { status?: string } | undefined)?.status === "done",
    );
    expect(done).toHaveLength(1);
    expect(hookWrite(done[0] as CommittedBatch)?.file.status).toBe("completed");
    expect(resultWrite(done[0] as CommittedBatch, followUp.inputId)).toMatchObject({ status: "placed" });
    expect(await f.harness.storage.getValue(bindResult(f.conversationId, followUp.inputId))).toMatchObject({
      value: { status: "done" },
    });
    expect(f.commits.filter((c) => hookWrite(c)?.file.status === "completed")).toHaveLength(1);
    expect((await f.rig.readHook("polecat-alpha")).hook.status).toBe("completed");
  });

  it("an idle agent's hook is activated by the setting commit and completed in the commit that records its answer", async () => {
    const f = await fixture(["the work is done"]);
    const set = await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-1", title: "short" } });
    expect(set.hook.status).toBe("active");
    expect(await f.handle.drive(call)).toBe("idle");
    const completed = f.commits.filter((c) => hookWrite(c)?.file.status === "completed");
    expect(completed).toHaveLength(1);
    expect((await f.rig.readHook("polecat-alpha")).hook.status).toBe("completed");
    const workInput = hookWrite(completed[0] as CommittedBatch)?.input?.inputId as Id;
    expect(resultWrite(completed[0] as CommittedBatch, workInput)).toMatchObject({ status: "done" });
    expect(userTexts(f.commits)).toEqual(["Work item gt-1: short"]);
  });
});

describe("the final-answer extension point (kinds)", () => {
  it("acceptFirst under a used request key places nothing and returns the original input", async () => {
    const faux = fauxProvider();
    const models = createModels();
    models.setProvider(faux.provider);
    const model = faux.getModel();
    faux.setResponses([fauxAssistantMessage("first"), fauxAssistantMessage("second"), fauxAssistantMessage("third")]);
    const accepted: Id[] = [];
    const kit = createTurnKit({
      models,
      finalAnswer: async (boundary) => {
        if (accepted.length >= 2) return;
        accepted.push(await boundary.acceptFirst("the extension's input", "ext:1"));
      },
    });
    const harness = await Harness.open(
      new MemoryStorage(),
      { taskKinds: kit.kinds, rootValues: [initialValue(generationConfig.model, `${model.provider}/${model.id}`)] },
      call,
    );
    open.push(harness);
    kit.install(harness);
    const commits: CommittedBatch[] = [];
    harness.onCommit((commit) => commits.push(commit));
    const root = await harness.root(call);
    await root.accept({ input: "hello" }, call);
    expect(await root.drive(call)).toBe("idle");
    // The first boundary accepted it; the second found the key used: the same input, nothing placed.
    expect(accepted).toHaveLength(2);
    expect(accepted[1]).toBe(accepted[0]);
    expect(userTexts(commits)).toEqual(["hello", "the extension's input"]);
    expect(faux.state.callCount).toBe(2);
  });
});

describe("conversation activity touches the hook", () => {
  for (const late of [true, false]) {
    it(`commits of the agent's conversation touch last_activity at most once per throttle window (${late ? "31 s after activation: one touch" : "10 s after activation, inside the window: no write"})`, async () => {
      const clock = new FakeClock(Date.parse("2026-03-05T10:00:00Z"));
      const f = await fixture(
        [
          fauxAssistantMessage([fauxToolCall("echo", { text: "step" }, { id: "c1" })], { stopReason: "toolUse" }),
          "the work is done",
        ],
        { clock, gupp: true },
      );
      const set = await f.rig.transition(mayor, "polecat-alpha", "set", { work: { bead_id: "gt-1", title: "short" } });
      expect(set.hook.status).toBe("active");
      clock.advance(late ? 31_000 : 10_000);
      expect(await f.handle.drive(call)).toBe("idle");
      await flush(f.harness, 4);
      const touches = f.commits.filter((c) => {
        const hook = hookWrite(c);
        return hook?.file.status === "active" && hook.file.last_activity !== set.hook.last_activity;
      });
      expect(touches.map((c) => hookWrite(c)?.file.last_activity)).toEqual(late ? ["2026-03-05T10:00:31.000Z"] : []);
      expect((await f.rig.readHook("polecat-alpha")).hook.status).toBe("completed");
    });
  }
});
