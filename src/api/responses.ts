/**
 * The response bodies of the HTTP API (docs/api.md): their TypeScript types, which the server's operations
 * return and the typed client reads, and their zod schemas, from which the OpenAPI document describes
 * them. Records the core already defines (entries, tasks, conversations, input results) keep their core
 * types; their schemas here are exact copies, and a type test (test/api/responses.test-d.ts) proves
 * every schema's inferred type equals the type the server answers with, both ways.
 * Imports nothing from src/worker/.
 *
 * One concept over 400 lines: the wire's response bodies. Each type sits beside its schema so the type
 * test can pin one against the other.
 */
import { z } from "zod";
import type { InspectResult } from "../core/driver.js";
import type { InvocationMethod } from "../core/host.js";
import type { Acceptance, InputResult, QueuedInput } from "../core/inbox.js";
import type { UsageRow, UsageTotals } from "../kinds/states.js";
import type { Conversation, Element, Entry, Id, JsonValue, Message, Page, Task } from "../storage/records.js";

/** The configuration a session is created with (PUT), after defaults: what a second PUT is compared to. */
export interface SessionConfig {
  readonly model: string;
  readonly thinking?: string;
  readonly selectedTools: readonly string[];
  readonly profile?: string;
  readonly budgetMs?: number;
  /**
   * What a restart does to a generation in flight (docs/design.md "Alarms and restarts"): retry it (default) or fail
   * it.
   */
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
  /** With a done result: the text parts of the final answer entry, joined. */
  readonly outputText?: string;
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
  readonly tasks: readonly ShownTask[];
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
  /**
   * GET .../config only: the profile and version the conversation's instructions were last prepared from
   * (a system entry is not proof of delivery, §8.2); absent when none were.
   */
  readonly preparedProfile?: { readonly name: string; readonly version: number };
}

/** A config PATCH: the fields to change; `profile: null` clears the profile. */
export type ConfigPatch = Omit<ConfigValues, "profile" | "preparedProfile"> & { readonly profile?: string | null };

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
  /** With a done result: the text parts of the final answer entry, joined. */
  readonly outputText?: string;
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
// Schemas of the response bodies: exact (strict objects, tagged unions), one per body the server
// answers. The OpenAPI document describes them, the end-to-end client test parses every body with them,
// and test/api/responses.test-d.ts proves each one's inferred type equals the server's type both ways.

const id = z.number().int().positive();
const seq = z.number().int().nonnegative();

function isJson(value: unknown): boolean {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(isJson);
  if (typeof value === "object") {
    const prototype: unknown = Object.getPrototypeOf(value);
    return (prototype === Object.prototype || prototype === null) && Object.values(value).every(isJson);
  }
  return false;
}
/** Any JSON value (task state fields, entry data, mail payloads): opaque to the API. */
export const jsonValue = z.custom<JsonValue>(isJson, "a JSON value").meta({ description: "Any JSON value" });
/** A pi-ai message (an entry's model projection): the model library's shape, not the API's. */
export const messageOut = z
  .custom<Message>(
    (value) =>
      typeof value === "object" &&
      value !== null &&
      typeof (value as { role?: unknown }).role === "string" &&
      isJson(value),
    "a pi-ai message",
  )
  .meta({ description: "A pi-ai message (role user, assistant or toolResult)" });

export const textContentOut = z.strictObject({
  type: z.literal("text"),
  text: z.string(),
  textSignature: z.string().optional(),
});
export const imageContentOut = z.strictObject({ type: z.literal("image"), data: z.string(), mimeType: z.string() });
export const userInputOut = z.union([
  z.string(),
  z.array(z.discriminatedUnion("type", [textContentOut, imageContentOut])),
]);

export const sessionConfigOut = z.strictObject({
  model: z.string(),
  thinking: z.string().optional(),
  selectedTools: z.array(z.string()),
  profile: z.string().optional(),
  budgetMs: z.number().int().optional(),
  onInterrupt: z.enum(["retry", "fail"]),
});
export const configValuesOut = z.strictObject({
  model: z.string().optional(),
  thinking: z.string().optional(),
  selectedTools: z.array(z.string()).optional(),
  profile: z.string().optional(),
  budgetMs: z.number().int().optional(),
  preparedProfile: z
    .strictObject({ name: z.string(), version: z.number().int() })
    .optional()
    .describe("GET .../config only: the profile and version the instructions were last prepared from"),
});

