/**
 * Type tests (docs/api.md "One wire schema"): every response schema of src/api/responses.ts infers exactly
 * the type the server answers with, both ways, so the typed client's types (z.infer of these schemas, or
 * the interfaces proven equal here) are the server's. They run in `npm run typecheck` (test/tsconfig.json):
 * a field added, dropped, retyped or made optional on one side only fails the build.
 *
 * The comparison is on the wire form (`Wire<T>`): what JSON carries. `readonly` is dropped, a property
 * that may be undefined counts as optional (JSON omits it), and the string index signature a stored
 * record inherits from `JsonObject` is dropped when the record also names its fields (the named fields are
 * the wire shape; the index signature only lets storage hold it). Any-JSON values compare as `JsonValue`.
 */
import type { Usage } from "@earendil-works/pi-ai";
import type { z } from "zod";
import type { problemBody, ProblemBody } from "../../src/api/problems.js";
import type * as R from "../../src/api/responses.js";
import type { InputResult, QueuedInput } from "../../src/core/inbox.js";
import type { UsageRow, UsageTotals } from "../../src/kinds/states.js";
import type {
  AgentRecord,
  HookFile,
  MailMessage,
  MailPage,
  MailView,
  Nudge,
  RigHealth,
  RigSettings,
} from "../../src/rig/index.js";
import type { Conversation, Element, Entry, JsonValue, Page, Task } from "../../src/storage/records.js";
import type { DirectoryEntry, DirectoryPage } from "../../src/worker/directory/object.js";
import type { listModels } from "../../src/worker/platform/models.js";
import type { ScheduleView } from "../../src/worker/session/schedule-ops.js";
import type { RigSessionOps, SessionOps } from "../../src/worker/session/ops.js";
import type { RetentionView } from "../../src/worker/session/retention.js";

/** True when A and B are the same type (not merely assignable to each other). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

type IsJson<T> = [T] extends [JsonValue] ? ([JsonValue] extends [T] ? true : false) : false;
type KnownKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: 0 };
/** A primitive branded by an object (`string & JsonObject`, from indexing `JsonObject & {...}`) is that primitive. */
type Primitive<T> = T extends string
  ? T extends object
    ? string
    : T
  : T extends number
    ? T extends object
      ? number
      : T
    : T;
type WireObject<T> = [KnownKeys<T>] extends [never]
  ? { [key: string]: Wire<T[keyof T]> }
  : {
      -readonly [K in KnownKeys<T>]-?: [
        undefined extends T[K] ? "optional" : "required",
        Wire<Exclude<T[K], undefined>>,
      ];
    };
type WireEach<T> = T extends string | number | boolean | null | undefined
  ? Primitive<T>
  : T extends readonly (infer U)[]
    ? Wire<U>[]
    : T extends object
      ? WireObject<T>
      : T;
/** The wire form of T (see the file comment). */
export type Wire<T> = IsJson<T> extends true ? JsonValue : WireEach<T>;

/** The schema's inferred type and the server's type have the same wire form. */
type Same<S extends z.ZodType, T> = Equal<Wire<z.infer<S>>, Wire<T>>;

/** `UsageRow.usage` is typed `(Usage & JsonObject) | null` so it can be stored; on the wire it is pi-ai's Usage. */
type UsageRowOnWire = { [K in KnownKeys<UsageRow>]: K extends "usage" ? Usage | null : UsageRow[K] };

/** The bodies the routes build themselves (src/worker/routes/*.ts) around the operations' results. */
type SessionSummaryBody = R.SessionSummary & {
  readonly session: string;
  readonly title?: string | null;
  readonly labels?: readonly string[];
  readonly metadata?: Readonly<Record<string, string>>;
  readonly retention?: RetentionView;
};
type AgentRowBody = AgentRecord & {
  readonly hook: HookFile;
  readonly attempt: number;
  readonly version: number;
  readonly summary?: string;
  readonly health: "terminated" | "stalled" | "active" | "pending" | "idle";
};

