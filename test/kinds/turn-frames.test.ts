/**
 * Scratch frames while a stream pauses (§4.6, §8.2): a burst's pending frames are flushed by the
 * flusher's timer within `flushMs`, not only when the next event arrives, so recovery and watchers see
 * the last tokens of a stalled stream.
 */
import { describe, expect, it } from "vitest";
import type { FrameBatch } from "../../src/kinds/frames.js";
import { coreBackends } from "../core/backends.js";
import { call, heldStream, openRig, tasksOfKind } from "./turn-race-fixtures.js";

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
        const streamedText = async (): Promise<string> => {
          const page = await rig.storage.readList<FrameBatch>({ scope: { scratch: generation?.id ?? 0 }, namespace: "frames", rewind: false }, { limit: 100 });
          return page.items.flatMap((e) => e.value.f).map((f) => (f[0] === "t" ? f[2] : "")).join("");
        };
        // The stream is held after its last delta: only the flusher's timer can persist what is pending.
        await eventually(async () => (await streamedText()) === "Hello, wor", "frames flushed while the stream is paused");
        held.release.resolve();
        expect(await driving).toBe("idle");
        expect((await root.result(inputId, call))?.status).toBe("done");
      }));
  });
}
