/**
 * The AG-UI events a conversation's watch view turns into (src/worker/frontends/ag-ui-events.ts), from views built
 * by hand: a thinking model's reasoning, a tool call streamed in the generation's preview and settled by its
 * entry, and what the page already holds. Every event validates against @ag-ui/core's schemas.
 */
import { EventSchemas } from "@ag-ui/core/schemas";
import { describe, expect, it } from "vitest";
import type { ConversationView } from "../../src/core/watch-types.js";
import type { Entry } from "../../src/storage/records.js";
import { AgUiTurn, type AgUiEvent, type Held } from "../../src/worker/frontends/ag-ui-events.js";
import { generation, user, view } from "./view-fixtures.js";

const none: Held = { messages: new Set(), toolCalls: new Set(), toolResults: new Set() };

function valid(events: readonly AgUiEvent[]): void {
  for (const event of events) expect(EventSchemas.safeParse(event).success, JSON.stringify(event)).toBe(true);
}

describe("AgUiTurn", () => {
  it("streams reasoning, text and a tool call from the preview, and settles them from the entry once", () => {
    const turn = new AgUiTurn(none);
    turn.placed(10);
    const first = turn.update(
      view({
        entries: [user],
        tasks: [generation],
        previews: { "7": { content: [{ type: "thinking", thinking: "Let me" }] } },
      }),
    );
    valid(first);
    expect(first).toEqual([
      { type: "REASONING_START", messageId: "r7-0" },
      { type: "REASONING_MESSAGE_START", messageId: "r7-0", role: "reasoning" },
      { type: "REASONING_MESSAGE_CONTENT", messageId: "r7-0", delta: "Let me" },
    ]);
    const second = turn.update(
      view({
        entries: [user],
        tasks: [generation],
        previews: {
          "7": {
            content: [
              { type: "thinking", thinking: "Let me think" },
              { type: "toolCall", id: "c1", name: "deploy", arguments: '{"id":' },
            ],
          },
        },
      }),
    );
    valid(second);
    expect(second).toEqual([
      { type: "REASONING_MESSAGE_CONTENT", messageId: "r7-0", delta: " think" },
      { type: "REASONING_MESSAGE_END", messageId: "r7-0" },
      { type: "REASONING_END", messageId: "r7-0" },
      { type: "TOOL_CALL_START", toolCallId: "c1", toolCallName: "deploy", parentMessageId: "m7" },
    ]);
    // The generation settled: its entry holds the whole message (the arguments as an object), then the result.
    const assistant: Entry = {
      id: 11,
      conversationId: 1,
      kind: "assistant",
      byTaskId: 7,
      model: [
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Let me think" },
            { type: "toolCall", id: "c1", name: "deploy", arguments: { id: 7 } },
          ],
        } as unknown as NonNullable<Entry["model"]>[number],
      ],
    };
    const result: Entry = {
      id: 12,
      conversationId: 1,
      kind: "tool_result",
      model: [
        {
          role: "toolResult",
          toolCallId: "c1",
          toolName: "deploy",
          content: [{ type: "text", text: "deployed" }],
          isError: false,
          timestamp: 0,
        },
      ],
    };
    const third = turn.update(view({ entries: [user, assistant, result] }));
    valid(third);
    expect(third).toEqual([
      { type: "TOOL_CALL_ARGS", toolCallId: "c1", delta: '{"id":7}' },
      { type: "TOOL_CALL_END", toolCallId: "c1" },
      { type: "TOOL_CALL_RESULT", messageId: "result-c1", toolCallId: "c1", content: "deployed", role: "tool" },
    ]);
    expect(turn.update(view({ entries: [user, assistant, result] }))).toEqual([]);
    expect(turn.close()).toEqual([]);
  });

  it("sends nothing the page holds, and nothing of a later input's turn", () => {
    const held: Held = { messages: new Set(["m7"]), toolCalls: new Set(), toolResults: new Set() };
    const turn = new AgUiTurn(held);
    turn.placed(10);
    const answer: Entry = {
      id: 11,
      conversationId: 1,
      kind: "assistant",
      byTaskId: 7,
      model: [{ role: "assistant", content: [{ type: "text", text: "hi" }] } as never],
    };
    const later: Entry = { id: 12, conversationId: 1, kind: "user" };
    const other: Entry = { ...answer, id: 13, byTaskId: 9 };
    expect(turn.update(view({ entries: [user, answer, later, other] }))).toEqual([]);
    // Not placed yet (queued): nothing.
    expect(new AgUiTurn(none).update(view({ entries: [user, answer] }))).toEqual([]);
  });

  it("Every AG-UI tool call's argument deltas join into its final arguments", () => {
    // A provider streams the arguments one way and settles them spelled another: the deltas still join into JSON
    // that parses to the settled arguments (they are held until the entry settles them).
    const turn = new AgUiTurn(none);
    turn.placed(10);
    const streamed = (args: string): ConversationView =>
      view({
        entries: [user],
        tasks: [generation],
        previews: { "7": { content: [{ type: "toolCall", id: "c1", name: "place", arguments: args }] } },
      });
    const events: AgUiEvent[] = [
      ...turn.update(streamed('{"region": "eu')),
      ...turn.update(streamed('{"region": "eu-w')),
    ];
    const settled: Entry = {
      id: 11,
      conversationId: 1,
      kind: "assistant",
      byTaskId: 7,
      model: [
        {
          role: "assistant",
          content: [{ type: "toolCall", id: "c1", name: "place", arguments: { region: "eu-west" } }],
        } as unknown as NonNullable<Entry["model"]>[number],
      ],
    };
    events.push(...turn.update(view({ entries: [user, settled] })), ...turn.close());
    valid(events);
    const joined = events
      .flatMap((event) => (event.type === "TOOL_CALL_ARGS" && event.toolCallId === "c1" ? [event.delta] : []))
      .join("");
    expect(JSON.parse(joined)).toEqual({ region: "eu-west" });
    expect(events.filter((event) => event.type === "TOOL_CALL_START")).toHaveLength(1);
    expect(events.filter((event) => event.type === "TOOL_CALL_END")).toHaveLength(1);
  });
});