export type ResponseSchemasEqualServerTypes = [
  // records of the core
  Expect<Same<typeof R.conversationOut, Conversation>>,
  Expect<Same<typeof R.entryOut, Entry>>,
  Expect<Same<typeof R.taskOut, R.ShownTask>>,
  Expect<Same<typeof R.inputResultOut, InputResult>>,
  Expect<Same<typeof R.queuedInputOut, QueuedInput>>,
  Expect<Same<typeof R.usageTotalsOut, UsageTotals>>,
  Expect<Same<typeof R.providerUsageOut, Usage>>,
  Expect<Same<typeof R.usageRowOut, UsageRowOnWire>>,
  // sessions, inputs, conversations
  Expect<Same<typeof R.sessionConfigOut, R.SessionConfig>>,
  Expect<Same<typeof R.configValuesOut, R.ConfigValues>>,
  Expect<Same<typeof R.createSessionResponse, R.CreateSessionResponse>>,
  Expect<Same<typeof R.sessionSummaryResponse, SessionSummaryBody>>,
  Expect<Same<typeof R.directoryRow, DirectoryEntry>>,
  Expect<Same<typeof R.sessionsPage, DirectoryPage>>,
  Expect<
    Same<
      typeof R.sessionMetaResponse,
      {
        readonly session: string;
        readonly title: string | null;
        readonly labels: readonly string[];
        readonly metadata: Readonly<Record<string, string>>;
        readonly variables?: Readonly<Record<string, string>>;
      }
    >
  >,
  Expect<Same<typeof R.acceptResponse, R.AcceptResponse>>,
  Expect<Same<typeof R.acceptResponse, SessionOps["accept"]["result"]>>,
  Expect<Same<typeof R.inputResponse, R.InputResponse>>,
  Expect<Same<typeof R.inputResponse, SessionOps["withdraw"]["result"]>>,
  Expect<Same<typeof R.acceptanceResponse, R.AcceptanceResponse>>,
  Expect<Same<typeof R.snapshotResponse, R.ConversationSnapshot>>,
  Expect<Same<typeof R.entriesResponse, Page<Entry>>>,
  Expect<Same<typeof R.abortedResponse, SessionOps["abort"]["result"]>>,
  Expect<Same<typeof R.forkResponse, R.ForkResponse>>,
  Expect<Same<typeof R.forkResponse, SessionOps["fork"]["result"]>>,
  Expect<Same<typeof R.continueResponse, SessionOps["continue"]["result"]>>,
  Expect<Same<typeof R.collapseResponse, SessionOps["collapse"]["result"]>>,
  Expect<Same<typeof R.resetResponse, SessionOps["reset"]["result"]>>,
  Expect<Same<typeof R.watchTokenResponse, R.WatchTokenResponse>>,
  // usage, tasks, operator
  Expect<
    Same<
      typeof R.usageResponse,
      { readonly totals: UsageTotals | undefined; readonly rows: Page<Element<UsageRowOnWire>> }
    >
  >,
  Expect<Same<typeof R.tasksResponse, SessionOps["tasks"]["result"]>>,
  Expect<Same<typeof R.taskOut, SessionOps["abortTask"]["result"]>>,
  Expect<Same<typeof R.releasedResponse, SessionOps["releaseQuarantine"]["result"]>>,
  Expect<Same<typeof R.faultRecordOut, R.FaultRecord>>,
  Expect<Same<typeof R.inspectResponse, R.SessionInspection>>,
  Expect<Same<typeof R.shutdownResponse, SessionOps["shutdown"]["result"]>>,
  Expect<Same<typeof R.clearFaultResponse, SessionOps["clearFault"]["result"]>>,
  // models and schedules
  Expect<Same<typeof R.modelsResponse, Awaited<ReturnType<typeof listModels>>>>,
  Expect<Same<typeof R.scheduleViewOut, ScheduleView>>,
  Expect<Same<typeof R.schedulesPage, SessionOps["schedules"]["result"]>>,
  // the rig
  Expect<Same<typeof R.hookFileOut, HookFile>>,
  Expect<Same<typeof R.agentRecordOut, AgentRecord>>,
  Expect<Same<typeof R.registerAgentResponse, RigSessionOps["rigRegister"]["result"]>>,
  Expect<Same<typeof R.deletedResponse, RigSessionOps["rigDeregister"]["result"]>>,
  Expect<Same<typeof R.agentRecordOut, RigSessionOps["rigTerminate"]["result"]>>,
  Expect<Same<typeof R.agentRowOut, AgentRowBody>>,
  Expect<Same<typeof R.mailMessageOut, MailMessage>>,
  Expect<Same<typeof R.mailViewOut, MailView>>,
  Expect<Same<typeof R.mailboxResponse, MailPage>>,
  Expect<Same<typeof R.nudgeOut, Nudge>>,
  Expect<Same<typeof R.nudgesResponse, { readonly nudges: readonly Nudge[] }>>,
  Expect<Same<typeof R.rigSettingsOut, RigSettings>>,
  Expect<Same<typeof R.rigHealthOut, RigHealth>>,
  // problems
  Expect<Same<typeof problemBody, ProblemBody>>,
  // the wire form does tell apart what it must (a check of the checker)
  Expect<Equal<Same<typeof R.hookFileOut, Omit<HookFile, "last_activity">>, false>>,
  Expect<Equal<Same<typeof R.hookFileOut, HookFile & { readonly extra?: string }>, false>>,
  Expect<Equal<Same<typeof R.hookFileOut, Partial<HookFile>>, false>>,
  Expect<Equal<Same<typeof R.inputResultOut, Exclude<InputResult, { status: "queued" }>>, false>>,
];
