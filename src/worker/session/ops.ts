/**
 * The session Durable Object's operation table as types: every HTTP operation's arguments and result
 * (`SessionOps`, with the inputs' `InputSessionOps`, the schedules' `ScheduleSessionOps`, the rig's
 * `RigSessionOps` and the inbound endpoints' `InboundSessionOps`) and what `create` takes. The object
 * implements the table (session/op-table.ts, over session/rig-ops.ts and the other *-ops.ts modules) and
 * callers reach it through the typed stub (session/rpc.ts); they import it from here, so none imports
 * another for a type.
 */
import type { InitialValue } from "../../core/harness.js";
import type { Conversation, Entry, Id, Page, Task } from "../../storage/records.js";
import type {
  Actor,
  AgentListing,
  AgentRecord,
  HookView,
  MailMessage,
  MailPayload,
  MailPage,
  MailView,
  Nudge,
  RegisterRequest,
  RigHealth,
  RigSettings,
  Transition,
  TransitionRequest,
  TransitionResult,
} from "../../rig/index.js";
import type { SessionInspection, ShownTask } from "../../api/responses.js";
import type { InboundSessionOps } from "./inbound-ops.js";
import type { RemoteCallSessionOps } from "../remote/call-ops.js";
import type { PendingSessionOps } from "./pending-ops.js";
import type { ChatSessionOps } from "./chat-ops.js";
import type { OutboxSessionOps } from "../outbox/types.js";
import type { InputAdmission, InputSessionOps } from "./input-ops.js";
import type { ScheduleSessionOps } from "./schedule-ops.js";
import type {
  ConfigPatch,
  ConfigValues,
  ConversationRef,
  ConversationSnapshot,
  SessionSummary,
  UsageReport,
} from "./api.js";

/** One operation of the table: its arguments and its result. */
export type Op<Args extends readonly unknown[], Result> = { readonly args: Args; readonly result: Result };

/** Every HTTP operation on a session: its arguments and its result. */
export interface SessionOps
  extends
    InputSessionOps,
    ChatSessionOps,
    ScheduleSessionOps,
    RigSessionOps,
    InboundSessionOps,
    PendingSessionOps,
    OutboxSessionOps,
    RemoteCallSessionOps {
  summary: Op<[], SessionSummary>;
  snapshot: Op<[ref: ConversationRef], ConversationSnapshot>;
  entries: Op<[ref: ConversationRef, query: { before?: Id; after?: Id; limit?: number; kind?: string }], Page<Entry>>;
  abort: Op<[ref: ConversationRef], { aborted: true }>;
  deleteConversation: Op<[ref: ConversationRef], { deleted: Id[] }>;
  fork: Op<
    [ref: ConversationRef, options: { at: Id | "start"; abort?: boolean }],
    { conversationId: Id; conversation: Conversation }
  >;
  /** With `admission` (something is limited): the new turn is reserved as an input holding no turn slot. */
  continue: Op<[ref: ConversationRef, admission?: InputAdmission], { inputs: Id[]; generation: Id }>;
  collapse: Op<[ref: ConversationRef, instructions: string | undefined], { taskId: Id }>;
  reset: Op<[ref: ConversationRef, handoff: string | undefined], { reset: true }>;
  getConfig: Op<[ref: ConversationRef], ConfigValues>;
  patchConfig: Op<[ref: ConversationRef, patch: ConfigPatch], ConfigValues>;
  /** Set (a value) or remove (null) the session's variables; answers them all. */
  setVariables: Op<[patch: Readonly<Record<string, string | null>>], { variables: Record<string, string> }>;
  tasks: Op<[query: { live?: boolean; conversation?: ConversationRef; after?: Id; limit?: number }], Page<ShownTask>>;
  abortTask: Op<[taskId: Id], ShownTask>;
  usage: Op<[query: { after?: Id; limit?: number }], UsageReport>;
  inspect: Op<[], SessionInspection>;
  shutdown: Op<[], { shutdown: true }>;
  clearFault: Op<[], { readonly cleared: boolean }>;
  /** Resume a paused rig (an imported copy's): GUPP and the witness run again; whether it was paused. */
  rigResume: Op<[], { readonly resumed: boolean }>;
  releaseQuarantine: Op<[taskId: Id], { released: true }>;
  /** The storage's last sequence (tests check that a refused request wrote nothing). */
  lastSeq: Op<[], Id>;
}

/** Every rig operation: its arguments and its result. */
export interface RigSessionOps {
  rigRegister: Op<
    [actor: Actor, agentId: string, request: RegisterRequest],
    { readonly created: boolean; readonly agent: AgentRecord }
  >;
  rigAgents: Op<[actor: Actor], AgentListing[]>;
  rigDeregister: Op<[actor: Actor, agentId: string], { readonly deleted: true }>;
  rigTerminate: Op<[actor: Actor, agentId: string], AgentRecord>;
  rigHook: Op<[actor: Actor, agentId: string, waitMs: number], HookView>;
  rigTransition: Op<
    [actor: Actor, agentId: string, transition: Transition, request: TransitionRequest],
    TransitionResult
  >;
  rigMail: Op<[actor: Actor, query: { readonly after?: Id; readonly limit?: number }], MailPage>;
  rigSend: Op<[actor: Actor, to: string, payload: MailPayload], MailMessage>;
  rigAck: Op<[actor: Actor, id: Id], MailView>;
  rigNudges: Op<[actor: Actor, waitMs: number], Nudge[]>;
  rigSettings: Op<[], RigSettings>;
  rigPatchSettings: Op<[actor: Actor, patch: Partial<RigSettings>], RigSettings>;
  rigHealth: Op<[rigName: string], RigHealth>;
  rigHookFile: Op<[actor: Actor, agentId: string], string>;
  rigExport: Op<[actor: Actor], Uint8Array>;
}

export interface CreateConfig {
  /** Values of the root conversation, written in the creating commit (§9.5). */
  readonly rootValues?: readonly InitialValue[];
}
