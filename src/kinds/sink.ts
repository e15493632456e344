/**
 * The tool output sink (§9.3): everything a tool produces goes through it. It keeps the live folded
 * state (what settlement records as ToolOutputState) and persists compact output operations to the
 * task's scratch (§4.6) so recover/abort can rebuild the output from durable state alone:
 *
 *   { t: "w", s, n? }   write: append text (s is at most the retained window; n = chars it stands for)
 *   { t: "r", s, n? }   replace the text wholesale (same windowing)
 *   { t: "i", v }       an image (never windowed)
 *   { t: "d", v }       a details snapshot (tools mutate their details object; a flush diffs it)
 *   { t: "u", v }       usage to add (accumulates)
 *   { t: "a", v }       addTools (replaces)          { t: "x", v }   terminate (replaces)
 *   { t: "h", s }       handoff (replaces)           { t: "j", v }   delegate to job v (replaces)
 *   { t: "g", v }       a diagnostic
 *   { t: "c", n, p? }   capture: the text stands for n characters; p = where the whole output was spilled
 *
 * A flush appends one scratch list element `{ o: SinkOp[] }` with consecutive writes merged; flushes are
 * coalesced to at most one per `flushMs` and never overlap. When the ops written since the last
 * checkpoint pass `compactBytes`, the flush instead sets the checkpoint value to the durable fold and
 * clears the list, so scratch stays bounded by the retained window plus that margin.
 *
 * The preview (§9.4) folds what was written, never more (§7.4: write, then publish): each flush folds its
 * batch into the preview inside its scratch commit, so watchers get it with that commit; output no flush
 * wrote reaches the preview only through `showUnwritten()`, inside the settlement commit that records it.
 * A kill therefore never loses output a watcher saw: recover and abort rebuild at least that from scratch.
 *
 * The sink owns its scratch promises (§6.3): it awaits and catches each one. A rejection that is
 * expected after a durable abort mark or close (TaskCancelled, closed) stops persistence and drops late
 * output silently; any other rejection is a real persistence error: it is reported and `drain()`
 * rethrows it, so the invocation fails and the session fail-stops (§8.2 "Persistence and invariant
 * failures ... fault the session"). `drain()` is awaited before the invocation returns; afterwards the
 * sink ignores further calls, so a leaked callback cannot write scratch that settlement retired.
 *
 * One concept over 400 lines: the tool output sink. The op fold and the live sink that writes those ops
 * belong together, because recover and abort rebuild output with the same fold.
 */
import type { ImageContent, TextContent, Usage } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import { PicoError, TaskCancelled } from "../core/errors.js";
import type { ListHandle, ValueHandle } from "../core/harness.js";
import type { TaskRuntime } from "../core/runtime.js";
import { scratchList, scratchValue, type ListRef, type ValueRef } from "../core/state.js";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";
import { StorageError } from "../storage/storage.js";
import type { ShellOutputMetadata } from "../core/env.js";
import type { ToolOutput } from "./services.js";
import type { ToolDiag, ToolOutputState } from "./states.js";

export type SinkOp =
  | { readonly t: "w"; readonly s: string; readonly n?: number }
  | { readonly t: "r"; readonly s: string; readonly n?: number }
  | { readonly t: "i"; readonly v: JsonValue }
  | { readonly t: "d"; readonly v: JsonValue }
  | { readonly t: "u"; readonly v: JsonValue }
  | { readonly t: "a"; readonly v: string[] }
  | { readonly t: "x"; readonly v: boolean }
  | { readonly t: "h"; readonly s: string }
  | { readonly t: "j"; readonly v: Id }
  | { readonly t: "g"; readonly v: ToolDiag }
  | { readonly t: "c"; readonly n: number; readonly p?: string };

/** One flush: one scratch list element. */
export interface OpBatch {
  readonly o: readonly SinkOp[];
}

