/**
 * Request messages from a derived context (§2.2 "messages"): concatenate the items' effective model
 * messages in context order, then normalize tool exchanges for the request only.
 *
 * - Assistant messages with stopReason "error" or "aborted" are excluded; their tool calls never get
 *   results (a stored result answering one is dropped with them).
 * - After each remaining assistant with tool calls, its existing results are placed directly after it
 *   in call order, even when other messages (a notice, a system delta) landed between them. A result
 *   belongs to the nearest preceding assistant, i.e. it must appear before the next assistant.
 * - A call without a result in the context (a fork cut the exchange, or the results were omitted) gets
 *   a synthetic error result "No result provided", as pi-ai's transformMessages does. It is local to
 *   the request; nothing is stored or executed.
 * - A tool result that answers no call in the context (its assistant was omitted, cut by a head, or
 *   failed) or repeats an answered call is dropped: providers reject results without their call.
 *
 * Why not pi-ai's transformMessages (api/transform-messages in 1.6.0): it requires the target Model
 * (it also rewrites thinking blocks and call ids per provider), it does not move results up past a user
 * message, and it stamps synthetic results with Date.now(). Providers still run it during conversion,
 * so our output is already exchange-complete when it gets there. Synthetic results here carry the
 * assistant's timestamp, so the same context always yields the same request (cache-prefix friendly).
 *
 * Used by generation preparation on a request snapshot. Returns a fresh array; message objects are the
 * context's (immutable) ones, and callers copy any message they change.
 */
import type { AssistantMessage, Message, ToolCall, ToolResultMessage } from "@earendil-works/pi-ai";
import type { DerivedContext } from "./context-fold.js";

/** The text of a synthetic result, the same words pi-ai uses. */
export const MISSING_TOOL_RESULT = "No result provided";

/** Whether an assistant message is replayed in later requests (not a failed/aborted output). */
export function isReplayable(message: AssistantMessage): boolean {
  return message.stopReason !== "error" && message.stopReason !== "aborted";
}

export function requestMessages(context: DerivedContext): Message[] {
  const flat: Message[] = [];
  for (const item of context.items) {
    for (const message of item.messages) {
      if (message.role === "assistant" && !isReplayable(message)) continue;
      flat.push(message);
    }
  }
  return normalizeToolExchanges(flat);
}

/** Place results with their calls in call order and supply missing ones; see the module comment. */
export function normalizeToolExchanges(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  let i = 0;
  // Messages before the first assistant: no call can be answered there.
  while (i < messages.length && (messages[i] as Message).role !== "assistant") {
    const message = messages[i] as Message;
    if (message.role !== "toolResult") out.push(message);
    i++;
  }
  while (i < messages.length) {
    const assistant = messages[i] as AssistantMessage;
    i++;
    // The exchange segment: everything up to the next assistant.
    const results = new Map<string, ToolResultMessage>();
    const rest: Message[] = [];
    const calls = assistant.content.filter((block): block is ToolCall => block.type === "toolCall");
    const callIds = new Set(calls.map((call) => call.id));
    while (i < messages.length && (messages[i] as Message).role !== "assistant") {
      const message = messages[i] as Message;
      i++;
      switch (message.role) {
        case "toolResult":
          if (callIds.has(message.toolCallId) && !results.has(message.toolCallId))
            results.set(message.toolCallId, message);
          break;
        case "user":
        case "system":
          rest.push(message);
          break;
        case "assistant":
          throw new Error("unreachable: the segment ends at the next assistant");
        default: {
          const _exhaustive: never = message;
          throw new Error(`unknown message role ${String((_exhaustive as { role: unknown }).role)}`);
        }
      }
    }
    out.push(assistant);
    for (const call of calls) out.push(results.get(call.id) ?? missingResult(call, assistant));
    out.push(...rest);
  }
  return out;
}

function missingResult(call: ToolCall, assistant: AssistantMessage): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: [{ type: "text", text: MISSING_TOOL_RESULT }],
    isError: true,
    timestamp: assistant.timestamp,
  };
}
