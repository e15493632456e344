/**
 * Streaming a generation's answer (§8.2) and what watchers see of it (§9.4): the preview folded from
 * frames, the frames persisted to scratch (coalesced, bounded in bytes, `FrameFlusher`) and read back by
 * recovery and abort, and one attempt's answer: streamed through pi-ai's `streamSimple` with only
 * `{ messages }`, or polled when the provider deferred it.
 */
import type { AssistantMessage, Context } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { TaskRuntime } from "../core/runtime.js";
import type { Id } from "../storage/records.js";
import {
  encodeEvent,
  fitFrames,
  frameBytes,
  framesAfter,
  framesList,
  pushFrame,
  type Frame,
  type FrameBatch,
} from "./frames.js";
import { attemptOptions, type ExchangeProbe } from "./model-request.js";
import type { Attempt, GenerationContext } from "./generation-types.js";

/** What watchers see of a streaming generation: the partial answer's content blocks (§9.4). */
export interface GenerationPreview {
  content: (
    | { type: "text"; text: string }
    | { type: "thinking"; thinking: string }
    | { type: "toolCall"; id: string; name: string; arguments: string }
  )[];
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

/** Every frame batch on scratch, in order: what a recovery or an abort keeps of the partial answer. */
export async function readFrames(runtime: TaskRuntime, call: Call): Promise<FrameBatch[]> {
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

/** One attempt's answer, and how to show its frames no scratch commit wrote. */
export interface ReceivedAnswer {
  readonly message: AssistantMessage;
  /**
   * In the plan of a settlement that records the answer: the frames no scratch commit wrote join the
   * preview, published with that commit once it is durable (§7.4). A deferred poll streamed nothing.
   */
  readonly showUnwritten: () => void;
}

/**
 * The answer to `request`: polled when the provider deferred it, otherwise streamed with frames to scratch.
 * `chain` is the ownership chain whose hooks may run after the stream; `probe` sees each HTTP exchange.
 */
export async function receiveAnswer(
  ctx: GenerationContext,
  attempt: Attempt,
  request: Context,
  chain: readonly Id[],
  probe: ExchangeProbe,
): Promise<ReceivedAnswer> {
  const { services } = ctx;
  const { state, runtime, model, call } = attempt;
  const { config, retry } = state;
  let message: AssistantMessage;
  let showUnwritten = (): void => undefined;
  if (state.status === "deferred") {
    // Poll the deferred answer; a provider that is not done yet answers deferred again.
    message = await services.models.models.fetchDeferred(model, state.handle, {
      signal: call.abortSignal ?? new AbortController().signal,
    });
  } else {
    // Stream: frames to scratch, coalesced; the partial stays in memory for the preview.
    // A retry must not replay the frames of the attempt before it; a first attempt has none to clear,
    // so it spends no scratch commit on it (one fewer commit per generation).
    if (retry.attempt > 0) await runtime.scratch((sc) => sc.list(framesList).clear(), call);
    // The first attempt reuses the preview built at invocation start (one base); a retry cleared the
    // frames above, so its preview starts empty again.
    const preview =
      (retry.attempt > 0 ? undefined : runtime.currentPreview<GenerationPreview>()) ??
      runtime.preview<GenerationPreview>({ content: [] });
    // The producer gets its own signal (§4.6): any early exit of the loop below (a failed scratch
    // commit, a post-mark rejection) cancels it, and the finally joins it, so no provider request
    // keeps running unobserved after this invocation returns.
    const producer = linkedController(call.abortSignal);
    const stream = services.models.models.streamSimple(
      model,
      request,
      attemptOptions(model, config.thinking, producer.controller.signal, probe),
    );
    // The flusher folds frames into the preview only as a scratch commit writes them (or as the
    // settlement records them): what watchers see is never ahead of what a restart recovers.
    const flusher = new FrameFlusher(
      runtime,
      preview.state,
      services.options.flushMs,
      services.options.maxScratchBytes,
      call,
    );
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
        // A stream that ended keeps its last frames in memory until its outcome is known (settlesNext);
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
    if (!settlesNext(ctx, message, chain, call)) await flusher.close();
  }
  return { message, showUnwritten };
}

/**
 * Whether the commit after this stream settles the task with nothing outside the line before it: a
 * completed answer (calls, final or overflow), no after_response handler, no on_yield handler for an
 * answer without calls, no cancellation.
 */
function settlesNext(ctx: GenerationContext, message: AssistantMessage, chain: readonly Id[], call: Call): boolean {
  if (call.abortSignal?.aborted === true) return false;
  if (message.stopReason !== "stop" && message.stopReason !== "length" && message.stopReason !== "toolUse")
    return false;
  if (ctx.services.hooks.handlers(ctx.kind.kind, "after_response", chain).length > 0) return false;
  const calls = message.content.some((block) => block.type === "toolCall");
  return calls || ctx.services.hooks.handlers(ctx.kind.kind, "on_yield", chain).length === 0;
}

/**
 * The reason `cancel` aborts a stream's signal with: the AbortError a reasonless `abort()` would
 * create (same name and message), made once. Building a DOMException captures a stack, twice a turn
 * on the hot path (docs/performance.md); readers compare a reason by name or with their own signal's
 * reason, never by its stack.
 */
const STREAM_LEFT = new DOMException("This operation was aborted", "AbortError");

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
      controller.abort(STREAM_LEFT);
    },
  };
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
