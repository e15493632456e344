/**
 * A branch's transcript as AG-UI messages (`MESSAGES_SNAPSHOT`, docs/frontends.md "AG-UI"): what a run without a new
 * user message answers, so a page loading its thread shows what the server holds. A user entry is a user message
 * under the id the page gave it (its entry's key) or `u{entry}`; an assistant entry is an assistant message per model
 * message, `m{task}` as the run's `TEXT_MESSAGE_START` names it, with its tool calls; a tool result is a tool message.
 */
import type { Entry } from "../../storage/records.js";
import { agUiUserContent, type AgUiUserContent } from "./content-parts.js";

export type AgUiMessageOut =
  | { readonly id: string; readonly role: "user"; readonly content: AgUiUserContent }
  | {
      readonly id: string;
      readonly role: "assistant";
      readonly content?: string;
      readonly toolCalls?: readonly {
        readonly id: string;
        readonly type: "function";
        readonly function: { readonly name: string; readonly arguments: string };
      }[];
    }
  | {
      readonly id: string;
      readonly role: "tool";
      readonly toolCallId: string;
      readonly content: string;
      readonly error?: string;
    };

function textOf(content: string | readonly { readonly type: string; readonly text?: string }[]): string {
  if (typeof content === "string") return content;
  return content.map((block) => (block.type === "text" ? (block.text ?? "") : "")).join("");
}

export function agUiMessages(entries: readonly Entry[]): AgUiMessageOut[] {
  const out: AgUiMessageOut[] = [];
  for (const entry of entries) {
    for (const [index, message] of (entry.model ?? []).entries()) {
      switch (message.role) {
        case "user":
          // The text, or text and image parts when it carried images (content-parts.ts).
          out.push({ id: entry.key ?? `u${entry.id}`, role: "user", content: agUiUserContent(message.content) });
          break;
        case "assistant": {
          const task = String(entry.byTaskId ?? `e${entry.id}`);
          const text = textOf(message.content);
          const calls = message.content.flatMap((block) =>
            block.type === "toolCall"
              ? [
                  {
                    id: block.id,
                    type: "function" as const,
                    function: { name: block.name, arguments: JSON.stringify(block.arguments) },
                  },
                ]
              : [],
          );
          out.push({
            id: index === 0 ? `m${task}` : `m${task}-${index}`,
            role: "assistant",
            ...(text === "" ? {} : { content: text }),
            ...(calls.length === 0 ? {} : { toolCalls: calls }),
          });
          break;
        }
        case "toolResult": {
          const text = textOf(message.content);
          out.push({
            id: `result-${message.toolCallId}`,
            role: "tool",
            toolCallId: message.toolCallId,
            content: text,
            ...(message.isError ? { error: text } : {}),
          });
          break;
        }
        case "system":
          break;
        default: {
          const never: never = message;
          return never;
        }
      }
    }
  }
  return out;
}
