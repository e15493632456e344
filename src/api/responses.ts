/**
 * The response bodies of the HTTP API (issue 14): their TypeScript types, which the server's operations
 * return and the typed client reads, and their zod schemas, from which the OpenAPI document describes
 * them. Records the core already defines (entries, tasks, conversations, input results, views) keep
 * their core types; their schemas here describe the fields a client relies on and allow the rest.
 * Imports nothing from src/worker/.
 */
import { z } from "zod";
import type { InspectResult } from "../core/driver.js";
import type { InvocationMethod } from "../core/host.js";
import type { Acceptance, InputResult, QueuedInput } from "../core/inbox.js";
import type { UsageRow, UsageTotals } from "../kinds/states.js";
import type { Conversation, Element, Entry, Id, Page, Task } from "../storage/records.js";

/** The configuration a session is created with (PUT), after defaults: what a second PUT is compared to. */
export interface SessionConfig {
  readonly model: string;
  readonly thinking?: string;
  readonly selectedTools: readonly string[];
  readonly profile?: string;
  readonly budgetMs?: number;
  /** What a restart does to a generation in flight (DESIGN §3): retry it (default) or fail it. */
  readonly onInterrupt: "retry" | "fail";
}

export interface AcceptResponse {
  readonly inputId: Id;
  readonly conversationId: Id;
  /** The input's status when the response was made (after the wait, if any). */
  readonly status: InputResult["status"];
  /** The request key was used before: this is its first acceptance, and nothing was written. */
  readonly duplicate: boolean;
  readonly result: InputResult | undefined;
  /** With a wait and a done result: the answer entry. */
  readonly answer?: Entry;
}

export interface SessionSummary {
  readonly config: SessionConfig | undefined;
  readonly rootConversationId: Id;
  readonly lastSeq: Id;
  readonly liveTasks: number;
}

export interface ConversationSnapshot {
  readonly conversation: Conversation;
  /** The task that created this conversation and the conversation that task belongs to (§5.7), if any. */
  readonly owner: { readonly taskId: Id; readonly conversationId: Id } | null;
  /** Conversations created by this conversation's tasks (subagents, §8.5), oldest first; at most 1,000. */
  readonly children: readonly Id[];
  readonly config: ConfigValues;
  readonly tasks: readonly Task[];
  /** Queued inputs; `waiting: true` marks steer/followUp items that no live turn will place (a group
   * ended without a final answer): POST .../continue places them. */
  readonly inbox: readonly WaitingElement[];
  readonly readAt: Id;
}

export type WaitingElement = Element<QueuedInput> & { readonly waiting: boolean };

export interface ConfigValues {
  readonly model?: string;
  readonly thinking?: string;
  readonly selectedTools?: readonly string[];
  readonly profile?: string;
  readonly budgetMs?: number;
}

export interface UsageReport {
  readonly totals: UsageTotals | undefined;
  readonly rows: Page<Element<UsageRow>>;
}

/** A task's consecutive kills as counted under `version`. */
export interface KillCount {
  readonly taskId: Id;
  readonly kills: number;
  readonly version: string;
}

/** The durable fault record (what inspect shows an operator). */
export interface FaultRecord {
  readonly at: number;
  readonly taskId?: Id;
  readonly kind?: string;
  readonly method?: InvocationMethod;
  readonly message: string;
}

export interface SessionInspection extends InspectResult {
  /** The durable fault record; while present, alarms do not drive the session. */
  readonly fault: FaultRecord | undefined;
  /** Consecutive-kill counters of tasks whose last execute/recover did not return. */
  readonly kills: readonly KillCount[];
  readonly killBound: number;
  readonly version: string;
  /** Invocations in flight in this instance. */
  readonly busy: boolean;
  readonly nextWake: number | undefined;
}

/** `PUT /v1/sessions/{s}`: 201 created, 200 the same config again. */
export interface CreateSessionResponse {
  readonly session: string;
  readonly created: boolean;
  readonly config: SessionConfig;
}

/** `GET` / `DELETE /inputs/{inputId}`. */
export interface InputResponse {
  readonly inputId: Id;
  readonly conversationId: Id;
  readonly result: InputResult;
}

/** `GET /acceptances/{requestKey}`. */
export type AcceptanceResponse = Omit<Acceptance, "requestId"> & { readonly requestKey: string };

export interface ForkResponse {
  readonly conversationId: Id;
  readonly conversation: Conversation;
}

export interface CollapseResponse {
  readonly taskId: Id;
}

