/**
 * A tool call in the AI SDK's UI message stream as the model streams it (src/worker/frontends/ui-stream.ts,
 * ui-previews.ts), from views built by hand: `tool-input-start` as soon as the generation's committed preview shows
 * the call, the `tool-input-delta`s joining into exactly the call's final arguments JSON (held until the entry settles
 * them: a provider may stream `{"region": "eu` and settle `{"region":"eu-west"}`), then `tool-input-available`. Every
 * chunk validates against `ai`'s own chunk schema, and `readUIMessageStream` folds them into the tool part.
 */
import {
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
  type UIMessage,
  type UIMessageChunk,
} from "ai";
import { describe, expect, it } from "vitest";
import type { ConversationView } from "../../src/core/watch-types.js";
import type { Entry } from "../../src/storage/records.js";
import { UiTurn, uiSse, type UiChunk } from "../../src/worker/frontends/ui-stream.js";
import { generation, user, view } from "./view-fixtures.js";

/** The generation's preview: its text, and the call with the arguments streamed so far. */
function streaming(args: string): ConversationView {
  return view({
    entries: [user],
    tasks: [generation],
    previews: {
      "7": {
        content: [
          { type: "text", text: "Placing it." },
          { type: "toolCall", id: "c1", name: "place", arguments: args },
        ],
      },
    },
  });
}

const settled: Entry = {
  id: 11,
  conversationId: 1,
  kind: "assistant",
  byTaskId: 7,
  model: [
    {
      role: "assistant",
      content: [
        { type: "text", text: "Placing it." },
        { type: "toolCall", id: "c1", name: "place", arguments: { region: "eu-west" } },
      ],
      model: "echo",
      timestamp: 0,
      usage: { input: 1, output: 1 },
    } as unknown as NonNullable<Entry["model"]>[number],
  ],
};

function step(turn: UiTurn, next: ConversationView): UiChunk[] {
  turn.fold({ type: "view", id: "1", view: next });
  return [...turn.step().chunks];
}

/** The chunks as the route frames them, parsed back with `ai`'s chunk schema (each must validate). */
async function parsed(chunks: readonly UiChunk[]): Promise<UIMessageChunk[]> {
  const bytes = new TextEncoder().encode(chunks.map(uiSse).join(""));
  const stream = parseJsonEventStream({
    stream: new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes);
        controller.close();
      },
    }),
    schema: uiMessageChunkSchema,
  });
  const out: UIMessageChunk[] = [];
  const reader = stream.getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return out;
    expect(next.value.success, JSON.stringify(next.value)).toBe(true);
    if (next.value.success) out.push(next.value.value);
  }
}

describe("tool input in the UI message stream", () => {
  it("starts a tool call's input as the preview shows it, and its deltas join into the final arguments", async () => {
    const turn = new UiTurn(10);
    const first = step(turn, streaming('{"region": "eu'));
    // The call started while the model streamed it, in the step its text opened.
    expect(first).toEqual([
      { type: "start-step" },
      { type: "text-start", id: "p7-0" },
      { type: "text-delta", id: "p7-0", delta: "Placing it." },
      { type: "tool-input-start", toolCallId: "c1", toolName: "place" },
    ]);
    // Arguments still settling: nothing more (a delta now might not join into the final JSON).
    expect(step(turn, streaming('{"region": "eu-w'))).toEqual([]);
    const last = [...step(turn, view({ entries: [user, settled] })), ...turn.close()];
    const chunks = [...first, ...last];
    expect(chunks.filter((c) => c.type === "tool-input-start")).toHaveLength(1);
    const joined = chunks.flatMap((c) => (c.type === "tool-input-delta" ? [c.inputTextDelta] : [])).join("");
    expect(joined).toBe(JSON.stringify({ region: "eu-west" }));
    const types = chunks.map((c) => c.type);
    expect(types.indexOf("tool-input-start")).toBeLessThan(types.indexOf("tool-input-delta"));
    expect(types.indexOf("tool-input-delta")).toBeLessThan(types.indexOf("tool-input-available"));
    expect(types.at(-1)).toBe("finish-step");

    // `ai` reads every chunk, and folds them into the tool part with the settled input.
    const wire = await parsed([{ type: "start", messageId: "a10" }, ...chunks, { type: "finish" }]);
    let message: UIMessage | undefined;
    for await (const m of readUIMessageStream<UIMessage>({
      stream: new ReadableStream<UIMessageChunk>({
        start(controller) {
          for (const chunk of wire) controller.enqueue(chunk);
          controller.close();
        },
      }),
      terminateOnError: true,
    }))
      message = m;
    expect(message?.parts.find((part) => part.type === "tool-place")).toMatchObject({
      toolCallId: "c1",
      state: "input-available",
      input: { region: "eu-west" },
    });
  });

  it("a call the stream started and never settled ends as tool-input-error", async () => {
    const turn = new UiTurn(10);
    const chunks = [...step(turn, streaming('{"region": "eu')), ...turn.close()];
    expect(chunks).toContainEqual({
      type: "tool-input-error",
      toolCallId: "c1",
      toolName: "place",
      input: null,
      errorText: "the generation ended before the call's arguments were complete",
    });
    expect(chunks.at(-1)).toEqual({ type: "finish-step" });
    await parsed(chunks);
  });
});
