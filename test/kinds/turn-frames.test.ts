/**
 * Scratch frames (§4.6, §8.2, §8.3, §9.4): a burst's pending frames are flushed by the flusher's timer
 * within `flushMs`, not only when the next event arrives, so recovery and watchers see the last tokens
 * of a stalled stream. The last frames of a stream and a tool's last output are not written when the
 * settlement follows with nothing in between (it would delete them at once): watchers still get every
 * token, with the settlement commit, a kill after a timer flush still recovers from what is on disk, and
 * an after_response or after_tool hook still finds them on disk. A watcher never sees what a kill could
 * lose (§7.4: write all bytes, then publish): its preview holds what scratch commits wrote, plus what
 * the settlement commit records, delivered with that commit.
 */
import type { ToolCall } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import type { GenerationPreview } from "../../src/kinds/generation-stream.js";
import {
  applyEvent,
  applyMessage,
  previewOf,
  watchConversation,
  type ConversationEvent,
  type ConversationView,
  type WatchHandle,
  type WatchMessage,
} from "../../src/core/watch.js";
import { fitFrames, frameBytes, framesAfter, type Frame, type FrameBatch } from "../../src/kinds/frames.js";
import { bind } from "../../src/core/state.js";
import { fold, sinkOps, type SinkFold } from "../../src/kinds/sink.js";
import type { Entry, Id } from "../../src/storage/records.js";
import { coreBackends } from "../core/backends.js";
import type { AnyTool } from "../../src/kinds/services.js";
import {
  call,
  callsMessage,
  crashAndReopen,
  deferred,
  fauxAssistantMessage,
  heldStream,
  liveTasks,
  openRig,
  resultOf,
  tasksOfKind,
  textOf,
  transcript,
  type HeldStream,
  type TurnRig,
} from "./turn-race-fixtures.js";

/** No flush timer fires within a test: frames are written only at the end of a stream, if at all. */
const END_ONLY = 3_600_000;

/** Scratch commits (and the scratch rows they wrote) of one run, from the storage spy. */
function scratchBatches(rig: TurnRig): number {
  return rig.storage.batches.filter((b) => b.kind === "scratch").length;
}

async function framesText(rig: TurnRig, task: Id): Promise<string> {
  const page = await rig.storage.inner.readList<FrameBatch>(
    { scope: { scratch: task }, namespace: "frames", rewind: false },
    { limit: 1000 },
  );
  return page.items
    .flatMap((e) => e.value.f)
    .map((f) => (f[0] === "t" ? f[2] : ""))
    .join("");
}

/** Accept `input` at the root, drive it unawaited, and wait until `held` has streamed: the input and its generation. */
async function startHeld(
  rig: TurnRig,
  held: HeldStream,
  input: string,
): Promise<{ readonly inputId: Id; readonly gen: Id }> {
  const root = await rig.harness.root(call);
  const { inputId } = await root.accept({ input }, call);
  void root.drive(call).catch(() => undefined);
  await held.streamed.promise;
  const [generation] = await tasksOfKind(rig, "generation");
  return { inputId, gen: generation?.id as Id };
}

/** A remote watcher: the messages it received, its fold, and each task's preview as its task_end arrived. */
interface RemoteWatch {
  readonly watch: WatchHandle<ConversationView, ConversationEvent>;
  readonly messages: WatchMessage<ConversationEvent>[];
  /** Each settled task's kind and remote preview just before its task_end was folded. */
  readonly atEnd: Map<Id, { readonly kind: string; readonly preview: unknown }>;
  remote: ConversationView;
}

/** Fold every message as a remote UI would (through JSON), event by event. */
function watchRemote(watch: WatchHandle<ConversationView, ConversationEvent>): RemoteWatch {
  const seen: RemoteWatch = {
    watch,
    messages: [],
    atEnd: new Map(),
    remote: JSON.parse(JSON.stringify(watch.view)) as ConversationView,
  };
  watch.startCommits((message) => {
    const wire = JSON.parse(JSON.stringify(message)) as WatchMessage<ConversationEvent>;
    seen.messages.push(wire);
    let folding = seen.remote;
    for (const event of wire.events) {
      if (event.type === "task_end")
        seen.atEnd.set(event.task.id, { kind: event.task.kind, preview: previewOf(folding, event.task.id) });
      folding = applyEvent(folding, event);
    }
    seen.remote = applyMessage(seen.remote, wire);
  });
  return seen;
}

