/**
 * The AI SDK's UI message stream, protocol v1 (docs/frontends.md; `ai` 7's `UIMessageChunk`): what a
 * conversation's committed transcript and pending list look like to `useChat`. A `UiTurn` follows one turn of
 * a conversation feed (feed.ts) from a starting entry: it folds the feed's view and per-commit messages
 * and answers the chunks they add: a live generation's text as its preview grows (ui-previews.ts), each
 * committed entry (ui-stream-chunks.ts), the pending items it waits on. Text comes only from what was
 * committed (§9.4: a page never shows a token the session did not commit). The SSE framing is `uiSse`
 * (`data: {json}` per chunk, `data: [DONE]` last).
 */
import { applyEvent, addressKey, type ConversationEvent, type ConversationView } from "../../core/watch.js";
import { bindTo } from "../../core/state.js";
import { pendingHere, type PendingItem } from "../../kinds/pending-types.js";
import type { Entry, Id, JsonValue } from "../../storage/records.js";
import type { FeedOut } from "../watch/feed.js";
import { PreviewStreams } from "./ui-previews.js";
import { entryChunks, type UiChunk, type UiMessageMetadata } from "./ui-stream-chunks.js";

import { callIdOf } from "./ui-messages.js";

export { UI_SSE_DONE, UI_STREAM_HEADERS, uiSse, type UiChunk } from "./ui-stream-chunks.js";

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
  readonly #previews = new PreviewStreams();
  /**
   * A step's `finish-step` is held until the next step starts or the stream ends, so what the step's tool calls lead
   * to (a `tool-approval-request`, a client tool's wait, a tool's output) arrives inside the step, as `ai` streams it.
   */
  #stepOpen = false;
  /** The turn's newest model message sent: `finish`'s `messageMetadata`. */
  #metadata: UiMessageMetadata | undefined;

  /** `known`: tool calls the page already shows (their inputs are not sent again). */
  constructor(after?: Id, known: readonly string[] = []) {
    this.#after = after;
    for (const id of known) this.#seenCalls.add(id);
  }

  /** `finish`'s `messageMetadata`: the newest model message of the turn (when, which model, its usage). */
  get metadata(): UiMessageMetadata | undefined {
    return this.#metadata;
  }

  get view(): ConversationView | undefined {
    return this.#view;
  }

  /** Set where the turn starts (once its input is placed). */
  startAfter(after: Id): void {
    if (this.#after === undefined) this.#after = after;
  }

  /** End the parts still streaming (the stream ends before their entry commits). */
  close(): UiChunk[] {
    return this.#steps(
      [...this.#previews.close(), ...(this.#stepOpen ? [{ type: "finish-step" } as const] : [])],
      true,
    );
  }

  /** `chunks` with each `finish-step` held until the next `start-step` (`end`: nothing follows, close the last). */
  #steps(chunks: readonly UiChunk[], end = false): UiChunk[] {
    const out: UiChunk[] = [];
    for (const chunk of chunks) {
      if (chunk.type === "finish-step") {
        this.#stepOpen = true;
        continue;
      }
      if (chunk.type === "start-step" && this.#stepOpen) {
        out.push({ type: "finish-step" });
        this.#stepOpen = false;
      }
      out.push(chunk);
    }
    if (end && this.#stepOpen) {
      out.push({ type: "finish-step" });
      this.#stepOpen = false;
    }
    return out;
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
      for (const message of entry?.model ?? [])
        if (message.role === "assistant") {
          const { input, output } = message.usage;
          this.#metadata = {
            createdAt: message.timestamp,
            model: message.model,
            usage: { inputTokens: input, outputTokens: output, totalTokens: input + output },
          };
        }
      if (entry !== undefined)
        chunks.push(...(this.#previews.settle(entry, this.#seenCalls) ?? entryChunks(entry, this.#seenCalls)));
    }
    // A live generation's committed text as it grows (none once the turn's result is in: `through`).
    if (through === undefined) chunks.push(...this.#previews.advance(view));
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
    return { chunks: this.#steps(chunks), waiting };
  }
}
