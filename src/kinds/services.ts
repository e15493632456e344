/**
 * What the built-in turn kinds are built with: pi-ai models, the tool registry, hooks, system sections
 * and turn options. Kinds close over these services (dependency injection), so a replacement kind can
 * wrap or swap them; the driver's TaskRuntime stays runtime-agnostic.
 */
import type { Api, ImageContent, Model, Models, TextContent, Usage } from "@earendil-works/pi-ai";
import type { Call } from "../core/call.js";
import type { ConversationHandle } from "../core/conversation.js";
import type { HookRegistry } from "../core/hooks.js";
import type { UserInput } from "../core/entries.js";
import type { ConversationTx, TxBuilder } from "../core/tx.js";
import { PicoError } from "../core/errors.js";
import type { ExecutionEnv, ShellOutputMetadata } from "../core/env.js";
import type { JobOutputView } from "./job-state.js";
import type { ToolCatalog } from "./catalog-types.js";
import type { RemoteCallServices, RemoteCallStart, RemoteOutcome } from "./remote-call-state.js";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";

// ---------------------------------------------------------------------------------------------
// Tools (§8.3, §9.3)

/** The sink: everything a tool produces goes through it. */
export interface ToolOutput<TDetails extends JsonValue = JsonValue> {
  write(text: string): void;
  image(image: ImageContent): void;
  replace(text: string): void;
  /**
   * Report output the text does not resend (§9.3, provisional): the totals the retained text stands for
   * and where the whole output was spilled. The harness then says it was truncated (and where the rest
   * is) in its own diagnostic; a later write or replace starts counting again.
   */
  capture(metadata: ShellOutputMetadata): void;
  /** The tool's own details object; set it or mutate it. */
  details: TDetails;
  usage(usage: Usage): void;
  addTools(names: string[]): void;
  terminate(value: boolean): void;
  handoff(message: string): void;
  delegate(job: Id): void;
  diag(severity: "info" | "warn" | "error", message: string, code?: string): void;
}

export interface ToolRuntime {
  readonly taskId: Id;
  readonly conversationId: Id;
  readonly budgetMs: number;
  /** The harness's execution environment, FileSystem & Shell (§9.3). */
  readonly env: ExecutionEnv;
  now(): number;
  commit<T>(plan: (tx: ConversationTx) => T | Promise<T>, call: Call): Promise<T>;
  conversation(id: Id, call: Call): Promise<ConversationHandle | undefined>;
  abortTask(id: Id, call: Call): Promise<void>;
  /** Cancellation that treats an already-terminal target as finished (§6.3): the ids it marked. */
  markIfLive(ids: readonly Id[], call: Call): Promise<Id[]>;
  waitForTask(id: Id, options: { budgetMs?: number } | undefined, call: Call): Promise<boolean>;
  /**
   * Start a background job for this call (§8.3 "Blocking budget"): one commit creates the job (origin:
   * this call) and records its id and cancellation policy on this tool's own running task, so the
   * tool's abort handler can cancel it from durable state. `detach: true` is explicit backgrounding:
   * aborting the call leaves the job running.
   */
  startJob(input: JobStart, call: Call): Promise<Id>;
  /** A job's output so far (live from scratch) or final (from its terminal state) (§9.3). */
  jobOutput(id: Id, call: Call): Promise<JobOutputView>;
  /**
   * Start the background remote call of this tool call (an HTTP tool): one commit creates the
   * `remote_call` task (origin: this call) and records its id on this tool's running task. Idempotent
   * per tool task: a call that already started one gets its id back (a replay after a restart).
   */
  startRemoteCall(input: RemoteCallStart, call: Call): Promise<Id>;
  /** A remote call's status and, once settled, its outcome. */
  /** `firstSentAt`: when its first request left (absent until then, and once it settled). */
  remoteCall(
    id: Id,
    call: Call,
  ): Promise<{ readonly status: string; readonly outcome?: RemoteOutcome; readonly firstSentAt?: number }>;
}

/** What a tool gives to start a job (§8.6 JobInput without the origin, which the harness fills in). */
export interface JobStart {
  readonly cmd: string;
  readonly cwd?: string;
  readonly limits?: { readonly maxChars?: number };
  readonly every?: number;
  readonly notBefore?: number;
  readonly rerun?: "safe";
  readonly detach?: boolean;
}

export interface Tool<TParams extends JsonObject = JsonObject, TDetails extends JsonValue = JsonValue> {
  readonly name: string;
  readonly description: string;
  /** JSON schema of the arguments; validated before the tool runs. */
  readonly parameters: JsonObject;
  /** Retained text window (characters); output beyond it is truncated with a diagnostic. */
  readonly maxOutputChars?: number;
  /** May recover re-run it after a crash? Default "never": recovery writes an interrupted result. */
  readonly replay?: "safe" | "never";
  /** Run after the previous call of the same response instead of in parallel (§5.5 "Sequential tools"). */
  readonly sequential?: boolean;
  execute(
    toolCallId: string,
    params: TParams,
    out: ToolOutput<TDetails>,
    runtime: ToolRuntime,
    call: Call,
  ): Promise<void>;
}

export type AnyTool = Tool<JsonObject, JsonValue>;

export class ToolRegistry {
  readonly #tools = new Map<string, AnyTool>();

  constructor(tools: readonly AnyTool[] = []) {
    for (const tool of tools) this.register(tool);
  }