/** The text of a generation preview in a view. */
function previewText(view: ConversationView, task: Id): string {
  const preview = previewOf(view, task) as GenerationPreview | undefined;
  return (preview?.content ?? []).map((block) => (block.type === "text" ? block.text : "")).join("");
}

/** The text of a tool's preview (its sink fold) in a view. */
function toolPreviewText(view: ConversationView, task: Id): string {
  return (previewOf(view, task) as SinkFold | undefined)?.text ?? "";
}

/** What a tool's scratch folds to. */
async function sinkText(rig: TurnRig, task: Id): Promise<string> {
  const page = await rig.storage.inner.readList(bind(sinkOps, { conversationId: rig.root, taskId: task }), {
    limit: 1000,
  });
  return fold(
    page.items.map((e) => e.value),
    50_000,
  ).text;
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
        await eventually(
          async () => (await framesText(rig, generation?.id ?? 0)) === "Hello, wor",
          "frames flushed while the stream is paused",
        );
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
        const rig = await openRig(inner, [callsMessage("echo"), fauxAssistantMessage(answer)], {
          turn: { flushMs: END_ONLY },
        });
        const root = await rig.harness.root(call);
        const seen = watchRemote(await watchConversation(rig.harness, root.id, { tail: 50 }, call));
        const { inputId } = await root.accept({ input: "call echo, then answer" }, call);
        expect(await root.drive(call)).toBe("idle");
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect((await resultOf(rig, inputId))?.status).toBe("done");

        // Two generations and one tool streamed and settled without one scratch commit.
        expect(scratchBatches(rig)).toBe(0);

        // Every token reached the watcher with the message that ends its task (the settlement commit's,
        // once durable), before its task_end: the remote preview as each task_end is folded.
        const entries = await transcript(rig);
        const assistants = entries.filter((e): e is Entry => e.kind === "assistant");
        expect(assistants.map((e) => textOf(e))).toEqual(["", answer]);
        for (const [id, { kind }] of seen.atEnd) {
          if (kind !== "generation" && kind !== "tool") continue;
          const ending = seen.messages.find((m) => m.events.some((e) => e.type === "task_end" && e.task.id === id));
          const order = ending?.events.flatMap((e) =>
            e.type === "task_output" && e.task === id
              ? ["output"]
              : e.type === "task_end" && e.task.id === id
                ? ["end"]
                : [],
          );
          expect(order).toEqual(["output", "end"]);
        }
        const atEnd = seen.atEnd;
        const generations = [...atEnd.values()]
          .filter((t) => t.kind === "generation")
          .map((t) => t.preview as GenerationPreview | undefined);
        expect(generations).toHaveLength(2);
        const call0 = (assistants[0]?.model?.[0] as { content: ToolCall[] }).content.find((b) => b.type === "toolCall");
        expect(generations[0]?.content).toEqual([
          { type: "toolCall", id: call0?.id, name: "echo", arguments: JSON.stringify(call0?.arguments) },
        ]);
        expect(generations[1]?.content).toEqual([{ type: "text", text: answer }]);
        const tools = [...atEnd.values()]
          .filter((t) => t.kind === "tool")
          .map((t) => t.preview as SinkFold | undefined);
        // The echo tool returns its arguments' text ("t0", callsMessage).
        expect(tools.map((t) => t?.text)).toEqual(["t0"]);
        // The server's view and the remote fold agree; settled tasks left no preview behind.
        expect(Object.keys(seen.watch.view.previews)).toEqual([]);
        expect(seen.remote).toEqual(JSON.parse(JSON.stringify(seen.watch.view)));
        seen.watch.unsubscribe();
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

    it(`Shown frames are durable before or with the settlement (${backend.name})`, () =>
      backend.run(async (inner) => {
        // §7.4: write all bytes, then publish. A watcher's preview of a streaming answer holds only frames
        // a scratch commit wrote, or frames the settlement commit carries (the answer entry holds them):
        // a kill before the settlement leaves disk, the recovered partial and the watcher agreeing.
        const held: HeldStream = { ...heldStream("Hel", "lo, "), after: ["world"] };
        const rig = await openRig(inner, [held, fauxAssistantMessage("again")], { turn: { flushMs: 20 } });
        const root = await rig.harness.root(call);
        const seen = watchRemote(await watchConversation(rig.harness, root.id, { tail: 50 }, call));
        const { inputId, gen } = await startHeld(rig, held, "greet");
        await eventually(async () => (await framesText(rig, gen)) === "Hello, ", "the timer flush reached scratch");
        await eventually(async () => previewText(seen.remote, gen) === "Hello, ", "the watcher saw the flushed frames");
        // The stream ends; the next commit (the settlement) is held at the barrier and the process dies there.
        const arrived = rig.storage.pause();
        held.release.resolve();
        await arrived;
        await new Promise((resolve) => setTimeout(resolve, 0));
        const shown = previewText(seen.remote, gen);
        const again = await crashAndReopen(rig, { turn: { flushMs: 20 } });
        const durable = await framesText(again, gen);
        // Every byte the watcher saw is on disk.
        expect(durable.slice(0, shown.length)).toBe(shown);
        expect(shown).toBe("Hello, ");
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        // The partial kept for display holds everything the watcher saw.
        const assistants = (await transcript(again)).filter((e) => e.kind === "assistant");
        expect(textOf(assistants[0]).slice(0, shown.length)).toBe(shown);
        expect((await resultOf(again, inputId))?.status).toBe("done");
        seen.watch.unsubscribe();

        // Without a kill the settlement carries the last frames: they reach the watcher in the message of
        // the settlement commit, before its task_end, and the folded preview is the whole answer.
        const next: HeldStream = { ...heldStream("Good", "bye, "), after: ["moon"] };
        again.provider.push(next);
        const root2 = await again.harness.root(call);
        const seen2 = watchRemote(await watchConversation(again.harness, root2.id, { tail: 50 }, call));
        const { inputId: input2 } = await root2.accept({ input: "part" }, call);
        void root2.drive(call).catch(() => undefined);
        await next.streamed.promise;
        const gen2 = (await liveTasks(again)).find((t) => t.kind === "generation")?.id as Id;
        await eventually(
          async () => previewText(seen2.remote, gen2) === "Goodbye, ",
          "the watcher saw the flushed frames",
        );
        next.release.resolve();
        await eventually(async () => (await resultOf(again, input2))?.status === "done", "the answer settled");
        await new Promise((resolve) => setTimeout(resolve, 0));
        const ending = seen2.messages.findIndex((m) =>
          m.events.some((e) => e.type === "task_end" && e.task.id === gen2),
        );
        const order = seen2.messages[ending]?.events.flatMap((e) =>
          e.type === "task_output" && e.task === gen2
            ? ["output"]
            : e.type === "task_end" && e.task.id === gen2
              ? ["end"]
              : [],
        );
        expect(order).toEqual(["output", "end"]);
        expect(seen2.atEnd.get(gen2)?.preview).toEqual({ content: [{ type: "text", text: "Goodbye, moon" }] });
        // No message before the settlement's showed the unwritten tail.
        expect(JSON.stringify(seen2.messages.slice(0, ending))).not.toContain("moon");
        seen2.watch.unsubscribe();
      }));

    it(`Interrupted tool result holds what the watcher saw (${backend.name})`, () =>
      backend.run(async (inner) => {
        // A tool that cannot be re-run (replay "never") prints a line, then its effect's receipt, and
        // returns. The process dies before its settlement: recovery writes an interrupted result from
        // scratch, and that result must hold every line a watcher saw, or the model may repeat the effect.
        const charged = deferred();
        const charge: AnyTool = {
          name: "charge",
          description: "Charges the card once.",
          parameters: { type: "object", properties: {} },
          async execute(_id, _params, out) {
            out.write("charging card\n");
            await charged.promise;
            out.write("charged: receipt R-1");
          },
        };
        const rig = await openRig(inner, [callsMessage("charge"), fauxAssistantMessage("done")], {
          tools: [charge],
          turn: { flushMs: 20 },
        });
        const root = await rig.harness.root(call);
        const seen = watchRemote(await watchConversation(rig.harness, root.id, { tail: 50 }, call));
        const { inputId } = await root.accept({ input: "charge it" }, call);
        void root.drive(call).catch(() => undefined);
        let tool: Id | undefined;
        await eventually(async () => {
          tool = (await tasksOfKind(rig, "tool"))[0]?.id;
          return tool !== undefined && (await sinkText(rig, tool)) === "charging card\n";
        }, "the first line reached scratch");
        const toolId = tool as Id;
        await eventually(
          async () => toolPreviewText(seen.remote, toolId) === "charging card\n",
          "the watcher saw the first line",
        );
        // The tool prints its receipt and returns; the next commit (its settlement) is held, and the process dies.
        const arrived = rig.storage.pause();
        charged.resolve();
        await arrived;
        await new Promise((resolve) => setTimeout(resolve, 0));
        const shown = toolPreviewText(seen.remote, toolId);
        seen.watch.unsubscribe();
        const again = await crashAndReopen(rig, { tools: [charge] });
        expect(await (await again.harness.root(call)).drive(call)).toBe("idle");
        const result = (await transcript(again)).find((e) => e.kind === "tool_result");
        const text = textOf(result);
        expect(text).toContain("interrupted");
        // Every line the watcher saw is in the result the model reads.
        expect(text.slice(0, shown.length)).toBe(shown);
        expect((await resultOf(again, inputId))?.status).toBe("done");
      }));

    it(`Tool output produced while a scratch commit is in flight is shown with the commit that writes it, not before (${backend.name})`, () =>
      backend.run(async (inner) => {
        const started = deferred();
        const more = deferred();
        const done = deferred();
        const slow: AnyTool = {
          name: "slow",
          description: "Prints two lines with a pause between.",
          parameters: { type: "object", properties: {} },
          async execute(_id, _params, out) {
            out.write("first\n");
            started.resolve();
            await more.promise;
            out.write("second\n");
            await done.promise;
          },
        };
        const rig = await openRig(inner, [callsMessage("slow"), fauxAssistantMessage("ok")], {
          tools: [slow],
          turn: { flushMs: 20 },
        });
        const root = await rig.harness.root(call);
        const seen = watchRemote(await watchConversation(rig.harness, root.id, { tail: 50 }, call));
        const { inputId } = await root.accept({ input: "go" }, call);
        void root.drive(call).catch(() => undefined);
        await started.promise;
        const tool = (await tasksOfKind(rig, "tool"))[0]?.id as Id;
        // The timer's scratch commit of "first" is held at the barrier; the tool prints "second" meanwhile.
        const arrived = rig.storage.pause();
        await arrived;
        more.resolve();
        await new Promise((resolve) => setTimeout(resolve, 0));
        rig.storage.resume();
        // The next commit (the timer's scratch commit of "second", 20 ms on) is held, so the check below never races
        // it on a loaded machine: the held commit above took its barrier already and goes through.
        const next = rig.storage.pause();
        await eventually(async () => (await sinkText(rig, tool)) === "first\n", "the first line reached scratch");
        await eventually(
          async () => toolPreviewText(seen.remote, tool) === "first\n",
          "the watcher saw the first line",
        );
        await new Promise((resolve) => setTimeout(resolve, 0));
        // What the watcher holds is what that commit wrote; "second" comes with the commit that writes it.
        expect(toolPreviewText(seen.remote, tool)).toBe("first\n");
        await next;
        rig.storage.resume();
        await eventually(
          async () => (await sinkText(rig, tool)) === "first\nsecond\n",
          "the second line reached scratch",
        );
        await eventually(
          async () => toolPreviewText(seen.remote, tool) === "first\nsecond\n",
          "the watcher saw the second line",
        );
        done.resolve();
        await eventually(async () => (await resultOf(rig, inputId))?.status === "done", "the turn answered");
        seen.watch.unsubscribe();
      }));

    it(`With an after_response hook the last frames are on disk before the hook runs, and with an after_tool hook the tool's last output is (${backend.name})`, () =>
      backend.run(async (inner) => {
        const answer = "every token on disk before the hook";
        const rig = await openRig(inner, [callsMessage("echo"), fauxAssistantMessage(answer)], {
          turn: { flushMs: END_ONLY },
        });
        const seenFrames: string[] = [];
        const seenOutput: string[] = [];
        // Hooks fail open, so an expect inside one would be swallowed: collect, assert below.
        rig.kit.hooks.on(rig.kit.generation, "after_response", async () => {
          const live = (await tasksOfKind(rig, "generation")).filter((t) => t.state.status === "streaming");
          for (const t of live) seenFrames.push(await framesText(rig, t.id));
        });
        rig.kit.hooks.on(rig.kit.tool, "after_tool", async () => {
          for (const t of (await tasksOfKind(rig, "tool")).filter((x) => x.state.status === "running")) {
            const page = await rig.storage.inner.readList(bind(sinkOps, { conversationId: rig.root, taskId: t.id }), {
              limit: 1000,
            });
            seenOutput.push(
              fold(
                page.items.map((e) => e.value),
                50_000,
              ).text,
            );
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
    it(`A frame batch over the scratch budget writes the frames that fit, so a kill recovers the answer up to the budget, and a watcher saw no more (${backend.name})`, () =>
      backend.run(async (inner) => {
        const maxScratchBytes = 300;
        const held: HeldStream = {
          ...heldStream("a".repeat(100), "b".repeat(100), "c".repeat(100)),
          after: ["d".repeat(50)],
        };
        // The three deltas arrive microtasks apart; a flush timer long enough that a loaded machine still has them all
        // when it fires (at 20 ms, a clean-clone CI run once flushed the first delta alone).
        const rig = await openRig(inner, [held, fauxAssistantMessage("again")], {
          turn: { flushMs: 500, maxScratchBytes },
        });
        const seen = watchRemote(await watchConversation(rig.harness, rig.root, { tail: 50 }, call));
        const { inputId, gen } = await startHeld(rig, held, "write a lot");
        // One timer flush holds all 300 characters (over the budget): it writes the prefix that fits.
        await eventually(async () => (await framesText(rig, gen)) !== "", "the timer flush reached scratch");
        const written = await framesText(rig, gen);
        const whole = "a".repeat(100) + "b".repeat(100) + "c".repeat(100);
        expect(whole.startsWith(written)).toBe(true);
        const page = await rig.storage.inner.readList<FrameBatch>(
          { scope: { scratch: gen }, namespace: "frames", rewind: false },
          { limit: 10 },
        );
        expect(page.items).toHaveLength(1);
        const bytes = JSON.stringify(page.items[0]?.value.f).length;
        expect(bytes).toBeLessThanOrEqual(maxScratchBytes);
        expect(bytes).toBeGreaterThan(maxScratchBytes - 2);
        expect(written.length).toBeGreaterThan(200);
        // Past the budget nothing more is written, so nothing more is shown until the settlement: the
        // watcher's preview is the written prefix (not the whole cut delta), also once the stream ended
        // and its settlement waits at the barrier when the process dies.
        await eventually(async () => previewText(seen.remote, gen) !== "", "the watcher saw the written frames");
        expect(previewText(seen.remote, gen)).toBe(written);
        const arrived = rig.storage.pause();
        held.release.resolve();
        await arrived;
        await new Promise((resolve) => setTimeout(resolve, 30));
        expect(previewText(seen.remote, gen)).toBe(written);
        seen.watch.unsubscribe();
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
    const frames: Frame[] = [
      ["t", 0, "abc"],
      ["t", 1, "\u{1F600}\u{1F600}xyz"],
    ];
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
    expect(fitFrames(frames, frameBytes(frames) - 1)).toEqual([
      ["t", 0, "abc"],
      ["t", 1, "\u{1F600}\u{1F600}xy"],
    ]);
    // framesAfter gives back what the fit left out: the kept frames then the rest spell every block whole.
    const blocks = (list: readonly Frame[]): string[] => {
      const out: string[] = [];
      for (const f of list) if (f[0] === "t") out[f[1]] = (out[f[1]] ?? "") + f[2];
      return out;
    };
    for (let budget = 0; budget <= frameBytes(frames); budget++) {
      const fit = fitFrames(frames, budget);
      expect(blocks([...fit, ...framesAfter(frames, fit)])).toEqual(["abc", "\u{1F600}\u{1F600}xyz"]);
    }
    // A tool-call start that does not fit is not cut: the batch ends before it.
    const call: Frame[] = [
      ["t", 0, "abc"],
      ["c", 1, "id-1", "echo"],
    ];
    expect(fitFrames(call, frameBytes(call) - 1)).toEqual([["t", 0, "abc"]]);
    expect(framesAfter(call, [["t", 0, "abc"]])).toEqual([["c", 1, "id-1", "echo"]]);
  });
});
