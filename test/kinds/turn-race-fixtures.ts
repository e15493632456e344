/**
 * Fixtures for the turn race, mode and crash tests (§8.1-§8.4, §5.5, §10.2): a turn kit over pi-ai's
 * faux provider wrapped so a test can also hold a stream mid-way (some deltas streamed, then nothing
 * until the test releases it or the call is cancelled), a GateStorage (commit barrier, crash, reopen)
 * under the harness, a commit recorder, and readers for tasks, input results and usage.
 */
import {
  createAssistantMessageEventStream,
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type AssistantMessage,
  type Context,
  type DeferredHandle,
  type FauxResponseFactory,
  type FauxResponseStep,
  type Models,
  type Provider,
} from "@earendil-works/pi-ai";
import { Harness, initialValue, type CommittedBatch } from "../../src/core/harness.js";
import type { DriverHost } from "../../src/core/host.js";
import { bindResult, INPUT_RESULT_NAMESPACE, type InputResult } from "../../src/core/inbox.js";
import { bind } from "../../src/core/state.js";
import { generationConfig } from "../../src/kinds/config.js";
import type { AnyTool, TurnOptions } from "../../src/kinds/services.js";
import { createTurnKit, type TurnKit } from "../../src/kinds/turns.js";
import { readUsageRow, usageList, usageTotals } from "../../src/kinds/usage.js";
import type { UsageRow, UsageTotals } from "../../src/kinds/states.js";
import type { Entry, Id, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { call, deferred, GateStorage, type Deferred } from "../core/driver-fixtures.js";
import { echoTool, textOf } from "./turn-fixtures.js";

export { call, deferred, echoTool, fauxAssistantMessage, fauxToolCall, GateStorage, textOf, type Deferred };

/** A stream the test holds: `deltas` stream at once, then nothing until `release` (or cancellation). */
export interface HeldStream {
  readonly held: true;
  readonly deltas: readonly string[];
  /** Deltas streamed after `release`, before the message ends. */
  readonly after: readonly string[];
  /** Keep streaming after cancellation (a provider that notices the signal late). */
  readonly ignoreSignal: boolean;
  /** Resolve to finish the message normally with these deltas as its text. */
  readonly release: Deferred;
  /** Resolves once every delta has been pushed. */
  readonly streamed: Deferred;
  /** Resolves when the producer has ended its message, with how it ended. */
  readonly ended: Deferred<"aborted" | "released">;
}

/** A message streamed exactly as given (the faux provider would replace its usage with an estimate). */
export interface RawStep {
  readonly raw: AssistantMessage;
}

export type Step = FauxResponseStep | HeldStream | RawStep;

export function heldStream(...deltas: string[]): HeldStream {
  return {
    held: true,
    deltas,
    after: [],
    ignoreSignal: false,
    release: deferred(),
    streamed: deferred(),
    ended: deferred(),
  };
}

/** A held stream that ignores cancellation and streams `after` once released. */
export function lateStream(deltas: readonly string[], after: readonly string[]): HeldStream {
  return {
    held: true,
    deltas,
    after,
    ignoreSignal: true,
    release: deferred(),
    streamed: deferred(),
    ended: deferred(),
  };
}

function isHeld(step: Step): step is HeldStream {
  return typeof step === "object" && "held" in step;
}

function isRaw(step: Step): step is RawStep {
  return typeof step === "object" && "raw" in step;
}

/**
 * A faux-backed provider whose responses come from one queue of steps: a faux step is handed to the
 * faux provider for that call; a held step is streamed here.
 */
export class ScriptedProvider {
  readonly faux = fauxProvider();
  readonly #steps: Step[] = [];
  calls = 0;
  /** Deferred handles polled, in order. */
  readonly polls: DeferredHandle[] = [];
  /** The abort signal each call was given, in call order. */
  readonly signals: (AbortSignal | undefined)[] = [];

  constructor(steps: readonly Step[] = []) {
    this.#steps.push(...steps);
  }

  push(...steps: Step[]): void {
    this.#steps.push(...steps);
  }

  get pending(): number {
    return this.#steps.length;
  }

  provider(): Provider {
    const base = this.faux.provider;
    const stream: Provider["stream"] = (model, context, options) => {
      this.calls += 1;
      this.signals.push(options?.signal);
      const step = this.#steps.shift();
      if (step !== undefined && isRaw(step)) return rawStream(model, step.raw);
      if (step === undefined || !isHeld(step)) {
        this.faux.setResponses(step === undefined ? [] : [step]);
        return base.stream(model, context, options);
      }
      const out = createAssistantMessageEventStream();
      const fullText = [...step.deltas, ...step.after].join("");
      const message: AssistantMessage = {
        ...fauxAssistantMessage(fullText),
        api: model.api,
        provider: model.provider,
        model: model.id,
      };
      const signal = options?.signal;
      void (async () => {
        const partial: AssistantMessage = { ...message, content: [{ type: "text", text: "" }], stopReason: "stop" };
        out.push({ type: "start", partial });
        out.push({ type: "text_start", contentIndex: 0, partial });
        for (const delta of step.deltas) {
          await Promise.resolve();
          const block = partial.content[0];
          if (block?.type === "text") block.text += delta;
          out.push({ type: "text_delta", contentIndex: 0, delta, partial });
        }
        step.streamed.resolve();
        const aborted = new Promise<"aborted">((resolve) => {
          if (step.ignoreSignal) return;
          if (signal?.aborted) resolve("aborted");
          signal?.addEventListener("abort", () => resolve("aborted"), { once: true });
        });
        const outcome = await Promise.race([step.release.promise.then(() => "released" as const), aborted]);
        if (outcome === "aborted") {
          const error: AssistantMessage = { ...partial, stopReason: "aborted", errorMessage: "Request was aborted" };
          out.push({ type: "error", reason: "aborted", error });
          out.end(error);
          step.ended.resolve("aborted");
          return;
        }
        for (const delta of step.after) {
          await Promise.resolve();
          const block = partial.content[0];
          if (block?.type === "text") block.text += delta;
          out.push({ type: "text_delta", contentIndex: 0, delta, partial });
        }
        out.push({ type: "text_end", contentIndex: 0, content: fullText, partial });
        out.push({ type: "done", reason: "stop", message });
        out.end(message);
        step.ended.resolve("released");
      })();
      return out;
    };
    // A deferred answer is polled from the same script: the next step is what the poll returns.
    const fetchDeferred: NonNullable<Provider["fetchDeferred"]> = (model, handle) => {
      this.polls.push(handle);
      const step = this.#steps.shift();
      if (step === undefined || !isRaw(step)) throw new Error("a deferred poll needs a raw step");
      return rawStream(model, step.raw);
    };
    return { ...base, stream, streamSimple: stream, fetchDeferred };
  }
}

/** A request as pico handed it to pi-ai's Models, before pi-ai normalized it for the provider. */
export interface SentRequest {
  readonly method: "stream" | "streamSimple" | "complete" | "completeSimple";
  readonly context: Context;
  readonly options: unknown;
}

const RECORDED = new Set<string>(["stream", "streamSimple", "complete", "completeSimple"]);

/** Models that record what the caller passed to each request method, then delegate. */
function recordingModels(models: Models, sent: SentRequest[]): Models {
  return new Proxy(models, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => unknown;
      if (typeof prop !== "string" || !RECORDED.has(prop)) return method.bind(target);
      return (...args: unknown[]) => {
        sent.push({ method: prop as SentRequest["method"], context: args[1] as Context, options: args[2] });
        return method.apply(target, args);
      };
    },
  });
}