export const contextEditOut = z.discriminatedUnion("action", [
  z.strictObject({ target: id, action: z.literal("omit") }),
  z.strictObject({ target: id, action: z.literal("replace"), messages: z.array(messageOut) }),
]);
export const entryOut = z
  .strictObject({
    id,
    conversationId: id,
    kind: z.string(),
    byTaskId: id.optional(),
    key: z.string().optional(),
    data: jsonValue
      .optional()
      .describe(
        "The kind's data; a tool_result entry's is the whole tool result data (§9.3): details, usage, addedTools, terminate, handoff, delegated, diags, truncation, isError",
      ),
    model: z.array(messageOut).optional(),
    head: id.optional(),
    edits: z.array(contextEditOut).optional(),
  })
  .meta({ description: "A transcript entry (§2.2)" });
/**
 * Why the host marked a task for abort, when it did for a reason of its own: `imported`, the import of its session
 * settled it (docs/operations.md "Export and import"). An operator's or a user's abort carries none.
 */
export type AbortReason = "imported";

/** A task as the API shows it: the stored task and, for a host's abort mark, its reason. */
export type ShownTask = Task & { readonly abortReason?: AbortReason };

export const storedTaskOut = z
  .strictObject({
    id,
    conversationId: id,
    kind: z.string(),
    role: z.enum(["start", "inflight", "terminal"]),
    /** The kind's own state: a status and whatever else the kind keeps (JSON). */
    state: z
      .object({ status: z.string() })
      .catchall(jsonValue)
      .describe(
        "The kind's own state: a status and whatever else the kind keeps. A settled tool task's output is the whole tool result data (§9.3); its call keeps only id and name (and namespace): the arguments are in the assistant entry it names",
      ),
    after: z.array(id),
    background: z.literal(true).optional(),
    turn: z.literal(true).optional(),
    owns: z.array(id).optional(),
    abort: z.literal(true).optional(),
  })
  .meta({ description: "A durable task (§5), as stored" });
/** A task as the task routes and a conversation's snapshot show it: stored, with the host's abort reason. */
export const taskOut = storedTaskOut
  .extend({
    abortReason: z
      .enum(["imported"])
      .optional()
      .describe("Why the host marked the task for abort: imported (its session's import settled it); absent otherwise"),
  })
  .meta({ description: "A durable task (§5)" });
export const conversationOut = z
  .strictObject({
    id,
    parent: z.strictObject({ conversationId: id, at: seq }).optional(),
    owner: id.optional(),
  })
  .meta({ description: "A conversation record (§2.5)" });
const requestId = z.string().optional();
export const inputResultOut = z
  .discriminatedUnion("status", [
    z.strictObject({ status: z.literal("queued"), requestId }),
    z.strictObject({ status: z.literal("placed"), requestId, entry: id }),
    z.strictObject({ status: z.literal("done"), requestId, entry: id, answer: id.optional() }),
    z.strictObject({
      status: z.literal("unanswered"),
      requestId,
      entry: id.optional(),
      reason: z.enum(["terminated", "aborted", "failed"]),
      detail: z.string().optional(),
    }),
  ])
  .meta({ description: "An input's result (§3.4)" });
/** A storage page (§7.2): `next` pages on, `readAt` is the lastSeq it was read at. */
export const pageOf = <T extends z.ZodType>(item: T) =>
  z.strictObject({ items: z.array(item), next: id.optional(), readAt: seq });
export const elementOf = <T extends z.ZodType>(value: T) => z.strictObject({ id, value });

