/**
 * What an AG-UI run shows of a conversation's watch (docs/api.md "AG-UI"): the events of AG-UI 1.0 this
 * server sends, and `AgUiTurn`, which turns the folded watch view (src/core/watch.ts) into them. It reads
 * only what the watch carries, so every token it sends was committed (§9.4: a generation's preview is folded
 * from written frames only): the turn's entries after the input's user entry, and the preview of the live
 * generation. Message ids come from the generation task (`m{task}`, reasoning `r{task}-{block}`), tool call ids
 * from the model's call ids, so a run sent again skips what the page already holds (its `messages`) and a
 * preview and the entry that settles it are one message.
 */
import type { AgUiMessageOut } from "./ag-ui-messages.js";
import type { ConversationView } from "../../core/watch-types.js";
import type { Entry, Id } from "../../storage/records.js";

/** The AG-UI 1.0 events this server sends (no state events). */
export type AgUiEvent =
  | {
      readonly type: "RUN_STARTED";
      readonly threadId: string;
      readonly runId: string;
      readonly protocolVersion?: string;
      readonly parentRunId?: string;
    }
  | { readonly type: "MESSAGES_SNAPSHOT"; readonly messages: readonly AgUiMessageOut[] }
  | {
      readonly type: "RUN_FINISHED";
      readonly threadId: string;
      readonly runId: string;
      readonly outcome: AgUiOutcome;
    }
  | { readonly type: "RUN_ERROR"; readonly message: string; readonly code?: string }
  | { readonly type: "TEXT_MESSAGE_START"; readonly messageId: string; readonly role: "assistant" }
  | { readonly type: "TEXT_MESSAGE_CONTENT"; readonly messageId: string; readonly delta: string }
  | { readonly type: "TEXT_MESSAGE_END"; readonly messageId: string }
  | {
      readonly type: "TOOL_CALL_START";
      readonly toolCallId: string;
      readonly toolCallName: string;
      readonly parentMessageId: string;
    }
  | { readonly type: "TOOL_CALL_ARGS"; readonly toolCallId: string; readonly delta: string }
  | { readonly type: "TOOL_CALL_END"; readonly toolCallId: string }
  | {
      readonly type: "TOOL_CALL_RESULT";
      readonly messageId: string;
      readonly toolCallId: string;
      readonly content: string;
      readonly role: "tool";
    }
  | { readonly type: "REASONING_START"; readonly messageId: string }
  | { readonly type: "REASONING_MESSAGE_START"; readonly messageId: string; readonly role: "reasoning" }
  | { readonly type: "REASONING_MESSAGE_CONTENT"; readonly messageId: string; readonly delta: string }
  | { readonly type: "REASONING_MESSAGE_END"; readonly messageId: string }
  | { readonly type: "REASONING_END"; readonly messageId: string };

/** One interrupt of an `interrupt` outcome: a pending approval. */
export interface AgUiInterrupt {
  readonly id: string;
  readonly reason: string;
  readonly message: string;
  readonly toolCallId?: string;
  readonly responseSchema: Readonly<Record<string, unknown>>;
  readonly expiresAt?: string;
}

export type AgUiOutcome =
  | { readonly type: "success"; readonly pendingToolCallIds?: readonly string[] }
  | { readonly type: "interrupt"; readonly interrupts: readonly AgUiInterrupt[] }
  | { readonly type: "cancelled" };

/** What the page already holds (from the run's `messages`): those are never sent again. */
export interface Held {
  readonly messages: ReadonlySet<string>;
  readonly toolCalls: ReadonlySet<string>;
  readonly toolResults: ReadonlySet<string>;
}

/** A block of an assistant message, as the generation's preview and its entry hold it. */
type Block =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "thinking"; readonly thinking: string }
  | { readonly type: "toolCall"; readonly id: string; readonly name: string; readonly arguments: unknown };

/** One block's progress: what was sent of it, whether it is open. */
interface Sent {
  readonly kind: "text" | "thinking" | "toolCall" | "held";
  readonly id: string;
  text: string;
  open: boolean;
}