/** Stream `raw` as the whole answer: start, then done (or error), with the model's identity. */
function rawStream(
  model: { readonly api: string; readonly provider: string; readonly id: string },
  raw: AssistantMessage,
) {
  const out = createAssistantMessageEventStream();
  const message: AssistantMessage = { ...raw, api: model.api, provider: model.provider, model: model.id };
  queueMicrotask(() => {
    out.push({ type: "start", partial: message });
    if (message.stopReason === "error" || message.stopReason === "aborted")
      out.push({ type: "error", reason: message.stopReason, error: message });
    else
      out.push({
        type: "done",
        reason:
          message.stopReason === "length"
            ? "length"
            : message.stopReason === "toolUse"
              ? "toolUse"
              : message.stopReason === "deferred"
                ? "deferred"
                : "stop",
        message,
      });
    out.end(message);
  });
  return out;
}

export interface TurnRig {
  readonly harness: Harness;
  readonly kit: TurnKit;
  readonly storage: GateStorage;
  readonly provider: ScriptedProvider;
  readonly modelId: string;
  readonly commits: CommittedBatch[];
  readonly root: Id;
  /** Every request the kinds handed to pi-ai, as handed (not as the provider saw it). */
  readonly sent: SentRequest[];
}

export interface RigOptions {
  readonly tools?: readonly AnyTool[];
  readonly turn?: Partial<TurnOptions>;
  readonly host?: DriverHost;
  /** Reuse a provider (a reopen after a crash keeps the script). */
  readonly provider?: ScriptedProvider;
}