/** The folded sink state; also the checkpoint's payload. */
export interface SinkFold extends JsonObject {
  /** The retained window: the tail of the text, at most `maxChars` characters. */
  text: string;
  /** Characters the current text stands for (a replace restarts the count). */
  totalChars: number;
  images: JsonValue[];
  details: JsonValue;
  usage: JsonValue;
  addedTools: string[] | null;
  terminate: boolean;
  handoff: string | null;
  delegated: Id | null;
  diags: ToolDiag[];
  /** Where the whole output was spilled (`capture`), if it was. */
  spill: string | null;
}

export const sinkOps = scratchList<OpBatch>("pi.tool.ops");
export const sinkCheckpoint = scratchValue<SinkFold>("pi.tool.checkpoint");

export const DEFAULT_MAX_OUTPUT_CHARS = 50_000;
export const DEFAULT_COMPACT_BYTES = 256 * 1024;

export function emptyFold(): SinkFold {
  return {
    text: "",
    totalChars: 0,
    images: [],
    details: {},
    usage: null,
    addedTools: null,
    terminate: false,
    handoff: null,
    delegated: null,
    diags: [],
    spill: null,
  };
}

// ---------------------------------------------------------------------------------------------
// The fold: the one reducer the live sink, recover and abort share.

/** Apply one op in place. */
export function applyOp(state: SinkFold, op: SinkOp, maxChars: number): void {
  switch (op.t) {
    case "w":
      state.totalChars += op.n ?? op.s.length;
      state.text = tail(state.text + op.s, maxChars);
      break;
    case "r":
      state.totalChars = op.n ?? op.s.length;
      state.text = tail(op.s, maxChars);
      state.spill = null;
      break;
    case "i":
      state.images.push(op.v);
      break;
    case "d":
      state.details = op.v;
      break;
    case "u":
      state.usage = addUsage(state.usage, op.v);
      break;
    case "a":
      state.addedTools = [...op.v];
      break;
    case "x":
      state.terminate = op.v;
      break;
    case "h":
      state.handoff = op.s;
      break;
    case "j":
      state.delegated = op.v;
      break;
    case "g":
      state.diags.push(op.v);
      break;
    case "c":
      // Totals without the text (§9.3 capture): never fewer than what is retained.
      state.totalChars = Math.max(op.n, state.text.length);
      state.spill = op.p ?? null;
      break;
    default: {
      const never: never = op;
      throw new PicoError("contract", `unknown sink op ${JSON.stringify(never)}`);
    }
  }
}

/** Rebuild the folded state from a checkpoint (if any) and the op batches written after it. */
export function fold(batches: readonly OpBatch[], maxChars: number, from?: SinkFold): SinkFold {
  const state = from === undefined ? emptyFold() : cloneFold(from);
  for (const batch of batches) for (const op of batch.o) applyOp(state, op, maxChars);
  return state;
}

/** Read the durable sink state of a task (recover and abort: only durable records, §6.3). */
export async function readSinkScratch(
  runtime: { value<T>(addr: ValueRef<T>): ValueHandle<T>; list<T>(addr: ListRef<T>): ListHandle<T> },
  maxChars: number,
  call: Call,
): Promise<SinkFold> {
  const checkpoint = await runtime.value(sinkCheckpoint).get(call);
  const batches: OpBatch[] = [];
  let after: Id | undefined;
  for (;;) {
    const page = await runtime.list(sinkOps).read(after === undefined ? { limit: 1000 } : { after, limit: 1000 }, call);
    batches.push(...page.items.map((e) => e.value));
    if (page.next === undefined) break;
    after = page.next;
  }
  return fold(batches, maxChars, checkpoint);
}

/**
 * What settlement records (§9.3): content is the retained text then the images; when the text was
 * windowed, the harness-owned `truncated` warning is added to the diagnostics with the final totals.
 */