export const createSessionResponse = z.strictObject({
  session: z.string(),
  created: z.boolean(),
  config: sessionConfigOut,
});
export const sessionSummaryResponse = z.strictObject({
  session: z.string(),
  config: sessionConfigOut.optional(),
  rootConversationId: id,
  lastSeq: seq,
  liveTasks: z.number().int().nonnegative(),
  title: z
    .string()
    .nullable()
    .optional()
    .describe("The directory title (null: none); absent before the directory knows the session"),
  labels: z.array(z.string()).optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  retention: z
    .strictObject({
      deleteAfterDays: z.number().int(),
      expiresAt: z.number().int().describe("Epoch ms: last activity + deleteAfterDays"),
    })
    .optional()
    .describe("Absent: the session never expires (docs/operations.md Retention)"),
});
/** One row of the tenant's directory (GET /v1/sessions). */
export const directoryRow = z.strictObject({
  session: z.string(),
  owner: z
    .string()
    .optional()
    .describe("The end user who created it with a user token (docs/users.md); absent: the tenant's"),
  title: z.string().optional(),
  labels: z.array(z.string()),
  metadata: z.record(z.string(), z.string()),
  status: z
    .enum(["idle", "busy", "faulted"])
    .describe("idle: no live turn; busy: a live turn; faulted: a session fault or a quarantined task"),
  createdAt: z.number().int(),
  lastActivityAt: z.number().int(),
  liveTasks: z.number().int().nonnegative(),
});
export const sessionsPage = z.strictObject({
  items: z.array(directoryRow),
  cursor: z.string().optional().describe("Pass as ?cursor= for the next page; absent on the last"),
});
export const sessionMetaResponse = z.strictObject({
  session: z.string(),
  title: z.string().nullable(),
  labels: z.array(z.string()),
  metadata: z.record(z.string(), z.string()),
  variables: z
    .record(z.string(), z.string())
    .optional()
    .describe("When the PATCH set variables: all of the session's variables after it"),
});
export const toolResultRecorded = z.strictObject({
  taskId: id,
  recordedAt: z.number().describe("When the result was recorded (ms since the epoch)"),
});
export const deletedResponse = z.strictObject({ deleted: z.literal(true) });
const outputText = z
  .string()
  .describe("With a done result: the text parts of the final answer entry, joined (absent for any other status)");