/**
 * Open a harness with the turn kit over `inner` (wrapped in a GateStorage), the root configured with the
 * scripted model and the echo tool selected. Reopen over the same data with `reopenRig(rig)`.
 */
export async function openRig(
  inner: Storage | GateStorage,
  steps: readonly Step[] = [],
  options: RigOptions = {},
): Promise<TurnRig> {
  const storage = inner instanceof GateStorage ? inner : new GateStorage(inner);
  const provider = options.provider ?? new ScriptedProvider();
  provider.push(...steps);
  const models = createModels();
  models.setProvider(provider.provider());
  const model = provider.faux.getModel();
  const modelId = `${model.provider}/${model.id}`;
  const sent: SentRequest[] = [];
  const kit = createTurnKit({
    models: recordingModels(models, sent),
    tools: options.tools ?? [echoTool],
    options: { retryBaseMs: 10, flushMs: 0, ...options.turn },
  });
  const harness = await Harness.open(
    storage,
    {
      taskKinds: kit.kinds,
      rootValues: [
        initialValue(generationConfig.model, modelId),
        initialValue(
          generationConfig.selectedTools,
          (options.tools ?? [echoTool]).map((t) => t.name),
        ),
      ],
      ...(options.host === undefined ? {} : { host: options.host }),
    },
    call,
  );
  kit.install(harness);
  const commits: CommittedBatch[] = [];
  harness.onCommit((c) => commits.push(c));
  return { harness, kit, storage, provider, modelId, commits, root: harness.rootId, sent };
}

/** The process died: the old harness loses its storage; a fresh one opens over the same data. */
export async function crashAndReopen(rig: TurnRig, options: RigOptions = {}): Promise<TurnRig> {
  rig.storage.crash();
  return openRig(rig.storage.reopen(), [], { provider: rig.provider, ...options });
}

// ---------------------------------------------------------------------------------------------
// Readers

export async function taskOf(rig: TurnRig, id: Id): Promise<Task> {
  const task = (await rig.storage.inner.getTasks([id])).get(id);
  if (task === undefined) throw new Error(`task ${id} missing`);
  return task;
}

export async function tasksOfKind(rig: TurnRig, kind: string): Promise<Task[]> {
  const page = await rig.storage.inner.scanTasks({ kind, limit: 1000 });
  return [...page.items];
}

/** The input group a generation or post_tools task carries. */
export function inputsOf(task: Task | undefined): Id[] {
  return (task?.state as unknown as { inputs?: Id[] } | undefined)?.inputs ?? [];
}

export async function liveTasks(rig: TurnRig): Promise<Task[]> {
  return [...(await rig.storage.inner.scanTasks({ live: true, limit: 1000 })).items];
}