export function outputState(state: SinkFold, isError: boolean): ToolOutputState {
  const content: JsonValue[] = [];
  if (state.text !== "") content.push({ type: "text", text: state.text } satisfies TextContent);
  content.push(...state.images);
  const retainedChars = state.text.length;
  const truncated = state.totalChars > retainedChars;
  const diags = [...state.diags];
  if (truncated) {
    diags.push({
      severity: "warn",
      message: `output truncated: showing the last ${fmt(retainedChars)} of ${fmt(state.totalChars)} characters${state.spill === null || state.spill === undefined ? "" : `; full output at ${state.spill}`}`,
      code: "truncated",
    });
  } else if (state.spill !== null && state.spill !== undefined) {
    diags.push({ severity: "info", message: `full output at ${state.spill}`, code: "spilled" });
  }
  return {
    content,
    details: state.details,
    usage: state.usage,
    addedTools: state.addedTools,
    terminate: state.terminate,
    handoff: state.handoff,
    delegated: state.delegated,
    diags,
    truncation: { totalChars: state.totalChars, retainedChars, truncated },
    isError,
  };
}

// ---------------------------------------------------------------------------------------------
// The live sink

export interface SinkOptions {
  /** The invocation's runtime: scratch commits and the injected clock. */
  readonly runtime: Pick<TaskRuntime, "scratch" | "now">;
  /** The invocation's call: scratch commits carry its identity and observe its cancellation. */
  readonly call: Call;
  /** At most one scratch commit per this many ms (TurnOptions.flushMs). */
  readonly flushMs: number;
  /** Retained text window in characters (Tool.maxOutputChars). */
  readonly maxChars: number;
  /** Op bytes since the last checkpoint before a flush compacts into a new checkpoint. */
  readonly compactBytes?: number;
  /** Start from this state (a replay that continues durable output); default empty. */
  readonly seed?: SinkFold;
  /** Real persistence errors, as they happen (drain() also rethrows the first one). */
  readonly report?: (error: unknown) => void;
  /** The invocation's preview state (a Chord tracker's `state`): the sink folds each flushed batch into
   * it inside its scratch commit, so watchers see output live at the scratch-commit cadence and only
   * once it is durable (§9.3, §9.4, §7.4); `showUnwritten()` folds the rest. */
  readonly preview?: SinkFold;
}

export class ToolSink implements ToolOutput<JsonValue> {
  readonly #runtime: Pick<TaskRuntime, "scratch" | "now">;
  readonly #call: Call;
  readonly #flushMs: number;
  readonly #maxChars: number;
  readonly #compactBytes: number;
  readonly #report: (error: unknown) => void;
  readonly #preview: SinkFold | undefined;
  /** Everything the tool produced (what normal settlement records). */
  readonly #state: SinkFold;
  /** What the committed scratch folds to. */
  #durable: SinkFold;
  #pending: SinkOp[] = [];
  #detailsJson: string;
  #opBytes = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #lastFlush = Number.NEGATIVE_INFINITY;
  #chain: Promise<void> = Promise.resolve();
  /** Persistence stopped: an expected cancellation (late output is dropped) or a real error. */
  #stopped = false;
  #error: { error: unknown } | undefined;
  #drained = false;
  #dropped = 0;

  constructor(options: SinkOptions) {
    this.#runtime = options.runtime;
    this.#call = options.call;
    this.#flushMs = options.flushMs;
    this.#maxChars = options.maxChars;
    this.#compactBytes = options.compactBytes ?? DEFAULT_COMPACT_BYTES;
    this.#report = options.report ?? (() => undefined);
    this.#preview = options.preview;
    this.#state = options.seed === undefined ? emptyFold() : cloneFold(options.seed);
    this.#durable = cloneFold(this.#state);
    this.#detailsJson = JSON.stringify(this.#state.details);
  }

  // ToolOutput --------------------------------------------------------------------------------

  get details(): JsonValue {
    return this.#state.details;
  }

