/**
 * The collapse kind (§8.4): summarize a prefix of the context and append a summary head whose boundary
 * is the first retained entry. One live collapse per conversation. A summary prepared against an old
 * context still lands unless a newer head landed meanwhile (stale); intervening edits do not stale it.
 * Automatic collapses (threshold, overflow) are foreground; manual ones are background. The overflow
 * chain's collapse carries the input group and its settlement creates the next generation (§8.2).
 * `planCollapse` plans one (threshold and overflow from the generation kind, manual from the turn API).
 */
import type { AssistantMessage, Message } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { DerivedContext } from "../core/context.js";
import type { ConversationHandle } from "../core/conversation.js";
import { requestMessages } from "../core/context.js";
import { summaryEntry, summaryKind } from "../core/entries.js";
import type { Entry } from "../storage/records.js";
import { PicoError } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import { defineTaskKind, type TypedTask } from "../core/task-kind.js";
import { scratchValue } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import { ownershipChain } from "./chain.js";
import { captureConfig, freshRetry, generationConfig } from "./config.js";
import { createGeneration, landIdleInbox, resolveUnanswered } from "./placement.js";
import { takeRunTools, withRunTools } from "./run-tools.js";
import type { TurnServices } from "./services.js";
import { collapseRoles, type CollapseState } from "./states.js";
import { recordUsage } from "./usage.js";
import { withImageUrls } from "./image-urls.js";

export interface CollapseHooks {
  [point: string]: { input: unknown; output: unknown };
  before_collapse: {
    input: { reason: CollapseState["reason"]; entries: readonly Entry[] };
    output: { decline?: boolean; instructions?: string; summary?: string };
  };
}

const candidate = scratchValue<string>("summary");

type CollapseTask = TypedTask<CollapseState, typeof collapseRoles>;

export const SUMMARY_PROMPT =
  "Summarize the conversation so far for your own later use: the user's goals, decisions made, facts learned, files and tools involved, and open questions. Be concise and complete; do not address the user.";

export function createCollapseKind(services: TurnServices) {
  const kind = defineTaskKind<CollapseState, TaskRuntime, CollapseHooks>()({
    kind: "collapse",
    roles: collapseRoles,
    initialStatus: "planned",
    turn: true,
    hooks: { before_collapse: {} },
    async execute(task, runtime, call) {
      const { status: _status, ...base } = task.state;
      await runtime.commit((tx) => tx.patch(task, "summarizing", base), call);
      await summarize(task, runtime, call);
    },
    async recover(task, runtime, call) {
      await summarize(task, runtime, call);
    },
    async abort(task, runtime, call) {
      const { status: _status, ...base } = task.state;
      await runtime.commit(async (tx) => {
        if (base.carry !== null) await resolveUnanswered(tx.builder, task.conversationId, base.carry.inputs, "aborted");
        if (task.state.status === "summarizing") {
          await recordUsage(tx.builder, {
            conversationId: task.conversationId,
            taskId: task.id,
            kind: "collapse",
            model: base.carry?.config.model ?? "",
            usage: null,
          });
        }
        tx.settle(task, "aborted", base);
      }, call);
    },
  });

  async function summarize(task: CollapseTask, runtime: TaskRuntime, call: Call): Promise<void> {
    const { status: _status, ...base } = task.state;
    const conversation = await runtime.conversation(task.conversationId, call);
    if (conversation === undefined) throw new PicoError("not_found", `conversation ${task.conversationId} vanished`);
    const prefix = await summarizedPrefix(conversation, base, call);
    const chain = await ownershipChain(runtime, task.conversationId, call);
    const decision = await services.hooks.run<{ decline?: boolean; instructions?: string; summary?: string }>(
      kind,
      "before_collapse",
      { reason: base.reason, entries: prefix.items.map((item) => item.entry) },
      chain,
      call,
    );
    let text: string | undefined = (await runtime.scratch((sc) => sc.value(candidate).get(), call)) ?? decision.summary;
    let usage: AssistantMessage["usage"] | null = null;
    let error: string | undefined = decision.decline ? "declined by before_collapse" : undefined;
    const modelId = base.carry?.config.model ?? (await conversation.value(generationConfig.model).get(call));
    if (text === undefined && error === undefined) {
      const model = modelId === undefined ? undefined : services.models.resolve(modelId);
      if (model === undefined) error = `no summarizer model (${modelId ?? "unset"})`;
      else {
        const instructions = decision.instructions ?? base.instructions ?? SUMMARY_PROMPT;
        const messages: Message[] = [
          ...requestMessages(prefix),
          { role: "user", content: instructions, timestamp: runtime.now() },
        ];
        // The history's tool declarations stay (providers need them to read its tool blocks), but the
        // summarizer must answer in text: tool choice none.
        const answer = await services.models.models.completeSimple(
          model,
          { messages },
          {
            signal: call.abortSignal ?? new AbortController().signal,
            toolChoice: "none",
            // The history's images named by URL go as URLs, as in a generation (image-urls.ts).
            onPayload: (payload) => withImageUrls(payload),
          },
        );
        usage = answer.usage;
        const produced = answer.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("");
        if (answer.stopReason === "error" || answer.stopReason === "aborted" || produced === "")
          error = answer.errorMessage ?? "the summarizer returned nothing";
        else text = produced;
      }
      if (text !== undefined) {
        const summary = text;
        await runtime.scratch((sc) => sc.value(candidate).set(summary), call);
      }
    }

    await runtime.commit(async (tx) => {
      const b = tx.builder;
      if (usage !== null || text === undefined) {
        await recordUsage(b, {
          conversationId: task.conversationId,
          taskId: task.id,
          kind: "collapse",
          model: modelId ?? "",
          usage: usage as never,
        });
      }
      // Stale when a head newer than the captured one landed (a competing summary or reset).
      const storage = conversation.harness.storage;
      const newest = await storage.newestHead(task.conversationId, storage.lastSeq);
      const stale = (newest?.id ?? null) !== base.capturedHead;
      const successor = async (): Promise<Id | null> => {
        if (base.carry === null) return idleBoundary();
        if (base.carry.retry.attempt >= base.carry.retry.maxAttempts) return null;
        return createGeneration(b, task.conversationId, base.carry.inputs, base.carry.config, base.carry.retry);
      };
      // A manual collapse held the conversation (§5.8): input queued meanwhile is placed at its
      // settlement when nothing else is turning, so it does not wait for the next explicit accept.
      const idleBoundary = async (): Promise<Id | null> => {
        const live = await b.scanTasks({ conversationIds: [task.conversationId], live: true, limit: 1000 });
        if (live.items.some((t) => t.turn === true && t.id !== task.id)) return null;
        const config = await captureConfig(b, task.conversationId, services.options).catch(() => undefined);
        if (config === undefined) return null;
        const group = await landIdleInbox(b, task.conversationId, runtime.now());
        if (group.length === 0) return null;
        // The page tools its input queued with, if it offered some (run-tools.ts).
        const tools = await takeRunTools(b, task.conversationId, group);
        return createGeneration(
          b,
          task.conversationId,
          group,
          withRunTools(config, tools),
          freshRetry(services.options),
        );
      };
      if (text === undefined || stale) {
        const reason = stale ? "stale: a newer head landed while summarizing" : (error ?? "no summary");
        const next = await successor();
        if (next === null && base.carry !== null)
          await resolveUnanswered(b, task.conversationId, base.carry.inputs, "failed", {
            detail: reason,
            placeWrites: true,
          });
        tx.settle(task, "failed", { ...base, error: reason, successor: next });
        return;
      }
      const summary = tx.entry(
        summaryKind,
        summaryEntry(text, base.summarizeThrough, base.firstRetained, runtime.now()),
      );
      const next = await successor();
      if (next === null && base.carry !== null)
        await resolveUnanswered(b, task.conversationId, base.carry.inputs, "failed", {
          detail: "attempt budget exhausted",
          placeWrites: true,
        });
      tx.settle(task, "done", { ...base, summary, successor: next });
    }, call);
  }

  return kind;
}

