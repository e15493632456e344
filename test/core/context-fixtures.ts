/**
 * Fixtures for context tests and benchmarks: pi-ai messages and a history builder that commits
 * entries at exact ids (spec examples use ids like 10, 20, 30) by filling gaps with session writes.
 */
import type {
  AssistantMessage,
  Message,
  StopReason,
  SystemMessage,
  ToolResultMessage,
  UserMessage,
} from "@earendil-works/pi-ai";
import type { ContextEdit, Entry, Id, MainWrite } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";

export function user(text: string): UserMessage {
  return { role: "user", content: text, timestamp: 1 };
}

export function system(text: string): SystemMessage {
  return { role: "system", content: text, timestamp: 1 };
}

const usage = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

export function assistant(
  text: string,
  o: { calls?: readonly string[]; stopReason?: StopReason; timestamp?: number } = {},
): AssistantMessage {
  const calls = o.calls ?? [];
  return {
    role: "assistant",
    content: [
      { type: "text", text },
      ...calls.map((id) => ({ type: "toolCall" as const, id, name: `tool_${id}`, arguments: {} })),
    ],
    api: "anthropic-messages",
    provider: "anthropic",
    model: "test-model",
    usage,
    stopReason: o.stopReason ?? (calls.length > 0 ? "toolUse" : "stop"),
    timestamp: o.timestamp ?? 2,
  };
}

export function toolResult(callId: string, text = `result ${callId}`): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: callId,
    toolName: `tool_${callId}`,
    content: [{ type: "text", text }],
    isError: false,
    timestamp: 3,
  };
}

/** Entry fields a test supplies; id and conversation come from the builder. */
export interface EntrySpec {
  readonly kind?: string;
  readonly model?: readonly Message[];
  readonly head?: Id;
  readonly edits?: readonly ContextEdit[];
  readonly key?: string;
}

const filler = (n: number): MainWrite => ({
  type: "value.set",
  addr: { scope: { session: true }, namespace: "test.filler", rewind: false },
  value: n,
});

/** Commits writes at exact sequence numbers, filling gaps with session value writes. */
export class HistoryBuilder {
  constructor(readonly storage: Storage) {}

  /** Writes that bring lastSeq to `id - 1`; throws if `id` is already used. */
  fillTo(id: Id): MainWrite[] {
    const last = this.storage.lastSeq;
    if (id <= last) throw new Error(`id ${id} is not after lastSeq ${last}`);
    const writes: MainWrite[] = [];
    for (let seq = last + 1; seq < id; seq++) writes.push(filler(seq));
    return writes;
  }

  /** Create a conversation at exactly `id` (default: next sequence). */
  async conversation(o: { id?: Id; parent?: { conversationId: Id; at: Id } } = {}): Promise<Id> {
    const id = o.id ?? this.storage.lastSeq + 1;
    const writes = this.fillTo(id);
    writes.push({
      type: "createConversation",
      conversation: o.parent === undefined ? { id } : { id, parent: o.parent },
    });
    await this.storage.commit({ kind: "main", writes });
    return id;
  }

  /** The entry record at `id` (not committed). */
  entry(conversationId: Id, id: Id, spec: EntrySpec): Entry {
    return {
      id,
      conversationId,
      kind: spec.kind ?? kindOf(spec),
      ...(spec.key === undefined ? {} : { key: spec.key }),
      ...(spec.model === undefined ? {} : { model: spec.model }),
      ...(spec.head === undefined ? {} : { head: spec.head }),
      ...(spec.edits === undefined ? {} : { edits: spec.edits }),
    };
  }

  /** Commit one entry at exactly `id` (fillers first, in the same batch). Returns the stored entry. */
  async append(conversationId: Id, id: Id, spec: EntrySpec): Promise<{ entry: Entry; last: Id }> {
    const writes = this.fillTo(id);
    const entry = this.entry(conversationId, id, spec);
    writes.push({ type: "entry", entry });
    const { last } = await this.storage.commit({ kind: "main", writes });
    return { entry, last };
  }

  /** Commit several entries, each at its id, in one batch per entry. */
  async appendAll(conversationId: Id, specs: readonly (readonly [Id, EntrySpec])[]): Promise<Entry[]> {
    const out: Entry[] = [];
    for (const [id, spec] of specs) out.push((await this.append(conversationId, id, spec)).entry);
    return out;
  }
}

function kindOf(spec: EntrySpec): string {
  if (spec.head !== undefined) return spec.model === undefined ? "reset" : "summary";
  const first = spec.model?.[0];
  if (first === undefined) return spec.edits === undefined ? "note" : "edit";
  return first.role === "toolResult" ? "tool_result" : first.role;
}
