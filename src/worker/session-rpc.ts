/**
 * The SessionObject's RPC surface as its callers see it through a Durable Object stub (the HTTP layer
 * and tests). Every method returns a promise over the wire, and the values are structured clones.
 *
 * Why a hand-written interface: the stub type that `@cloudflare/workers-types` derives from the class
 * (`DurableObjectStub<SessionObject>`) maps every result through its `Rpc` serialization types, and the
 * recursive `JsonValue` inside task records makes that mapping "excessively deep" for the compiler.
 *
 * The HTTP operations go through one typed method, `op(name, ...args)`, whose table is `SessionOps`;
 * they return `Outcome`s (a value or a problem) because RPC drops error classes.
 */
import type { InputResult, Acceptance } from "../core/inbox.js";
import type { Conversation, Element, Entry, Id, Page, Task } from "../storage/records.js";
import type { Outcome } from "./problems.js";
import type { SessionConfigBody } from "./schemas.js";
import type {
  AcceptRequest,
  AcceptResponse,
  ConfigValues,
  ConversationRef,
  ConversationSnapshot,
  RequestSource,
  SchedulePatch,
  ScheduleRequest,
  ScheduleView,
  SessionConfig,
  SessionSummary,
  UsageReport,
} from "./session-api.js";
import type { RigSessionOps } from "./rig-ops.js";
import type { CreateConfig, SessionInspection, SessionObject } from "./session-object.js";

export type Op<Args extends readonly unknown[], Result> = { readonly args: Args; readonly result: Result };

/** Every HTTP operation on a session: its arguments and its result. */
export interface SessionOps extends RigSessionOps {
  summary: Op<[], SessionSummary>;
  accept: Op<[ref: ConversationRef, request: AcceptRequest], AcceptResponse>;
  input: Op<[inputId: Id], { inputId: Id; conversationId: Id; result: InputResult }>;
  withdraw: Op<[inputId: Id], { inputId: Id; conversationId: Id; result: InputResult }>;
  acceptance: Op<[source: RequestSource], Acceptance>;
  snapshot: Op<[ref: ConversationRef], ConversationSnapshot>;
  entries: Op<[ref: ConversationRef, query: { before?: Id; after?: Id; limit?: number; kind?: string }], Page<Entry>>;
  abort: Op<[ref: ConversationRef], { aborted: true }>;
  deleteConversation: Op<[ref: ConversationRef], { deleted: Id[] }>;
  fork: Op<[ref: ConversationRef, options: { at: Id | "start"; abort?: boolean }], { conversationId: Id; conversation: Conversation }>;
  continue: Op<[ref: ConversationRef], { inputs: Id[]; generation: Id }>;
  collapse: Op<[ref: ConversationRef, instructions: string | undefined], { taskId: Id }>;
  reset: Op<[ref: ConversationRef, handoff: string | undefined], { reset: true }>;
  getConfig: Op<[ref: ConversationRef], ConfigValues>;
  patchConfig: Op<[ref: ConversationRef, patch: ConfigValues], ConfigValues>;
  tasks: Op<[query: { live?: boolean; conversation?: ConversationRef; after?: Id; limit?: number }], Page<Task>>;
  abortTask: Op<[taskId: Id], Task>;
  usage: Op<[query: { after?: Id; limit?: number }], UsageReport>;
  createSchedule: Op<[request: ScheduleRequest], ScheduleView>;
  schedules: Op<[query: { after?: Id; limit?: number; all?: boolean }], Page<ScheduleView>>;
  schedule: Op<[id: Id], ScheduleView>;
  deleteSchedule: Op<[id: Id], ScheduleView>;
  patchSchedule: Op<[id: Id, patch: SchedulePatch], ScheduleView>;
  inspect: Op<[], SessionInspection>;
  shutdown: Op<[], { shutdown: true }>;
  clearFault: Op<[], { readonly cleared: boolean }>;
  releaseQuarantine: Op<[taskId: Id], { released: true }>;
  /** The storage's last sequence (tests check that a refused request wrote nothing). */
  lastSeq: Op<[], Id>;

}

export interface SessionRpc {
  create(config?: CreateConfig): Promise<{ readonly created: boolean }>;
  exists(): Promise<boolean>;
  inspect(): Promise<SessionInspection>;
  abortTask(taskId: Id): Promise<void>;
  shutdown(): Promise<void>;
  clearFault(): Promise<{ readonly cleared: boolean }>;
  releaseQuarantine(taskId: Id): Promise<void>;
  createSession(
    body: SessionConfigBody,
    where?: { readonly tenant: string; readonly session: string },
  ): Promise<Outcome<{ readonly created: boolean; readonly config: SessionConfig }>>;
  relabel(change: { readonly title?: string | null; readonly labels?: readonly string[] }): Promise<Outcome<{ readonly title?: string; readonly labels: readonly string[] }>>;
  directoryMeta(): Promise<{ readonly title?: string; readonly labels: readonly string[] } | undefined>;
  op<K extends keyof SessionOps>(name: K, ...args: SessionOps[K]["args"]): Promise<Outcome<SessionOps[K]["result"]>>;
  destroy(): Promise<Outcome<{ readonly deleted: true }>>;
  fetch(request: Request): Promise<Response>;
}

/** The typed RPC view of a session stub. */
export function sessionRpc(stub: DurableObjectStub<SessionObject>): SessionRpc {
  return stub as unknown as SessionRpc;
}

export type { Element };
