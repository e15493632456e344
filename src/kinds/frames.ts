/**
 * Compact stream frames (§4.6, §8.2): what a streaming generation persists to scratch so a restart can
 * recover the partial answer. Frames carry content deltas and the start/end metadata needed to rebuild
 * the message, never a growing partial snapshot; terminal outcome and usage are recorded separately.
 * pi-ai 1.6 has no frame encoder, so this is the project's own format:
 *
 *   ["t", index, text]                 text delta of content block `index` (a text block starts on its first delta)
 *   ["h", index, text]                 thinking delta
 *   ["c", index, id, name]             a tool call block starts
 *   ["a", index, json]                 tool-call argument JSON delta
 *   ["e", index, toolCall]             a tool call block ended with its parsed call
 *
 * A flush appends one scratch list element `{ f: Frame[] }`, with consecutive deltas of one block merged,
 * so a burst of tokens is one small scratch row.
 */
import type {
  AssistantMessage,
  AssistantMessageEvent,
  TextContent,
  ThinkingContent,
  ToolCall,
} from "@earendil-works/pi-ai";
import { scratchList } from "../core/state.js";
import type { JsonValue } from "../storage/records.js";

export type Frame =
  | readonly ["t", number, string]
  | readonly ["h", number, string]
  | readonly ["c", number, string, string]
  | readonly ["a", number, string]
  | readonly ["e", number, ToolCall & { [key: string]: JsonValue }];

export interface FrameBatch {
  readonly f: readonly Frame[];
  readonly [key: string]: JsonValue;
}

/** The generation's scratch list of frame batches. */
export const framesList = scratchList<FrameBatch>("frames");

/** Turn one provider event into frames (none for start/done/error and *_start of text/thinking). */
export function encodeEvent(event: AssistantMessageEvent): Frame[] {
  switch (event.type) {
    case "text_delta":
      return [["t", event.contentIndex, event.delta]];
    case "thinking_delta":
      return [["h", event.contentIndex, event.delta]];
    case "toolcall_start": {
      const block = event.partial.content[event.contentIndex];
      const call = block?.type === "toolCall" ? block : undefined;
      return [["c", event.contentIndex, call?.id ?? "", call?.name ?? ""]];
    }
    case "toolcall_delta":
      return [["a", event.contentIndex, event.delta]];
    case "toolcall_end":
      return [["e", event.contentIndex, event.toolCall as ToolCall & { [key: string]: JsonValue }]];
    case "start":
    case "text_start":
    case "text_end":
    case "thinking_start":
    case "thinking_end":
    case "done":
    case "error":
      return [];
    default: {
      const never: never = event;
      return never;
    }
  }
}

/** Append frames, merging a delta into the previous frame of the same type and block. */
export function pushFrame(buffer: Frame[], frame: Frame): void {
  const last = buffer[buffer.length - 1];
  if (
    last !== undefined &&
    (frame[0] === "t" || frame[0] === "h" || frame[0] === "a") &&
    last[0] === frame[0] &&
    last[1] === frame[1]
  ) {
    buffer[buffer.length - 1] = [frame[0], frame[1], (last[2] as string) + frame[2]] as Frame;
    return;
  }
  buffer.push(frame);
}

/** Bytes a frame batch adds to scratch (approximate: UTF-16 length of its JSON). */
export function frameBytes(frames: readonly Frame[]): number {
  return JSON.stringify(frames).length;
}

/**
 * The longest prefix of `frames` whose batch fits in `budget` bytes (as `frameBytes` counts them): frames
 * that fit whole, then the next one cut to fill the budget when it is a delta (text, thinking or
 * argument JSON; a cut never splits a surrogate pair). A start or end frame is never cut.
 */
export function fitFrames(frames: readonly Frame[], budget: number): Frame[] {
  const out: Frame[] = [];
  // A batch's JSON is "[" + frames joined by "," + "]".
  let used = 2;
  for (const frame of frames) {
    const separator = out.length === 0 ? 0 : 1;
    const size = JSON.stringify(frame).length;
    if (used + separator + size <= budget) {
      out.push(frame);
      used += separator + size;
      continue;
    }
    if (frame[0] === "t" || frame[0] === "h" || frame[0] === "a") {
      const room = budget - used - separator;
      const text = frame[2];
      let low = 0;
      let high = text.length;
      while (low < high) {
        const mid = Math.ceil((low + high) / 2);
        if (JSON.stringify([frame[0], frame[1], text.slice(0, mid)]).length <= room) low = mid;
        else high = mid - 1;
      }
      if (low > 0 && isHighSurrogate(text.charCodeAt(low - 1))) low -= 1;
      if (low > 0) out.push([frame[0], frame[1], text.slice(0, low)]);
    }
    return out;
  }
  return out;
}

/** A delta frame: text, thinking or argument JSON, the frames `fitFrames` may cut. */
type DeltaFrame = Extract<Frame, { readonly 0: "t" | "h" | "a" }>;

function isDelta(frame: Frame): frame is DeltaFrame {
  return frame[0] === "t" || frame[0] === "h" || frame[0] === "a";
}

/**
 * What `fitFrames(frames, budget)` left out, given what it kept: the rest of a delta it cut, then the
 * frames after it. `kept` followed by the result is `frames` again (deltas of one block concatenated).
 */
export function framesAfter(frames: readonly Frame[], kept: readonly Frame[]): Frame[] {
  const last = kept.length - 1;
  const cut = kept[last];
  const whole = frames[last];
  const rest = frames.slice(kept.length);
  if (cut === undefined || whole === undefined || !isDelta(cut) || !isDelta(whole) || cut[2].length >= whole[2].length)
    return rest;
  return [[whole[0], whole[1], whole[2].slice(cut[2].length)] as DeltaFrame, ...rest];
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** Rebuild the partial assistant content from persisted frame batches. */
export function assembleContent(batches: readonly FrameBatch[]): (TextContent | ThinkingContent | ToolCall)[] {
  const content: (TextContent | ThinkingContent | ToolCall)[] = [];
  const args = new Map<number, string>();
  for (const batch of batches) {
    for (const frame of batch.f) {
      const index = frame[1];
      switch (frame[0]) {
        case "t": {
          const block = content[index];
          if (block?.type === "text") block.text += frame[2];
          else content[index] = { type: "text", text: frame[2] };
          break;
        }
        case "h": {
          const block = content[index];
          if (block?.type === "thinking") block.thinking += frame[2];
          else content[index] = { type: "thinking", thinking: frame[2] };
          break;
        }
        case "c":
          content[index] = { type: "toolCall", id: frame[2], name: frame[3], arguments: {} };
          break;
        case "a":
          args.set(index, (args.get(index) ?? "") + frame[2]);
          break;
        case "e":
          content[index] = frame[2];
          break;
        default: {
          const never: never = frame;
          return never;
        }
      }
    }
  }
  return content.filter((block) => block !== undefined);
}

/** A partial answer rebuilt for display: stopReason "aborted", so requests exclude it (§8.2). */
export function partialMessage(
  base: Pick<AssistantMessage, "api" | "provider" | "model">,
  batches: readonly FrameBatch[],
  timestamp: number,
  errorMessage: string,
): AssistantMessage | undefined {
  const content = assembleContent(batches).filter((block) => block.type !== "toolCall");
  if (content.length === 0) return undefined;
  return {
    role: "assistant",
    content,
    api: base.api,
    provider: base.provider,
    model: base.model,
    usage: zeroUsage(),
    stopReason: "aborted",
    errorMessage,
    timestamp,
  };
}

export function zeroUsage(): AssistantMessage["usage"] {
  return {
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}
