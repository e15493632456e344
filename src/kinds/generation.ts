/**
 * The generation kind (§8.2): one task per model answer, living through retries. It prepares system
 * instructions (sections and tools) and the request cutoff on the line, streams through pi-ai's
 * `streamSimple` with only `{ messages }` (the thinking level and retry probe are request options,
 * `model-request.ts`), persists compact frames to scratch (coalesced), and settles with exactly one outcome:
 * calls (tools + post_tools), final answer (resolving its input group), retry_wait, overflow (handed to
 * a collapse whose settlement creates the next generation), or failure. Usage is recorded per attempt.
 *
 * One concept over 400 lines: the generation kind. Its execute, recover and abort paths, and the frame
 * flusher that streams into scratch, are one task's life.
 */
import type { AssistantMessage, Context, DeferredHandle, Message, ToolCall } from "@earendil-works/pi-ai";
import { isContextOverflow, isRetryableAssistantError } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { ConversationHandle } from "../core/conversation.js";
import { assistantKind, systemKind, type AssistantEntry } from "../core/entries.js";
import { PicoError, TaskCancelled } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import { bindTo, conversationValue } from "../core/state.js";
import { defineTaskKind, type TypedTask } from "../core/task-kind.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id, JsonObject } from "../storage/records.js";
import { ownershipChain } from "./chain.js";
import { generationConfig, readOnInterrupt } from "./config.js";
import { attemptOptions, exchangeProbe, retryDecision, retryHintMs } from "./model-request.js";
import { encodeEvent, fitFrames, frameBytes, framesAfter, framesList, partialMessage, pushFrame, zeroUsage, type Frame, type FrameBatch } from "./frames.js";
import { createGeneration, landFinalInbox, resolveUnanswered } from "./placement.js";
import { estimateTokensCached, ProjectionCache } from "./request-cache.js";
import { foldSectionState, foldTools, planSystemEntry, prepareSections, type SectionRegistry, type SystemInstructionsInput, type SystemInstructionsOutput } from "./sections.js";
import type { TurnServices } from "./services.js";
import { generationRoles, type CapturedConfig, type CollapseState, type GenerationState, type RetryBudget } from "./states.js";
import { recordUsage } from "./usage.js";

/**
 * The last threshold collapse planned in a conversation: the estimated context tokens then and the head
 * it was to replace. While the head is unchanged (the collapse was declined or failed), the next one
 * waits for the context to grow (§8.2).
 */
export const thresholdAttempt = conversationValue<{ tokens: number; head: Id | null }>("pi.collapse.threshold", { rewind: true });

/** Hook points of the generation (§8.7). */
export interface GenerationHooks {
  [point: string]: { input: unknown; output: unknown };
  system_instructions: { input: SystemInstructionsInput; output: SystemInstructionsOutput };
  before_request: { input: { request: Context }; output: { request?: Context } };
  after_response: { input: { response: AssistantMessage; usage: AssistantMessage["usage"] }; output: void };
  on_yield: { input: { answer: AssistantMessage }; output: { continue?: string } };
}

export interface GenerationServices extends TurnServices {
  readonly sections: SectionRegistry;
}

type GenTask = TypedTask<GenerationState, typeof generationRoles>;

/** What watchers see of a streaming generation: the partial answer's content blocks (§9.4). */
export interface GenerationPreview {
  content: ({ type: "text"; text: string } | { type: "thinking"; thinking: string } | { type: "toolCall"; id: string; name: string; arguments: string })[];
}

/** Mutate the tracked preview in place, so a token is one append op, never a recomputed object. */
export function applyFrame(preview: GenerationPreview, frame: Frame): void {
  const index = frame[1];
  const block = preview.content[index];
  switch (frame[0]) {
    case "t":
      if (block?.type === "text") block.text += frame[2];
      else preview.content[index] = { type: "text", text: frame[2] };
      return;
    case "h":
      if (block?.type === "thinking") block.thinking += frame[2];
      else preview.content[index] = { type: "thinking", thinking: frame[2] };
      return;
    case "c":
      preview.content[index] = { type: "toolCall", id: frame[2], name: frame[3], arguments: "" };
      return;
    case "a":
      if (block?.type === "toolCall") block.arguments += frame[2];
      return;
    case "e":
      if (block?.type === "toolCall") block.arguments = JSON.stringify(frame[2].arguments);
      return;
    default: {
      const never: never = frame;
      return never;
    }
  }
}

