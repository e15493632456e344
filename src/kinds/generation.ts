/**
 * The generation kind (§8.2): one task per model answer, living through retries. It prepares system
 * instructions (sections and tools) and the request cutoff on the line, streams through pi-ai's
 * `streamSimple` with only `{ messages }` (the thinking level and retry probe are request options,
 * `model-request.ts`), persists compact frames to scratch (coalesced), and settles with exactly one outcome:
 * calls (tools + post_tools), final answer (resolving its input group), retry_wait, overflow (handed to
 * a collapse whose settlement creates the next generation), or failure. Usage is recorded per attempt.
 *
 * This file is the kind's registration (execute, recover, abort, the preview's init) and one attempt's
 * course; its steps live by concept: request preparation and the threshold collapse
 * (generation-prepare.ts), streaming, frames and the preview (generation-stream.ts), settlement and
 * its outcomes, retry_wait included (generation-settle.ts), and the shared shapes (generation-types.ts).
 */
import type { AssistantMessage } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { ConversationHandle } from "../core/conversation.js";
import { assistantKind, type AssistantEntry } from "../core/entries.js";
import { PicoError } from "../core/errors.js";
import type { TaskRuntime } from "../core/runtime.js";
import { defineTaskKind } from "../core/task-kind.js";
import type { Id } from "../storage/records.js";
import { ownershipChain } from "./chain.js";
import { generationConfig, readOnInterrupt } from "./config.js";
import { exchangeProbe } from "./model-request.js";
import { framesList, partialMessage } from "./frames.js";
import { resolveUnanswered } from "./placement.js";
import { ProjectionCache } from "./request-cache.js";
import { generationRoles, type CapturedConfig, type GenerationState } from "./states.js";
import { recordUsage } from "./usage.js";
import { startChildSpan } from "../core/telemetry.js";
import { chatSpanName } from "../core/telemetry-genai.js";
import { chatRequestAttributes, endChatSpan } from "./generation-spans.js";
import { collapseBeforeRequest, prepareRequest } from "./generation-prepare.js";
import { retryOrFail, settleAnswer } from "./generation-settle.js";
import { applyFrame, readFrames, receiveAnswer, type GenerationPreview } from "./generation-stream.js";
import {
  builderOf,
  type Attempt,
  type GenerationContext,
  type GenerationHooks,
  type GenerationServices,
  type GenTask,
} from "./generation-types.js";

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
        for (let after: Id | undefined; ;) {
          const page = await scratch
            .list(framesList)
            .read(after === undefined ? { limit: 1000 } : { after, limit: 1000 }, call);
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
      // rest (docs/design.md "Alarms and restarts"): "retry" (default) runs the attempt again within the retry budget;
      // "fail"
      // settles without tools/results as §8.2 reads.
      const batches = await readFrames(runtime, call);
      const { status: _status, ...base } = task.state;
      if (batches.length > 0) {
        const error = "interrupted by a restart";
        const retried = await runtime.commit(async (tx) => {
          const b = builderOf(tx);
          const message = partialMessage(modelBase(base.config), batches, runtime.now(), error);
          const partial = message === undefined ? null : tx.entry(assistantKind, { model: [message] });
          await recordUsage(b, {
            conversationId: task.conversationId,
            taskId: task.id,
            kind: "generation",
            model: base.config.model,
            usage: null,
          });
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
      await retryOrFail(services, task, runtime, base, "interrupted before any output", call);
    },
    async abort(task, runtime, call) {
      if (task.state.status === "deferred") {
        // Best effort: the provider may stop working on an answer nobody will read.
        const model = services.models.resolve(task.state.config.model);
        if (model !== undefined)
          await services.models.models
            .cancelDeferred(model, task.state.handle, { signal: call.abortSignal ?? new AbortController().signal })
            .catch(() => undefined);
      }
      const state = task.state;
      if (state.status === "done")
        throw new PicoError("contract", `generation ${task.id} is settled (done); nothing to abort`);
      const batches = await readFrames(runtime, call);
      const { status: _status, ...base } = state;
      await runtime.commit(async (tx) => {
        const b = builderOf(tx);
        const message =
          batches.length > 0 ? partialMessage(modelBase(base.config), batches, runtime.now(), "aborted") : undefined;
        const partial = message === undefined ? null : tx.entry(assistantKind, { model: [message] });
        await resolveUnanswered(b, task.conversationId, base.inputs, "aborted");
        if (state.status === "streaming") {
          await recordUsage(b, {
            conversationId: task.conversationId,
            taskId: task.id,
            kind: "generation",
            model: base.config.model,
            usage: null,
          });
        }
        tx.settle(task, "aborted", { ...base, partial });
      }, call);
    },
  });
  // What the steps of an attempt close over (generation-types.ts).
  const ctx: GenerationContext = { services, kind, projections };

  function modelBase(config: CapturedConfig): Pick<AssistantMessage, "api" | "provider" | "model"> {
    const model = services.models.resolve(config.model);
    return { api: model?.api ?? "unknown", provider: model?.provider ?? "unknown", model: model?.id ?? config.model };
  }

  async function runAttempt(task: GenTask, runtime: TaskRuntime, call: Call): Promise<void> {
    const state = task.state;
    if (
      state.status !== "pending" &&
      state.status !== "retry_wait" &&
      state.status !== "streaming" &&
      state.status !== "deferred"
    ) {
      throw new PicoError("contract", `generation ${task.id} cannot run from ${state.status}`);
    }
    if (state.status === "retry_wait" || state.status === "deferred") await runtime.sleep(state.notBefore, call);
    const { inputs, config, retry } = state;
    const conversation = await runtime.conversation(task.conversationId, call);
    if (conversation === undefined) throw new PicoError("not_found", `conversation ${task.conversationId} vanished`);
    const model = services.models.resolve(config.model);

    if (model === undefined) {
      await runtime.commit(async (tx) => {
        await resolveUnanswered(builderOf(tx), task.conversationId, inputs, "failed", {
          detail: `unknown model ${config.model}`,
          placeWrites: true,
        });
        tx.settle(task, "failed", {
          inputs,
          config,
          retry,
          reason: "error",
          error: `unknown model ${config.model}`,
          partial: null,
          successor: null,
        });
      }, call);
      return;
    }

    const attempt: Attempt = { task, state, runtime, conversation, model, call };
    if (await collapseBeforeRequest(ctx, attempt)) return;

    // Preparation: sections and tools outside the line, the system entry and cutoff on the line.
    const chain = await ownershipChain(runtime, task.conversationId, call);
    const prepared = await prepareRequest(ctx, attempt, chain);

    // streamSimple maps the thinking level per provider; the probe sees each HTTP exchange (retry hints).
    const probe = exchangeProbe();
    // One `chat {model}` span per model request (GenAI conventions, src/core/telemetry-genai.ts).
    const span = startChildSpan(call, chatSpanName(model.id), chatRequestAttributes(model));
    let answer: Awaited<ReturnType<typeof receiveAnswer>>;
    try {
      answer = await receiveAnswer(ctx, attempt, prepared.request, chain, probe);
      endChatSpan(span, answer.message);
    } catch (error) {
      span.recordError(error);
      span.setStatus("error", error instanceof Error ? error.message : String(error));
      span.end();
      throw error;
    }
    await services.hooks.run(
      kind,
      "after_response",
      { response: answer.message, usage: answer.message.usage },
      chain,
      call,
    );
    await settleAnswer(ctx, attempt, answer, prepared, chain, probe);
  }

  return kind;
}

export type { AssistantEntry, ConversationHandle };