export const acceptResponse = z.strictObject({
  inputId: id,
  conversationId: id,
  status: z.enum(["queued", "placed", "done", "unanswered"]),
  duplicate: z.boolean(),
  result: inputResultOut.optional(),
  answer: entryOut.optional(),
  outputText: outputText.optional(),
});
export const inputResponse = z.strictObject({
  inputId: id,
  conversationId: id,
  result: inputResultOut,
  outputText: outputText.optional(),
});
export const acceptanceResponse = z.strictObject({ requestKey: z.string(), conversationId: id, inputId: id });
export const queuedInputOut = z.discriminatedUnion("mode", [
  z.strictObject({
    mode: z.enum(["steer", "followUp", "nextRun"]),
    input: userInputOut,
    requestId,
    data: jsonValue.optional().describe("The user entry's data it becomes (an inbound delivery's payload and source)"),
    /** The id the sender shows the message under (a chat message's id). */
    messageId: z.string().optional(),
  }),
  z.strictObject({
    mode: z.literal("write"),
    kind: z.string(),
    entry: z.strictObject({
      key: z.string().optional(),
      data: jsonValue.optional(),
      model: z.array(messageOut).optional(),
      head: z.union([id, z.literal("self")]).optional(),
      edits: z.array(contextEditOut).optional(),
    }),
    requestId,
  }),
]);
export const snapshotResponse = z.strictObject({
  conversation: conversationOut,
  owner: z
    .strictObject({ taskId: id, conversationId: id })
    .nullable()
    .describe("The task that created this conversation (a subagent's tool call) and its conversation"),
  children: z
    .array(id)
    .describe("Conversations created by this conversation's tasks (subagents), oldest first; at most 1,000"),
  config: configValuesOut,
  tasks: z.array(taskOut),
  inbox: z
    .array(z.strictObject({ id, value: queuedInputOut, waiting: z.boolean() }))
    .describe("Queued inputs; waiting: no live turn will place it (POST .../continue does)"),
  readAt: seq,
});
export const entriesResponse = pageOf(entryOut);
export const abortedResponse = z.strictObject({ aborted: z.literal(true) });
export const conversationDeletedResponse = z.strictObject({
  deleted: z
    .array(z.number().int().positive())
    .describe("The deleted conversations: this one first, then every conversation it owned, down the tree"),
});
export const forkResponse = z.strictObject({ conversationId: id, conversation: conversationOut });
export const continueResponse = z.strictObject({ inputs: z.array(id), generation: id });
export const collapseResponse = z.strictObject({ taskId: id });
export const resetResponse = z.strictObject({ reset: z.literal(true) });
export const usageTotalsOut = z.strictObject({
  attempts: z.number().int(),
  unknown: z.number().int(),
  input: z.number(),
  output: z.number(),
  cacheRead: z.number(),
  cacheWrite: z.number(),
  totalTokens: z.number(),
  cost: z.number(),
});
export const providerUsageOut = z.strictObject({
  input: z.number(),
  output: z.number(),
  cacheRead: z.number(),
  cacheWrite: z.number(),
  cacheWrite1h: z.number().optional(),
  reasoning: z.number().optional(),
  totalTokens: z.number(),
  cost: z.strictObject({
    input: z.number(),
    output: z.number(),
    cacheRead: z.number(),
    cacheWrite: z.number(),
    total: z.number(),
    totalFromProvider: z.boolean().optional(),
  }),
});
export const usageRowOut = z.strictObject({
  conversationId: id,
  taskId: id,
  kind: z.string(),
  model: z.string(),
  usage: providerUsageOut.nullable().describe("null: the provider reported nothing (unknown cost, not zero)"),
});
export const usageResponse = z.strictObject({
  totals: usageTotalsOut.optional(),
  rows: pageOf(elementOf(usageRowOut)),
});
export const tasksResponse = pageOf(taskOut);
export const releasedResponse = z.strictObject({ released: z.literal(true) });
export const faultRecordOut = z.strictObject({
  at: z.number(),
  taskId: id.optional(),
  kind: z.string().optional(),
  method: z.enum(["execute", "recover", "abort"]).optional(),
  message: z.string(),
});
export const inspectResponse = z.strictObject({
  start: z.array(storedTaskOut),
  inflight: z.array(storedTaskOut),
  orphaned: z.array(storedTaskOut),
  parked: z.array(storedTaskOut),
  quarantined: z.array(storedTaskOut),
  fault: faultRecordOut.optional(),
  kills: z.array(z.strictObject({ taskId: id, kills: z.number().int(), version: z.string() })),
  killBound: z.number().int(),
  version: z.string(),
  busy: z.boolean(),
  nextWake: z.number().optional(),
});
export const shutdownResponse = z.strictObject({ shutdown: z.literal(true) });
export const watchTokenResponse = z.strictObject({
  token: z.string(),
  expiresAt: z.string(),
  expiresIn: z.number().int(),
});
/** `POST /v1/tokens`: a `user` token (docs/users.md) and when it expires (ISO 8601). */
export const mintedTokenResponse = z.strictObject({ token: z.string(), expiresAt: z.string() });
export const clearFaultResponse = z.strictObject({ cleared: z.boolean() });

/** One row of `GET /v1/models`: the id a session config names, and what the model can do. */
export const modelListingOut = z.strictObject({
  id: z.string(),
  provider: z.string(),
  name: z.string(),
  api: z.string(),
  reasoning: z.boolean(),
  input: z.array(z.string()),
  contextWindow: z.number(),
  maxTokens: z.number(),
});
export const modelsResponse = z.strictObject({
  defaultModel: z.string(),
  providers: z.array(z.string()),
  models: z.array(modelListingOut),
});