/** Exponential backoff with the configured jitter and cap (`model-request.ts`), ms. */
export function retryDelay(options: GenerationServices["options"], attempt: number): number {
  const decision = retryDecision(options, attempt, undefined);
  return decision.type === "wait" ? decision.delayMs : options.retryMaxDelayMs;
}

export function createGenerationKind(services: GenerationServices) {
  // Request messages and context folds per conversation, extended with new entries (request-cache.ts).
  const projections = new ProjectionCache();
  const kind = defineTaskKind<GenerationState, TaskRuntime, GenerationHooks, typeof generationConfig>()({
    kind: "generation",
    roles: generationRoles,
    initialStatus: "pending",
    turn: true,
    config: generationConfig,
    hooks: { system_instructions: {}, before_request: {}, after_response: {}, on_yield: { failClosed: false } },
    // Built from the frames on scratch when an invocation starts (§9.4): after a restart the watcher's
    // first preview is the partial that reached disk, not an empty answer. A pending generation never
    // streamed (frames follow the streaming status), so it has none to read.
    preview: {
      async init(scratch, call, task) {
        const preview: GenerationPreview = { content: [] };
        if (task.state.status === "pending") return preview;
        for (let after: Id | undefined; ; ) {
          const page = await scratch.list(framesList).read(after === undefined ? { limit: 1000 } : { after, limit: 1000 }, call);
          for (const element of page.items) for (const frame of element.value.f) applyFrame(preview, frame);
          if (page.next === undefined) return preview;
          after = page.next;
        }
      },
    },
    async execute(task, runtime, call) {
      await runAttempt(task, runtime, call);
    },
    async recover(task, runtime, call) {
      if (task.state.status !== "streaming") {
        await runAttempt(task, runtime, call);
        return;
      }
      // A crash mid-stream (a deploy or an eviction). Frames on disk -> keep the partial for display
      // (stopReason aborted, excluded from requests, §8.2). The session's onInterrupt policy decides the
      // rest (docs/design.md "Alarms and restarts"): "retry" (default) runs the attempt again within the retry budget; "fail"
      // settles without tools/results as §8.2 reads.
      const batches = await readFrames(runtime, call);
      const { status: _status, ...base } = task.state;
      if (batches.length > 0) {
        const error = "interrupted by a restart";
        const retried = await runtime.commit(async (tx) => {
          const b = builderOf(tx);
          const message = partialMessage(modelBase(base.config), batches, runtime.now(), error);
          const partial = message === undefined ? null : tx.entry(assistantKind, { model: [message] });
          await recordUsage(b, { conversationId: task.conversationId, taskId: task.id, kind: "generation", model: base.config.model, usage: null });
          const retry = { ...base.retry, attempt: base.retry.attempt + 1 };
          if ((await readOnInterrupt(b)) === "retry" && retry.attempt < retry.maxAttempts) {
            const waiting = { inputs: base.inputs, config: base.config, retry, notBefore: runtime.now(), error };
            tx.patch(task, "retry_wait", waiting);
            return { ...task, state: { status: "retry_wait" as const, ...waiting } };
          }
          await resolveUnanswered(b, task.conversationId, base.inputs, "failed", { detail: error, placeWrites: true });
          tx.settle(task, "failed", { ...base, retry, reason: "interrupted", error, partial, successor: null });
          return undefined;
        }, call);
        // The retry runs in this same invocation, so a turn that kills the object every time keeps
        // raising its kill count and is quarantined (docs/operations.md) instead of resetting it between tries.
        if (retried !== undefined) await runAttempt(retried, runtime, call);
        return;
      }
      // Nothing reached disk: retry within the budget, else fail.
      await retryOrFail(task, runtime, base, "interrupted before any output", call);
    },
    async abort(task, runtime, call) {
      if (task.state.status === "deferred") {
        // Best effort: the provider may stop working on an answer nobody will read.
        const model = services.models.resolve(task.state.config.model);
        if (model !== undefined) await services.models.models.cancelDeferred(model, task.state.handle, { signal: call.abortSignal ?? new AbortController().signal }).catch(() => undefined);
      }
      const state = task.state;
      if (state.status === "done") throw new PicoError("contract", `generation ${task.id} is settled (done); nothing to abort`);
      const batches = await readFrames(runtime, call);
      const { status: _status, ...base } = state;
      await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        const message = batches.length > 0 ? partialMessage(modelBase(base.config), batches, runtime.now(), "aborted") : undefined;
        const partial = message === undefined ? null : tx.entry(assistantKind, { model: [message] });
        await resolveUnanswered(b, task.conversationId, base.inputs, "aborted");
        if (state.status === "streaming") {
          await recordUsage(b, { conversationId: task.conversationId, taskId: task.id, kind: "generation", model: base.config.model, usage: null });
        }
        tx.settle(task, "aborted", { ...base, partial });
      }, call);
    },
  });

  /** The TxBuilder behind a ConversationTx: placement helpers take builders. */
  function builderOf(tx: { readonly builder: TxBuilder }): TxBuilder {
    return tx.builder;
  }

  async function readFrames(runtime: TaskRuntime, call: Call): Promise<FrameBatch[]> {
    return runtime.scratch(async (sc) => {
      const out: FrameBatch[] = [];
      let after: Id | undefined;
      for (;;) {
        const page = await sc.list(framesList).read(after === undefined ? { limit: 1000 } : { after, limit: 1000 });
        out.push(...page.items.map((e) => e.value));
        if (page.next === undefined) return out;
        after = page.next;
      }
    }, call);
  }

  function modelBase(config: CapturedConfig): Pick<AssistantMessage, "api" | "provider" | "model"> {
    const model = services.models.resolve(config.model);
    return { api: model?.api ?? "unknown", provider: model?.provider ?? "unknown", model: model?.id ?? config.model };
  }

  async function retryOrFail(task: GenTask, runtime: TaskRuntime, base: Omit<GenerationState & { status: "pending" }, "status">, error: string, call: Call): Promise<void> {
    const attempt = base.retry.attempt + 1;
    await runtime.commit(async (tx) => {
      // The interrupted attempt reached the provider; what it cost is unknown, not zero (§8.2).
      await recordUsage(builderOf(tx), { conversationId: task.conversationId, taskId: task.id, kind: "generation", model: base.config.model, usage: null });
      if (attempt < base.retry.maxAttempts) {
        const notBefore = runtime.now() + retryDelay(services.options, attempt);
        tx.patch(task, "retry_wait", { inputs: base.inputs, config: base.config, retry: { ...base.retry, attempt }, notBefore, error });
      } else {
        await resolveUnanswered(builderOf(tx), task.conversationId, base.inputs, "failed", { detail: error, placeWrites: true });
        tx.settle(task, "failed", { inputs: base.inputs, config: base.config, retry: { ...base.retry, attempt }, reason: "error", error, partial: null, successor: null });
      }
    }, call);
  }

  /**
   * Whether the commit after this stream settles the task with nothing outside the line before it: a
   * completed answer (calls, final or overflow), no after_response handler, no on_yield handler for an
   * answer without calls, no cancellation.
   */
  function settlesNext(message: AssistantMessage, chain: readonly Id[], call: Call): boolean {
    if (call.abortSignal?.aborted === true) return false;
    if (message.stopReason !== "stop" && message.stopReason !== "length" && message.stopReason !== "toolUse") return false;
    if (services.hooks.handlers(kind.kind, "after_response", chain).length > 0) return false;
    const calls = message.content.some((block) => block.type === "toolCall");
    return calls || services.hooks.handlers(kind.kind, "on_yield", chain).length === 0;
  }

  async function runAttempt(task: GenTask, runtime: TaskRuntime, call: Call): Promise<void> {
    const state = task.state;
    if (state.status !== "pending" && state.status !== "retry_wait" && state.status !== "streaming" && state.status !== "deferred") {
      throw new PicoError("contract", `generation ${task.id} cannot run from ${state.status}`);
    }
    if (state.status === "retry_wait" || state.status === "deferred") await runtime.sleep(state.notBefore, call);
    const { inputs, config, retry } = state;
    const conversation = await runtime.conversation(task.conversationId, call);
    if (conversation === undefined) throw new PicoError("not_found", `conversation ${task.conversationId} vanished`);
    const storage = conversation.harness.storage;
    const model = services.models.resolve(config.model);

    if (model === undefined) {
      await runtime.commit(async (tx) => {
        await resolveUnanswered(builderOf(tx), task.conversationId, inputs, "failed", { detail: `unknown model ${config.model}`, placeWrites: true });
        tx.settle(task, "failed", { inputs, config, retry, reason: "error", error: `unknown model ${config.model}`, partial: null, successor: null });
      }, call);
      return;
    }

    // Threshold collapse before the request (§8.2 execute): C, then G' after [C]. A threshold collapse
    // that did not replace the head (declined, failed) is not planned again for the same head until the
    // context grew by collapseRetryGrowthTokens: G' goes ahead uncollapsed (an overflow, if it comes,
    // takes the overflow path), so a declining before_collapse cannot loop.
    const threshold = services.options.collapseThresholdTokens;
    if (threshold > 0 && state.status !== "deferred") {
      const current = await conversation.contextEntries(undefined, call);
      const tokens = estimateTokensCached(projections.of(task.conversationId).requestMessages(current));
      if (tokens > threshold && current.items.length > services.options.collapseKeepEntries + 1) {
        const growth = services.options.collapseRetryGrowthTokens ?? Math.ceil(threshold / 10);
        const head = current.head?.id ?? null;
        const handedOff = await runtime.commit(async (tx) => {
          const b = builderOf(tx);
          const attempted = b.value(bindTo(thresholdAttempt, task.conversationId));
          const last = await attempted.get();
          if (last !== undefined && last.head === head && tokens < last.tokens + growth) return false;
          const collapse = await planCollapse(b, task.conversationId, current, "threshold", null, services.options.collapseKeepEntries);
          if (collapse === undefined) return false;
          attempted.set({ tokens, head });
          const next = b.task({ kind: "generation" }, task.conversationId, { state: { status: "pending", inputs, config, retry }, after: [collapse] });
          tx.settle(task, "done", { inputs, attempt: retry.attempt, assistant: null, successor: next });
          return true;
        }, call);
        if (handedOff) return;
      }
    }

    // Preparation: sections and tools outside the line, the system entry and cutoff on the line.
    const chain = await ownershipChain(runtime, task.conversationId, call);
    // A deferred answer keeps its prepared request's cutoff: no new preparation, poll instead (§8.2).
    let requestThrough: Id | undefined = state.status === "deferred" ? state.requestThrough : undefined;
    for (let round = 0; requestThrough === undefined; round++) {
      if (round > 5) throw new PicoError("contract", `generation ${task.id}: section state kept changing during preparation`);
      const tip = storage.lastSeq;
      const seed = await foldSectionState(storage, task.conversationId, tip);
      const prepared = await prepareSections({ seed, registry: services.sections, hooks: services.hooks, kind, chain, conversationId: task.conversationId, config, call });
      requestThrough = await runtime.commit(async (tx) => {
        const context = await conversation.contextEntries(undefined, call);
        const current = await foldSectionState(storage, task.conversationId, storage.lastSeq);
        const projection = projections.of(task.conversationId);
        const folds = { baseline: projection.baseline(context), tools: () => projection.tools(context) };
        const plan = planSystemEntry({ context, seedCursor: seed.cursor, currentCursor: current.cursor, prepared, timestamp: runtime.now(), folds });
        if (plan.stale) return undefined;
        let through: Id | undefined = plan.draft === undefined ? undefined : tx.entry(systemKind, plan.draft);
        if (through === undefined) {
          const last = await storage.scanEntries({ conversationId: task.conversationId, before: Number.MAX_SAFE_INTEGER, limit: 1 });
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
    const hooked = state.status === "deferred" ? {} : await services.hooks.run<{ request?: Context }>(kind, "before_request", { request: { messages: [...request.messages] } }, chain, call);
    if (hooked.request !== undefined) request = hooked.request;
    if ("systemPrompt" in request || "tools" in request) {
      throw new PicoError("contract", "before_request must keep the request messages-only (no systemPrompt or tools)");
    }
    // Returned calls are checked against the tools this request actually offered (§8.2), after
    // before_request, not against the registry: a registered but unselected tool is not callable.
    // Unhooked, the request's system messages are the context's, in order: the projection's tool fold.
    const offered = hooked.request === undefined ? projection.tools(snapshot) : foldTools([request.messages]);

    // streamSimple maps the thinking level per provider; the probe sees each HTTP exchange (retry hints).
    const probe = exchangeProbe();
    let message: AssistantMessage;
    // In the plan of a settlement that records the answer: the frames no scratch commit wrote join the
    // preview, published with that commit once it is durable (§7.4). A deferred poll streamed nothing.
    let showUnwritten = (): void => undefined;
    if (state.status === "deferred") {
      // Poll the deferred answer; a provider that is not done yet answers deferred again.
      message = await services.models.models.fetchDeferred(model, state.handle, { signal: call.abortSignal ?? new AbortController().signal });
    } else {
      // Stream: frames to scratch, coalesced; the partial stays in memory for the preview.
      // A retry must not replay the frames of the attempt before it; a first attempt has none to clear,
      // so it spends no scratch commit on it (one fewer commit per generation).
      if (retry.attempt > 0) await runtime.scratch((sc) => sc.list(framesList).clear(), call);
      // The first attempt reuses the preview built at invocation start (one base); a retry cleared the
      // frames above, so its preview starts empty again.
      const preview = (retry.attempt > 0 ? undefined : runtime.currentPreview<GenerationPreview>()) ?? runtime.preview<GenerationPreview>({ content: [] });
      // The producer gets its own signal (§4.6): any early exit of the loop below (a failed scratch
      // commit, a post-mark rejection) cancels it, and the finally joins it, so no provider request
      // keeps running unobserved after this invocation returns.
      const producer = linkedController(call.abortSignal);
      const stream = services.models.models.streamSimple(model, request, attemptOptions(model, config.thinking, producer.controller.signal, probe));
      // The flusher folds frames into the preview only as a scratch commit writes them (or as the
      // settlement records them): what watchers see is never ahead of what a restart recovers.
      const flusher = new FrameFlusher(runtime, preview.state, services.options.flushMs, services.options.maxScratchBytes, call);
      showUnwritten = () => flusher.showUnwritten();
      let ended = false;
      try {
        for await (const event of stream) {
          for (const frame of encodeEvent(event)) flusher.push(frame);
          await flusher.maybeFlush();
        }
        ended = true;
      } finally {
        producer.cancel();
        try {
          // A stream that ended keeps its last frames in memory until its outcome is known (below);
          // any other exit writes them now.
          await (ended ? flusher.hold() : flusher.close());
        } finally {
          await stream.result();
        }
      }
      message = await stream.result();
      // The last frames are written only when something can happen between here and a settlement:
      // an after_response or on_yield hook (which may block on the world, §5.3 rule 2, §8.7), an
      // outcome that does not settle (a retry wait keeps scratch), or a cancellation (abort reads
      // the frames). Otherwise the settlement commit follows with no effect in between and would
      // delete them at once (§4.6): they are never written; the settlement's answer entry holds them
      // and watchers get them with that commit (`showUnwritten`), never before it is durable.
      if (!settlesNext(message, chain, call)) await flusher.close();
    }
    await services.hooks.run(kind, "after_response", { response: message, usage: message.usage }, chain, call);
    const usage = message.usage;
    const attemptRetry: RetryBudget = { ...retry, attempt: retry.attempt + 1 };
    const row = { conversationId: task.conversationId, taskId: task.id, kind: "generation", model: config.model, usage: usage === undefined ? null : (usage as never) };

    // A durable mark wins over any in-band outcome: the commit below rejects and abort runs.
    if (message.stopReason === "aborted" && call.abortSignal?.aborted) throw new TaskCancelled(task.id);

    // Deferred (§8.2): the provider answers later. Keep the handle and the request cutoff, record the
    // attempt's usage, and execute again from notBefore (a start status: a restart resumes polling).
    const handle = message.deferred;
    if (message.stopReason === "deferred" && handle !== undefined) {
      const through = requestThrough;
      await runtime.commit(async (tx) => {
        await recordUsage(builderOf(tx), row);
        const notBefore = runtime.now() + (handle.pollAfterMs ?? services.options.deferredPollMs ?? 30_000);
        tx.patch(task, "deferred", { inputs, config, retry, requestThrough: through, handle: handle as DeferredHandle & JsonObject, notBefore });
      }, call);
      return;
    }

    // Overflow, reported as an error or silently: an answer whose input filled the window (a `stop`
    // over it, a `length` stop with no output) was cut by the provider, so it is not answered (§8.2).
    if (isContextOverflow(message, model.contextWindow)) {
      const error = message.errorMessage ?? `context overflow (${message.stopReason}: ${message.usage.input + message.usage.cacheRead} input tokens, window ${model.contextWindow})`;
      // Overflow: settle, hand the retry to a collapse whose settlement creates G' (nothing live waits on it).
      await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        const current = await conversation.contextEntries(undefined, call);
        await recordUsage(b, row);
        const collapse = await planCollapse(b, task.conversationId, current, "overflow", { inputs, config, retry: attemptRetry }, services.options.collapseKeepEntries);
        if (collapse === undefined) {
          await resolveUnanswered(b, task.conversationId, inputs, "failed", { detail: `context overflow: ${error}`, placeWrites: true });
        }
        tx.settle(task, "failed", { inputs, config, retry: attemptRetry, reason: "overflow", error, partial: null, successor: collapse ?? null });
      }, call);
      return;
    }
    if (message.stopReason === "error" || message.stopReason === "aborted") {
      const error = message.errorMessage ?? message.stopReason;
      const decision = message.stopReason === "error" && isRetryableAssistantError(message) && attemptRetry.attempt < retry.maxAttempts
        ? retryDecision(services.options, attemptRetry.attempt, services.options.retryHonourHints === false ? undefined : retryHintMs(message, probe, runtime.now()))
        : undefined;
      if (decision?.type === "wait") {
        // The wake time is durable in state (§5.3): after an eviction the alarm resumes the sleep.
        await runtime.commit(async (tx) => {
          await recordUsage(builderOf(tx), row);
          const notBefore = runtime.now() + decision.delayMs;
          tx.patch(task, "retry_wait", { inputs, config, retry: attemptRetry, notBefore, error });
        }, call);
        return;
      }
      const failure = decision?.type === "give_up" ? `${error} (${decision.reason})` : error;
      await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        await recordUsage(b, row);
        if (message.content.length > 0) showUnwritten();
        const shown = message.content.length > 0 ? tx.entry(assistantKind, { model: [message] }) : null;
        await resolveUnanswered(b, task.conversationId, inputs, "failed", { detail: failure, placeWrites: true });
        tx.settle(task, "failed", { inputs, config, retry: attemptRetry, reason: "error", error: failure, partial: shown, successor: null });
      }, call);
      return;
    }

    const calls = message.content.filter((block): block is ToolCall => block.type === "toolCall");
    if (calls.length > 0) {
      await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        showUnwritten();
        const assistant = tx.entry(assistantKind, { model: [message] });
        const tools: Id[] = [];
        let previous: Id | undefined;
        for (const toolCall of calls) {
          const tool = services.tools.get(toolCall.name);
          const after = tool?.sequential && previous !== undefined ? [previous] : [];
          // A catalog tool's definition is captured with the call: recovery never reads the live catalog.
          const def = tool === undefined ? services.catalog?.capture(toolCall.name) : undefined;
          const planned = {
            status: "planned" as const,
            call: toolCall as ToolCall & JsonObject,
            assistant,
            ...(offered.has(toolCall.name) ? {} : { offered: false }),
            // The blocking budget from this generation's captured config (§8.3); absent is the default.
            ...(config.budgetMs === services.options.toolBudgetMs ? {} : { budgetMs: config.budgetMs }),
            ...(def === undefined ? {} : { def }),
          };
          previous = b.task({ kind: "tool" }, task.conversationId, { state: planned, after });
          tools.push(previous);
        }
        const post = b.task({ kind: "post_tools" }, task.conversationId, { state: { status: "waiting", assistant, tools, inputs }, after: tools });
        await recordUsage(b, row);
        tx.settle(task, "done", { inputs, attempt: attemptRetry.attempt, assistant, successor: post });
      }, call);
      return;
    }

    // A final answer: on_yield may continue the same group; otherwise resolve it and start the next.
    const yielded = await services.hooks.run<{ continue?: string }>(kind, "on_yield", { answer: message }, chain, call);
    await runtime.commit(async (tx) => {
      const b = builderOf(tx);
      showUnwritten();
      const assistant = tx.entry(assistantKind, { model: [message] });
      await recordUsage(b, row);
      let successor: Id | null = null;
      if (yielded.continue !== undefined) {
        b.entry({ kind: "user" }, task.conversationId, { model: [{ role: "user", content: yielded.continue, timestamp: runtime.now() }] });
        successor = createGeneration(b, task.conversationId, inputs, config, { attempt: 0, maxAttempts: retry.maxAttempts });
      } else {
        const next = await landFinalInbox(b, task.conversationId, inputs, assistant, runtime.now(), services.finalAnswer);
        if (next.length > 0) successor = createGeneration(b, task.conversationId, next, config, { attempt: 0, maxAttempts: retry.maxAttempts });
      }
      tx.settle(task, "done", { inputs, attempt: attemptRetry.attempt, assistant, ...(successor === null ? {} : { successor }) });
    }, call);
  }

  return kind;
}

