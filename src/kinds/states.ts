/**
 * Durable state of the built-in turn kinds (§5.5, §8.2-§8.4): generation, tool, post_tools and collapse.
 * Each is a tagged union over status; fields common to every variant have one type (§5.1). Every
 * built-in kind carries the input group it owns (`inputs`) where §8.1 says it does.
 */
import type { DeferredHandle, ToolCall, Usage } from "@earendil-works/pi-ai";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";
import type { CapturedTool, OfferedTool } from "./catalog-types.js";
import type { PendingRef, PendingResolution } from "./pending-types.js";

// ---------------------------------------------------------------------------------------------
// Generation (§8.2)

/** Config captured at creation so a retry uses what the attempt used (§8.2 "create"). */
// A type literal (not an interface) so it is a JsonObject with an optional field.
export type CapturedConfig = {
  /** "provider/model" or a bare model id the model resolver knows. */
  model: string;
  thinking: string | null;
  tools: string[];
  profile: string | null;
  /**
   * The version of `profile` the host knew when the generation was created (TurnOptions.profileVersion), so
   * a retry prepares the instructions the attempt prepared; absent: none known, the host decides at
   * preparation.
   */
  profileVersion?: number;
  budgetMs: number;
  /** Tools the page offered for this group's turn (run-tools.ts); absent: none. */
  runTools?: OfferedTool[];
};

/** Retry policy and the shared attempt budget carried in state (§8.2). */
export interface RetryBudget extends JsonObject {
  attempt: number;
  maxAttempts: number;
}

type GenBase = { inputs: Id[]; config: CapturedConfig; retry: RetryBudget };

export type GenerationState =
  | (GenBase & { status: "pending" })
  | (GenBase & { status: "retry_wait"; notBefore: number; error: string })
  | (GenBase & { status: "streaming"; requestThrough: Id })
  // The provider answers later (§8.2): poll `handle` from notBefore on; the cutoff of the prepared
  // request stays. A start status: execute (also after a restart) sleeps, then polls.
  | (GenBase & { status: "deferred"; requestThrough: Id; handle: DeferredHandle & JsonObject; notBefore: number })
  // Settled with an answer, nothing retries it: no captured config and no retry budget (fewer stored bytes;
  // §8.2 captures them for a retry), only the attempt that answered. Rows written before carry `config`
  // and `retry` (its `attempt`) instead; nothing reads them. `successor` is absent when there is none
  // (fewer stored bytes); rows written before carry `successor: null`.
  | { inputs: Id[]; status: "done"; attempt: number; assistant: Id | null; successor?: Id | null }
  | (GenBase & {
      status: "failed";
      reason: "error" | "overflow" | "interrupted";
      error: string;
      partial: Id | null;
      successor: Id | null;
    })
  | (GenBase & { status: "aborted"; partial: Id | null });

export const generationRoles = {
  pending: "start",
  retry_wait: "start",
  streaming: "inflight",
  deferred: "start",
  done: "terminal",
  failed: "terminal",
  aborted: "terminal",
} as const;

// ---------------------------------------------------------------------------------------------
// Tool output (§9.3)

export interface ToolDiag extends JsonObject {
  severity: "info" | "warn" | "error";
  message: string;
  /** A stable machine-readable tag ("truncated", "blocked", ...); null when the tool gave none. */
  code: string | null;
}

export interface ToolTruncation extends JsonObject {
  /** Total characters ever written, and how many the retained text holds. */
  totalChars: number;
  retainedChars: number;
  truncated: boolean;
}

/**
 * The non-message part of a tool result entry (§9.3), and what a settled tool task records of its output
 * (the content is in the result entry's message).
 */
export interface ToolResultData extends JsonObject {
  details: JsonValue;
  usage: JsonValue; // Usage | null
  addedTools: string[] | null;
  terminate: boolean;
  handoff: string | null;
  delegated: Id | null;
  diags: ToolDiag[];
  truncation: ToolTruncation;
  isError: boolean;
}

/**
 * `ToolResultData` as stored in a tool result entry's `data` and a settled tool task's `output` (stored
 * compact): a field at its default (details {}, usage/addedTools/handoff/delegated null, terminate and isError
 * false, diags []) is absent, and an untruncated output keeps only `chars` (its total characters, absent
 * when 0) instead of `truncation`. Rows written before carry every field; `readToolData` reads both.
 */
export type StoredToolData = {
  details?: JsonValue;
  usage?: JsonValue;
  addedTools?: string[] | null;
  terminate?: boolean;
  handoff?: string | null;
  delegated?: Id | null;
  diags?: ToolDiag[];
  truncation?: ToolTruncation;
  chars?: number;
  isError?: boolean;
};

/** What the live sink folds to; used to build the result entry. */
export interface ToolOutputState extends ToolResultData {
  content: JsonValue[]; // (TextContent | ImageContent)[]
}

// ---------------------------------------------------------------------------------------------
// Tool (§8.3) and post_tools (§5.5)

/**
 * The call a tool task runs: pi-ai's `ToolCall` while the task is live. A settled task keeps only its
 * `id`, `name` (and `namespace`): the assistant entry `assistant` holds the arguments and the
 * provider's signature, and `type` is always "toolCall" (fewer stored bytes). Tasks settled before keep the
 * whole call.
 */
