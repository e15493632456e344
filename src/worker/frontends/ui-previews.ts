/**
 * Streaming a generation's text as it is committed (§9.4), for the UI message stream (ui-stream.ts): a live
 * generation task's preview (its partial answer, folded only from frames a scratch commit wrote) becomes
 * `text-*` / `reasoning-*` chunks as it grows, and its assistant entry, when it commits, finishes those
 * parts instead of sending them again. A page never sees a token the session did not commit.
 *
 * A tool call the preview shows is `tool-input-start` at once, in its step, while the model streams its arguments;
 * its `tool-input-delta` waits for the entry: a provider may stream arguments it settles spelled otherwise
 * (`{"region": "eu` settling as `{"region":"eu-west"}`), and the deltas must join into exactly the call's final
 * arguments JSON (as AG-UI's `TOOL_CALL_ARGS`, ag-ui-events.ts). A call started and never settled (the stream ends
 * first: an abort, a fault) ends as `tool-input-error`.
 */
import type { ConversationView } from "../../core/watch.js";
import type { Entry, Id, JsonValue } from "../../storage/records.js";
import { messageChunks, type UiChunk } from "./ui-stream-chunks.js";

/** The kind of generation tasks (kinds/generation.ts). */
const GENERATION_KIND = "generation";

type BlockKind = "text" | "reasoning";

interface StreamedBlock {
  readonly id: string;
  readonly kind: BlockKind;
  sent: number;
}

interface Streamed {
  readonly blocks: Map<number, StreamedBlock>;
  /** Tool calls started from the preview, by call id: their name. */
  readonly calls: Map<string, { readonly id: string; readonly name: string }>;
}

/** A preview block that is a tool call: its id and name (its arguments are not sent until they settle). */
function callOf(block: JsonValue | undefined): { id: string; name: string } | undefined {
  if (block === null || block === undefined || typeof block !== "object" || Array.isArray(block)) return undefined;
  const record = block as Readonly<Record<string, JsonValue | undefined>>;
  if (record["type"] !== "toolCall" || typeof record["id"] !== "string" || typeof record["name"] !== "string")
    return undefined;
  return record["id"] === "" || record["name"] === "" ? undefined : { id: record["id"], name: record["name"] };
}

/** The chunk that ends a call started from the preview whose arguments never settled. */
function unsettled(call: { readonly id: string; readonly name: string }): UiChunk {
  return {
    type: "tool-input-error",
    toolCallId: call.id,
    toolName: call.name,
    input: null,
    errorText: "the generation ended before the call's arguments were complete",
  };
}

/** A preview block's kind and text (undefined: not one this stream shows while it grows). */
function blockOf(block: JsonValue | undefined): { kind: BlockKind; text: string } | undefined {
  if (block === null || block === undefined || typeof block !== "object" || Array.isArray(block)) return undefined;
  const record = block as Readonly<Record<string, JsonValue | undefined>>;
  if (record["type"] === "text" && typeof record["text"] === "string") return { kind: "text", text: record["text"] };
  if (record["type"] === "thinking" && typeof record["thinking"] === "string")
    return { kind: "reasoning", text: record["thinking"] };
  return undefined;
}

function contentOf(preview: JsonValue | undefined): readonly JsonValue[] {
  if (preview === null || preview === undefined || typeof preview !== "object" || Array.isArray(preview)) return [];
  const content = (preview as Readonly<Record<string, JsonValue | undefined>>)["content"];
  return Array.isArray(content) ? content : [];
}

function start(kind: BlockKind, id: string): UiChunk {
  return kind === "text" ? { type: "text-start", id } : { type: "reasoning-start", id };
}
function delta(kind: BlockKind, id: string, text: string): UiChunk {
  return kind === "text" ? { type: "text-delta", id, delta: text } : { type: "reasoning-delta", id, delta: text };
}
function end(kind: BlockKind, id: string): UiChunk {
  return kind === "text" ? { type: "text-end", id } : { type: "reasoning-end", id };
}

export class PreviewStreams {
  readonly #streams = new Map<Id, Streamed>();