/**
 * Plan a collapse of the current context (§8.4): summarize everything before the retained tail, which
 * starts on a complete exchange. Returns the collapse task id, or undefined when nothing can be folded.
 */
export async function planCollapse(
  b: TxBuilder,
  conversationId: Id,
  context: { readonly head?: { readonly id: Id }; readonly items: readonly { readonly entry: { readonly id: Id; readonly kind: string } }[] },
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
  return b.task({ kind: "collapse" }, conversationId, { state, ...(reason === "manual" ? { background: true as const } : {}) });
}

/** An AbortController that follows `parent` until `cancel` (which also aborts it and unlinks). */
function linkedController(parent: AbortSignal | undefined): { readonly controller: AbortController; cancel(): void } {
  const controller = new AbortController();
  const follow = (): void => controller.abort(parent?.reason);
  if (parent?.aborted === true) follow();
  else parent?.addEventListener("abort", follow, { once: true });
  return {
    controller,
    cancel() {
      parent?.removeEventListener("abort", follow);
      controller.abort();
    },
  };
}

/** A cheap token estimate (chars/4) for the threshold check; providers count exactly. */
export function estimateTokens(messages: readonly Message[]): number {
  let chars = 0;
  for (const m of messages) chars += JSON.stringify(m.content ?? "").length;
  return Math.ceil(chars / 4);
}

