/**
 * A typed HTTP client for the pico-edge API (docs/api.md), for frontends and the end-to-end tests: one
 * method per route, its types from the wire schema (src/api/; nothing from src/worker/), problem+json errors as `PicoApiError`, and live watches that fold the server's
 * messages with the core's reducer (`applyMessage`) and resume with Last-Event-ID after a disconnect
 * (or, with `watchToken`, connect as EventSource does: a fresh watch token and `?lastEventId=` per
 * connection, no bearer token on the stream).
 *
 * One concept over 400 lines: the typed client of this API. It has one class per resource (session,
 * conversation, rig) and the watch they share.
 *
 * @example
 * const client = new PicoClient({ baseUrl: "http://localhost:8787", token });
 * const s = client.session("demo");
 * await s.create({});
 * const { inputId } = await s.conversation("root").accept("hello", { idempotencyKey: "k1", wait: 10 });
 * const watch = s.conversation("root").watch({ onChange: (view) => render(view) });
 */
import type { UserInput } from "../core/entries.js";
import { applyMessage, applySessionMessage, type ConversationEvent, type ConversationView, type SessionEvent, type SessionView, type WatchMessage } from "../core/watch.js";
import type { ProblemBody } from "../api/problems.js";
import type {
  AbortedResponse,
  AcceptanceResponse,
  AcceptResponse,
  AgentRecordResponse,
  AgentsResponse,
  ClearFaultResponse,
  CollapseResponse,
  ConfigValues,
  ContinueResponse,
  ConversationDeletedResponse,
  ConversationSnapshot,
  CreateSessionResponse,
  DeletedResponse,
  ForkResponse,
  HookFileResponse,
  InputResponse,
  MailboxResponse,
  MailMessageResponse,
  MailViewResponse,
  ModelsResponse,
  NudgesResponse,
  RegisterAgentResponse,
  ReleasedResponse,
  ResetResponse,
  RigHealthResponse,
  RigSettingsResponse,
  ScheduleViewResponse,
  SchedulesPage,
  SessionInspection,
  SessionMeta,
  SessionsPage,
  SessionSummaryResponse,
  ShutdownResponse,
  UsageReport,
  WatchTokenResponse,
} from "../api/responses.js";
import type { z } from "zod";
import type { registerBody, setHookBody, witnessPatch } from "../api/rig.js";
import type { AcceptBody, scheduleBody, SessionConfigBody, SessionPatch } from "../api/schemas.js";
import type { Entry, Id, Page, Task } from "../storage/records.js";
import { InboundClient } from "./inbound.js";
import { answerPending, listPending, PENDING_CLIENT_OPERATIONS, type PendingAnswerBody, type PendingAnsweredResponse, type PendingListResponse } from "./pending.js";
import { DeliveriesClient, EVENTS_CLIENT_OPERATIONS, WebhookEndpointsClient } from "./webhook-endpoints.js";
import { TOOLS_CLIENT_OPERATIONS, ToolsClient } from "./tools.js";
import { ISSUER_CLIENT_OPERATIONS } from "./issuers.js";
import { LIMITS_CLIENT_OPERATIONS } from "./limits.js";
import { END_USER_CLIENT_OPERATIONS } from "./end-users.js";
import { UsersClient, USERS_CLIENT_OPERATIONS } from "./users.js";
import { readSse, type SseFrame } from "./sse.js";

export interface ClientOptions {
  /** e.g. `http://localhost:8787` (no trailing /v1). */
  readonly baseUrl: string;
  readonly token: string;
  /** A fetch implementation (default: the global fetch). */
  readonly fetch?: (request: Request) => Promise<Response>;
}

/** A problem+json answer. */
export class PicoApiError extends Error {
  override readonly name = "PicoApiError";
  constructor(
    readonly status: number,
    readonly problem: ProblemBody,
  ) {
    super(`${status} ${problem.code}: ${problem.detail}`);
  }

  get code(): string {
    return this.problem.code;
  }
}

/** `?a=1&b=x` of the defined values (empty when none). */
function queryString(query: Readonly<Record<string, string | number | boolean | undefined>>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  return params.size > 0 ? `?${params}` : "";
}

export class PicoClient {
  readonly #options: ClientOptions;

