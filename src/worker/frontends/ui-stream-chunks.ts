/**
 * The chunks of the AI SDK's UI message stream, protocol v1 (`ai` 7's `UIMessageChunk`, field for field, the
 * subset this service sends), their SSE framing, and the chunks of one committed transcript entry.
 */
import type { Message } from "@earendil-works/pi-ai";
import type { Entry, JsonValue } from "../../storage/records.js";

/** The chunks this service sends (a subset of `ai`'s `UIMessageChunk`, field for field). */
export type UiChunk =
  | { readonly type: "start"; readonly messageId?: string }
  | { readonly type: "start-step" }
  | { readonly type: "finish-step" }
  | { readonly type: "text-start"; readonly id: string }
  | { readonly type: "text-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "text-end"; readonly id: string }
  | { readonly type: "reasoning-start"; readonly id: string }
  | { readonly type: "reasoning-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "reasoning-end"; readonly id: string }
  | { readonly type: "tool-input-start"; readonly toolCallId: string; readonly toolName: string }
  | { readonly type: "tool-input-delta"; readonly toolCallId: string; readonly inputTextDelta: string }
  | {
      readonly type: "tool-input-available";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly input: JsonValue;
    }
  | {
      readonly type: "tool-input-error";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly input: JsonValue;
      readonly errorText: string;
    }
  | { readonly type: "tool-output-available"; readonly toolCallId: string; readonly output: JsonValue }
  | { readonly type: "tool-output-error"; readonly toolCallId: string; readonly errorText: string }
  | { readonly type: "tool-output-denied"; readonly toolCallId: string }
  | { readonly type: "tool-approval-request"; readonly approvalId: string; readonly toolCallId: string }
  | { readonly type: "error"; readonly errorText: string }
  | { readonly type: "abort"; readonly reason?: string }
  | {
      readonly type: "finish";
      readonly finishReason?: UiFinishReason;
      readonly messageMetadata?: UiMessageMetadata;
    };

/** Why a stream's message finished (`ai`'s `FinishReason`, the ones this service tells). */
export type UiFinishReason = "stop" | "error" | "tool-calls" | "other";

/** The `messageMetadata` of `finish`: when the answer's last model message was made, by which model, its usage. */
export interface UiMessageMetadata {
  readonly createdAt?: number;
  readonly model?: string;
  readonly usage?: { readonly inputTokens: number; readonly outputTokens: number; readonly totalTokens: number };
}

/**
 * A tool result's output as the page gets it: the JSON value its text spells when it is a JSON object or array (a
 * client tool's object output comes back as the object), else the text.
 */
export function toolOutputOf(text: string): JsonValue {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return text;
  try {
    return JSON.parse(trimmed) as JsonValue;
  } catch {
    return text;
  }
}

/** Whether a tool result entry records a denied approval (its data's `details.error`, kinds/tool.ts `errorOutput`). */
export function isDenial(entry: Entry): boolean {
  const data = entry.data;
  if (data === null || typeof data !== "object" || Array.isArray(data)) return false;
  const details = (data as Readonly<Record<string, JsonValue | undefined>>)["details"];
  if (details === null || typeof details !== "object" || Array.isArray(details)) return false;
  return (details as Readonly<Record<string, JsonValue | undefined>>)["error"] === "denied";
}

export const UI_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
};

/** One chunk as an SSE event. */
export function uiSse(chunk: UiChunk): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}
export const UI_SSE_DONE = "data: [DONE]\n\n";

/** The text of a message's content (a string, or its text blocks joined). */
function contentText(content: string | readonly { readonly type: string; readonly text?: string }[]): string {
  if (typeof content === "string") return content;
  return content.map((block) => (block.type === "text" ? (block.text ?? "") : "")).join("");
}

/** The chunks of one committed entry: a step per assistant message, a tool output per tool result. */
export function entryChunks(entry: Entry, seen: Set<string>): UiChunk[] {
  const out: UiChunk[] = [];
  for (const [m, message] of (entry.model ?? []).entries())
    out.push(...messageChunks(`e${entry.id}-${m}`, message, seen, isDenial(entry)));
  return out;
}

/** `denied`: a tool result of a denied approval (`tool-output-denied`). */
export function messageChunks(prefix: string, message: Message, seen: Set<string>, denied = false): UiChunk[] {
  switch (message.role) {
    case "assistant": {
      const out: UiChunk[] = [{ type: "start-step" }];
      for (const [b, block] of message.content.entries()) {
        const id = `${prefix}-${b}`;
        switch (block.type) {
          case "text":
            if (block.text !== "")
              out.push(
                { type: "text-start", id },
                { type: "text-delta", id, delta: block.text },
                { type: "text-end", id },
              );
            break;
          case "thinking":
            if (block.redacted !== true && block.thinking !== "")
              out.push(
                { type: "reasoning-start", id },
                { type: "reasoning-delta", id, delta: block.thinking },
                { type: "reasoning-end", id },
              );
            break;
          case "toolCall":
            seen.add(block.id);
            out.push(
              { type: "tool-input-start", toolCallId: block.id, toolName: block.name },
              { type: "tool-input-delta", toolCallId: block.id, inputTextDelta: JSON.stringify(block.arguments) },
            );
            out.push({
              type: "tool-input-available",
              toolCallId: block.id,
              toolName: block.name,
              input: block.arguments,
            });
            break;
          default:
            break;
        }
      }
      out.push({ type: "finish-step" });
      return out;
    }
    case "toolResult": {
      const out: UiChunk[] = [];
      if (!seen.has(message.toolCallId)) {
        seen.add(message.toolCallId);
        out.push({
          type: "tool-input-available",
          toolCallId: message.toolCallId,
          toolName: message.toolName,
          input: {},
        });
      }
      const text = contentText(message.content);
      out.push(
        denied
          ? { type: "tool-output-denied", toolCallId: message.toolCallId }
          : message.isError
            ? { type: "tool-output-error", toolCallId: message.toolCallId, errorText: text }
            : { type: "tool-output-available", toolCallId: message.toolCallId, output: toolOutputOf(text) },
      );
      return out;
    }
    case "user":
    case "system":
      return [];
    default: {
      const never: never = message;
      return never;
    }
  }
}
