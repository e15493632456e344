/**
 * Fixtures for the tool / post_tools / sink tests: a harness with the real tool and post_tools kinds
 * and a minimal stand-in registered as "generation" (its behaviour is scripted per test), an exchange
 * publisher that commits exactly what a generation's settlement with calls publishes (§5.5), gated
 * tools, and a commit recorder. Crashes are simulated with GateStorage (test/core/driver-fixtures.ts):
 * `crash()` makes the old harness's storage refuse everything while the inner storage (the same
 * MemoryStorage object, or the same SqliteStorage inside the same Durable Object callback) keeps the
 * data, and a fresh Harness opens over `reopen()` — a process restart over durable state.
 */
import type { ExecutionEnv } from "../../src/core/env.js";
import { createModels, fauxAssistantMessage, fauxText, fauxToolCall, type ToolCall } from "@earendil-works/pi-ai";
import type { Call } from "../../src/core/call.js";
import { assistantEntry, assistantKind } from "../../src/core/entries.js";
import { Harness, initialValue, type CommittedBatch } from "../../src/core/harness.js";
import { HookRegistry, type HookFailure } from "../../src/core/hooks.js";
import { bindResult, placeInput, queueInput, userDraft, type InputResult } from "../../src/core/inbox.js";
import type { TaskRuntime } from "../../src/core/runtime.js";
import type { DriverHost } from "../../src/core/host.js";
import { bindTo } from "../../src/core/state.js";
import { defineTaskKind, erase, type AnyTaskKind, type TypedTask } from "../../src/core/task-kind.js";
import { conversationTx, type TxBuilder } from "../../src/core/tx.js";
import { captureConfig, freshRetry, generationConfig } from "../../src/kinds/config.js";
import { createGeneration, landFinalInbox, resolveUnanswered } from "../../src/kinds/placement.js";
import { createPostToolsKind } from "../../src/kinds/post-tools.js";
import {
  defaultTurnOptions,
  ToolRegistry,
  type AnyTool,
  type TurnOptions,
  type TurnServices,
} from "../../src/kinds/services.js";
import { generationRoles, type GenerationState, type PostToolsState, type ToolStates } from "../../src/kinds/states.js";
import { createToolKind } from "../../src/kinds/tool.js";
import type { Entry, Id, JsonObject, Task } from "../../src/storage/records.js";
import type { Storage } from "../../src/storage/storage.js";
import { call, cancellable, deferred, flush, Gates, type Deferred } from "../core/driver-fixtures.js";

export { call };

export const MODEL = "faux/stand-in";

// ---------------------------------------------------------------------------------------------
// The stand-in generation

export type GenTask = TypedTask<GenerationState, typeof generationRoles>;
export type GenMethod = (task: GenTask, runtime: TaskRuntime, call: Call) => Promise<void>;

export interface GenScript {
  execute?: GenMethod;
  recover?: GenMethod;
}

/** Final answer: an assistant entry, the group resolved to it (§8.1), settle done. */
export const finalAnswer: GenMethod = async (task, runtime, c) => {
  const base = liveBase(task.state);
  await runtime.commitBuilder(async (b) => {
    const tx = conversationTx(b, task.conversationId);
    const assistant = tx.entry(assistantKind, assistantEntry(fauxAssistantMessage("final answer")));
    const next = await landFinalInbox(b, task.conversationId, base.inputs, assistant, runtime.now());
    const successor =
      next.length > 0
        ? createGeneration(b, task.conversationId, next, base.config, freshRetry(defaultTurnOptions))
        : null;
    tx.settle(task, "done", { inputs: base.inputs, attempt: base.retry.attempt, assistant, successor });
  }, c);
};

/** A generation settling with calls: what §5.5's settlement publishes, then settle done. */
export function answerWithCalls(calls: readonly ToolCall[]): GenMethod {
  return async (task, runtime, c) => {
    const base = liveBase(task.state);
    await runtime.commitBuilder((b) => {
      const { assistant, postTools } = publishCalls(b, task.conversationId, base.inputs, calls);
      conversationTx(b, task.conversationId).settle(task, "done", {
        inputs: base.inputs,
        attempt: base.retry.attempt,
        assistant,
        successor: postTools,
      });
    }, c);
  };
}

/** The captured fields of a generation that is not settled done (a settled done keeps none). */
export function liveBase(state: GenerationState): Exclude<GenerationState, { status: "done" }> {
  if (state.status === "done") throw new Error("the generation is settled done");
  return state;
}

