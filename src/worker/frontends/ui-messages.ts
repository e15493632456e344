/**
 * A conversation's transcript as the AI SDK's `UIMessage[]` (`GET .../chat/{conversation}/messages`,
 * docs/frontends.md), so a page starts `useChat` from the server's history. A user entry is a user message;
 * the assistant and tool result entries after it are one assistant message, a `step-start` per model
 * message. A user message keeps the id the client gave it (its entry's key, docs/frontends.md), else `u{entry}`;
 * an assistant message is `a{id}` of the user entry it answers, as the stream's `start` names it, so ids are stable. A tool call
 * that waits on an approval shows `approval-requested` with the pending item's id.
 */
import type { Message } from "@earendil-works/pi-ai";
import type { PendingItem } from "../../kinds/pending-types.js";
import type { Entry, Id, JsonValue, Task } from "../../storage/records.js";
import { toolOutputOf } from "./ui-stream-chunks.js";
import { uiFileParts, type UiFilePart } from "./content-parts.js";

export type UiMessagePart =
  | { readonly type: "step-start" }
  | UiFilePart
  | { readonly type: "text"; readonly text: string; readonly state: "done" }
  | { readonly type: "reasoning"; readonly text: string; readonly state: "done" }
  | {
      readonly type: `tool-${string}`;
      readonly toolCallId: string;
      readonly state: "input-available";
      readonly input: JsonValue;
    }
  | {
      readonly type: `tool-${string}`;
      readonly toolCallId: string;
      readonly state: "approval-requested";
      readonly input: JsonValue;
      readonly approval: { readonly id: string };
    }
  | {
      readonly type: `tool-${string}`;
      readonly toolCallId: string;
      readonly state: "output-available";
      readonly input: JsonValue;
      readonly output: JsonValue;
    }
  | {
      readonly type: `tool-${string}`;
      readonly toolCallId: string;
      readonly state: "output-error";
      readonly input: JsonValue;
      readonly errorText: string;
    };

/** The id of the assistant message that answers user entry `userEntry` (the stream's `start` and the history agree). */
export function assistantMessageId(userEntry: Id): string {
  return `a${userEntry}`;
}

export interface UiMessage {
  readonly id: string;
  readonly role: "user" | "assistant";
  parts: UiMessagePart[];
}

function textOf(content: string | readonly { readonly type: string; readonly text?: string }[]): string {
  if (typeof content === "string") return content;
  return content.map((block) => (block.type === "text" ? (block.text ?? "") : "")).join("");
}

/** The tool call id a tool task holds (`state.call.id`): how a pending item meets its tool part. */
export function callIdOf(task: Task | undefined): string | undefined {
  const call = task?.state["call"];
  if (call === null || call === undefined || typeof call !== "object" || Array.isArray(call)) return undefined;
  const id = (call as Readonly<Record<string, JsonValue | undefined>>)["id"];
  return typeof id === "string" ? id : undefined;
}

/** The transcript's user and assistant messages, with the conversation's pending approvals on their tool calls. */
export function uiMessages(
  entries: readonly Entry[],
  pending: readonly PendingItem[],
  tasks: readonly Task[],
): UiMessage[] {
  const approvals = new Map<string, string>();
  for (const item of pending) {
    const callId = callIdOf(tasks.find((task) => task.id === item.taskId));
    if (item.type === "approval" && callId !== undefined) approvals.set(callId, item.id);
  }
  const out: UiMessage[] = [];
  let assistant: UiMessage | undefined;
  let lastUser: Id | undefined;
  const tools = new Map<string, { index: number; name: string; input: JsonValue }>();
  const add = (entry: Entry, message: Message): void => {
    switch (message.role) {
      case "user": {
        assistant = undefined;
        lastUser = entry.id;
        // Its text, then its images as the `file` parts the page sent (content-parts.ts).
        const text = textOf(message.content);
        const files = uiFileParts(message.content);
        out.push({
          id: entry.key ?? `u${entry.id}`,
          role: "user",
          parts: [
            ...(text === "" && files.length > 0 ? [] : [{ type: "text" as const, text, state: "done" as const }]),
            ...files,
          ],
        });
        return;
      }
      case "assistant": {
        if (assistant === undefined) {
          assistant = { id: assistantMessageId(lastUser ?? entry.id), role: "assistant", parts: [] };
          out.push(assistant);
        }
        assistant.parts.push({ type: "step-start" });
        for (const block of message.content) {
          if (block.type === "text" && block.text !== "")
            assistant.parts.push({ type: "text", text: block.text, state: "done" });
          else if (block.type === "thinking" && block.redacted !== true && block.thinking !== "")
            assistant.parts.push({ type: "reasoning", text: block.thinking, state: "done" });
          else if (block.type === "toolCall") {
            const approval = approvals.get(block.id);
            tools.set(block.id, { index: assistant.parts.length, name: block.name, input: block.arguments });
            assistant.parts.push(
              approval === undefined
                ? { type: `tool-${block.name}`, toolCallId: block.id, state: "input-available", input: block.arguments }
                : {
                    type: `tool-${block.name}`,
                    toolCallId: block.id,
                    state: "approval-requested",
                    input: block.arguments,
                    approval: { id: approval },
                  },
            );
          }
        }
        return;
      }
      case "toolResult": {
        const call = tools.get(message.toolCallId);
        if (assistant === undefined || call === undefined) return;
        const text = textOf(message.content);
        assistant.parts[call.index] = message.isError
          ? {
              type: `tool-${call.name}`,
              toolCallId: message.toolCallId,
              state: "output-error",
              input: call.input,
              errorText: text,
            }
          : {
              type: `tool-${call.name}`,
              toolCallId: message.toolCallId,
              state: "output-available",
              input: call.input,
              output: toolOutputOf(text),
            };
        return;
      }
      case "system":
        return;
      default: {
        const never: never = message;
        return never;
      }
    }
  };
  for (const entry of entries) for (const message of entry.model ?? []) add(entry, message);
  return out;
}