export type TaskToolCall = {
  type?: "toolCall";
  id: string;
  name: string;
  namespace?: string;
  arguments?: JsonObject;
  thoughtSignature?: string;
  argumentsError?: string;
};

type ToolBase = { call: TaskToolCall; assistant: Id };

export type ToolStates =
  // offered: false — the model called a tool its request did not offer (§8.2); it never runs.
  // budgetMs: the blocking budget (§8.3) the generation captured in its config, when it is not the
  // deployment's default (absent: the default), so a later change of the conversation's value does not
  // reach a call already made.
  // def: the catalog tool the call uses, captured when the call was created (docs/tools.md); absent for
  // a built-in tool. Recovery and replay read it, never the live catalog.
  | (ToolBase & { status: "planned"; offered?: boolean; budgetMs?: number; def?: CapturedTool })
  // Waiting for a person or the frontend (an approval, a client tool's output): a durable wait on the
  // task's `pico.wait` record, named by `pending`; `resolved` lists the items it already consumed.
  | (ToolBase & {
      status: "parked";
      args: JsonObject;
      def: CapturedTool;
      budgetMs?: number;
      pending: PendingRef;
      resolved?: PendingResolution[];
    })
  // jobId / cancelJobOnAbort: the job this call started and whether aborting the call kills it (§8.3).
  // remoteCallId / cancelRemoteOnAbort: the same for the remote call of an HTTP tool.
  | (ToolBase & {
      status: "running";
      args: JsonObject;
      replay: "safe" | "never";
      budgetMs?: number;
      jobId?: Id;
      cancelJobOnAbort?: boolean;
      def?: CapturedTool;
      remoteCallId?: Id;
      cancelRemoteOnAbort?: boolean;
      resolved?: PendingResolution[];
    })
  // The settled output without its content: the result entry's message holds that (before, a large
  // output was stored twice); post_tools needs only the flags (terminate, handoff, addedTools). Stored
  // compact (`StoredToolData`): read it with `readToolData`.
  // resolved: the pending items the call consumed, so a late answer is refused with what happened.
  | (ToolBase & { status: "done"; output: StoredToolData; result: Id; resolved?: PendingResolution[] })
  | (ToolBase & { status: "aborted"; output: StoredToolData; result: Id; resolved?: PendingResolution[] });

export const toolRoles = {
  planned: "start",
  parked: "inflight",
  running: "inflight",
  done: "terminal",
  aborted: "terminal",
} as const;

/** `runTools`: the page tools of the group (run-tools.ts), handed to the next generation; absent: none. */
type PostBase = { assistant: Id; tools: Id[]; inputs: Id[]; runTools?: OfferedTool[] };

export type PostToolsState =
  | (PostBase & { status: "waiting" })
  | (PostBase & { status: "done"; successor: Id | null })
  | (PostBase & { status: "stopped" })
  | (PostBase & { status: "aborted" });

export const postToolsRoles = { waiting: "start", done: "terminal", stopped: "terminal", aborted: "terminal" } as const;

// ---------------------------------------------------------------------------------------------
// Collapse (§8.4)

export type CollapseReason = "manual" | "threshold" | "overflow";

/** What a collapse hands to the generation its settlement creates (threshold/overflow chains). */
export interface CollapseCarry extends JsonObject {
  inputs: Id[];
  config: CapturedConfig;
  retry: RetryBudget;
}

type CollapseBase = {
  reason: CollapseReason;
  /** The newest head id when captured (null: none); a newer head makes the summary stale. */
  capturedHead: Id | null;
  /** First retained entry: the new head boundary. */
  firstRetained: Id;
  /** Last summarized entry (inclusive). */
  summarizeThrough: Id;
  instructions: string | null;
  carry: CollapseCarry | null;
};

export type CollapseState =
  | (CollapseBase & { status: "planned" })
  | (CollapseBase & { status: "summarizing" })
  | (CollapseBase & { status: "done"; summary: Id; successor: Id | null })
  | (CollapseBase & { status: "failed"; error: string; successor: Id | null })
  | (CollapseBase & { status: "aborted" });

export const collapseRoles = {
  planned: "start",
  summarizing: "inflight",
  done: "terminal",
  failed: "terminal",
  aborted: "terminal",
} as const;

// ---------------------------------------------------------------------------------------------
// Usage (§8.2): one row per attempt in the session list pi.usage; totals in pi.usage.totals.

export interface UsageRow extends JsonObject {
  conversationId: Id;
  taskId: Id;
  kind: string;
  model: string;
  /** null: the provider reported nothing (unknown cost, not zero). */
  usage: (Usage & JsonObject) | null;
}

/**
 * A usage element as stored (compact; `stored.ts`): no `kind` when it is "generation" (most
 * elements), `usage` without its zero counts and cost components and without the totals that are sums.
 * Elements written before hold every field.
 */
export type StoredUsage = JsonObject;

export type StoredUsageRow = {
  conversationId: Id;
  taskId: Id;
  kind?: string;
  model: string;
  usage: StoredUsage | null;
};

export interface UsageTotals extends JsonObject {
  attempts: number;
  unknown: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  totalTokens: number;
  cost: number;
}
