/**
 * Accepting input and placing it (§8.1): every mode (write, steer, followUp, nextRun) and every
 * `whenBusy` case (followUp default, steer, reject), steering joining a group at post_tools, followUp
 * after a final answer, nextRun at the next idle accept; on memory and SQLite with the faux provider.
 * A generation is held busy with a deferred faux response the test releases.
 */
import { describe, expect, it } from "vitest";
import { userEntry, userKind } from "../../src/core/entries.js";
import { bindInbox } from "../../src/core/inbox.js";
import type { Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { until } from "../core/driver-fixtures.js";
import {
  answerNewest,
  call,
  inputsOf,
  callsMessage,
  deferred,
  kinds,
  openRig,
  resultOf,
  tasksOfKind,
  transcript,
  type Deferred,
  type TurnRig,
} from "./turn-race-fixtures.js";
import type { FauxResponseStep } from "@earendil-works/pi-ai";

/** A faux step that waits for `gate`, then answers from the newest message. */
function gated(gate: Deferred, prefix = "answer"): FauxResponseStep {
  const answer = answerNewest(prefix);
  return async (context, options, state, model) => {
    await gate.promise;
    return answer(context, options, state, model);
  };
}

/** A faux step that waits for `gate`, then asks for these tools. */
function gatedCalls(gate: Deferred, ...names: string[]): FauxResponseStep {
  return async () => {
    await gate.promise;
    return callsMessage(...names);
  };
}

async function queued(rig: TurnRig): Promise<{ id: Id; mode: string }[]> {
  const page = await rig.storage.inner.readList(bindInbox(rig.root), { limit: 100 });
  return page.items.map((e) => ({ id: e.id, mode: e.value.mode }));
}

async function generationRunning(rig: TurnRig): Promise<void> {
  await until(rig.harness, () => rig.provider.calls > 0, "the first request");
}

async function answerId(rig: TurnRig, inputId: Id): Promise<Id | undefined> {
  const r = await resultOf(rig, inputId);
  return r?.status === "done" ? r.answer : undefined;
}

for (const backend of coreBackends) {
  describe(`turn accept modes (${backend.name})`, () => {
    it(`accept when idle places the entry and starts a generation in one commit (${backend.name})`, () =>
      backend.run(async (inner) => {
        const rig = await openRig(inner, [answerNewest()]);
        const root = await rig.harness.root(call);
        const before = rig.commits.length;
        const receipt = await root.accept({ input: "hi" }, call);
        expect(receipt.status).toBe("placed");
        const commit = rig.commits[before];
        expect(rig.commits.length).toBe(before + 1);
        const writes = commit?.batch.kind === "main" ? commit.batch.writes : [];
        expect(writes.some((w) => w.type === "entry" && w.entry.kind === "user")).toBe(true);
        expect(writes.some((w) => w.type === "task" && w.task.kind === "generation")).toBe(true);
        expect(await resultOf(rig, receipt.inputId)).toMatchObject({ status: "placed" });
        expect(await root.drive(call)).toBe("idle");
        expect(await resultOf(rig, receipt.inputId)).toMatchObject({ status: "done" });
      }));

    it(`whenBusy followUp (the default) queues and starts the next group after the final answer (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate), answerNewest()]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const b = await root.accept({ input: "B" }, call);
        expect(b.status).toBe("queued");
        expect(await queued(rig)).toEqual([{ id: b.inputId, mode: "followUp" }]);
        expect(await resultOf(rig, b.inputId)).toEqual({ status: "queued" });
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "user", "assistant"]);
        const [ansA, ansB] = [await answerId(rig, a.inputId), await answerId(rig, b.inputId)];
        expect(ansA).toBeDefined();
        expect(ansB).toBeDefined();
        expect(ansA).not.toBe(ansB);
        expect((await tasksOfKind(rig, "generation")).map((t) => inputsOf(t))).toEqual([[a.inputId], [b.inputId]]);
      }));

    it(`whenBusy steer with no tool calls starts the next group after the final answer (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate), answerNewest()]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const b = await root.accept({ input: "B", whenBusy: "steer" }, call);
        expect(await queued(rig)).toEqual([{ id: b.inputId, mode: "steer" }]);
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "user", "assistant"]);
        expect(await answerId(rig, a.inputId)).not.toBe(await answerId(rig, b.inputId));
      }));

    it(`whenBusy reject throws conflict and writes nothing (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate)]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const seq = rig.storage.lastSeq;
        await expect(root.accept({ input: "B", whenBusy: "reject", requestId: "r-b" }, call)).rejects.toMatchObject({
          code: "conflict",
        });
        expect(rig.storage.lastSeq).toBe(seq);
        expect(await queued(rig)).toEqual([]);
        expect(await rig.harness.acceptance("r-b", call)).toBeUndefined();
        gate.resolve();
        expect(await driving).toBe("idle");
      }));

    it(`steering joins the active group at post_tools: placed after the tool results, answered by the same final answer (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gatedCalls(gate, "echo"), answerNewest()]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const s = await root.accept({ input: "steer S", whenBusy: "steer" }, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "tool_result", "user", "assistant"]);
        const post = (await tasksOfKind(rig, "post_tools"))[0];
        expect(post?.state).toMatchObject({ status: "done", inputs: [a.inputId, s.inputId] });
        const answer = await answerId(rig, a.inputId);
        expect(answer).toBeDefined();
        expect(await answerId(rig, s.inputId)).toBe(answer);
        expect(rig.provider.calls).toBe(2);
      }));

    it(`followUp is not placed at post_tools; it starts the next group after the final answer (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gatedCalls(gate, "echo"), answerNewest("first"), answerNewest("second")]);
        const root = await rig.harness.root(call);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const f = await root.queueInput({ mode: "followUp", input: "F" }, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "tool_result", "assistant", "user", "assistant"]);
        const entries = await transcript(rig);
        const answerA = await answerId(rig, a.inputId);
        const answerF = await answerId(rig, f.inputId);
        expect(entries.find((e) => e.id === answerA)?.model).toMatchObject([{ content: [{ text: "first: t0" }] }]);
        expect(answerF).toBeGreaterThan(answerA as Id);
      }));

    it(`a write appends at once when idle (done, no answer) and, when busy, lands at the next post_tools boundary without joining the group (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gatedCalls(gate, "echo"), answerNewest()]);
        const root = await rig.harness.root(call);
        const idle = await root.write(userKind, userEntry("note while idle", 0), call);
        const idleResult = await resultOf(rig, idle.inputId);
        expect(idleResult).toMatchObject({ status: "done" });
        expect(idleResult && "answer" in idleResult ? idleResult.answer : undefined).toBeUndefined();
        expect(await queued(rig)).toEqual([]);
        const a = await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const w = await root.write(userKind, userEntry("note while busy", 0), call);
        expect(await queued(rig)).toEqual([{ id: w.inputId, mode: "write" }]);
        expect(await resultOf(rig, w.inputId)).toEqual({ status: "queued" });
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "user", "assistant", "tool_result", "user", "assistant"]);
        const written = await resultOf(rig, w.inputId);
        expect(written).toMatchObject({ status: "done" });
        expect(written && "answer" in written ? written.answer : undefined).toBeUndefined();
        expect((await tasksOfKind(rig, "post_tools"))[0]?.state).toMatchObject({ inputs: [a.inputId] });
        expect(await answerId(rig, a.inputId)).toBeDefined();
      }));

    it(`a write queued during a turn without tools lands at the final-answer boundary and creates no successor (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate)]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const w = await root.write(userKind, userEntry("late note", 0), call);
        gate.resolve();
        expect(await driving).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "user"]);
        expect(await resultOf(rig, w.inputId)).toMatchObject({ status: "done" });
        expect((await tasksOfKind(rig, "generation")).length).toBe(1);
      }));

    it(`nextRun stays queued through the final answer and joins the group of the next idle accept (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate, "first"), answerNewest("second")]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const n = await root.queueInput({ mode: "nextRun", input: "N" }, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        // No work by inference: the nextRun item waits for an explicit acceptance.
        expect(await queued(rig)).toEqual([{ id: n.inputId, mode: "nextRun" }]);
        expect(await resultOf(rig, n.inputId)).toEqual({ status: "queued" });
        expect((await tasksOfKind(rig, "generation")).length).toBe(1);
        const c = await root.accept({ input: "C" }, call);
        expect(c.status).toBe("placed");
        expect(await root.drive(call)).toBe("idle");
        expect(await kinds(rig)).toEqual(["user", "assistant", "user", "user", "assistant"]);
        const generations = await tasksOfKind(rig, "generation");
        expect(generations[1]?.state).toMatchObject({ inputs: [n.inputId, c.inputId] });
        const answer = await answerId(rig, c.inputId);
        expect(await answerId(rig, n.inputId)).toBe(answer);
      }));

    it(`a steer queued while a followUp waits is placed first only if admitted first: admission order at the final boundary (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(inner, [gated(gate), answerNewest()]);
        const root = await rig.harness.root(call);
        await root.accept({ input: "A" }, call);
        const driving = root.drive(call);
        await generationRunning(rig);
        const f = await root.accept({ input: "F" }, call);
        const s = await root.accept({ input: "S", whenBusy: "steer" }, call);
        gate.resolve();
        expect(await driving).toBe("idle");
        const generations = await tasksOfKind(rig, "generation");
        expect(generations[1]?.state).toMatchObject({ inputs: [f.inputId, s.inputId] });
        expect(await answerId(rig, f.inputId)).toBe(await answerId(rig, s.inputId));
      }));
  });
}

for (const backend of coreBackends) {
  describe(`turn accept during a manual collapse (${backend.name})`, () => {
    it(`input accepted while only a background collapse runs queues (§5.8) and is placed when the collapse settles, not stranded (${backend.name})`, () =>
      backend.run(async (inner) => {
        const gate = deferred();
        const rig = await openRig(
          inner,
          [answerNewest("1"), answerNewest("2"), answerNewest("3"), gated(gate, "SUMMARY"), answerNewest("4")],
          { turn: { collapseKeepEntries: 2 } },
        );
        const root = await rig.harness.root(call);
        for (const text of ["one", "two", "three"]) await root.prompt({ input: text }, call);
        const collapse = await root.collapse(undefined, call);
        await until(rig.harness, () => rig.provider.calls === 4, "the summarizer request");
        const early = await root.accept({ input: "early" }, call);
        const steer = await root.accept({ input: "also this", whenBusy: "steer" }, call);
        expect(early.status).toBe("queued");
        expect(steer.status).toBe("queued");
        gate.resolve();
        await rig.harness.driver.waitForTask(collapse, undefined, call);
        // The collapse's settlement was the boundary: both inputs were placed into one new group.
        expect((await resultOf(rig, early.inputId))?.status).toBe("placed");
        expect(await root.drive(call)).toBe("idle");
        const generations = await tasksOfKind(rig, "generation");
        expect(generations[generations.length - 1]?.state).toMatchObject({ inputs: [early.inputId, steer.inputId] });
        expect(await answerId(rig, early.inputId)).toBe(await answerId(rig, steer.inputId));
        expect(await answerId(rig, early.inputId)).toBeDefined();
      }));
  });
}
