/**
 * The agent turn end to end with pi-ai's faux provider (§8.1-§8.4): accept and placement, generation,
 * tools and post_tools, usage, on memory and on SQLite.
 */
import { describe, expect, it } from "vitest";
import { assistantKind, userKind } from "../../src/core/entries.js";
import { coreBackends } from "../core/backends.js";
import { call, fauxAssistantMessage, fauxToolCall, openTurns, textOf } from "./turn-fixtures.js";

for (const backend of coreBackends) {
  describe(`turn (${backend.name})`, () => {
    it(`prompt answers from the model and resolves the input done with the answer (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness, faux } = await openTurns(storage, { responses: [fauxAssistantMessage("hello there")] });
        const root = await harness.root(call);
        const answer = await root.prompt({ input: "hi" }, call);
        expect(textOf(answer)).toBe("hello there");
        expect(faux.state.callCount).toBe(1);
        const transcript = await harness.entries(root.id, { limit: 50 }, call);
        expect(transcript.items.map((e) => e.kind).filter((k) => k !== "system")).toEqual(["user", "assistant"]);
        const inspect = await harness.inspect(call);
        expect(inspect.start.length + inspect.inflight.length).toBe(0);
      }));

    it(`a tool call runs the tool, post_tools continues, and the final answer follows the result (${backend.name})`, () =>
      backend.run(async (storage) => {
        const { harness } = await openTurns(storage, {
          responses: [
            fauxAssistantMessage([fauxToolCall("echo", { text: "ping" }, { id: "c1" })], { stopReason: "toolUse" }),
            (context) => {
              const last = context.messages[context.messages.length - 1];
              const text =
                last?.role === "toolResult" ? last.content.map((c) => (c.type === "text" ? c.text : "")).join("") : "?";
              return fauxAssistantMessage(`tool said ${text}`);
            },
          ],
        });
        const root = await harness.root(call);
        const answer = await root.prompt({ input: "use the tool" }, call);
        expect(textOf(answer)).toBe("tool said ping");
        const kinds = (await harness.entries(root.id, { limit: 50 }, call)).items
          .map((e) => e.kind)
          .filter((k) => k !== "system");
        expect(kinds).toEqual(["user", "assistant", "tool_result", "assistant"]);
        expect(
          await harness.getEntry(
            userKind,
            (await harness.entries(root.id, { limit: 1 }, call)).items[0]?.id ?? 0,
            call,
          ),
        ).toBeDefined();
        expect(answer === undefined ? false : assistantKind.is(answer)).toBe(true);
      }));
  });
}
