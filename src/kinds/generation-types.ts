/**
 * The shapes the generation kind's pieces share (§8.2): its hook points (§8.7) and services, the kind's
 * type, and one attempt in flight as request preparation (generation-prepare.ts), streaming
 * (generation-stream.ts) and settlement (generation-settle.ts) read it. The kind itself is generation.ts.
 */
import type { Api, AssistantMessage, Context, Model } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { ConversationHandle } from "../core/conversation.js";
import type { TaskRuntime } from "../core/runtime.js";
import type { TaskKind, TypedTask } from "../core/task-kind.js";
import type { TxBuilder } from "../core/tx.js";
import type { generationConfig } from "./config.js";
import type { ProjectionCache } from "./request-cache.js";
import type { SectionRegistry, SystemInstructionsInput, SystemInstructionsOutput } from "./sections.js";
import type { TurnServices } from "./services.js";
import type { GenerationState, generationRoles } from "./states.js";

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

export type GenTask = TypedTask<GenerationState, typeof generationRoles>;

/** The generation kind as `createGenerationKind` defines it. */
export type GenerationKind = TaskKind<
  GenerationState,
  typeof generationRoles,
  TaskRuntime,
  GenerationHooks,
  typeof generationConfig
>;

/** What every attempt of the kind closes over: its services, the kind (for its hooks) and the request projections. */
export interface GenerationContext {
  readonly services: GenerationServices;
  readonly kind: GenerationKind;
  /** Request messages and context folds per conversation, extended with new entries (request-cache.ts). */
  readonly projections: ProjectionCache;
}

/** The statuses an attempt runs from: a start status, or streaming (a recovery). */
export type AttemptState = Extract<GenerationState, { status: "pending" | "retry_wait" | "streaming" | "deferred" }>;

/** One attempt in flight: the task, the state it started from, and the conversation and model it runs against. */
export interface Attempt {
  readonly task: GenTask;
  readonly state: AttemptState;
  readonly runtime: TaskRuntime;
  readonly conversation: ConversationHandle;
  readonly model: Model<Api>;
  readonly call: Call;
}

/** The TxBuilder behind a ConversationTx: placement helpers take builders. */
export function builderOf(tx: { readonly builder: TxBuilder }): TxBuilder {
  return tx.builder;
}
