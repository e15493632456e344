/**
 * A streaming turn seen through watch (§9.4): the generation's preview travels as task_output delta ops
 * at the scratch-commit cadence, folds into view.previews while the task is live, and leaves with it.
 */
import { describe, expect, it } from "vitest";
import {
  applyMessage,
  watchConversation,
  type ConversationEvent,
  type ConversationView,
  type WatchMessage,
} from "../../src/core/watch.js";
import { coreBackends } from "../core/backends.js";
import { call, fauxAssistantMessage, openTurns, textOf } from "./turn-fixtures.js";

for (const backend of coreBackends) {
  describe(`turn watch (${backend.name})`, () => {
    it(`a streamed answer reaches watchers as task_output ops and a remote reducer ends with the server's view (${backend.name})`, () =>
      backend.run(async (storage) => {
        const long = "streaming ".repeat(40).trim();
        const { harness } = await openTurns(storage, { responses: [fauxAssistantMessage(long)], turn: { flushMs: 0 } });
        const root = await harness.root(call);
        const watch = await watchConversation(harness, root.id, { tail: 50 }, call);
        let remote = JSON.parse(JSON.stringify(watch.view)) as ConversationView;
        const messages: WatchMessage<ConversationEvent>[] = [];
        watch.startCommits((message) => {
          messages.push(message);
          remote = applyMessage(remote, JSON.parse(JSON.stringify(message)) as WatchMessage<ConversationEvent>);
        });
        const answer = await root.prompt({ input: "talk" }, call);
        await new Promise((resolve) => setTimeout(resolve, 0));
        expect(textOf(answer)).toBe(long);
        const outputs = messages.flatMap((m) => m.events).filter((e) => e.type === "task_output");
        expect(outputs.length).toBeGreaterThan(0);
        const starts = messages.flatMap((m) => m.events).filter((e) => e.type === "task_start");
        const ends = messages.flatMap((m) => m.events).filter((e) => e.type === "task_end");
        expect(starts.length).toBe(1);
        expect(ends.length).toBe(1);
        // Once the generation settled its preview is gone; the remote fold equals the server's view.
        expect(Object.keys(watch.view.previews)).toEqual([]);
        expect(remote).toEqual(JSON.parse(JSON.stringify(watch.view)));
        expect(remote.entries.map((e) => e.id)).toContain(answer?.id);
        watch.unsubscribe();
      }));
  });
}