/**
 * What the summarizer reads (§2.3): the context as of the captured head, cut after the last summarized
 * entry. That is inside the current context and starts with the previous head (its summary carries what
 * came before), never the raw history the head replaced, even when the prefix ends before the head was
 * appended (derivation at `summarizeThrough` alone would predate the head).
 */
async function summarizedPrefix(
  conversation: ConversationHandle,
  base: Pick<CollapseState, "capturedHead" | "summarizeThrough">,
  call: Call,
): Promise<DerivedContext> {
  const at = Math.max(base.summarizeThrough, base.capturedHead ?? 0);
  const context = await conversation.contextEntries(at, call);
  const headId = context.head?.id;
  const items = context.items.filter((item) => item.entry.id === headId || item.entry.id <= base.summarizeThrough);
  return { ...context, items, ids: items.map((item) => item.entry.id) };
}

/**
 * Plan a collapse of the current context (§8.4): summarize everything before the retained tail, which
 * starts on a complete exchange. Returns the collapse task id, or undefined when nothing can be folded.
 */
export async function planCollapse(
  b: TxBuilder,
  conversationId: Id,
  context: {
    readonly head?: { readonly id: Id };
    readonly items: readonly { readonly entry: { readonly id: Id; readonly kind: string } }[];
  },
  reason: CollapseState["reason"],
  carry: CollapseState["carry"],
  keep: number,
  instructions: string | null = null,
): Promise<Id | undefined> {
  // One live collapse per conversation (§8.4).
  const live = await b.scanTasks({ conversationIds: [conversationId], live: true, kind: "collapse", limit: 1 });
  if (live.items.length > 0) return undefined;
  const items = context.items.filter((item) => item.entry.id !== context.head?.id);
  if (items.length <= keep) return undefined;
  // The retained tail starts at a user entry (a complete exchange boundary), at most `keep` from the end.
  let start = items.length - keep;
  while (start > 0 && items[start]?.entry.kind !== "user") start -= 1;
  if (start <= 0) return undefined;
  const firstRetained = items[start]?.entry.id as Id;
  const summarizeThrough = items[start - 1]?.entry.id as Id;
  const state: CollapseState = {
    status: "planned",
    reason,
    capturedHead: context.head?.id ?? null,
    firstRetained,
    summarizeThrough,
    instructions,
    carry,
  };
  return b.task({ kind: "collapse" }, conversationId, {
    state,
    ...(reason === "manual" ? { background: true as const } : {}),
  });
}
