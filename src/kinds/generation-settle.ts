/**
 * How a generation attempt settles (§8.2), with exactly one outcome: deferred (poll from notBefore),
 * overflow (handed to a collapse whose settlement creates the next generation), retry_wait within the
 * retry budget, failure, calls (tools + post_tools), or a final answer (resolving its input group, or
 * continued by on_yield). Usage is recorded per attempt.
 */
import type { DeferredHandle, ToolCall } from "@earendil-works/pi-ai";
import { isContextOverflow, isRetryableAssistantError } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { assistantKind } from "../core/entries.js";
import { TaskCancelled } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import type { Id, JsonObject } from "../storage/records.js";
import { planCollapse } from "./collapse.js";
import { retryDecision, retryHintMs, type ExchangeProbe } from "./model-request.js";
import { createGeneration, landFinalInbox, resolveUnanswered } from "./placement.js";
import type { GenerationState, RetryBudget } from "./states.js";
import { recordUsage } from "./usage.js";
import type { PreparedRequest } from "./generation-prepare.js";
import type { ReceivedAnswer } from "./generation-stream.js";
import {
  builderOf,
  type Attempt,
  type GenerationContext,
  type GenerationServices,
  type GenTask,
} from "./generation-types.js";
import { runToolCapture, runToolOf, takeRunTools, withRunTools } from "./run-tools.js";

/** Exponential backoff with the configured jitter and cap (`model-request.ts`), ms. */
export function retryDelay(options: GenerationServices["options"], attempt: number): number {
  const decision = retryDecision(options, attempt, undefined);
  return decision.type === "wait" ? decision.delayMs : options.retryMaxDelayMs;
}

/**
 * An attempt that ended with nothing to show (interrupted before any output): retry_wait within the
 * retry budget, else fail.
 */
export async function retryOrFail(
  services: GenerationServices,
  task: GenTask,
  runtime: TaskRuntime,
  base: Omit<GenerationState & { status: "pending" }, "status">,
  error: string,
  call: Call,
): Promise<void> {
  const attempt = base.retry.attempt + 1;
  await runtime.commit(async (tx) => {
    // The interrupted attempt reached the provider; what it cost is unknown, not zero (§8.2).
    await recordUsage(builderOf(tx), {
      conversationId: task.conversationId,
      taskId: task.id,
      kind: "generation",
      model: base.config.model,
      usage: null,
    });
    if (attempt < base.retry.maxAttempts) {
      const notBefore = runtime.now() + retryDelay(services.options, attempt);
      tx.patch(task, "retry_wait", {
        inputs: base.inputs,
        config: base.config,
        retry: { ...base.retry, attempt },
        notBefore,
        error,
      });
    } else {
      await resolveUnanswered(builderOf(tx), task.conversationId, base.inputs, "failed", {
        detail: error,
        placeWrites: true,
      });
      tx.settle(task, "failed", {
        inputs: base.inputs,
        config: base.config,
        retry: { ...base.retry, attempt },
        reason: "error",
        error,
        partial: null,
        successor: null,
      });
    }
  }, call);
}

/**
 * Settle the attempt with its answer (after the after_response hook): `prepared` is the request it
 * answers, `chain` the ownership chain whose on_yield handlers may continue a final answer, `probe` the
 * HTTP exchanges (retry hints).
 */