function blocksOf(value: unknown): readonly Block[] {
  if (value === null || typeof value !== "object") return [];
  const content = (value as { content?: unknown }).content;
  if (!Array.isArray(content)) return [];
  const out: Block[] = [];
  for (const raw of content as unknown[]) {
    if (raw === null || typeof raw !== "object") continue;
    const block = raw as { type?: unknown; text?: unknown; thinking?: unknown; id?: unknown; name?: unknown };
    if (block.type === "text" && typeof block.text === "string") out.push({ type: "text", text: block.text });
    else if (block.type === "thinking" && typeof block.thinking === "string")
      out.push({ type: "thinking", thinking: block.thinking });
    else if (block.type === "toolCall" && typeof block.id === "string" && typeof block.name === "string")
      out.push({
        type: "toolCall",
        id: block.id,
        name: block.name,
        arguments: (raw as { arguments?: unknown }).arguments,
      });
  }
  return out;
}

/** The text of a tool result's content (its text blocks, joined). */
function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as unknown[])
    .map((block) =>
      block !== null && typeof block === "object" && (block as { type?: unknown }).type === "text"
        ? String((block as { text?: unknown }).text ?? "")
        : "",
    )
    .join("");
}

/** A block's text so far: a text's or thinking's text, a tool call's arguments (streamed JSON, or the settled object). */
function textOf(block: Block): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "thinking":
      return block.thinking;
    case "toolCall":
      return typeof block.arguments === "string" ? block.arguments : JSON.stringify(block.arguments ?? {});
    default: {
      const never: never = block;
      return never;
    }
  }
}

/** The AG-UI events of one input's turn, from successive folded views of its conversation's watch. */
export class AgUiTurn {
  readonly #held: Held;
  readonly #sent = new Map<string, Sent>();
  readonly #results = new Set<string>();
  readonly #settled = new Set<Id>();
  /** The input's user entry (undefined while the input is queued). */
  #from: Id | undefined;
  /** The turn's last entry, once its result is done. */
  #until: Id | undefined;

  constructor(held: Held) {
    this.#held = held;
  }

  /** The input was placed at `entry`; with `answer`, its turn is done and ends at that entry. */
  placed(entry: Id, answer?: Id): void {
    this.#from = entry;
    if (answer !== undefined) this.#until = answer;
  }

