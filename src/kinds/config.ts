/**
 * The generation's declared configuration (§5.2, §8.2): conversation values a UI can list and a fork
 * inherits (model, thinking, selected tools and profile rewind; the tool budget is sticky). Generation
 * captures them when it is created so a retry uses what the attempt used.
 */
import { PicoError } from "../core/errors.js";
import { bindTo, conversationValue, sessionValue, type ValueSpec } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";
import type { TurnOptions } from "./services.js";
import type { CapturedConfig, RetryBudget } from "./states.js";

export const generationConfig = {
  model: conversationValue<string>("pi.model", { rewind: true }),
  thinking: conversationValue<string>("pi.thinking", { rewind: true }),
  selectedTools: conversationValue<string[]>("pi.tools.selected", { rewind: true }),
  profile: conversationValue<string>("pi.prompt.profile", { rewind: true }),
  budgetMs: conversationValue<number>("pi.tool.budget", { rewind: false }),
} as const;

/**
 * What recovery does with a generation a restart interrupted mid-stream (docs/design.md "Alarms and restarts"): "retry"
 * (the
 * default) keeps the partial for display only and runs the attempt again within its retry budget, so a
 * deploy does not fail every turn in flight; "fail" settles it failed(interrupted) as §8.2 reads.
 */
export type OnInterrupt = "retry" | "fail";

/** Session-wide turn policy values (sticky; absent means the default). */
export const turnPolicy = {
  onInterrupt: sessionValue<OnInterrupt>("pi.onInterrupt"),
} as const;

export type GenerationConfig = {
  readonly model?: string;
  readonly thinking?: string;
  readonly selectedTools?: string[];
  readonly profile?: string;
  readonly budgetMs?: number;
};

/** Read the conversation's config on the line and capture it; a missing model is a clear error (§9.5). */
export async function captureConfig(b: TxBuilder, conversationId: Id, options: TurnOptions): Promise<CapturedConfig> {
  return configFrom(<T>(spec: ValueSpec<T>) => b.value(bindTo(spec, conversationId)).get(), conversationId, options);
}

/** The same capture from values given directly (a spawned child's values, written in the same commit, §4.3). */
export async function configFrom(
  read: <T>(spec: ValueSpec<T>) => Promise<T | undefined> | T | undefined,
  conversationId: Id,
  options: TurnOptions,
): Promise<CapturedConfig> {
  const [model, thinking, tools, profile, budgetMs] = await Promise.all([
    read(generationConfig.model),
    read(generationConfig.thinking),
    read(generationConfig.selectedTools),
    read(generationConfig.profile),
    read(generationConfig.budgetMs),
  ]);
  if (model === undefined || model === "") {
    throw new PicoError(
      "invalid_commit",
      `conversation ${conversationId} has no model configured (pi.model); set it before asking for a turn`,
    );
  }
  return {
    model,
    thinking: thinking ?? null,
    tools: tools ?? [],
    profile: profile ?? null,
    ...profileVersionOf(profile, options),
    budgetMs: budgetMs ?? options.toolBudgetMs,
  };
}

/** The captured version of the named profile, when the host knows one (TurnOptions.profileVersion). */
function profileVersionOf(profile: string | undefined, options: TurnOptions): { profileVersion?: number } {
  const version = profile === undefined ? undefined : options.profileVersion?.(profile);
  return version === undefined ? {} : { profileVersion: version };
}

export function freshRetry(options: TurnOptions): RetryBudget {
  return { attempt: 0, maxAttempts: options.maxAttempts };
}

/** The session's interrupt policy, read on the line; absent (never set) is "retry". */
export async function readOnInterrupt(b: TxBuilder): Promise<OnInterrupt> {
  return (await b.value(turnPolicy.onInterrupt).get()) ?? "retry";
}