  register(tool: AnyTool): void {
    if (this.#tools.has(tool.name)) throw new PicoError("conflict", `tool ${tool.name} is already registered`);
    this.#tools.set(tool.name, tool);
  }

  replace(tool: AnyTool): void {
    this.#tools.set(tool.name, tool);
  }

  remove(name: string): void {
    this.#tools.delete(name);
  }

  get(name: string): AnyTool | undefined {
    return this.#tools.get(name);
  }

  names(): string[] {
    return [...this.#tools.keys()];
  }
}

export type ToolContent = TextContent | ImageContent;

// ---------------------------------------------------------------------------------------------
// Models

/** Resolves a stored model id ("provider/model" or a bare id) to a pi-ai chat model. */
export interface ModelResolver {
  readonly models: Models;
  resolve(id: string): Model<Api> | undefined;
}

export function modelResolver(models: Models): ModelResolver {
  return {
    models,
    resolve(id) {
      const slash = id.indexOf("/");
      if (slash > 0) return models.getModel(id.slice(0, slash), id.slice(slash + 1));
      for (const model of models.getModels()) if (model.id === id) return model;
      return undefined;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Options and the bundle

export interface TurnOptions {
  /** Attempts per generation, shared across retries (§8.2). Default 8 (about 4 minutes of backoff). */
  readonly maxAttempts: number;
  /**
   * The version of a named profile a generation created now captures (§8.2 "create"), from the host's copy
   * of its profiles; undefined (or no function): none captured, the host's system_instructions handler
   * decides when it prepares.
   */
  readonly profileVersion?: (name: string) => number | undefined;
  /** Base delay of the exponential retry backoff, ms (attempt n waits base * 2^(n-1)). Default 2,000. */
  readonly retryBaseMs: number;
  /** Poll interval of a deferred answer when the provider's handle names none (§8.2). Default 30,000. */
  readonly deferredPollMs?: number;
  /** Longest retry wait, ms; a provider's retry hint above it fails the input. Default 300,000. */
  readonly retryMaxDelayMs: number;
  /** Backoff jitter: up to this fraction of the delay is added at random. Default 0.25. */
  readonly retryJitter: number;
  /**
   * Whether a provider's retry hint (`retry-after`, reset headers, "retry in 12s") sets the wait; a hint
   * above `retryMaxDelayMs` then fails the input. False: plain backoff only. Default true.
   */
  readonly retryHonourHints?: boolean;
  /** At most one scratch commit per task per this many ms while streaming (§8.2). Default 50. */
  readonly flushMs: number;
  /** Scratch bytes a streaming attempt may write before frames stop (the preview keeps going). */
  readonly maxScratchBytes: number;
  /** Estimated context tokens that trigger a threshold collapse before a request; 0 disables. */
  readonly collapseThresholdTokens: number;
  /**
   * After a threshold collapse that did not land (declined or failed), how many estimated tokens the
   * context must grow before the next one is tried. Default: a tenth of the threshold.
   */
  readonly collapseRetryGrowthTokens?: number;
  /** Entries kept verbatim after a collapse (the retained tail). Default 8. */
  readonly collapseKeepEntries: number;
  /** Default blocking budget of a tool call, ms (§8.3). */
  readonly toolBudgetMs: number;
}

export const defaultTurnOptions: TurnOptions = {
  maxAttempts: 8,
  retryBaseMs: 2000,
  retryMaxDelayMs: 300_000,
  retryJitter: 0.25,
  flushMs: 50,
  maxScratchBytes: 1_000_000,
  collapseThresholdTokens: 0,
  collapseKeepEntries: 8,
  toolBudgetMs: 120_000,
};

/**
 * The generation's final-answer boundary (§8.1), as an extension point of the turn kinds. The kit
 * consults it INSIDE the settlement commit that records the final answer, after the group's inputs
 * got their `done` results (so `inputs` are answered in this very commit) and before queued items are
 * placed. The extension may write to the same commit through `builder`, and may ask "before the queued
 * steer/followUp items, accept this input first": `acceptFirst` places it as the next group, and the
 * queued steer/followUp items stay queued for that group's final answer (queued writes are placed as
 * usual). It is consulted, it does not observe: a commit
 * listener sees a boundary only after it is durable and would need a second commit.
 *
 * The rig uses it for GUPP (docs/rig.md): the answer of a hook's work item completes the hook here, and a
 * pending hook's work item goes ahead of the user's queued followUps.
 */
export interface FinalAnswerBoundary {
  readonly builder: TxBuilder;
  readonly conversationId: Id;
  /** The answered group: each input's result is `done` with `answer` in this commit. */
  readonly inputs: readonly Id[];
  /** The final answer's assistant entry. */
  readonly answer: Id;
  readonly now: number;
  /**
   * Accept `input` under `requestId` ahead of the queued items: placed now as the next group, which the
   * queued steer/followUp items follow. A request key accepted before (§3.4) places nothing and returns
   * the original inputId.
   */
  acceptFirst(input: UserInput, requestId: string): Promise<Id>;
}

export type FinalAnswerExtension = (boundary: FinalAnswerBoundary) => Promise<void>;

export interface TurnServices {
  readonly models: ModelResolver;
  readonly tools: ToolRegistry;
  readonly hooks: HookRegistry;
  readonly options: TurnOptions;
  /** The final-answer boundary's extension point (see FinalAnswerBoundary); none by default. */
  readonly finalAnswer?: FinalAnswerExtension;
  /** The tenant's tool catalog (docs/tools.md); none: only registered tools exist. */
  readonly catalog?: ToolCatalog;
  /** What remote calls leave the object through; none: they settle `no_tenant`. */
  readonly remote?: RemoteCallServices;
  /** The session's incarnation (incarnation.ts), named in pending ids; none: ids without it. */
  readonly incarnation?: () => string | undefined;
}