/**
 * Coalesces frames into at most one scratch commit per `flushMs`, bounded in bytes (§8.2). A timer
 * flushes what a burst left pending when the stream pauses, so watchers see the last tokens at that
 * cadence too; commits are chained, and a rejection (a post-mark TaskCancelled) surfaces to the stream
 * loop at its next flush or at close. At the end of a stream `hold` keeps the tail in memory until the
 * outcome is known: `close` writes it, or the settlement carries it away unwritten.
 *
 * The preview (§9.4) is folded from written frames only (§7.4: write all bytes, then publish): each
 * scratch commit folds its batch into the preview inside its plan, so the hub publishes it with that
 * commit once it is durable, and a kill never loses a token a watcher saw. Frames never written (the
 * held tail, frames past the budget) join the preview through `showUnwritten`, in the plan of the
 * settlement that records the answer, and reach watchers with it.
 *
 * The scratch budget (`maxBytes`): the flush that would pass it writes the frames that fit (its last
 * delta cut at the budget), so what a restart recovers is the answer up to the budget; then frames
 * stop and the stream goes on. Watchers see nothing more until the settlement, which carries the rest:
 * a watcher never holds more than a restart would recover, and the answer still settles whole.
 */
class FrameFlusher {
  readonly #runtime: TaskRuntime;
  readonly #preview: GenerationPreview;
  readonly #flushMs: number;
  readonly #maxBytes: number;
  readonly #call: Call;
  /** Frames not written yet. */
  #buffer: Frame[] = [];
  /** Frames that will never be written (past the budget): shown only with the settlement. */
  #unwritten: Frame[] = [];
  #lastFlush: number;
  #bytes = 0;
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #chain: Promise<void> = Promise.resolve();
  #failure: { error: unknown } | undefined;