export async function resultOf(
  rig: TurnRig,
  inputId: Id,
  conversationId: Id = rig.root,
): Promise<InputResult | undefined> {
  return (await rig.storage.inner.getValue(bindResult(conversationId, inputId)))?.value;
}

export async function transcript(rig: TurnRig, conversationId: Id = rig.root): Promise<Entry[]> {
  return [...(await rig.storage.inner.scanEntries({ conversationId, limit: 1000 })).items];
}

/** Entry kinds in order, without managed system entries. */
export async function kinds(rig: TurnRig, conversationId: Id = rig.root): Promise<string[]> {
  return (await transcript(rig, conversationId)).map((e) => e.kind).filter((k) => k !== "system");
}

export async function usageRows(rig: TurnRig): Promise<UsageRow[]> {
  return (await rig.storage.inner.readList(bind(usageList, {}), { limit: 1000 })).items.map((e) =>
    readUsageRow(e.value),
  );
}

export async function totals(rig: TurnRig): Promise<UsageTotals | undefined> {
  return (await rig.storage.inner.getValue(bind(usageTotals, {})))?.value;
}

/** Every input-result write in commit order: [inputId, status]. */
export function resultWrites(rig: TurnRig): [Id, string][] {
  const out: [Id, string][] = [];
  for (const c of rig.commits) {
    if (c.batch.kind !== "main") continue;
    for (const w of c.batch.writes) {
      if (w.type === "value.set" && w.addr.namespace === INPUT_RESULT_NAMESPACE) {
        out.push([Number(w.addr.key), (w.value as { status: string }).status]);
      }
    }
  }
  return out;
}

/** Terminal result writes per input (each must be exactly one). */
export function terminalWrites(rig: TurnRig, inputId: Id): number {
  return resultWrites(rig).filter(([id, status]) => id === inputId && (status === "done" || status === "unanswered"))
    .length;
}

/** Did this commit settle task `id`? */
export function settles(c: CommittedBatch, id: Id): boolean {
  return c.batch.kind === "main" && c.batch.writes.some((w) => w.type === "settle" && w.id === id);
}

/** Task ids created in this commit, of a kind. */
export function created(c: CommittedBatch, kind: string): Id[] {
  if (c.batch.kind !== "main") return [];
  return c.batch.writes.flatMap((w) => (w.type === "task" && w.task.kind === kind ? [w.task.id] : []));
}

/** A tool whose execute waits on a per-test gate (released by the test). */
export function gatedTool(name: string, gate: () => Promise<void>, onStart?: () => void): AnyTool {
  return {
    name,
    description: `${name}: waits for the test`,
    parameters: { type: "object", properties: {} },
    async execute(_id, _params, out) {
      onStart?.();
      await gate();
      out.write(`${name} done`);
    },
  };
}

/** The final answer: text from the newest message only (so a test can see what the model saw last). */
export function answerNewest(prefix = "answer"): FauxResponseFactory {
  return (context) => {
    const last = context.messages[context.messages.length - 1];
    const content = last?.role === "user" || last?.role === "toolResult" ? last.content : "";
    const text = typeof content === "string" ? content : content.map((c) => (c.type === "text" ? c.text : "")).join("");
    return fauxAssistantMessage(`${prefix}: ${text}`);
  };
}

/** A faux step that waits on `gate` before answering `message`. */
export function deferredStep(
  gate: Deferred,
  message: AssistantMessage | (() => AssistantMessage),
): FauxResponseFactory {
  return async () => {
    await gate.promise;
    return typeof message === "function" ? message() : message;
  };
}

export function callsMessage(...names: string[]): AssistantMessage {
  return fauxAssistantMessage(
    names.map((name, i) => fauxToolCall(name, name === "echo" ? { text: `t${i}` } : {}, { id: `c${i}-${name}` })),
    { stopReason: "toolUse" },
  );
}

export function entryText(entry: Entry | undefined): string {
  return textOf(entry);
}
