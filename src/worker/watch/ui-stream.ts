/**
 * The AI SDK's UI message stream, protocol v1 (docs/frontends.md; `ai` 7's `UIMessageChunk`): what a
 * conversation's committed transcript and pending list look like to `useChat`. A `UiTurn` follows one turn of
 * a conversation feed (feed.ts) from a starting entry: it folds the feed's view and per-commit messages
 * and answers the chunks they add. Text comes only from committed entries (§9.4: a page never shows a token
 * the session did not commit). The SSE framing is `uiSse` (`data: {json}` per chunk, `data: [DONE]` last).
 *
 * Also the transcript as `UIMessage[]` (`uiMessages`), with ids derived from entry ids so they are stable.
 */
import type { Message } from "@earendil-works/pi-ai";
import { applyEvent, addressKey, type ConversationEvent, type ConversationView } from "../../core/watch.js";
import { bindTo } from "../../core/state.js";
import { pendingHere, type PendingItem } from "../../kinds/pending-types.js";
import type { Entry, Id, JsonValue } from "../../storage/records.js";
import type { FeedOut } from "./feed.js";
import { callIdOf } from "./ui-messages.js";

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
  | {
      readonly type: "tool-input-available";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly input: JsonValue;
    }
  | { readonly type: "tool-output-available"; readonly toolCallId: string; readonly output: JsonValue }
  | { readonly type: "tool-output-error"; readonly toolCallId: string; readonly errorText: string }
  | { readonly type: "tool-approval-request"; readonly approvalId: string; readonly toolCallId: string }
  | { readonly type: "error"; readonly errorText: string }
  | { readonly type: "abort"; readonly reason?: string }
  | { readonly type: "finish"; readonly finishReason?: "stop" | "error" | "tool-calls" | "other" };

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
    out.push(...messageChunks(`e${entry.id}-${m}`, message, seen));
  return out;
}

function messageChunks(prefix: string, message: Message, seen: Set<string>): UiChunk[] {
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
        message.isError
          ? { type: "tool-output-error", toolCallId: message.toolCallId, errorText: text }
          : { type: "tool-output-available", toolCallId: message.toolCallId, output: text },
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

/** The pending items of a conversation view (its `pi.pending` value). */
export function pendingOf(view: ConversationView): readonly PendingItem[] {
  const value = view.values[addressKey(bindTo(pendingHere, view.conversation.id))];
  return Array.isArray(value) ? (value as unknown as PendingItem[]) : [];
}

/** The tool call id a pending item's tool task holds, when the view has the task. */
function toolCallIdOf(view: ConversationView, item: PendingItem): string | undefined {
  return callIdOf(view.tasks.find((t) => t.id === item.taskId));
}

/** Where a turn's stream stands after a fold. */
export type TurnStep = { readonly chunks: readonly UiChunk[]; readonly waiting: boolean };

/**
 * One turn of a conversation as UI chunks. `after`: the entry the turn starts after (its input's entry, or
 * the newest entry before a continuation); entries above it are the turn's. Feed it every out of the
 * conversation feed (the view first); `step` answers the chunks the newest state adds, and `waiting` when a
 * pending item of this turn waits for the page (the stream ends there; the turn waits durably).
 */
export class UiTurn {
  #view: ConversationView | undefined;
  #after: Id | undefined;
  /** The turn's entries not yet sent, by id. */
  readonly #entries = new Map<Id, Entry>();
  readonly #sent = new Set<Id>();
  readonly #seenCalls = new Set<string>();
  readonly #sentPending = new Set<string>();

  /** `known`: tool calls the page already shows (their inputs are not sent again). */
  constructor(after?: Id, known: readonly string[] = []) {
    this.#after = after;
    for (const id of known) this.#seenCalls.add(id);
  }

  get view(): ConversationView | undefined {
    return this.#view;
  }

  /** Set where the turn starts (once its input is placed). */
  startAfter(after: Id): void {
    if (this.#after === undefined) this.#after = after;
  }

  fold(out: FeedOut<ConversationView, ConversationEvent>): void {
    switch (out.type) {
      case "view":
        this.#view = out.view;
        for (const entry of out.view.entries) this.#entries.set(entry.id, entry);
        return;
      case "commit":
        if (this.#view === undefined) return;
        for (const event of out.events) {
          this.#view = applyEvent(this.#view, event);
          if (event.type === "entry") this.#entries.set(event.entry.id, event.entry);
        }
        return;
      case "nudge":
        return;
      default: {
        const never: never = out;
        return never;
      }
    }
  }

  /**
   * The chunks of the turn's committed entries up to `through` (all when absent) and its new pending items
   * (`skip`: items just answered, which stay listed until their task consumes the answer).
   */
  step(through?: Id, skip: ReadonlySet<string> = new Set()): TurnStep {
    const after = this.#after;
    const view = this.#view;
    if (after === undefined || view === undefined) return { chunks: [], waiting: false };
    const chunks: UiChunk[] = [];
    const ids = [...this.#entries.keys()].filter((id) => id > after && !this.#sent.has(id)).sort((a, b) => a - b);
    for (const id of ids) {
      if (through !== undefined && id > through) break;
      const entry = this.#entries.get(id);
      this.#sent.add(id);
      this.#entries.delete(id);
      if (entry !== undefined) chunks.push(...entryChunks(entry, this.#seenCalls));
    }
    let waiting = false;
    for (const item of pendingOf(view)) {
      if (this.#sentPending.has(item.id) || skip.has(item.id)) continue;
      const toolCallId = toolCallIdOf(view, item) ?? item.id;
      if (!this.#seenCalls.has(toolCallId)) {
        this.#seenCalls.add(toolCallId);
        chunks.push({ type: "tool-input-available", toolCallId, toolName: item.name, input: item.arguments });
      }
      this.#sentPending.add(item.id);
      if (item.type === "approval") chunks.push({ type: "tool-approval-request", approvalId: item.id, toolCallId });
      waiting = true;
    }
    return { chunks, waiting };
  }
}