  /** The chunks the live generations' previews add since the last call. */
  advance(view: ConversationView): UiChunk[] {
    const out: UiChunk[] = [];
    for (const task of view.tasks) {
      if (task.kind !== GENERATION_KIND) continue;
      const content = contentOf(view.previews[String(task.id)]);
      for (const [index, raw] of content.entries()) {
        const call = callOf(raw);
        const block = blockOf(raw);
        if (call === undefined && (block === undefined || block.text === "")) continue;
        let stream = this.#streams.get(task.id);
        if (stream === undefined) {
          stream = { blocks: new Map(), calls: new Map() };
          this.#streams.set(task.id, stream);
          out.push({ type: "start-step" });
        }
        if (call !== undefined) {
          if (!stream.calls.has(call.id)) {
            stream.calls.set(call.id, call);
            out.push({ type: "tool-input-start", toolCallId: call.id, toolName: call.name });
          }
          continue;
        }
        if (block === undefined) continue;
        let streamed = stream.blocks.get(index);
        if (streamed === undefined) {
          streamed = { id: `p${task.id}-${index}`, kind: block.kind, sent: 0 };
          stream.blocks.set(index, streamed);
          out.push(start(block.kind, streamed.id));
        }
        if (streamed.kind === block.kind && block.text.length > streamed.sent) {
          out.push(delta(block.kind, streamed.id, block.text.slice(streamed.sent)));
          streamed.sent = block.text.length;
        }
      }
    }
    return out;
  }

  /**
   * The chunks that finish a streamed generation with its committed entry (undefined when its task streamed
   * nothing: the entry is sent whole). A block's committed text past what was sent is its last delta.
   */
  settle(entry: Entry, seen: Set<string>): UiChunk[] | undefined {
    const stream = entry.byTaskId === undefined ? undefined : this.#streams.get(entry.byTaskId);
    if (stream === undefined || entry.byTaskId === undefined) return undefined;
    this.#streams.delete(entry.byTaskId);
    const out: UiChunk[] = [];
    const [first, ...rest] = entry.model ?? [];
    if (first?.role === "assistant") {
      for (const [index, block] of first.content.entries()) {
        const streamed = stream.blocks.get(index);
        const shown = block.type === "text" ? block.text : block.type === "thinking" ? block.thinking : undefined;
        const kind: BlockKind | undefined =
          block.type === "text"
            ? "text"
            : block.type === "thinking" && block.redacted !== true
              ? "reasoning"
              : undefined;
        if (streamed !== undefined && kind === streamed.kind && shown !== undefined) {
          if (shown.length > streamed.sent) out.push(delta(kind, streamed.id, shown.slice(streamed.sent)));
          out.push(end(kind, streamed.id));
          stream.blocks.delete(index);
        } else if (block.type === "toolCall" && stream.calls.has(block.id)) {
          // Started from the preview: its settled arguments, whole, then the input.
          stream.calls.delete(block.id);
          seen.add(block.id);
          out.push(
            { type: "tool-input-delta", toolCallId: block.id, inputTextDelta: JSON.stringify(block.arguments) },
            { type: "tool-input-available", toolCallId: block.id, toolName: block.name, input: block.arguments },
          );
        } else {
          // Not streamed (a tool call, or text the preview did not show): the whole block, in this step.
          const chunks = messageChunks(`e${entry.id}-0`, { ...first, content: [block] }, seen);
          out.push(...chunks.filter((c) => c.type !== "start-step" && c.type !== "finish-step"));
        }
      }
    }
    for (const streamed of stream.blocks.values()) out.push(end(streamed.kind, streamed.id));
    for (const call of stream.calls.values()) out.push(unsettled(call));
    out.push({ type: "finish-step" });
    for (const [m, message] of rest.entries()) out.push(...messageChunks(`e${entry.id}-${m + 1}`, message, seen));
    return out;
  }

  /** End what is still open (the stream ends while a generation streams: an abort, a fault). */
  close(): UiChunk[] {
    const out: UiChunk[] = [];
    for (const stream of this.#streams.values()) {
      for (const streamed of stream.blocks.values()) out.push(end(streamed.kind, streamed.id));
      for (const call of stream.calls.values()) out.push(unsettled(call));
      out.push({ type: "finish-step" });
    }
    this.#streams.clear();
    return out;
  }
}