function standInGeneration(script: GenScript) {
  return defineTaskKind<GenerationState, TaskRuntime>()({
    kind: "generation",
    roles: generationRoles,
    initialStatus: "pending",
    turn: true,
    execute: (task, runtime, c) => (script.execute ?? finalAnswer)(task, runtime, c),
    recover: (task, runtime, c) => (script.recover ?? finalAnswer)(task, runtime, c),
    async abort(task, runtime, c) {
      const { inputs, config, retry } = liveBase(task.state);
      const base = { inputs, config, retry };
      await runtime.commitBuilder(async (b) => {
        await resolveUnanswered(b, task.conversationId, base.inputs, "aborted");
        conversationTx(b, task.conversationId).settle(task, "aborted", { ...base, partial: null });
      }, c);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The kit

export interface Kit {
  readonly h: Harness;
  readonly services: TurnServices;
  readonly hooks: HookRegistry;
  /** The registered tool kind (typed hook registration: `kit.hooks.on(kit.toolKind, "before_tool", ...)`). */
  readonly toolKind: ReturnType<typeof createToolKind>;
  readonly script: GenScript;
  readonly commits: CommittedBatch[];
  readonly hookFailures: HookFailure[];
  readonly root: Id;
  /** post_tools execute invocations (the §10.2 "starts once" count). */
  postToolsStarts: number;
}

export async function openKit(
  storage: Storage,
  tools: readonly AnyTool[],
  options: {
    turn?: Partial<TurnOptions>;
    script?: GenScript;
    selected?: string[];
    extraKinds?: readonly AnyTaskKind[];
    withoutToolKind?: boolean;
    host?: DriverHost;
    env?: ExecutionEnv;
  } = {},
): Promise<Kit> {
  const hookFailures: HookFailure[] = [];
  const hooks = new HookRegistry((f) => hookFailures.push(f));
  const services: TurnServices = {
    models: { models: createModels(), resolve: () => undefined },
    tools: new ToolRegistry(tools),
    hooks,
    options: { ...defaultTurnOptions, flushMs: 0, ...options.turn },
  };
  const script: GenScript = options.script ?? {};
  const toolKind = createToolKind(services);
  const postTools = createPostToolsKind(services);
  const kit: { postToolsStarts: number } = { postToolsStarts: 0 };
  const counted = {
    ...postTools,
    execute: async (...args: Parameters<typeof postTools.execute>) => {
      kit.postToolsStarts += 1;
      return postTools.execute(...args);
    },
  };
  const h = await Harness.open(
    storage,
    {
      taskKinds: [
        ...(options.withoutToolKind ? [] : [erase(toolKind)]),
        erase(counted),
        erase(standInGeneration(script)),
        ...(options.extraKinds ?? []),
      ],
      rootValues: [
        initialValue(generationConfig.model, MODEL),
        initialValue(generationConfig.selectedTools, options.selected ?? ["echo"]),
      ],
      ...(options.host === undefined ? {} : { host: options.host }),
      ...(options.env === undefined ? {} : { env: options.env }),
    },
    call,
  );
  const commits: CommittedBatch[] = [];
  h.onCommit((c) => commits.push(c));
  return Object.assign(kit, { h, services, hooks, toolKind, script, commits, hookFailures, root: h.rootId });
}

// ---------------------------------------------------------------------------------------------
// Exchanges

/** What a generation's settlement with calls publishes (§5.5), inside a builder. */
export function publishCalls(
  b: TxBuilder,
  conversationId: Id,
  inputs: readonly Id[],
  calls: readonly ToolCall[],
  options: { sequential?: boolean } = {},
): { assistant: Id; tools: Id[]; postTools: Id } {
  const assistant = b.entry(
    assistantKind,
    conversationId,
    assistantEntry(fauxAssistantMessage([...calls], { stopReason: "toolUse" })),
  );
  const tools: Id[] = [];
  for (const toolCall of calls) {
    const previous = tools[tools.length - 1];
    const after = options.sequential === true && previous !== undefined ? [previous] : [];
    tools.push(
      b.task({ kind: "tool" }, conversationId, {
        state: { status: "planned", call: toolCall as ToolCall & JsonObject, assistant },
        after,
      }),
    );
  }
  const state: PostToolsState = { status: "waiting", assistant, tools, inputs: [...inputs] };
  const postTools = b.task({ kind: "post_tools" }, conversationId, { state, after: tools });
  return { assistant, tools, postTools };
}

export interface Exchange {
  readonly inputId: Id;
  readonly assistant: Id;
  readonly tools: Id[];
  readonly postTools: Id;
}

/** From the host, in one commit: a placed user input (the group) and the published exchange. */
export async function startExchange(
  kit: Kit,
  calls: readonly ToolCall[],
  options: { input?: string; sequential?: boolean } = {},
): Promise<Exchange> {
  return kit.h.commitBound(call, { conversationId: kit.root }, (b) => {
    const item = { mode: "followUp" as const, input: options.input ?? "please use tools" };
    const inputId = queueInput(b, kit.root, item);
    placeInput(b, kit.root, inputId, item, userDraft(item.input, 0));
    return { inputId, ...publishCalls(b, kit.root, [inputId], calls, options) };
  });
}

/** From the host: a placed input and a pending generation owning it (what accept does when idle). */
export async function startGeneration(kit: Kit, input = "hello"): Promise<{ inputId: Id; generation: Id }> {
  return kit.h.commitBound(call, { conversationId: kit.root }, async (b) => {
    const config = await captureConfig(b, kit.root, kit.services.options);
    const item = { mode: "followUp" as const, input };
    const inputId = queueInput(b, kit.root, item);
    placeInput(b, kit.root, inputId, item, userDraft(input, 0));
    return { inputId, generation: createGeneration(b, kit.root, [inputId], config, freshRetry(kit.services.options)) };
  });
}

export function toolCall(name: string, args: JsonObject, id: string): ToolCall {
  return fauxToolCall(name, args, { id });
}

// ---------------------------------------------------------------------------------------------
// Reads

export async function task(kit: Kit, id: Id): Promise<Task> {
  const t = (await kit.h.storage.getTasks([id])).get(id);
  if (t === undefined) throw new Error(`task ${id} missing`);
  return t;
}

export async function toolState(kit: Kit, id: Id): Promise<ToolStates> {
  return (await task(kit, id)).state as ToolStates;
}

export async function entry(kit: Kit, id: Id): Promise<Entry> {
  const e = (await kit.h.storage.getEntries([id])).get(id);
  if (e === undefined) throw new Error(`entry ${id} missing`);
  return e;
}

/** The transcript of the root, in order. */
export async function transcript(kit: Kit): Promise<Entry[]> {
  const page = await kit.h.storage.scanEntries({ conversationId: kit.root, limit: 1000 });
  return [...page.items];
}

export async function inputResult(kit: Kit, inputId: Id): Promise<InputResult | undefined> {
  return (await kit.h.storage.getValue(bindResult(kit.root, inputId)))?.value;
}

export async function selectedTools(kit: Kit): Promise<string[] | undefined> {
  return (await kit.h.storage.getValue(bindTo(generationConfig.selectedTools, kit.root)))?.value;
}

/** Tasks of a kind in the root, by id. */
export async function tasksOfKind(kit: Kit, kind: string, conversationId = kit.root): Promise<Task[]> {
  const page = await kit.h.storage.scanTasks({ conversationIds: [conversationId], kind, limit: 1000 });
  return [...page.items];
}

/** The single text of a tool result message (its first content part). */
export function resultText(e: Entry): string {
  const message = e.model?.[0] as { content?: { type: string; text?: string }[] } | undefined;
  return (message?.content ?? []).map((p) => (p.type === "text" ? (p.text ?? "") : "[image]")).join("");
}

export function isErrorResult(e: Entry): boolean {
  return (e.model?.[0] as { isError?: boolean } | undefined)?.isError === true;
}

/** The result entry a terminal tool task points at. */
export async function resultOf(kit: Kit, toolId: Id): Promise<Entry> {
  const state = await toolState(kit, toolId);
  if (state.status !== "done" && state.status !== "aborted") throw new Error(`tool ${toolId} is ${state.status}`);
  return entry(kit, state.result);
}

/** Did a commit settle this task? */
export function settledIn(commit: CommittedBatch, id: Id): boolean {
  return commit.batch.kind === "main" && commit.batch.writes.some((w) => w.type === "settle" && w.id === id);
}

// ---------------------------------------------------------------------------------------------
// Gated tools

export { cancellable, Gates };

/** A tool that writes `start <key>`, waits for its gate (cooperatively), then writes ` end <key>`. */
export function gateTool(
  gates: Gates,
  options: { name?: string; replay?: "safe" | "never"; started?: (key: string) => void } = {},
): AnyTool {
  return {
    name: options.name ?? "gate",
    description: "waits for a test gate",
    parameters: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
    ...(options.replay === undefined ? {} : { replay: options.replay }),
    async execute(_id, params, out, _rt, c) {
      const key = String(params["key"]);
      out.write(`start ${key}`);
      options.started?.(key);
      await cancellable(gates.get(key).promise, c);
      out.write(` end ${key}`);
    },
  };
}

export const echo: AnyTool = {
  name: "echo",
  description: "echo",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  async execute(_id, params, out) {
    out.write(String(params["text"]));
  },
};

export { flush, fauxText };