  constructor(runtime: TaskRuntime, preview: GenerationPreview, flushMs: number, maxBytes: number, call: Call) {
    this.#runtime = runtime;
    this.#preview = preview;
    this.#flushMs = flushMs;
    this.#maxBytes = maxBytes;
    this.#call = call;
    this.#lastFlush = runtime.now();
  }

  push(frame: Frame): void {
    if (this.#stopped) {
      pushFrame(this.#unwritten, frame);
      return;
    }
    pushFrame(this.#buffer, frame);
    if (this.#timer === undefined && this.#failure === undefined) {
      const delay = Math.max(0, this.#lastFlush + this.#flushMs - this.#runtime.now());
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#enqueue();
      }, delay);
    }
  }

  async maybeFlush(): Promise<void> {
    if (this.#runtime.now() - this.#lastFlush >= this.#flushMs) this.#enqueue();
    await this.#settled();
  }

  /** Stop the timer and join the scratch commits; frames still pending stay in memory. */
  async hold(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#settled();
  }

  /** Write what is pending (within the budget) and join the scratch commits. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#enqueue();
    await this.#settled();
  }

  /**
   * After `hold` or `close`, inside the plan of the settlement that records the answer: fold the frames
   * no scratch commit wrote into the preview, so the settlement commit publishes them (preview.ts).
   */
  showUnwritten(): void {
    for (const frame of [...this.#buffer, ...this.#unwritten]) applyFrame(this.#preview, frame);
    this.#buffer = [];
    this.#unwritten = [];
  }

  #enqueue(): void {
    if (this.#failure !== undefined || this.#stopped || this.#buffer.length === 0) return;
    let frames = this.#buffer;
    this.#buffer = [];
    this.#lastFlush = this.#runtime.now();
    const room = this.#maxBytes - this.#bytes;
    if (frameBytes(frames) > room) {
      // Past the budget: write the frames that fit, keep the rest (and every later frame) unwritten.
      this.#stopped = true;
      const fit = fitFrames(frames, room);
      for (const frame of framesAfter(frames, fit)) pushFrame(this.#unwritten, frame);
      frames = fit;
      if (frames.length === 0) return;
    }
    this.#bytes += frameBytes(frames);
    const batch = frames;
    this.#chain = this.#chain.then(async () => {
      if (this.#failure !== undefined) return;
      try {
        await this.#runtime.scratch((sc) => {
          sc.list(framesList).append({ f: batch });
          // Shown with this commit: the hub flushes the preview once the commit is durable (preview.ts).
          for (const frame of batch) applyFrame(this.#preview, frame);
        }, this.#call);
      } catch (error) {
        this.#failure = { error };
      }
    });
  }

  async #settled(): Promise<void> {
    await this.#chain;
    if (this.#failure !== undefined) throw this.#failure.error;
  }
}

export type { AssistantEntry, ConversationHandle };