export async function settleAnswer(
  ctx: GenerationContext,
  attempt: Attempt,
  answer: ReceivedAnswer,
  prepared: PreparedRequest,
  chain: readonly Id[],
  probe: ExchangeProbe,
): Promise<void> {
  const { services, kind } = ctx;
  const { task, state, runtime, conversation, model, call } = attempt;
  const { inputs, config, retry } = state;
  const { message, showUnwritten } = answer;
  const { requestThrough, offered } = prepared;
  const usage = message.usage;
  const attemptRetry: RetryBudget = { ...retry, attempt: retry.attempt + 1 };
  const row = {
    conversationId: task.conversationId,
    taskId: task.id,
    kind: "generation",
    model: config.model,
    usage: usage === undefined ? null : (usage as never),
  };

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
      tx.patch(task, "deferred", {
        inputs,
        config,
        retry,
        requestThrough: through,
        handle: handle as DeferredHandle & JsonObject,
        notBefore,
      });
    }, call);
    return;
  }

  // Overflow, reported as an error or silently: an answer whose input filled the window (a `stop`
  // over it, a `length` stop with no output) was cut by the provider, so it is not answered (§8.2).
  if (isContextOverflow(message, model.contextWindow)) {
    const error =
      message.errorMessage ??
      `context overflow (${message.stopReason}: ${message.usage.input + message.usage.cacheRead} input tokens, window ${model.contextWindow})`;
    // Overflow: settle, hand the retry to a collapse whose settlement creates G' (nothing live waits on it).
    await runtime.commit(async (tx) => {
      const b = builderOf(tx);
      const current = await conversation.contextEntries(undefined, call);
      await recordUsage(b, row);
      const collapse = await planCollapse(
        b,
        task.conversationId,
        current,
        "overflow",
        { inputs, config, retry: attemptRetry },
        services.options.collapseKeepEntries,
      );
      if (collapse === undefined) {
        await resolveUnanswered(b, task.conversationId, inputs, "failed", {
          detail: `context overflow: ${error}`,
          placeWrites: true,
        });
      }
      tx.settle(task, "failed", {
        inputs,
        config,
        retry: attemptRetry,
        reason: "overflow",
        error,
        partial: null,
        successor: collapse ?? null,
      });
    }, call);
    return;
  }
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    const error = message.errorMessage ?? message.stopReason;
    const decision =
      message.stopReason === "error" && isRetryableAssistantError(message) && attemptRetry.attempt < retry.maxAttempts
        ? retryDecision(
            services.options,
            attemptRetry.attempt,
            services.options.retryHonourHints === false ? undefined : retryHintMs(message, probe, runtime.now()),
          )
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
      tx.settle(task, "failed", {
        inputs,
        config,
        retry: attemptRetry,
        reason: "error",
        error: failure,
        partial: shown,
        successor: null,
      });
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
        // A catalog tool's definition is captured with the call: recovery never reads the live catalog. A page
        // tool of this turn (run-tools.ts) is captured the same way, as a client tool.
        const runTool = tool === undefined ? runToolOf(config, toolCall.name) : undefined;
        const def =
          tool !== undefined
            ? undefined
            : runTool !== undefined
              ? runToolCapture(runTool)
              : services.catalog?.capture(toolCall.name);
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
      const post = b.task({ kind: "post_tools" }, task.conversationId, {
        state: {
          status: "waiting",
          assistant,
          tools,
          inputs,
          ...(config.runTools ? { runTools: config.runTools } : {}),
        },
        after: tools,
      });
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
      b.entry({ kind: "user" }, task.conversationId, {
        model: [{ role: "user", content: yielded.continue, timestamp: runtime.now() }],
      });
      successor = createGeneration(b, task.conversationId, inputs, config, {
        attempt: 0,
        maxAttempts: retry.maxAttempts,
      });
    } else {
      const next = await landFinalInbox(b, task.conversationId, inputs, assistant, runtime.now(), services.finalAnswer);
      // A new group: the page tools of this one are not offered to it, only those its own input queued with
      // (run-tools.ts).
      if (next.length > 0)
        successor = createGeneration(
          b,
          task.conversationId,
          next,
          withRunTools(config, await takeRunTools(b, task.conversationId, next)),
          {
            attempt: 0,
            maxAttempts: retry.maxAttempts,
          },
        );
    }
    tx.settle(task, "done", {
      inputs,
      attempt: attemptRetry.attempt,
      assistant,
      ...(successor === null ? {} : { successor }),
    });
  }, call);
}