  /** The events `view` adds to what was sent. */
  update(view: ConversationView): AgUiEvent[] {
    const from = this.#from;
    if (from === undefined) return [];
    const out: AgUiEvent[] = [];
    let later = false;
    for (const entry of view.entries) {
      if (entry.id <= from || this.#settled.has(entry.id)) continue;
      if (this.#until !== undefined && entry.id > this.#until) break;
      // Another input's turn starts here.
      if (entry.kind === "user" && this.#until === undefined) {
        later = true;
        break;
      }
      this.#entry(entry, out);
      this.#settled.add(entry.id);
    }
    if (later || this.#until !== undefined) return out;
    for (const task of view.tasks) {
      if (task.kind !== "generation") continue;
      const preview = view.previews[String(task.id)];
      const blocks = blocksOf(preview);
      blocks.forEach((block, index) =>
        this.#block(String(task.id), index, block, index < blocks.length - 1, false, out),
      );
    }
    return out;
  }

  /** Close every block still open (the run ends). */
  close(): AgUiEvent[] {
    const out: AgUiEvent[] = [];
    for (const sent of this.#sent.values()) this.#end(sent, out);
    return out;
  }

  #entry(entry: Entry, out: AgUiEvent[]): void {
    for (const message of entry.model ?? []) {
      if (message.role === "assistant") {
        const task = String(entry.byTaskId ?? `e${entry.id}`);
        const blocks = blocksOf(message);
        blocks.forEach((block, index) => this.#block(task, index, block, true, true, out));
      } else if (message.role === "toolResult") {
        const callId = message.toolCallId;
        if (this.#held.toolResults.has(callId) || this.#results.has(callId)) continue;
        this.#results.add(callId);
        for (const sent of this.#sent.values())
          if (sent.kind === "toolCall" && sent.id === callId) this.#end(sent, out);
        out.push({
          type: "TOOL_CALL_RESULT",
          messageId: `result-${callId}`,
          toolCallId: callId,
          content: resultText(message.content),
          role: "tool",
        });
      }
    }
  }

  /**
   * Send what `block` adds; `complete`: nothing more comes (a later block started, or its entry settled it);
   * `settled`: the block comes from its entry. A tool call's arguments are held until then: a provider may stream
   * JSON it later spells otherwise (`{"region": "eu` settling as `{"region":"eu-west"}`), and the `TOOL_CALL_ARGS`
   * deltas must join into exactly the call's final arguments.
   */
  #block(task: string, index: number, block: Block, complete: boolean, settled: boolean, out: AgUiEvent[]): void {
    const key = `${task}:${index}`;
    let sent = this.#sent.get(key);
    if (sent === undefined) {
      sent = this.#start(task, index, block, out);
      this.#sent.set(key, sent);
    }
    if (sent.kind === "held") return;
    if (sent.kind === "toolCall" && !settled) return;
    const text = textOf(block);
    if (text.length > sent.text.length && text.startsWith(sent.text) && sent.open) {
      const delta = text.slice(sent.text.length);
      sent.text = text;
      out.push(this.#delta(sent, delta));
    }
    if (complete) this.#end(sent, out);
  }

  #start(task: string, index: number, block: Block, out: AgUiEvent[]): Sent {
    switch (block.type) {
      case "text": {
        const messageId = index === 0 ? `m${task}` : `m${task}-${index}`;
        if (this.#held.messages.has(messageId)) return { kind: "held", id: messageId, text: "", open: false };
        out.push({ type: "TEXT_MESSAGE_START", messageId, role: "assistant" });
        return { kind: "text", id: messageId, text: "", open: true };
      }
      case "thinking": {
        const messageId = `r${task}-${index}`;
        if (this.#held.messages.has(messageId)) return { kind: "held", id: messageId, text: "", open: false };
        out.push({ type: "REASONING_START", messageId });
        out.push({ type: "REASONING_MESSAGE_START", messageId, role: "reasoning" });
        return { kind: "thinking", id: messageId, text: "", open: true };
      }
      case "toolCall": {
        if (this.#held.toolCalls.has(block.id)) return { kind: "held", id: block.id, text: "", open: false };
        out.push({
          type: "TOOL_CALL_START",
          toolCallId: block.id,
          toolCallName: block.name,
          parentMessageId: `m${task}`,
        });
        return { kind: "toolCall", id: block.id, text: "", open: true };
      }
      default: {
        const never: never = block;
        return never;
      }
    }
  }

  #delta(sent: Sent, delta: string): AgUiEvent {
    switch (sent.kind) {
      case "text":
        return { type: "TEXT_MESSAGE_CONTENT", messageId: sent.id, delta };
      case "thinking":
        return { type: "REASONING_MESSAGE_CONTENT", messageId: sent.id, delta };
      case "toolCall":
      case "held":
        return { type: "TOOL_CALL_ARGS", toolCallId: sent.id, delta };
      default: {
        const never: never = sent.kind;
        return never;
      }
    }
  }

  #end(sent: Sent, out: AgUiEvent[]): void {
    if (!sent.open) return;
    sent.open = false;
    switch (sent.kind) {
      case "text":
        out.push({ type: "TEXT_MESSAGE_END", messageId: sent.id });
        return;
      case "thinking":
        out.push({ type: "REASONING_MESSAGE_END", messageId: sent.id });
        out.push({ type: "REASONING_END", messageId: sent.id });
        return;
      case "toolCall":
        out.push({ type: "TOOL_CALL_END", toolCallId: sent.id });
        return;
      case "held":
        return;
      default: {
        const never: never = sent.kind;
        return never;
      }
    }
  }
}