/** `POST .../watch-token`: a token for `?access_token=` on that one watch. */
export interface WatchTokenResponse {
  readonly token: string;
  /** ISO 8601. */
  readonly expiresAt: string;
  readonly expiresIn: number;
}

// ---------------------------------------------------------------------------------------------
// Schemas of the response bodies, for the OpenAPI document

const id = z.number().int().positive();
/** A record of the core: the fields a client relies on; other fields are allowed. */
const record = <T extends z.core.$ZodLooseShape>(shape: T, description: string) => z.looseObject(shape).meta({ description });

export const sessionConfigOut = z.object({
  model: z.string(),
  thinking: z.string().optional(),
  selectedTools: z.array(z.string()),
  profile: z.string().optional(),
  budgetMs: z.number().int().optional(),
});
export const configValuesOut = sessionConfigOut.partial();
export const entryOut = record({ id, kind: z.string(), conversationId: id.optional() }, "A transcript entry (§2.2)");
export const taskOut = record({ id, kind: z.string(), status: z.string() }, "A durable task (§5)");
export const conversationOut = record({ id }, "A conversation record (§2.1)");
export const inputResultOut = record({ status: z.enum(["queued", "placed", "done", "unanswered"]) }, "An input's result (§3.4)");
export const pageOf = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item), next: z.number().int().optional() });

export const createSessionResponse = z.object({ session: z.string(), created: z.boolean(), config: sessionConfigOut });
export const sessionSummaryResponse = z.looseObject({
  session: z.string(),
  config: sessionConfigOut.optional(),
  rootConversationId: id,
  lastSeq: z.number().int(),
  liveTasks: z.number().int(),
  title: z.string().nullable().optional(),
  labels: z.array(z.string()).optional(),
});
/** One row of the tenant's directory (GET /v1/sessions). */
export const directoryRow = z.looseObject({
  session: z.string(),
  title: z.string().optional(),
  labels: z.array(z.string()),
  createdAt: z.number().int(),
  lastActivityAt: z.number().int(),
  liveTasks: z.number().int(),
});
export const sessionsPage = z.looseObject({ items: z.array(directoryRow), cursor: z.string().optional() });
export const sessionMetaResponse = z.looseObject({ session: z.string(), title: z.string().nullable(), labels: z.array(z.string()) });
/** `GET /v1/sessions`: a page of the tenant's directory. */
export type SessionsPage = z.infer<typeof sessionsPage>;
/** `PATCH /v1/sessions/{s}`: the session's directory title and labels after the change. */
export type SessionMeta = z.infer<typeof sessionMetaResponse>;
export const acceptResponse = z.object({
  inputId: id,
  conversationId: id,
  status: inputResultOut.shape.status,
  duplicate: z.boolean(),
  result: inputResultOut.optional(),
  answer: entryOut.optional(),
});
export const inputResponse = z.object({ inputId: id, conversationId: id, result: inputResultOut });
export const acceptanceResponse = z.object({ requestKey: z.string(), conversationId: id, inputId: id });
export const snapshotResponse = z.looseObject({
  conversation: conversationOut,
  owner: z.object({ taskId: id, conversationId: id }).nullable().describe("The task that created this conversation (a subagent's tool call) and its conversation"),
  children: z.array(id).describe("Conversations created by this conversation's tasks (subagents), oldest first; at most 1,000"),
  config: configValuesOut, tasks: z.array(taskOut), inbox: z.array(z.looseObject({})), readAt: z.number().int() });
export const forkResponse = z.object({ conversationId: id, conversation: conversationOut });
export const collapseResponse = z.object({ taskId: id });
export const usageResponse = z.looseObject({ totals: z.looseObject({}).optional(), rows: pageOf(z.looseObject({})) });
export const tasksResponse = pageOf(taskOut);
export const inspectResponse = z.looseObject({
  fault: z.looseObject({ at: z.number(), message: z.string() }).optional(),
  kills: z.array(z.object({ taskId: id, kills: z.number().int(), version: z.string() })),
  killBound: z.number().int(),
  version: z.string(),
  busy: z.boolean(),
  nextWake: z.number().optional(),
});
export const watchTokenResponse = z.object({ token: z.string(), expiresAt: z.string(), expiresIn: z.number().int() });
export const clearFaultResponse = z.looseObject({ cleared: z.boolean() });
/** Operations whose answer is an acknowledgement object (its fields are informative). */
export const ackResponse = z.looseObject({});
