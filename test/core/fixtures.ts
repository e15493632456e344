/**
 * Shared fixtures for core tests: test task kinds (no execution yet) and message builders.
 */
import type { AssistantMessage, ToolResultMessage, UserMessage } from "@earendil-works/pi-ai";
import { BACKGROUND_CONTEXT } from "../../src/core/call.js";
import { Harness, type HarnessOptions } from "../../src/core/harness.js";
import { defineTaskKind, erase } from "../../src/core/task-kind.js";
import type { Storage } from "../../src/storage/storage.js";

export const call = BACKGROUND_CONTEXT;

export type WorkState =
  | { status: "pending"; input: number }
  | { status: "running"; input: number; attempt: number }
  | { status: "done"; input: number; output: string }
  | { status: "failed"; input: number; error: string };

const noop = async (): Promise<void> => undefined;

export const workKind = defineTaskKind<WorkState>()({
  kind: "work",
  roles: { pending: "start", running: "inflight", done: "terminal", failed: "terminal" },
  initialStatus: "pending",
  execute: noop,
  recover: noop,
  abort: noop,
});

export type TurnState = { status: "pending"; inputs: number[] } | { status: "done"; inputs: number[] };

export const turnKind = defineTaskKind<TurnState>()({
  kind: "turnwork",
  roles: { pending: "start", done: "terminal" },
  initialStatus: "pending",
  turn: true,
  execute: noop,
  recover: noop,
  abort: noop,
});

export const testTaskKinds = [erase(workKind), erase(turnKind)];

export async function openHarness(storage: Storage, options: HarnessOptions = {}): Promise<Harness> {
  return Harness.open(storage, { taskKinds: testTaskKinds, ...options }, call);
}

export function user(text: string): UserMessage {
  return { role: "user", content: text, timestamp: 0 };
}

export function assistant(
  text: string,
  calls: readonly string[] = [],
  stopReason: AssistantMessage["stopReason"] = calls.length > 0 ? "toolUse" : "stop",
): AssistantMessage {
  return {
    role: "assistant",
    content: [
      { type: "text", text },
      ...calls.map((id) => ({ type: "toolCall" as const, id, name: "echo", arguments: {} })),
    ],
    api: "faux",
    provider: "faux",
    model: "faux",
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason,
    timestamp: 0,
  };
}

export function toolResult(callId: string, text: string): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: callId,
    toolName: "echo",
    content: [{ type: "text", text }],
    isError: false,
    timestamp: 0,
  };
}

/** Advance the session sequence to `lastSeq` with session-value writes (fillers for worked examples). */
export async function fillTo(harness: Harness, lastSeq: number): Promise<void> {
  const n = lastSeq - harness.storage.lastSeq;
  if (n < 0) throw new Error(`already past ${lastSeq}`);
  if (n === 0) return;
  await harness.commit((tx) => {
    for (let i = 0; i < n; i++)
      tx.value({ scope: { session: true }, namespace: "filler", key: String(i), rewind: false }).set(i);
  }, call);
}

/** A storage whose commits can be paused: the batch is built but not yet durable (§10.2 barriers). */
export class PausableStorage implements Storage {
  paused = false;
  #release: (() => void) | undefined;
  #barrier: Promise<void> | undefined;
  constructor(readonly inner: Storage) {}
  pause(): void {
    this.paused = true;
    this.#barrier = new Promise((resolve) => (this.#release = resolve));
  }
  resume(): void {
    this.paused = false;
    this.#release?.();
  }
  get lastSeq(): number {
    return this.inner.lastSeq;
  }
  async commit(batch: Parameters<Storage["commit"]>[0]): ReturnType<Storage["commit"]> {
    if (this.paused) await this.#barrier;
    return this.inner.commit(batch);
  }
  getConversations: Storage["getConversations"] = (ids) => this.inner.getConversations(ids);
  scanConversations: Storage["scanConversations"] = (q) => this.inner.scanConversations(q);
  getEntries: Storage["getEntries"] = (ids) => this.inner.getEntries(ids);
  scanEntries: Storage["scanEntries"] = (q) => this.inner.scanEntries(q);
  newestHead: Storage["newestHead"] = (c, at) => this.inner.newestHead(c, at);
  entryKinds: Storage["entryKinds"] = () => this.inner.entryKinds();
  getTasks: Storage["getTasks"] = (ids) => this.inner.getTasks(ids);
  scanTasks: Storage["scanTasks"] = (q) => this.inner.scanTasks(q);
  getValue: Storage["getValue"] = (addr, at) => this.inner.getValue(addr, at);
  scanValues: Storage["scanValues"] = (q) => this.inner.scanValues(q);
  readList: Storage["readList"] = (addr, q) => this.inner.readList(addr, q);
  close: Storage["close"] = () => this.inner.close();
}
