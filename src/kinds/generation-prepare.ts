/**
 * The generation's request preparation (§8.2 execute): the threshold collapse that may hand the attempt
 * to a collapse first, then sections and tools prepared outside the line, the system entry and request
 * cutoff on the line, and the messages-only request after the before_request hook, with the tools it offers.
 */
import type { Context, Tool } from "@earendil-works/pi-ai";
import { systemKind } from "../core/entries.js";
import { PicoError } from "../core/errors.js";
import { bindTo, conversationValue } from "../core/state.js";
import type { Id } from "../storage/records.js";
import { planCollapse } from "./collapse.js";
import { foldSectionState, foldTools, planSystemEntry, prepareSections } from "./sections.js";
import { builderOf, type Attempt, type GenerationContext } from "./generation-types.js";

/**
 * The last threshold collapse planned in a conversation: the estimated context tokens then and the head
 * it was to replace. While the head is unchanged (the collapse was declined or failed), the next one
 * waits for the context to grow (§8.2).
 */
export const thresholdAttempt = conversationValue<{ tokens: number; head: Id | null }>("pi.collapse.threshold", {
  rewind: true,
});

/**
 * Threshold collapse before the request (§8.2 execute): C, then G' after [C]. A threshold collapse
 * that did not replace the head (declined, failed) is not planned again for the same head until the
 * context grew by collapseRetryGrowthTokens: G' goes ahead uncollapsed (an overflow, if it comes,
 * takes the overflow path), so a declining before_collapse cannot loop.
 *
 * True when the attempt was handed off: the generation settled, its successor runs after the collapse.
 */
export async function collapseBeforeRequest(ctx: GenerationContext, attempt: Attempt): Promise<boolean> {
  const { services, projections } = ctx;
  const { task, state, runtime, conversation, call } = attempt;
  const { inputs, config, retry } = state;
  const threshold = services.options.collapseThresholdTokens;
  if (threshold > 0 && state.status !== "deferred") {
    const current = await conversation.contextEntries(undefined, call);
    const tokens = projections.of(task.conversationId).estimateTokens(current);
    if (tokens > threshold && current.items.length > services.options.collapseKeepEntries + 1) {
      const growth = services.options.collapseRetryGrowthTokens ?? Math.ceil(threshold / 10);
      const head = current.head?.id ?? null;
      const handedOff = await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        const attempted = b.value(bindTo(thresholdAttempt, task.conversationId));
        const last = await attempted.get();
        if (last !== undefined && last.head === head && tokens < last.tokens + growth) return false;
        const collapse = await planCollapse(
          b,
          task.conversationId,
          current,
          "threshold",
          null,
          services.options.collapseKeepEntries,
        );
        if (collapse === undefined) return false;
        attempted.set({ tokens, head });
        const next = b.task({ kind: "generation" }, task.conversationId, {
          state: { status: "pending", inputs, config, retry },
          after: [collapse],
        });
        tx.settle(task, "done", { inputs, attempt: retry.attempt, assistant: null, successor: next });
        return true;
      }, call);
      if (handedOff) return true;
    }
  }
  return false;
}

/** A prepared request: its cutoff on the line, its messages, and the tools it offers. */
export interface PreparedRequest {
  readonly requestThrough: Id;
  readonly request: Context;
  /**
   * Returned calls are checked against the tools this request actually offered (§8.2), after
   * before_request, not against the registry: a registered but unselected tool is not callable.
   */
  readonly offered: Map<string, Tool>;
}

/** Preparation: sections and tools outside the line, the system entry and cutoff on the line; then the request. */
export async function prepareRequest(
  ctx: GenerationContext,
  attempt: Attempt,
  chain: readonly Id[],
): Promise<PreparedRequest> {
  const { services, projections, kind } = ctx;
  const { task, state, runtime, conversation, call } = attempt;
  const { inputs, config, retry } = state;
  const storage = conversation.harness.storage;
  // A deferred answer keeps its prepared request's cutoff: no new preparation, poll instead (§8.2).
  let requestThrough: Id | undefined = state.status === "deferred" ? state.requestThrough : undefined;
  for (let round = 0; requestThrough === undefined; round++) {
    if (round > 5)
      throw new PicoError("contract", `generation ${task.id}: section state kept changing during preparation`);
    const tip = storage.lastSeq;
    const seed = await foldSectionState(storage, task.conversationId, tip);
    const prepared = await prepareSections({
      seed,
      registry: services.sections,
      hooks: services.hooks,
      kind,
      chain,
      conversationId: task.conversationId,
      config,
      call,
    });
    requestThrough = await runtime.commit(async (tx) => {
      const context = await conversation.contextEntries(undefined, call);
      const current = await foldSectionState(storage, task.conversationId, storage.lastSeq);
      const projection = projections.of(task.conversationId);
      const folds = { baseline: projection.baseline(context), tools: () => projection.tools(context) };
      const plan = planSystemEntry({
        context,
        seedCursor: seed.cursor,
        currentCursor: current.cursor,
        prepared,
        timestamp: runtime.now(),
        folds,
      });
      if (plan.stale) return undefined;
      let through: Id | undefined = plan.draft === undefined ? undefined : tx.entry(systemKind, plan.draft);
      if (through === undefined) {
        const last = await storage.scanEntries({
          conversationId: task.conversationId,
          before: Number.MAX_SAFE_INTEGER,
          limit: 1,
        });
        through = last.items[0]?.id ?? 0;
      }
      tx.patch(task, "streaming", { inputs, config, retry, requestThrough: through });
      return through;
    }, call);
  }

  // The request: the context at requestThrough, messages only (§8.2).
  const snapshot = await conversation.contextEntries(requestThrough, call);
  const projection = projections.of(task.conversationId);
  let request: Context = { messages: projection.requestMessages(snapshot) };
  // A deferred answer was requested already: polling sends no new request, so nothing to hook.
  const hooked =
    state.status === "deferred"
      ? {}
      : await services.hooks.run<{ request?: Context }>(
          kind,
          "before_request",
          { request: { messages: [...request.messages] } },
          chain,
          call,
        );
  if (hooked.request !== undefined) request = hooked.request;
  if ("systemPrompt" in request || "tools" in request) {
    throw new PicoError("contract", "before_request must keep the request messages-only (no systemPrompt or tools)");
  }
  // Returned calls are checked against the tools this request actually offered (§8.2), after
  // before_request, not against the registry: a registered but unselected tool is not callable.
  // Unhooked, the request's system messages are the context's, in order: the projection's tool fold.
  const offered = hooked.request === undefined ? projection.tools(snapshot) : foldTools([request.messages]);
  return { requestThrough, request, offered };
}