  constructor(options: ClientOptions) {
    this.#options = options;
  }

  session(name: string): SessionClient {
    return new SessionClient(this, `/v1/sessions/${encodeURIComponent(name)}`);
  }

  /** The tenant's sessions from its directory, newest activity first (`cursor` pages on). */
  async sessions(query: { limit?: number; cursor?: string; q?: string } = {}): Promise<SessionsPage> {
    return (await this.request<SessionsPage>("GET", `/v1/sessions${queryString(query)}`)).body;
  }

  /** The tenant's webhook endpoints (operator; src/client/webhook-endpoints.ts). */
  webhookEndpoints(): WebhookEndpointsClient {
    return new WebhookEndpointsClient(this);
  }

  /** The tenant's tool catalog (operator; src/client/tools.ts). */
  tools(): ToolsClient { return new ToolsClient(this); }

  /** Session templates and user revocation (operator; src/client/users.ts). */
  users(): UsersClient { return new UsersClient(this); }

  /** The models this deployment can use (what a session config's `model` may name) and the default. */
  async models(): Promise<ModelsResponse> {
    return (await this.request<ModelsResponse>("GET", "/v1/models")).body;
  }

  /** A raw request; JSON in and out; problem+json answers throw PicoApiError. */
  async request<T>(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: T; headers: Headers }> {
    const response = await this.send(method, path, options);
    const text = await response.text();
    const parsed: unknown = text === "" ? undefined : JSON.parse(text);
    if (!response.ok) throw new PicoApiError(response.status, parsed as ProblemBody);
    return { status: response.status, body: parsed as T, headers: response.headers };
  }

