/**
 * Fixtures for the `subagent` tool tests (§8.5): a harness with the real turn kit, the subagent tool and
 * an echo tool, whose faux model answers like the built-in `echo` model (src/worker/platform/echo-model.ts):
 * `/call NAME {json}` becomes a tool call, a tool result is answered with its text, anything else is
 * echoed. A prompt starting with `[hold]` waits at its provider request until `release()` (or until the
 * request is cancelled), so a child can be caught mid-turn.
 */
import type { AssistantMessage, Context, FauxResponseStep } from "@earendil-works/pi-ai";
import type { Call } from "../../src/core/call.js";
import type { Harness } from "../../src/core/harness.js";
import { bindResult, type InputResult } from "../../src/core/inbox.js";
import { subagentTool } from "../../src/tools/subagent.js";
import { echoReply } from "../../src/worker/platform/echo-model.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { generationConfig } from "../../src/kinds/config.js";
import { deferred, flush, type Deferred, type FakeClock } from "../core/driver-fixtures.js";
import { call, echoTool, openTurns, textOf, type TurnFixture } from "./turn-fixtures.js";

export { call, textOf };

export const HOLD = "[hold]";

export interface SubagentFixture extends TurnFixture {
  /** Requests currently held at the provider (prompts with `[hold]`). */
  held(): number;
  /** A promise that resolves when `n` requests are held. */
  holding(n?: number): Promise<void>;
  /** Let every held request (and later ones) answer. */
  release(): void;
}

function lastUserText(context: Context): string {
  for (let i = context.messages.length - 1; i >= 0; i--) {
    const message = context.messages[i];
    if (message?.role === "toolResult") return "";
    if (message?.role === "user") return textOf({ model: [message] });
  }
  return "";
}

export async function openSubagents(
  storage: Storage,
  options: { selected?: string[]; clock?: FakeClock; budgetMs?: number } = {},
): Promise<SubagentFixture> {
  let gate: Deferred<void> = deferred();
  let released = false;
  let held = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const answer = async (context: Context, signal: AbortSignal | undefined): Promise<AssistantMessage> => {
    if (!released && lastUserText(context).startsWith(HOLD)) {
      held += 1;
      for (const w of waiters.filter((w) => held >= w.n)) w.resolve();
      try {
        await new Promise<void>((resolve, reject) => {
          if (signal?.aborted === true) reject(signal.reason);
          signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
          void gate.promise.then(resolve);
        });
      } finally {
        held -= 1;
      }
    }
    return echoReply(context);
  };
  const step: FauxResponseStep = (context, streamOptions) => answer(context, streamOptions?.signal);
  const fixture = await openTurns(storage, {
    tools: [subagentTool, echoTool],
    responses: Array.from({ length: 200 }, () => step),
    ...(options.clock === undefined ? {} : { host: { clock: options.clock } }),
    ...(options.budgetMs === undefined ? {} : { turn: { toolBudgetMs: options.budgetMs } }),
  });
  const root = await fixture.harness.root(call);
  await root.settings.set({ selectedTools: options.selected ?? ["subagent", "echo"] }, call);
  return {
    ...fixture,
    held: () => held,
    holding: (n = 1) => (held >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve }))),
    release: () => {
      released = true;
      gate.resolve();
      gate = deferred();
    },
  };
}

/** A `/call subagent {...}` prompt the echo-like model turns into a subagent call. */
export function subagentCall(args: Record<string, unknown>): string {
  return `/call subagent ${JSON.stringify(args)}`;
}

export async function tasksOf(harness: Harness, conversationId: Id, kind?: string): Promise<readonly Task[]> {
  return (
    await harness.storage.scanTasks({
      conversationIds: [conversationId],
      limit: 1000,
      ...(kind === undefined ? {} : { kind }),
    })
  ).items;
}

export async function toolResults(harness: Harness, conversationId: Id): Promise<readonly Entry[]> {
  return (await harness.entries(conversationId, { limit: 100, kind: "tool_result" }, call)).items;
}

/** Conversations owned by a task. */
export async function ownedBy(harness: Harness, taskId: Id): Promise<Id[]> {
  return (await harness.storage.scanConversations({ ownedFrom: taskId, limit: 100 })).items.map((c) => c.id);
}

export async function resultOf(harness: Harness, conversationId: Id, inputId: Id): Promise<InputResult | undefined> {
  return (await harness.storage.getValue(bindResult(conversationId, inputId)))?.value;
}

export async function selectedOf(harness: Harness, conversationId: Id, c: Call = call): Promise<string[] | undefined> {
  const handle = await harness.conversation(conversationId, c);
  return handle?.value(generationConfig.selectedTools).get(c);
}

/** The details object of a tool result entry. */
export function detailsOf(entry: Entry | undefined): Record<string, unknown> {
  return ((entry?.data as { details?: unknown } | undefined)?.details ?? {}) as Record<string, unknown>;
}

/** Flush the line until `ok` holds (bounded, no wall clock). */
export async function eventually(harness: Harness, ok: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await ok()) return;
    await flush(harness, 2);
  }
  throw new Error(`timed out waiting for ${what}`);
}