  set details(value: JsonValue) {
    if (this.#drained) return;
    this.#state.details = value;
    this.#schedule();
  }

  write(text: string): void {
    if (text !== "") this.#op({ t: "w", s: text });
  }

  replace(text: string): void {
    this.#op({ t: "r", s: text });
  }

  image(image: ImageContent): void {
    this.#op({ t: "i", v: { type: "image", data: image.data, mimeType: image.mimeType } });
  }

  usage(usage: Usage): void {
    this.#op({ t: "u", v: usage as Usage & JsonObject });
  }

  addTools(names: string[]): void {
    this.#op({ t: "a", v: [...names] });
  }

  terminate(value: boolean): void {
    this.#op({ t: "x", v: value });
  }

  handoff(message: string): void {
    this.#op({ t: "h", s: message });
  }

  delegate(job: Id): void {
    this.#op({ t: "j", v: job });
  }

  capture(metadata: ShellOutputMetadata): void {
    if (!Number.isSafeInteger(metadata.totalChars) || metadata.totalChars < 0) {
      throw new PicoError(
        "contract",
        `capture: totalChars must be a non-negative integer, got ${String(metadata.totalChars)}`,
      );
    }
    this.#op(
      metadata.spillPath === undefined
        ? { t: "c", n: metadata.totalChars }
        : { t: "c", n: metadata.totalChars, p: metadata.spillPath },
    );
  }

  diag(severity: "info" | "warn" | "error", message: string, code?: string): void {
    this.#op({ t: "g", v: { severity, message, code: code ?? null } });
  }

  // harness side -------------------------------------------------------------------------------

