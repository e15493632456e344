/**
 * A typed HTTP client for the pico-edge API (docs/api.md "Typed client"), for frontends and the end-to-end
 * tests: one method per route, its types from the wire schema (src/api/; nothing from src/worker/),
 * problem+json errors as `PicoApiError`, and live watches that fold the server's messages with the core's
 * reducer (`applyMessage`) and resume with Last-Event-ID after a disconnect.
 *
 * This file holds the client itself (`PicoClient`: its raw request and send, the tenant's routes and the
 * way to the route groups), a session's routes (`SessionClient`), and the table of every operation's
 * client method. The route groups live beside it, one file each (conversation.ts, rig.ts, inbound.ts,
 * pending.ts, ...), over the plumbing in transport.ts; the live watch is watch.ts.
 *
 * @example
 * const client = new PicoClient({ baseUrl: "http://localhost:8787", token });
 * const s = client.session("demo");
 * await s.create({});
 * const { inputId } = await s.conversation("root").accept("hello", { idempotencyKey: "k1", wait: 10 });
 * const watch = s.conversation("root").watch({ onChange: (view) => render(view) });
 */
import { applySessionMessage } from "../core/watch-reduce.js";
import type { SessionEvent, SessionView } from "../core/watch-types.js";
import type { ProblemBody } from "../api/problems.js";
import type { ImportResponse, RigResumeResponse } from "../api/transfer.js";
import type {
  AcceptanceResponse,
  ClearFaultResponse,
  CreateSessionResponse,
  DeletedResponse,
  InputResponse,
  ModelsResponse,
  ReleasedResponse,
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
import type { scheduleBody, SessionConfigBody, SessionPatch, SessionStatus } from "../api/schemas.js";
import type { Id, Page, Task } from "../storage/records.js";
import { ConversationClient, CONVERSATION_CLIENT_OPERATIONS } from "./conversation.js";
import { InboundClient } from "./inbound.js";
import {
  answerPending,
  listPending,
  PENDING_CLIENT_OPERATIONS,
  type PendingAnswerBody,
  type PendingAnsweredResponse,
  type PendingListResponse,
} from "./pending.js";
import { RigClient, RIG_CLIENT_OPERATIONS } from "./rig.js";
import { DeliveriesClient, EVENTS_CLIENT_OPERATIONS, WebhookEndpointsClient } from "./webhook-endpoints.js";
import { TOOLS_CLIENT_OPERATIONS, ToolsClient } from "./tools.js";
import { ISSUER_CLIENT_OPERATIONS } from "./issuers.js";
import { INBOUND_ENDPOINT_CLIENT_OPERATIONS } from "./inbound-endpoints.js";
import { API_KEY_CLIENT_OPERATIONS } from "./api-keys.js";
import { LIMITS_CLIENT_OPERATIONS } from "./limits.js";
import { END_USER_CLIENT_OPERATIONS } from "./end-users.js";
import { UsersClient, USERS_CLIENT_OPERATIONS } from "./users.js";
import { PicoApiError, queryString, type ClientOptions } from "./transport.js";
import { Watch, type WatchOptions } from "./watch.js";

export class PicoClient {
  readonly #options: ClientOptions;

  constructor(options: ClientOptions) {
    this.#options = options;
  }

  session(name: string): SessionClient {
    return new SessionClient(this, `/v1/sessions/${encodeURIComponent(name)}`);
  }

  /**
   * The tenant's sessions from its directory, newest activity first (`cursor` pages on); `metadata` pairs all match,
   * the activity bounds are epoch ms (docs/api.md "Search and metadata").
   */
  async sessions(
    query: {
      limit?: number;
      cursor?: string;
      q?: string;
      owner?: string;
      status?: SessionStatus;
      activeSince?: number;
      activeBefore?: number;
      metadata?: Readonly<Record<string, string>>;
    } = {},
  ): Promise<SessionsPage> {
    const { metadata, ...rest } = query;
    const pairs = Object.fromEntries(Object.entries(metadata ?? {}).map(([key, value]) => [`metadata.${key}`, value]));
    return (await this.request<SessionsPage>("GET", `/v1/sessions${queryString({ ...rest, ...pairs })}`)).body;
  }

  /** The tenant's webhook endpoints (operator; src/client/webhook-endpoints.ts). */
  webhookEndpoints(): WebhookEndpointsClient {
    return new WebhookEndpointsClient(this);
  }

  /** The tenant's tool catalog (operator; src/client/tools.ts). */
  tools(): ToolsClient {
    return new ToolsClient(this);
  }

  /** Session templates and user revocation (operator; src/client/users.ts). */
  users(): UsersClient {
    return new UsersClient(this);
  }

  /** The models this deployment can use (what a session config's `model` may name) and the default. */
  async models(): Promise<ModelsResponse> {
    return (await this.request<ModelsResponse>("GET", "/v1/models")).body;
  }

  /** A raw request; JSON in and out; problem+json answers throw PicoApiError. */
  async request<T>(
    method: string,
    path: string,
    options: { body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: T; headers: Headers }> {
    const response = await this.send(method, path, options);
    const text = await response.text();
    const parsed: unknown = text === "" ? undefined : JSON.parse(text);
    if (!response.ok) throw new PicoApiError(response.status, parsed as ProblemBody);
    return { status: response.status, body: parsed as T, headers: response.headers };
  }

  /** A raw request; `bearer: false` sends no Authorization header (a URL that carries a watch token). */
  send(
    method: string,
    path: string,
    options: {
      body?: unknown;
      /** A body sent as it is (not JSON): its content type goes in `headers`. */
      raw?: string | ReadableStream<Uint8Array>;
      headers?: Record<string, string>;
      signal?: AbortSignal;
      bearer?: boolean;
    } = {},
  ): Promise<Response> {
    const headers = new Headers(options.headers);
    if (options.bearer !== false) headers.set("authorization", `Bearer ${this.#options.token}`);
    if (options.body !== undefined) headers.set("content-type", "application/json");
    const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    const request = new Request(`${this.#options.baseUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(typeof options.raw === "object" ? { duplex: "half" } : {}),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    return (this.#options.fetch ?? fetch)(request);
  }
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

  /** Change the directory title (null clears it) and labels, or (operators and clients) the variables (null removes one). */
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
  /**
   * What waits for an answer (approvals, client tools), here or in `conversation(c).pending()`; `answer` answers one
   * once (src/client/pending.ts).
   */
  pending(): Promise<PendingListResponse> {
    return listPending(this.#client, this.path);
  }
  answer(id: string, body: PendingAnswerBody): Promise<PendingAnsweredResponse> {
    return answerPending(this.#client, this.path, id, body);
  }

  async input(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("GET", `${this.path}/inputs/${inputId}`)).body;
  }

  async withdraw(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("DELETE", `${this.path}/inputs/${inputId}`)).body;
  }

  async acceptance(requestKey: string): Promise<AcceptanceResponse> {
    return (
      await this.#client.request<AcceptanceResponse>(
        "GET",
        `${this.path}/acceptances/${encodeURIComponent(requestKey)}`,
      )
    ).body;
  }

  /**
   * The session as JSONL (docs/operations.md "Export and import"): a header line, then its batches. An operator's
   * export is whole; a user's is redacted (and cannot be imported).
   */
  async exportJsonl(): Promise<ReadableStream<Uint8Array>> {
    const response = await this.#client.send("GET", `${this.path}/export`);
    if (!response.ok) throw new PicoApiError(response.status, (await response.json()) as ProblemBody);
    return response.body ?? new ReadableStream<Uint8Array>();
  }

  /** Import an export (operator) as this session, which must not exist; a bad line throws `invalid_import`. */
  async importJsonl(jsonl: string | ReadableStream<Uint8Array>): Promise<ImportResponse> {
    const response = await this.#client.send("POST", `${this.path}/import`, {
      raw: jsonl,
      headers: { "content-type": "application/jsonl" },
    });
    const parsed: unknown = await response.json();
    if (!response.ok) throw new PicoApiError(response.status, parsed as ProblemBody);
    return parsed as ImportResponse;
  }

  async usage(query: { after?: Id; limit?: number } = {}): Promise<UsageReport> {
    return (await this.#client.request<UsageReport>("GET", `${this.path}/usage${queryString(query)}`)).body;
  }

  /** Tasks (operator): `live` only, one `conversation`'s, paged with `after`. */
  async tasks(
    query: { live?: boolean; conversation?: "root" | Id; after?: Id; limit?: number } = {},
  ): Promise<Page<Task>> {
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

  /** Resume the rig an import paused (operator): GUPP and the witness run again; whether it was paused. */
  async resumeRig(): Promise<RigResumeResponse> {
    return (await this.#client.request<RigResumeResponse>("POST", `${this.path}/rig/resume`)).body;
  }

  /** A recurring input (§8.6): `every` ms or `cron` (with `timezone`); answers the schedule. */
  async createSchedule(schedule: ScheduleRequestBody): Promise<ScheduleViewResponse> {
    return (await this.#client.request<ScheduleViewResponse>("POST", `${this.path}/schedules`, { body: schedule }))
      .body;
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
    return (
      await this.#client.request<ScheduleViewResponse>("PATCH", `${this.path}/schedules/${scheduleId}`, { body: patch })
    ).body;
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
    return (
      await this.#client.request<WatchTokenResponse>("POST", `${this.path}/watch-token`, {
        body: ttlSeconds === undefined ? {} : { ttlSeconds },
      })
    ).body;
  }

  /** Watch the session view (conversations, session values, usage, reports). */
  watch(options: WatchOptions<SessionView, SessionEvent> = {}): Watch<SessionView, SessionEvent> {
    return new Watch(this.#client, `${this.path}/watch`, applySessionMessage, options);
  }
}

/**
 * `POST .../schedules`: `every` (ms) or `cron` (with `timezone`); `startAt` epoch ms or ISO 8601; `catchUp` "one"
 * (default) or "none".
 */
export type ScheduleRequestBody = z.input<typeof scheduleBody>;

/**
 * Operations of the API (`API_ROUTES` in src/api/openapi.ts) without a client method, and why; a test checks every
 * other has one (`CLIENT_OPERATIONS`).
 */
export const CLIENT_EXCLUDED_OPERATIONS: Readonly<Record<string, string>> = {
  health: "a liveness probe for load balancers and uptime checks: no token, plain text, not an API call",
  openapi: "the API's own description, read by tools (code generators, validators), not by an application",
  webhook:
    "sent by a webhook provider and authenticated by a Standard Webhooks signature with the endpoint's secret, never a bearer token; a client holding that secret would be impersonating the provider",
  inboundDelivery:
    "sent by an integration (GitHub, Slack, Stripe, a Standard Webhooks sender) and authenticated by its signature with the endpoint's secret, never a bearer token",
  tenantInboundDelivery:
    "sent by an integration to a tenant endpoint and authenticated by its signature with the endpoint's secret, never a bearer token",
  toolResult:
    "sent by an HTTP tool's endpoint and authenticated by a Standard Webhooks signature with the tool's secret, never a bearer token",
  chat: "spoken by the AI SDK's useChat through its DefaultChatTransport (docs/frontends.md), not by this REST client",
  chatResume:
    "spoken by the AI SDK's DefaultChatTransport (reconnectToStream, docs/frontends.md), not by this REST client",
  mcp: "spoken by an MCP client (the MCP SDK's Client over its streamable-HTTP transport, docs/mcp.md), not by this REST client",
  runAgUi:
    "spoken by an AG-UI client (@ag-ui/client's HttpAgent, or any AG-UI 1.0 frontend), which folds its events into its own messages",
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
  exportSession: "SessionClient.exportJsonl",
  importSession: "SessionClient.importJsonl",
  listTasks: "SessionClient.tasks",
  abortTask: "SessionClient.abortTask",
  releaseTask: "SessionClient.releaseTask",
  inspect: "SessionClient.inspect",
  shutdown: "SessionClient.shutdown",
  clearFault: "SessionClient.clearFault",
  resumeRig: "SessionClient.resumeRig",
  sessionWatchToken: "SessionClient.watchToken",
  watchSession: "SessionClient.watch",
  ...CONVERSATION_CLIENT_OPERATIONS,
  listModels: "PicoClient.models",
  createSchedule: "SessionClient.createSchedule",
  listSchedules: "SessionClient.schedules",
  getSchedule: "SessionClient.schedule",
  patchSchedule: "SessionClient.patchSchedule",
  deleteSchedule: "SessionClient.deleteSchedule",
  ...RIG_CLIENT_OPERATIONS,
  putInbound: "InboundClient.put",
  listInbound: "InboundClient.list",
  getInbound: "InboundClient.get",
  deleteInbound: "InboundClient.delete",
  ...PENDING_CLIENT_OPERATIONS,
  ...END_USER_CLIENT_OPERATIONS,
  ...EVENTS_CLIENT_OPERATIONS,
  ...TOOLS_CLIENT_OPERATIONS,
  ...LIMITS_CLIENT_OPERATIONS,
  ...USERS_CLIENT_OPERATIONS,
  ...ISSUER_CLIENT_OPERATIONS,
  ...API_KEY_CLIENT_OPERATIONS,
  ...INBOUND_ENDPOINT_CLIENT_OPERATIONS,
};