/** A schedule as the API shows it (§8.6; docs/jobs.md "Schedules"). */
export const scheduleViewOut = z.strictObject({
  id,
  conversationId: id,
  input: z.string(),
  mode: z.enum(["followUp", "steer", "nextRun"]),
  every: z.number().int().nullable(),
  cron: z.string().nullable(),
  timezone: z.string().nullable(),
  status: z.enum(["active", "paused", "ended"]),
  /** The next occurrence; null while paused (nothing runs until a resume) and once ended. */
  nextRunAt: z.number().int().nullable(),
  lastRunAt: z.number().int().nullable(),
  lastInputId: id.nullable(),
  /** After downtime: "one" run for all the missed occurrences, or "none" (the gap is skipped). */
  catchUp: z.enum(["one", "none"]),
  runs: z.number().int(),
  /** Occurrences missed while down or asleep and not run; a lower bound when `skippedCapped`. */
  skipped: z.number().int(),
  /** A cron gap's count stopped at 10,000: `skipped` is a lower bound. */
  skippedCapped: z.boolean(),
});
export const schedulesPage = pageOf(scheduleViewOut);

// The rig (docs/rig.md): the hook-persistence document's records (snake_case, ISO 8601 UTC), agents, mail,
// nudges, the witness's settings and its RigHealthReport.
const hookStatus = z.enum(["empty", "pending", "active", "completed"]);
/** `.chipset/state/hooks/{agent_id}.json`: exactly the document's fields. */
export const hookFileOut = z.strictObject({
  agent_id: z.string(),
  status: hookStatus,
  work_item: z.strictObject({ bead_id: z.string(), title: z.string(), assigned_at: z.string() }).nullable(),
  last_activity: z.string(),
});
/** A hook read: the file and, when the witness nudged the agent for its current bead, that record. */
export const hookReadOut = hookFileOut.extend({
  nudges: z.strictObject({ count: z.number().int().positive(), lastAt: z.string() }).optional(),
});
export const agentRecordOut = z.strictObject({
  agent_id: z.string(),
  role: z.enum(["polecat", "refinery", "crew"]),
  conversationId: id.optional(),
  registered_at: z.string(),
  registered_by: z.string(),
  terminated: z.strictObject({ by: z.string(), at: z.string() }).optional(),
});
export const registerAgentResponse = z.strictObject({ created: z.boolean(), agent: agentRecordOut });
/** One agent of `GET .../rig/agents`: its record, its hook (with version and attempt) and its health. */
export const agentRowOut = agentRecordOut.extend({
  hook: hookFileOut,
  attempt: z.number().int(),
  version: z.number().int(),
  summary: z.string().optional(),
  health: z.enum(["terminated", "stalled", "active", "pending", "idle"]),
});
export const agentsResponse = z.strictObject({ agents: z.array(agentRowOut) });
/** A mail payload: a non-empty string or a JSON object. */
export const mailPayloadOut = z.union([z.string(), z.record(z.string(), jsonValue)]);
export const mailMessageOut = z.strictObject({
  id,
  from: z.string(),
  to: z.string(),
  channel: z.literal("mail"),
  payload: mailPayloadOut,
  timestamp: z.string(),
  durable: z.literal(true),
});
export const mailViewOut = mailMessageOut.extend({
  ack: z.strictObject({ by: z.string(), at: z.string() }).optional(),
});
/** A mailbox page: its messages in order, and `next` (the cursor for `?after=`) while more remain. */
export const mailboxResponse = z.strictObject({ messages: z.array(mailViewOut), next: id.optional() });
export const nudgeOut = z.strictObject({
  from: z.string(),
  to: z.string(),
  channel: z.literal("nudge"),
  payload: z.string(),
  timestamp: z.string(),
  durable: z.literal(false),
});
export const nudgesResponse = z.strictObject({ nudges: z.array(nudgeOut) });
export const rigSettingsOut = z.strictObject({
  patrolIntervalMs: z.number().int(),
  stallThresholdMs: z.number().int(),
  alertAfterMs: z.number().int(),
  spawnGraceMs: z.number().int(),
  touchThrottleMs: z.number().int(),
});
export const rigHealthOut = z.strictObject({
  rigName: z.string(),
  timestamp: z.string(),
  totalAgents: z.number().int(),
  activeAgents: z.number().int(),
  stalledAgents: z.number().int(),
  idleAgents: z.number().int(),
  terminatedAgents: z.number().int(),
  stalledDetails: z.array(
    z.strictObject({
      agentId: z.string(),
      beadId: z.string(),
      stalledMinutes: z.number(),
      nudgesSent: z.number().int(),
    }),
  ),
  pendingAgents: z.number().int(),
  notStartedAgents: z.array(z.strictObject({ agentId: z.string(), beadId: z.string(), pendingMinutes: z.number() })),
});