  /** The live folded state (a copy). */
  state(): SinkFold {
    return cloneFold(this.#state);
  }

  /** What settlement records for the live state. */
  output(isError: boolean): ToolOutputState {
    return outputState(this.state(), isError);
  }

  /** Operations dropped after the sink drained (leaked callbacks), for diagnostics and tests. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Whether persistence stopped on an expected cancellation (the task was marked or the session closes). */
  get cancelled(): boolean {
    return this.#stopped && this.#error === undefined;
  }

  /**
   * Flush what is pending, wait for every scratch commit, and stop accepting output. Rethrows the first
   * real persistence error; expected cancellation rejections were already absorbed. `tail: "hold"`
   * writes nothing more: the caller settles next with nothing in between (§4.6: the settlement would
   * delete what a last flush wrote), the live state (`output()`) still holds every op, and the preview
   * gets the unwritten rest from `showUnwritten()` in the settlement's plan.
   */
  async drain(tail: "flush" | "hold" = "flush"): Promise<void> {
    if (tail === "flush") {
      this.#flush();
    } else if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#drained = true;
    await this.#chain;
    if (this.#error !== undefined) throw this.#error.error;
  }

  /**
   * After `drain("hold")`, inside the plan of the settlement commit that records `output()`: fold the
   * output no flush wrote into the preview, so watchers get it in that commit's message (the hub flushes
   * a settling task's preview with its settlement), never before it is durable. Nothing after a stop
   * (cancellation, persistence error) is folded: such a task does not settle with this output.
   */
  showUnwritten(): void {
    const ops = this.#stopped ? [] : this.#pending;
    this.#pending = [];
    const detailsJson = JSON.stringify(this.#state.details);
    if (!this.#stopped && detailsJson !== this.#detailsJson) {
      ops.push({ t: "d", v: JSON.parse(detailsJson) as JsonValue });
      this.#detailsJson = detailsJson;
    }
    if (this.#preview === undefined || ops.length === 0) return;
    for (const op of coalesce(ops, this.#maxChars)) applyOp(this.#preview, op, this.#maxChars);
  }

  // internals ----------------------------------------------------------------------------------

  #op(op: SinkOp): void {
    if (this.#drained) {
      this.#dropped += 1;
      return;
    }
    applyOp(this.#state, op, this.#maxChars);
    if (this.#stopped) return;
    if (op.t === "r") {
      // A replace makes earlier pending text operations irrelevant (the totals restart too).
      this.#pending = this.#pending.filter((p) => p.t !== "w" && p.t !== "r" && p.t !== "c");
    }
    this.#pending.push(op);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#stopped || this.#drained || this.#timer !== undefined) return;
    const delay = Math.max(0, this.#lastFlush + this.#flushMs - this.#runtime.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, delay);
  }

  /** Take the pending ops (and a details change) and chain one scratch commit for them. */
  #flush(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#stopped || this.#drained) return;
    const ops = this.#pending;
    this.#pending = [];
    const detailsJson = JSON.stringify(this.#state.details);
    if (detailsJson !== this.#detailsJson) {
      ops.push({ t: "d", v: JSON.parse(detailsJson) as JsonValue });
      this.#detailsJson = detailsJson;
    }
    if (ops.length === 0) return;
    this.#lastFlush = this.#runtime.now();
    const batch: OpBatch = { o: coalesce(ops, this.#maxChars) };
    this.#chain = this.#chain.then(() => this.#persist(batch));
  }

  async #persist(batch: OpBatch): Promise<void> {
    if (this.#stopped) return;
    const next = fold([batch], this.#maxChars, this.#durable);
    const bytes = JSON.stringify(batch).length;
    const compact = this.#opBytes + bytes > this.#compactBytes;
    try {
      await this.#runtime.scratch((sc) => {
        if (compact) {
          sc.list(sinkOps).clear();
          sc.value(sinkCheckpoint).set(next);
        } else {
          sc.list(sinkOps).append(batch);
        }
        // Shown with this commit: the hub flushes the preview once the commit is durable (preview.ts).
        if (this.#preview !== undefined) for (const op of batch.o) applyOp(this.#preview, op, this.#maxChars);
      }, this.#call);
      this.#durable = next;
      this.#opBytes = compact ? 0 : this.#opBytes + bytes;
    } catch (error) {
      this.#stopped = true;
      this.#pending = [];
      if (isExpectedRejection(error, this.#call)) return;
      this.#error ??= { error };
      this.#report(error);
    }
  }
}

/**
 * A scratch rejection that is normal control flow: the durable mark revoked this invocation's authority
 * (TaskCancelled), or the session is closing. Anything else is a persistence fault.
 */
export function isExpectedRejection(error: unknown, call: Call): boolean {
  if (error instanceof TaskCancelled) return true;
  if (error instanceof PicoError && (error.code === "task_cancelled" || error.code === "closed")) return true;
  if (error instanceof StorageError && error.code === "closed") return true;
  const signal = call.abortSignal;
  return signal?.aborted === true && error === signal.reason;
}

// ---------------------------------------------------------------------------------------------
// helpers

/** Merge consecutive writes and window every text op to what the fold can retain. */
function coalesce(ops: readonly SinkOp[], maxChars: number): SinkOp[] {
  const out: SinkOp[] = [];
  for (const op of ops) {
    const last = out[out.length - 1];
    if (op.t === "w" && last?.t === "w") {
      out[out.length - 1] = { t: "w", s: last.s + op.s, n: (last.n ?? last.s.length) + (op.n ?? op.s.length) };
    } else {
      out.push(op);
    }
  }
  return out.map((op) => {
    if ((op.t === "w" || op.t === "r") && op.s.length > maxChars) {
      return { t: op.t, s: tail(op.s, maxChars), n: op.n ?? op.s.length };
    }
    return op;
  });
}

function tail(text: string, maxChars: number): string {
  return text.length > maxChars ? text.slice(text.length - maxChars) : text;
}

function cloneFold(state: SinkFold): SinkFold {
  return JSON.parse(JSON.stringify(state)) as SinkFold;
}

function addUsage(a: JsonValue, b: JsonValue): JsonValue {
  const x = asUsage(a);
  const y = asUsage(b);
  if (y === undefined) return a;
  if (x === undefined) return b;
  return {
    input: x.input + y.input,
    output: x.output + y.output,
    cacheRead: x.cacheRead + y.cacheRead,
    cacheWrite: x.cacheWrite + y.cacheWrite,
    totalTokens: x.totalTokens + y.totalTokens,
    cost: {
      input: x.cost.input + y.cost.input,
      output: x.cost.output + y.cost.output,
      cacheRead: x.cost.cacheRead + y.cost.cacheRead,
      cacheWrite: x.cost.cacheWrite + y.cost.cacheWrite,
      total: x.cost.total + y.cost.total,
    },
  } satisfies Usage;
}

function asUsage(value: JsonValue): Usage | undefined {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  return typeof (value as { input?: unknown }).input === "number" ? (value as unknown as Usage) : undefined;
}

function fmt(n: number): string {
  return n.toLocaleString("en-US");
}