  /** A raw request; `bearer: false` sends no Authorization header (a URL that carries a watch token). */
  send(method: string, path: string, options: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal; bearer?: boolean } = {}): Promise<Response> {
    const headers = new Headers(options.headers);
    if (options.bearer !== false) headers.set("authorization", `Bearer ${this.#options.token}`);
    if (options.body !== undefined) headers.set("content-type", "application/json");
    const request = new Request(`${this.#options.baseUrl}${path}`, {
      method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return (this.#options.fetch ?? fetch)(request);
  }
}

export interface AcceptOptions {
  readonly idempotencyKey?: string;
  readonly mode?: AcceptBody["mode"];
  readonly whenBusy?: AcceptBody["whenBusy"];
  /** Wait up to this many seconds for the result. */
  readonly wait?: number;
}

export class SessionClient {
  readonly #client: PicoClient;
  readonly path: string;

  constructor(client: PicoClient, path: string) {
    this.#client = client;
    this.path = path;
  }

  get client(): PicoClient {
    return this.#client;
  }

  async create(config: SessionConfigBody = {}): Promise<CreateSessionResponse> {
    return (await this.#client.request<CreateSessionResponse>("PUT", this.path, { body: config })).body;
  }

  /** Change the directory title (null clears it) and labels. */
  async patch(patch: SessionPatch): Promise<SessionMeta> {
    return (await this.#client.request<SessionMeta>("PATCH", this.path, { body: patch })).body;
  }

  async get(): Promise<SessionSummaryResponse> {
    return (await this.#client.request<SessionSummaryResponse>("GET", this.path)).body;
  }

  async delete(): Promise<DeletedResponse> {
    return (await this.#client.request<DeletedResponse>("DELETE", this.path)).body;
  }

  conversation(ref: "root" | Id): ConversationClient {
    return new ConversationClient(this.#client, `${this.path}/conversations/${ref}`);
  }
  /** What waits for an answer (approvals, client tools), here or in `conversation(c).pending()`; `answer` answers one once (src/client/pending.ts). */
  pending(): Promise<PendingListResponse> { return listPending(this.#client, this.path); }
  answer(id: string, body: PendingAnswerBody): Promise<PendingAnsweredResponse> { return answerPending(this.#client, this.path, id, body); }

  async input(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("GET", `${this.path}/inputs/${inputId}`)).body;
  }

  async withdraw(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("DELETE", `${this.path}/inputs/${inputId}`)).body;
  }

  async acceptance(requestKey: string): Promise<AcceptanceResponse> {
    return (await this.#client.request<AcceptanceResponse>("GET", `${this.path}/acceptances/${encodeURIComponent(requestKey)}`)).body;
  }

  async usage(query: { after?: Id; limit?: number } = {}): Promise<UsageReport> {
    return (await this.#client.request<UsageReport>("GET", `${this.path}/usage${queryString(query)}`)).body;
  }

  /** Tasks (operator): `live` only, one `conversation`'s, paged with `after`. */
  async tasks(query: { live?: boolean; conversation?: "root" | Id; after?: Id; limit?: number } = {}): Promise<Page<Task>> {
    return (await this.#client.request<Page<Task>>("GET", `${this.path}/tasks${queryString(query)}`)).body;
  }

  async abortTask(taskId: Id): Promise<Task> {
    return (await this.#client.request<Task>("POST", `${this.path}/tasks/${taskId}/abort`)).body;
  }

  async releaseTask(taskId: Id): Promise<ReleasedResponse> {
    return (await this.#client.request<ReleasedResponse>("POST", `${this.path}/tasks/${taskId}/release`)).body;
  }

  async inspect(): Promise<SessionInspection> {
    return (await this.#client.request<SessionInspection>("GET", `${this.path}/inspect`)).body;
  }

  async shutdown(): Promise<ShutdownResponse> {
    return (await this.#client.request<ShutdownResponse>("POST", `${this.path}/shutdown`)).body;
  }

  async clearFault(): Promise<ClearFaultResponse> {
    return (await this.#client.request<ClearFaultResponse>("POST", `${this.path}/fault/clear`)).body;
  }

  /** A recurring input (§8.6): `every` ms or `cron` (with `timezone`); answers the schedule. */
  async createSchedule(schedule: ScheduleRequestBody): Promise<ScheduleViewResponse> {
    return (await this.#client.request<ScheduleViewResponse>("POST", `${this.path}/schedules`, { body: schedule })).body;
  }

  /** Live schedules (`all: true` includes ended ones), paged with `after`. */
  async schedules(query: { all?: boolean; after?: Id; limit?: number } = {}): Promise<SchedulesPage> {
    return (await this.#client.request<SchedulesPage>("GET", `${this.path}/schedules${queryString(query)}`)).body;
  }

  async schedule(scheduleId: Id): Promise<ScheduleViewResponse> {
    return (await this.#client.request<ScheduleViewResponse>("GET", `${this.path}/schedules/${scheduleId}`)).body;
  }

  /** Pause (`paused: true`) or resume a schedule. */
  async patchSchedule(scheduleId: Id, patch: { paused: boolean }): Promise<ScheduleViewResponse> {
    return (await this.#client.request<ScheduleViewResponse>("PATCH", `${this.path}/schedules/${scheduleId}`, { body: patch })).body;
  }

  /** End a schedule; answers it as ended. */
  async deleteSchedule(scheduleId: Id): Promise<ScheduleViewResponse> {
    return (await this.#client.request<ScheduleViewResponse>("DELETE", `${this.path}/schedules/${scheduleId}`)).body;
  }

  /** The session's rig (agents, hooks, mail, nudges, witness): what this client's token's role may do there. */
  rig(): RigClient {
    return new RigClient(this.#client, `${this.path}/rig`);
  }

  /** The session's inbound endpoints (operator; src/client/inbound.ts). */
  inbound(): InboundClient {
    return new InboundClient(this.#client, `${this.path}/inbound`);
  }

  /** The session's event deliveries (operator; src/client/webhook-endpoints.ts). */
  deliveries(): DeliveriesClient {
    return new DeliveriesClient(this.#client, `${this.path}/deliveries`);
  }

  /** A watch token for the session watch (what `?access_token=` takes: EventSource, WebSocket). */
  async watchToken(ttlSeconds?: number): Promise<WatchTokenResponse> {
    return (await this.#client.request<WatchTokenResponse>("POST", `${this.path}/watch-token`, { body: ttlSeconds === undefined ? {} : { ttlSeconds } })).body;
  }

  /** Watch the session view (conversations, session values, usage, reports). */
  watch(options: WatchOptions<SessionView, SessionEvent> = {}): Watch<SessionView, SessionEvent> {
    return new Watch(this.#client, `${this.path}/watch`, applySessionMessage, options);
  }
}

export class ConversationClient {
  readonly #client: PicoClient;
  readonly path: string;

  constructor(client: PicoClient, path: string) {
    this.#client = client;
    this.path = path;
  }

  async accept(input: UserInput, options: AcceptOptions = {}): Promise<AcceptResponse> {
    const headers: Record<string, string> = options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey };
    const qs = options.wait === undefined ? "" : `?wait=${options.wait}`;
    const body = { input, ...(options.mode === undefined ? {} : { mode: options.mode }), ...(options.whenBusy === undefined ? {} : { whenBusy: options.whenBusy }) };
    return (await this.#client.request<AcceptResponse>("POST", `${this.path}/inputs${qs}`, { body, headers })).body;
  }

  pending(): Promise<PendingListResponse> { return listPending(this.#client, this.path); }
  async snapshot(): Promise<ConversationSnapshot> {
    return (await this.#client.request<ConversationSnapshot>("GET", this.path)).body;
  }

  async entries(query: { before?: Id; after?: Id; limit?: number; kind?: string } = {}): Promise<Page<Entry>> {
    return (await this.#client.request<Page<Entry>>("GET", `${this.path}/entries${queryString(query)}`)).body;
  }

  async abort(): Promise<AbortedResponse> {
    return (await this.#client.request<AbortedResponse>("POST", `${this.path}/abort`)).body;
  }

  /** Delete this (non-root) conversation with every conversation it owns (§6.4). */
  async delete(): Promise<ConversationDeletedResponse> {
    return (await this.#client.request<ConversationDeletedResponse>("DELETE", this.path)).body;
  }

  async fork(options: { at: Id | "start"; abort?: boolean }): Promise<ForkResponse> {
    return (await this.#client.request<ForkResponse>("POST", `${this.path}/fork`, { body: options })).body;
  }

  /** Place queued steer/followUp inputs that wait (their group ended without a final answer) into a new turn. */
  async continue(): Promise<ContinueResponse> {
    return (await this.#client.request<ContinueResponse>("POST", `${this.path}/continue`)).body;
  }

  async collapse(instructions?: string): Promise<CollapseResponse> {
    return (await this.#client.request<CollapseResponse>("POST", `${this.path}/collapse`, { body: instructions === undefined ? {} : { instructions } })).body;
  }

  async reset(handoff?: string): Promise<ResetResponse> {
    return (await this.#client.request<ResetResponse>("POST", `${this.path}/reset`, { body: handoff === undefined ? {} : { handoff } })).body;
  }

  async config(): Promise<ConfigValues> {
    return (await this.#client.request<ConfigValues>("GET", `${this.path}/config`)).body;
  }

  async patchConfig(patch: ConfigValues): Promise<ConfigValues> {
    return (await this.#client.request<ConfigValues>("PATCH", `${this.path}/config`, { body: patch })).body;
  }

  /** A watch token for this conversation's watch (what `?access_token=` takes: EventSource, WebSocket). */
  async watchToken(ttlSeconds?: number): Promise<WatchTokenResponse> {
    return (await this.#client.request<WatchTokenResponse>("POST", `${this.path}/watch-token`, { body: ttlSeconds === undefined ? {} : { ttlSeconds } })).body;
  }

  /** The raw SSE frames of one connection (no reconnect, no fold): for tools and tests. */
  frames(options: { lastEventId?: string; signal?: AbortSignal } = {}): AsyncGenerator<SseFrame> {
    return openFrames(this.#client, `${this.path}/watch`, options);
  }

  /** Watch the conversation: the view, folded per commit, resumed after disconnects. */
  watch(options: WatchOptions<ConversationView, ConversationEvent> = {}): Watch<ConversationView, ConversationEvent> {
    return new Watch(this.#client, `${this.path}/watch`, applyMessage, options);
  }
}

/** `POST .../schedules`: `every` (ms) or `cron` (with `timezone`); `startAt` epoch ms or ISO 8601; `catchUp` "one" (default) or "none". */
export type ScheduleRequestBody = z.input<typeof scheduleBody>;
/** `PUT .../rig/agents/{agent_id}`: the role, and `conversation: "new"` for a conversation agent. */
export type RegisterAgentBody = z.input<typeof registerBody>;
/** `PUT .../rig/agents/{agent_id}/hook`: the work item (bead) to hook. */
export type HookWork = z.input<typeof setHookBody>;
/** `PATCH .../rig/witness`: the settings to change. */
export type WitnessPatch = z.input<typeof witnessPatch>;

/** A hook as its routes answer it: the document's record, its version (the ETag) and its attempt (Hook-Attempt). */
export interface HookResponse {
  readonly hook: HookFileResponse;
  /** Send as `ifMatch` to make the next transition conditional on this version. */
  readonly version: number;
  readonly attempt: number;
}

/** A mail payload: a non-empty string or a JSON object. */
export type MailPayload = MailMessageResponse["payload"];

/**
 * The rig's routes (docs/rig.md): the mayor and operators register agents, assign and
 * clear hooks, read health; an agent (a token with its agent id) long-polls its own hook, activates,
 * touches and completes it, and reads its nudges; everyone in the rig sends and reads mail.
 */
export class RigClient {
  readonly #client: PicoClient;
  readonly path: string;

  constructor(client: PicoClient, path: string) {
    this.#client = client;
    this.path = path;
  }

  async #hook(method: string, path: string, options: { body?: unknown; ifMatch?: number } = {}): Promise<HookResponse> {
    const headers: Record<string, string> = options.ifMatch === undefined ? {} : { "if-match": `"${options.ifMatch}"` };
    const response = await this.#client.request<HookFileResponse>(method, path, { headers, ...(options.body === undefined ? {} : { body: options.body }) });
    const version = Number(/^"(\d+)"$/.exec(response.headers.get("etag") ?? "")?.[1] ?? Number.NaN);
    return { hook: response.body, version, attempt: Number(response.headers.get("hook-attempt") ?? Number.NaN) };
  }

  /** Register an agent (mayor, operator): `conversation: "new"` makes it a conversation agent. 201 created, 200 the same again. */
  async registerAgent(agentId: string, request: RegisterAgentBody): Promise<RegisterAgentResponse> {
    return (await this.#client.request<RegisterAgentResponse>("PUT", `${this.path}/agents/${encodeURIComponent(agentId)}`, { body: request })).body;
  }

  /** Every agent with its hook and health (mayor, operator). */
  async agents(): Promise<AgentsResponse> {
    return (await this.#client.request<AgentsResponse>("GET", `${this.path}/agents`)).body;
  }

  /** Deregister an agent whose hook is empty (mayor). */
  async deregisterAgent(agentId: string): Promise<DeletedResponse> {
    return (await this.#client.request<DeletedResponse>("DELETE", `${this.path}/agents/${encodeURIComponent(agentId)}`)).body;
  }

  /** Abort a conversation agent's work (mayor). */
  async terminateAgent(agentId: string): Promise<AgentRecordResponse> {
    return (await this.#client.request<AgentRecordResponse>("POST", `${this.path}/agents/${encodeURIComponent(agentId)}/terminate`)).body;
  }

  /** An agent's hook; `wait` (seconds) long-polls until it is not empty. */
  agentHook(agentId: string, options: { wait?: number } = {}): Promise<HookResponse> {
    return this.#hook("GET", `${this.path}/agents/${encodeURIComponent(agentId)}/hook${queryString(options)}`);
  }

  /** empty -> pending (mayor): hook a work item (bead) on an agent; `ifMatch` makes it conditional. */
  setHook(agentId: string, work: HookWork, options: { ifMatch?: number } = {}): Promise<HookResponse> {
    return this.#hook("PUT", `${this.path}/agents/${encodeURIComponent(agentId)}/hook`, { body: work, ...options });
  }

  /** completed -> empty (mayor), after verifying the work. */
  clearHook(agentId: string, options: { ifMatch?: number } = {}): Promise<HookResponse> {
    return this.#hook("DELETE", `${this.path}/agents/${encodeURIComponent(agentId)}/hook`, options);
  }

  /** The calling agent's own hook (agent token); `wait` (seconds) long-polls until it is not empty. */
  hook(options: { wait?: number } = {}): Promise<HookResponse> {
    return this.#hook("GET", `${this.path}/hook${queryString(options)}`);
  }

  /**
   * pending -> active (the owning agent). `attempt` (required: the hook's `attempt`, its Hook-Attempt
   * header) names the assignment, so a worker whose hook the mayor cleared or reassigned is refused.
   */
  activate(options: { attempt: number; ifMatch?: number }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/activate`, { body: { attempt: options.attempt }, ...(options.ifMatch === undefined ? {} : { ifMatch: options.ifMatch }) });
  }

  /** Update last_activity (throttled: a touch within the throttle writes nothing); `attempt` as for activate. */
  touch(options: { attempt: number }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/touch`, { body: { attempt: options.attempt } });
  }

  /** active -> completed (the owning agent), with an optional summary for the mayor; `attempt` as for activate. */
  complete(options: { attempt: number; summary?: string }): Promise<HookResponse> {
    return this.#hook("POST", `${this.path}/hook/complete`, { body: { attempt: options.attempt, ...(options.summary === undefined ? {} : { summary: options.summary }) } });
  }

  /** A page of the caller's mailbox by cursor: pass the page's `next` as `after` for the following one. */
  async mail(query: { after?: Id; limit?: number } = {}): Promise<MailboxResponse> {
    return (await this.#client.request<MailboxResponse>("GET", `${this.path}/mail${queryString(query)}`)).body;
  }

  /** Send durable mail to an agent, `mayor` or `witness`. */
  async sendMail(to: string, payload: MailPayload): Promise<MailMessageResponse> {
    return (await this.#client.request<MailMessageResponse>("POST", `${this.path}/mail`, { body: { to, payload } })).body;
  }

  async ackMail(mailId: Id): Promise<MailViewResponse> {
    return (await this.#client.request<MailViewResponse>("POST", `${this.path}/mail/${mailId}/ack`)).body;
  }

  /** Nudges for the calling external agent since it last asked; `wait` (seconds) long-polls. */
  async nudges(options: { wait?: number } = {}): Promise<NudgesResponse> {
    return (await this.#client.request<NudgesResponse>("GET", `${this.path}/nudges${queryString(options)}`)).body;
  }

  async witness(): Promise<RigSettingsResponse> {
    return (await this.#client.request<RigSettingsResponse>("GET", `${this.path}/witness`)).body;
  }

  /** Change the witness's settings (mayor, operator); each at least 1,000 ms. */
  async patchWitness(patch: WitnessPatch): Promise<RigSettingsResponse> {
    return (await this.#client.request<RigSettingsResponse>("PATCH", `${this.path}/witness`, { body: patch })).body;
  }

  /** The witness document's RigHealthReport (mayor, operator). */
  async health(): Promise<RigHealthResponse> {
    return (await this.#client.request<RigHealthResponse>("GET", `${this.path}/health`)).body;
  }

  /** `.chipset/state/hooks/{agent_id}.json`: the hook file exactly as the document writes it. */
  async hookFile(agentId: string): Promise<HookFileResponse> {
    return (await this.#client.request<HookFileResponse>("GET", `${this.path}/chipset/state/hooks/${encodeURIComponent(agentId)}.json`)).body;
  }

  /** The `.chipset/state` tree as a tar archive. */
  async chipsetState(): Promise<Uint8Array> {
    const response = await this.#client.send("GET", `${this.path}/chipset/state`);
    if (!response.ok) {
      const text = await response.text();
      throw new PicoApiError(response.status, (text === "" ? { code: "internal", detail: "no body" } : JSON.parse(text)) as ProblemBody);
    }
    return new Uint8Array(await response.arrayBuffer());
  }
}

/**
 * Open one SSE connection. With the bearer header (the default) the resume position is Last-Event-ID;
 * with `watchToken`, the way a browser's EventSource connects, the URL carries `?access_token=` (a watch
 * token) and `?lastEventId=`, and no Authorization header is sent.
 */
async function* openFrames(client: PicoClient, path: string, options: { lastEventId?: string; signal?: AbortSignal; watchToken?: string }): AsyncGenerator<SseFrame> {
  const headers: Record<string, string> = { accept: "text/event-stream" };
  let url = path;
  if (options.watchToken === undefined) {
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
  } else {
    const params = new URLSearchParams({ access_token: options.watchToken });
    if (options.lastEventId !== undefined) params.set("lastEventId", options.lastEventId);
    url = `${path}?${params.toString()}`;
  }
  const response = await client.send("GET", url, { headers, bearer: options.watchToken === undefined, ...(options.signal === undefined ? {} : { signal: options.signal }) });
  if (!response.ok || response.body === null) {
    const text = await response.text();
    throw new PicoApiError(response.status, (text === "" ? { code: "internal", detail: "no body" } : JSON.parse(text)) as ProblemBody);
  }
  yield* readSse(response.body);
}

export interface WatchOptions<View, Event> {
  /** Resume from this event id (a fresh view is sent when the server cannot resume). */
  readonly lastEventId?: string;
  /** After each view or message, with the folded view. */
  readonly onChange?: (view: View, change: { readonly type: "view" } | { readonly type: "commit"; readonly message: WatchMessage<Event> }) => void;
  /** Reconnect (with Last-Event-ID) when the stream drops; default true. */
  readonly reconnect?: boolean;
  /**
   * Connect as a browser's EventSource does: mint a watch token (`POST .../watch-token`, this lifetime in
   * seconds, or the server's default when `true`) for each connection and put it and the resume position
   * in the URL (`?access_token=&lastEventId=`) instead of sending the bearer token. A token that expired
   * is never reused: every reconnect mints a fresh one.
   */
  readonly watchToken?: boolean | { readonly ttlSeconds: number };
  readonly signal?: AbortSignal;
}

/** A live watch: `view` is current after every message; reconnects resume from `lastEventId`. */
export class Watch<View, Event> {
  view: View | undefined;
  lastEventId: string | undefined;
  /** How many `view` frames arrived (1 = never had to resnapshot). */
  views = 0;
  /** How many connections were opened (1 + reconnects). */
  connections = 0;
  /** Resolves when the watch stops (closed by the server, aborted, or a non-retryable error). */
  readonly done: Promise<void>;
  readonly #controller = new AbortController();

  constructor(
    client: PicoClient,
    path: string,
    fold: (view: View, message: WatchMessage<Event>) => View,
    options: WatchOptions<View, Event>,
  ) {
    this.lastEventId = options.lastEventId;
    options.signal?.addEventListener("abort", () => this.#controller.abort(), { once: true });
    this.done = this.#run(client, path, fold, options);
  }

  close(): void {
    this.#controller.abort();
  }

  async #run(client: PicoClient, path: string, fold: (view: View, message: WatchMessage<Event>) => View, options: WatchOptions<View, Event>): Promise<void> {
    const signal = this.#controller.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      let closed = false;
      try {
        const watchToken = options.watchToken === undefined || options.watchToken === false ? undefined : await mintWatchToken(client, path, options.watchToken);
        this.connections += 1;
        const frames = openFrames(client, path, {
          signal,
          ...(this.lastEventId === undefined ? {} : { lastEventId: this.lastEventId }),
          ...(watchToken === undefined ? {} : { watchToken }),
        });
        for await (const frame of frames) {
          attempt = 0;
          if (frame.event === "view") {
            this.view = JSON.parse(frame.data) as View;
            this.views += 1;
            options.onChange?.(this.view, { type: "view" });
          } else if (frame.event === "commit" && this.view !== undefined) {
            const message = JSON.parse(frame.data) as WatchMessage<Event>;
            this.view = fold(this.view, message);
            options.onChange?.(this.view, { type: "commit", message });
            if (message.events.some((event) => (event as { type?: unknown }).type === "closed")) closed = true;
          }
          if (frame.id !== undefined) this.lastEventId = frame.id;
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof PicoApiError && error.status < 500) throw error;
      }
      if (closed || options.reconnect === false) return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, 250 * 2 ** Math.min(attempt, 7))));
    }
  }
}

/** A fresh watch token for the watch at `path` (`.../watch` -> `POST .../watch-token`). */
async function mintWatchToken(client: PicoClient, path: string, option: true | { readonly ttlSeconds: number }): Promise<string> {
  const body = option === true ? {} : { ttlSeconds: option.ttlSeconds };
  return (await client.request<WatchTokenResponse>("POST", `${path}-token`, { body })).body.token;
}

/** Operations of the API (`API_ROUTES` in src/api/openapi.ts) without a client method, and why; a test checks every other has one (`CLIENT_OPERATIONS`). */
export const CLIENT_EXCLUDED_OPERATIONS: Readonly<Record<string, string>> = {
  health: "a liveness probe for load balancers and uptime checks: no token, plain text, not an API call",
  openapi: "the API's own description, read by tools (code generators, validators), not by an application",
  webhook: "sent by a webhook provider and authenticated by a Standard Webhooks signature with the endpoint's secret, never a bearer token; a client holding that secret would be impersonating the provider",
  inboundDelivery: "sent by an integration (GitHub, Slack, Stripe, a Standard Webhooks sender) and authenticated by its signature with the endpoint's secret, never a bearer token",
  toolResult: "sent by an HTTP tool's endpoint and authenticated by a Standard Webhooks signature with the tool's secret, never a bearer token",
  mcp: "spoken by an MCP client (the MCP SDK's Client over its streamable-HTTP transport, docs/mcp.md), not by this REST client",
};

/** Each covered operation and the client method that calls it (`Class.method`). */
export const CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  listSessions: "PicoClient.sessions",
  createSession: "SessionClient.create",
  getSession: "SessionClient.get",
  patchSession: "SessionClient.patch",
  deleteSession: "SessionClient.delete",
  getInput: "SessionClient.input",
  withdrawInput: "SessionClient.withdraw",
  getAcceptance: "SessionClient.acceptance",
  usage: "SessionClient.usage",
  listTasks: "SessionClient.tasks",
  abortTask: "SessionClient.abortTask",
  releaseTask: "SessionClient.releaseTask",
  inspect: "SessionClient.inspect",
  shutdown: "SessionClient.shutdown",
  clearFault: "SessionClient.clearFault",
  sessionWatchToken: "SessionClient.watchToken",
  watchSession: "SessionClient.watch",
  accept: "ConversationClient.accept",
  getConversation: "ConversationClient.snapshot",
  listEntries: "ConversationClient.entries",
  abortConversation: "ConversationClient.abort",
  deleteConversation: "ConversationClient.delete",
  fork: "ConversationClient.fork",
  continueConversation: "ConversationClient.continue",
  collapse: "ConversationClient.collapse",
  reset: "ConversationClient.reset",
  getConfig: "ConversationClient.config",
  patchConfig: "ConversationClient.patchConfig",
  conversationWatchToken: "ConversationClient.watchToken",
  watchConversation: "ConversationClient.watch",
  listModels: "PicoClient.models",
  createSchedule: "SessionClient.createSchedule",
  listSchedules: "SessionClient.schedules",
  getSchedule: "SessionClient.schedule",
  patchSchedule: "SessionClient.patchSchedule",
  deleteSchedule: "SessionClient.deleteSchedule",
  registerAgent: "RigClient.registerAgent",
  listAgents: "RigClient.agents",
  deregisterAgent: "RigClient.deregisterAgent",
  terminateAgent: "RigClient.terminateAgent",
  getAgentHook: "RigClient.agentHook",
  setHook: "RigClient.setHook",
  clearHook: "RigClient.clearHook",
  ownHook: "RigClient.hook",
  activateHook: "RigClient.activate",
  touchHook: "RigClient.touch",
  completeHook: "RigClient.complete",
  listMail: "RigClient.mail",
  sendMail: "RigClient.sendMail",
  ackMail: "RigClient.ackMail",
  nudges: "RigClient.nudges",
  getWitness: "RigClient.witness",
  patchWitness: "RigClient.patchWitness",
  rigHealth: "RigClient.health",
  hookFile: "RigClient.hookFile",
  chipsetExport: "RigClient.chipsetState",
  putInbound: "InboundClient.put",
  listInbound: "InboundClient.list",
  getInbound: "InboundClient.get",
  deleteInbound: "InboundClient.delete",
  ...PENDING_CLIENT_OPERATIONS, ...END_USER_CLIENT_OPERATIONS, ...EVENTS_CLIENT_OPERATIONS,
  ...TOOLS_CLIENT_OPERATIONS, ...LIMITS_CLIENT_OPERATIONS, ...USERS_CLIENT_OPERATIONS, ...ISSUER_CLIENT_OPERATIONS,
};
