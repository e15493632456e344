/**
 * Scratch frames (§4.6, §8.2, §8.3, §9.4): a burst's pending frames are flushed by the flusher's timer
 * within `flushMs`, not only when the next event arrives, so recovery and watchers see the last tokens
 * of a stalled stream. The last frames of a stream and a tool's last output are not written when the
 * settlement follows with nothing in between (it would delete them at once): watchers still get every
 * token, a kill after a timer flush still recovers from what is on disk, and an after_response or
 * after_tool hook still finds them on disk.
 */
import type { ToolCall } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import type { GenerationPreview } from "../../src/kinds/generation.js";
import { applyMessage, watchConversation, type ConversationEvent, type ConversationView, type WatchMessage } from "../../src/core/watch.js";
import { fitFrames, frameBytes, type Frame, type FrameBatch } from "../../src/kinds/frames.js";
import { bind } from "../../src/core/state.js";
import { fold, sinkOps, type SinkFold } from "../../src/kinds/sink.js";
import type { Entry, Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import { call, callsMessage, crashAndReopen, fauxAssistantMessage, heldStream, openRig, resultOf, tasksOfKind, textOf, transcript, type HeldStream, type TurnRig } from "./turn-race-fixtures.js";

/** No flush timer fires within a test: frames are written only at the end of a stream, if at all. */
const END_ONLY = 3_600_000;

/** Scratch commits (and the scratch rows they wrote) of one run, from the storage spy. */
function scratchBatches(rig: TurnRig): number {
  return rig.storage.batches.filter((b) => b.kind === "scratch").length;
}

async function framesText(rig: TurnRig, task: Id): Promise<string> {
  const page = await rig.storage.inner.readList<FrameBatch>({ scope: { scratch: task }, namespace: "frames", rewind: false }, { limit: 1000 });
  return page.items.flatMap((e) => e.value.f).map((f) => (f[0] === "t" ? f[2] : "")).join("");
}

/** Accept `input` at the root, drive it unawaited, and wait until `held` has streamed: the input and its generation. */
async function startHeld(rig: TurnRig, held: HeldStream, input: string): Promise<{ readonly inputId: Id; readonly gen: Id }> {
  const root = await rig.harness.root(call);
  const { inputId } = await root.accept({ input }, call);
  void root.drive(call).catch(() => undefined);
  await held.streamed.promise;
  const [generation] = await tasksOfKind(rig, "generation");
  return { inputId, gen: generation?.id as Id };
}

/** Poll between macrotasks (bounded rounds, no time asserted). */
async function eventually(predicate: () => Promise<boolean>, what: string): Promise<void> {
  for (let round = 0; round < 500; round++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`gave up waiting for: ${what}`);
}

for (const backend of coreBackends) {
  describe(`generation frames (${backend.name})`, () => {
    it(`frames of a burst reach scratch while the stream is paused, then the answer settles whole (${backend.name})`, () =>
      backend.run(async (inner) => {
        const held = heldStream("Hel", "lo, ", "wor");
        const rig = await openRig(inner, [held], { turn: { flushMs: 20 } });
        const root = await rig.harness.root(call);
        const { inputId } = await root.accept({ input: "greet" }, call);
        const driving = root.drive(call);
        await held.streamed.promise;
        const [generation] = await tasksOfKind(rig, "generation");
        // The stream is held after its last delta: only the flusher's timer can persist what is pending.
        await eventually(async () => (await framesText(rig, generation?.id ?? 0)) === "Hello, wor", "frames flushed while the stream is paused");
        held.release.resolve();
        expect(await driving).toBe("idle");
        expect((await root.result(inputId, call))?.status).toBe("done");
      }));
  });
}

for (const backend of coreBackends) {
  describe(`final frames and the settlement (${backend.name})`, () => {
    it(`Final frames ride on the settlement: no scratch row is written and watchers see every token (${backend.name})`, () =>
      backend.run(async (inner) => {
        const answer = "the final answer, streamed token by token ".repeat(8).trim();
        const rig = await openRig(inner, [callsMessage("echo"), fauxAssistantMessage(answer)], { turn: { flushMs: END_ONLY } });
        const root = await rig.harness.root(call);
        const watch = await watchConversation(rig.harness, root.id, { tail: 50 }, call);
        let remote = JSON.parse(JSON.stringify(watch.view)) as ConversationView;
        // What a remote watcher's folded preview of each task holds when the message ending it arrives.
        const atEnd = new Map<Id, { kind: string; preview: unknown }>();
        watch.startCommits((message) => {
          const wire = JSON.parse(JSON.stringify(message)) as WatchMessage<ConversationEvent>;
          for (const event of wire.events) {
            if (event.type === "task_end") atEnd.set(event.task.id, { kind: event.task.kind, preview: remote.previews[String(event.task.id)] });
          }
          remote = applyMessage(remote, wire);
        });
        const { inputId } = await root.accept({ input: "call echo, then answer" }, call);
        expect(await root.drive(call)).toBe("idle");
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect((await resultOf(rig, inputId))?.status).toBe("done");

        // Two generations and one tool streamed and settled without one scratch commit.
        expect(scratchBatches(rig)).toBe(0);

        // Every token reached the watcher before (or with) the message that ends its task.
        const entries = await transcript(rig);
        const assistants = entries.filter((e): e is Entry => e.kind === "assistant");
        expect(assistants.map((e) => textOf(e))).toEqual(["", answer]);
        const generations = [...atEnd.values()].filter((t) => t.kind === "generation").map((t) => t.preview as GenerationPreview | undefined);
        expect(generations).toHaveLength(2);
        const call0 = (assistants[0]?.model?.[0] as { content: ToolCall[] }).content.find((b) => b.type === "toolCall");
        expect(generations[0]?.content).toEqual([{ type: "toolCall", id: call0?.id, name: "echo", arguments: JSON.stringify(call0?.arguments) }]);
        expect(generations[1]?.content).toEqual([{ type: "text", text: answer }]);
        const tools = [...atEnd.values()].filter((t) => t.kind === "tool").map((t) => t.preview as SinkFold | undefined);
        // The echo tool returns its arguments' text ("t0", callsMessage).
        expect(tools.map((t) => t?.text)).toEqual(["t0"]);
        // The server's view and the remote fold agree; settled tasks left no preview behind.
        expect(Object.keys(watch.view.previews)).toEqual([]);
        expect(remote).toEqual(JSON.parse(JSON.stringify(watch.view)));
        watch.unsubscribe();
      }));

    it(`A kill after a timer flush, before the settlement, recovers from the frames on disk; the unwritten tail is lost with the process (${backend.name})`, () =>
      backend.run(async (inner) => {
        const held: HeldStream = { ...heldStream("Hel", "lo, "), after: ["world"] };
        const rig = await openRig(inner, [held, fauxAssistantMessage("again")], { turn: { flushMs: 20 } });
        const { inputId, gen } = await startHeld(rig, held, "greet");
        await eventually(async () => (await framesText(rig, gen)) === "Hello, ", "the timer flush reached scratch");
        const scratchBefore = scratchBatches(rig);
        // The next commit after the stream ends is held at the barrier: it is the settlement (the
        // tail "world" was not written by a scratch commit of its own), and the process dies there.
        const arrived = rig.storage.pause();
        held.release.resolve();
        await arrived;
        expect(scratchBatches(rig)).toBe(scratchBefore);
        const again = await crashAndReopen(rig);
        expect(await framesText(again, gen)).toBe("Hello, ");
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        // Recovery kept the partial that reached disk for display, retried, and answered.
        const assistants = (await transcript(again)).filter((e) => e.kind === "assistant");
        expect(assistants.map((e) => [textOf(e), (e.model?.[0] as { stopReason: string }).stopReason])).toEqual([
          ["Hello, ", "aborted"],
          ["again", "stop"],
        ]);
        expect((await resultOf(again, inputId))?.status).toBe("done");
      }));

    it(`With an after_response hook the last frames are on disk before the hook runs, and with an after_tool hook the tool's last output is (${backend.name})`, () =>
      backend.run(async (inner) => {
        const answer = "every token on disk before the hook";
        const rig = await openRig(inner, [callsMessage("echo"), fauxAssistantMessage(answer)], { turn: { flushMs: END_ONLY } });
        const seenFrames: string[] = [];
        const seenOutput: string[] = [];
        // Hooks fail open, so an expect inside one would be swallowed: collect, assert below.
        rig.kit.hooks.on(rig.kit.generation, "after_response", async () => {
          const live = (await tasksOfKind(rig, "generation")).filter((t) => t.state.status === "streaming");
          for (const t of live) seenFrames.push(await framesText(rig, t.id));
        });
        rig.kit.hooks.on(rig.kit.tool, "after_tool", async () => {
          for (const t of (await tasksOfKind(rig, "tool")).filter((x) => x.state.status === "running")) {
            const page = await rig.storage.inner.readList(bind(sinkOps, { conversationId: rig.root, taskId: t.id }), { limit: 1000 });
            seenOutput.push(fold(page.items.map((e) => e.value), 50_000).text);
          }
        });
        const root = await rig.harness.root(call);
        const { inputId } = await root.accept({ input: "call echo, then answer" }, call);
        expect(await root.drive(call)).toBe("idle");
        expect((await resultOf(rig, inputId))?.status).toBe("done");
        expect(seenFrames).toEqual(["", answer]);
        expect(seenOutput).toEqual(["t0"]);
        // Hooked: the tail flushes happened (two generations, one tool), and settlement retired them.
        expect(scratchBatches(rig)).toBe(3);
      }));
  });
}


for (const backend of coreBackends) {
  describe(`the scratch budget (${backend.name})`, () => {
    it(`A frame batch over the scratch budget writes the frames that fit, so a kill recovers the answer up to the budget (${backend.name})`, () =>
      backend.run(async (inner) => {
        const maxScratchBytes = 300;
        const held = heldStream("a".repeat(100), "b".repeat(100), "c".repeat(100));
        const rig = await openRig(inner, [held, fauxAssistantMessage("again")], { turn: { flushMs: 20, maxScratchBytes } });
        const { inputId, gen } = await startHeld(rig, held, "write a lot");
        // One timer flush holds all 300 characters (over the budget): it writes the prefix that fits.
        await eventually(async () => (await framesText(rig, gen)) !== "", "the timer flush reached scratch");
        const written = await framesText(rig, gen);
        const whole = "a".repeat(100) + "b".repeat(100) + "c".repeat(100);
        expect(whole.startsWith(written)).toBe(true);
        const page = await rig.storage.inner.readList<FrameBatch>({ scope: { scratch: gen }, namespace: "frames", rewind: false }, { limit: 10 });
        expect(page.items).toHaveLength(1);
        const bytes = JSON.stringify(page.items[0]?.value.f).length;
        expect(bytes).toBeLessThanOrEqual(maxScratchBytes);
        expect(bytes).toBeGreaterThan(maxScratchBytes - 2);
        expect(written.length).toBeGreaterThan(200);
        const again = await crashAndReopen(rig);
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        const assistants = (await transcript(again)).filter((e) => e.kind === "assistant");
        expect(assistants.map((e) => textOf(e))).toEqual([written, "again"]);
        expect((await resultOf(again, inputId))?.status).toBe("done");
      }));
  });
}

describe("fitFrames", () => {
  it("keeps whole frames that fit, cuts the next delta to fill the budget, never splits a surrogate pair or cuts a start/end frame", () => {
    const frames: Frame[] = [["t", 0, "abc"], ["t", 1, "\u{1F600}\u{1F600}xyz"]];
    expect(fitFrames(frames, frameBytes(frames))).toEqual(frames);
    // Every budget gives a batch within it that is a prefix of the frames' text.
    for (let budget = 0; budget <= frameBytes(frames); budget++) {
      const fit = fitFrames(frames, budget);
      if (fit.length > 0) expect(frameBytes(fit)).toBeLessThanOrEqual(budget);
      const last = fit[fit.length - 1];
      if (last !== undefined && last[0] === "t") expect(/[\ud800-\udbff]$/.test(last[2])).toBe(false);
      const text = fit.map((f) => (f[0] === "t" ? f[2] : "")).join("");
      expect("abc\u{1F600}\u{1F600}xyz".startsWith(text)).toBe(true);
    }
    // A budget one byte short of the whole batch drops only the last character.
    expect(fitFrames(frames, frameBytes(frames) - 1)).toEqual([["t", 0, "abc"], ["t", 1, "\u{1F600}\u{1F600}xy"]]);
    // A tool-call start that does not fit is not cut: the batch ends before it.
    const call: Frame[] = [["t", 0, "abc"], ["c", 1, "id-1", "echo"]];
    expect(fitFrames(call, frameBytes(call) - 1)).toEqual([["t", 0, "abc"]]);
  });
});