/** How an inbound endpoint turns a delivery into input, as both kinds of endpoint answer it (api/inbound.ts too). */
export const inboundDeliveryShape = {
  mode: z.enum(["followUp", "steer", "nextRun"]),
  template: z.string().optional(),
  events: z.array(z.string()).optional(),
  when: z.array(z.record(z.string(), jsonValue)).optional(),
  ignore: z.array(z.string()).optional(),
  self: z.string().optional(),
  fields: z.array(z.string()).optional(),
};

/** An inbound endpoint as an operator sees it (docs/integrations.md); `secret` only in the PUT that generated it. */
export const inboundOut = z.strictObject({
  name: z.string(),
  url: z.string().describe("Where the sender posts: POST /v1/inbound/{tenant}/{session}/{name}"),
  format: z.enum(["standard", "github", "slack", "stripe"]),
  conversationId: id,
  ...inboundDeliveryShape,
  secret: z
    .string()
    .optional()
    .describe("A standard endpoint's generated whsec_ secret: answered once, when it is generated"),
});
export const inboundListResponse = z.strictObject({ items: z.array(inboundOut) });
/**
 * A delivery: the input it queued (`duplicate`: a redelivery, the first acceptance), or the platform's handshake
 * answer.
 */
export const inboundDeliveryResponse = z.union([
  z.strictObject({
    inputId: id,
    duplicate: z.boolean(),
    session: z.string().optional().describe("A tenant endpoint's delivery: the session it was routed to"),
    thread: z.string().optional().describe("A tenant endpoint's delivery: the chat id of its thread"),
  }),
  z.strictObject({ ignored: z.literal(true), reason: z.string() }).describe("A delivery its filters ignore"),
  z.record(z.string(), jsonValue),
]);

// Types of the bodies that have no interface above: inferred from their schemas.
export type SessionSummaryResponse = z.infer<typeof sessionSummaryResponse>;
/** `GET /v1/sessions`: a page of the tenant's directory. */
export type SessionsPage = z.infer<typeof sessionsPage>;
/** `PATCH /v1/sessions/{s}`: the session's directory title and labels after the change. */
export type SessionMeta = z.infer<typeof sessionMetaResponse>;
export type DeletedResponse = z.infer<typeof deletedResponse>;
export type AbortedResponse = z.infer<typeof abortedResponse>;
export type ConversationDeletedResponse = z.infer<typeof conversationDeletedResponse>;
export type ContinueResponse = z.infer<typeof continueResponse>;
export type ResetResponse = z.infer<typeof resetResponse>;
export type ReleasedResponse = z.infer<typeof releasedResponse>;
export type ShutdownResponse = z.infer<typeof shutdownResponse>;
export type MintedTokenResponse = z.infer<typeof mintedTokenResponse>;
export type ClearFaultResponse = z.infer<typeof clearFaultResponse>;
export type ModelsResponse = z.infer<typeof modelsResponse>;
export type ScheduleViewResponse = z.infer<typeof scheduleViewOut>;
export type SchedulesPage = z.infer<typeof schedulesPage>;
export type HookFileResponse = z.infer<typeof hookFileOut>;
export type AgentRecordResponse = z.infer<typeof agentRecordOut>;
export type RegisterAgentResponse = z.infer<typeof registerAgentResponse>;
export type AgentsResponse = z.infer<typeof agentsResponse>;
export type MailMessageResponse = z.infer<typeof mailMessageOut>;
export type MailViewResponse = z.infer<typeof mailViewOut>;
export type MailboxResponse = z.infer<typeof mailboxResponse>;
export type NudgesResponse = z.infer<typeof nudgesResponse>;
export type RigSettingsResponse = z.infer<typeof rigSettingsOut>;
export type RigHealthResponse = z.infer<typeof rigHealthOut>;
export type InboundResponse = z.infer<typeof inboundOut>;
export type InboundListResponse = z.infer<typeof inboundListResponse>;
