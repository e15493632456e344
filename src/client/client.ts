/**
 * A typed HTTP client for the pico-edge API (issue 6), for frontends and the end-to-end tests: one
 * method per route, its types from the wire schema (src/api/; nothing from src/worker/), problem+json errors as `PicoApiError`, and live watches that fold the server's
 * messages with the core's reducer (`applyMessage`) and resume with Last-Event-ID after a disconnect
 * (or, with `watchToken`, connect as EventSource does: a fresh watch token and `?lastEventId=` per
 * connection, no bearer token on the stream).
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
  AcceptanceResponse,
  AcceptResponse,
  CollapseResponse,
  ConfigValues,
  ConversationSnapshot,
  CreateSessionResponse,
  ForkResponse,
  InputResponse,
  SessionConfig,
  SessionInspection,
  SessionSummary,
  UsageReport,
  WatchTokenResponse,
  SessionsPage,
  SessionMeta,
} from "../api/responses.js";
import type { AcceptBody, SessionConfigBody, SessionPatch } from "../api/schemas.js";
import type { Conversation, Entry, Id, Page, Task } from "../storage/records.js";
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
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
    const qs = params.size > 0 ? `?${params}` : "";
    return (await this.request<SessionsPage>("GET", `/v1/sessions${qs}`)).body;
  }

  /** A raw request; JSON in and out; problem+json answers throw PicoApiError. */
  async request<T>(method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: T }> {
    const response = await this.send(method, path, options);
    const text = await response.text();
    const parsed: unknown = text === "" ? undefined : JSON.parse(text);
    if (!response.ok) throw new PicoApiError(response.status, parsed as ProblemBody);
    return { status: response.status, body: parsed as T };
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

  async get(): Promise<SessionSummary> {
    return (await this.#client.request<SessionSummary>("GET", this.path)).body;
  }

  async delete(): Promise<void> {
    await this.#client.request("DELETE", this.path);
  }

  conversation(ref: "root" | Id): ConversationClient {
    return new ConversationClient(this.#client, `${this.path}/conversations/${ref}`);
  }

  async input(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("GET", `${this.path}/inputs/${inputId}`)).body;
  }

  async withdraw(inputId: Id): Promise<InputResponse> {
    return (await this.#client.request<InputResponse>("DELETE", `${this.path}/inputs/${inputId}`)).body;
  }

  async acceptance(requestKey: string): Promise<AcceptanceResponse> {
    return (await this.#client.request<AcceptanceResponse>("GET", `${this.path}/acceptances/${encodeURIComponent(requestKey)}`)).body;
  }

  async usage(): Promise<UsageReport> {
    return (await this.#client.request<UsageReport>("GET", `${this.path}/usage`)).body;
  }

  async tasks(query: { live?: boolean; after?: Id; limit?: number } = {}): Promise<Page<Task>> {
    const params = new URLSearchParams();
    if (query.live !== undefined) params.set("live", String(query.live));
    if (query.after !== undefined) params.set("after", String(query.after));
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    const qs = params.size > 0 ? `?${params}` : "";
    return (await this.#client.request<Page<Task>>("GET", `${this.path}/tasks${qs}`)).body;
  }

  async abortTask(taskId: Id): Promise<Task> {
    return (await this.#client.request<Task>("POST", `${this.path}/tasks/${taskId}/abort`)).body;
  }

  async releaseTask(taskId: Id): Promise<void> {
    await this.#client.request("POST", `${this.path}/tasks/${taskId}/release`);
  }

  async inspect(): Promise<SessionInspection> {
    return (await this.#client.request<SessionInspection>("GET", `${this.path}/inspect`)).body;
  }

  async shutdown(): Promise<void> {
    await this.#client.request("POST", `${this.path}/shutdown`);
  }

  async clearFault(): Promise<{ cleared: boolean }> {
    return (await this.#client.request<{ cleared: boolean }>("POST", `${this.path}/fault/clear`)).body;
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

  async snapshot(): Promise<ConversationSnapshot> {
    return (await this.#client.request<ConversationSnapshot>("GET", this.path)).body;
  }

  async entries(query: { before?: Id; after?: Id; limit?: number; kind?: string } = {}): Promise<Page<Entry>> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
    const qs = params.size > 0 ? `?${params}` : "";
    return (await this.#client.request<Page<Entry>>("GET", `${this.path}/entries${qs}`)).body;
  }

  async abort(): Promise<void> {
    await this.#client.request("POST", `${this.path}/abort`);
  }

  async fork(options: { at: Id | "start"; abort?: boolean }): Promise<ForkResponse> {
    return (await this.#client.request<ForkResponse>("POST", `${this.path}/fork`, { body: options })).body;
  }

  /** Place queued steer/followUp inputs that wait (their group ended without a final answer) into a new turn. */
  async continue(): Promise<{ inputs: Id[]; generation: Id }> {
    return (await this.#client.request<{ inputs: Id[]; generation: Id }>("POST", `${this.path}/continue`)).body;
  }

  async collapse(instructions?: string): Promise<CollapseResponse> {
    return (await this.#client.request<CollapseResponse>("POST", `${this.path}/collapse`, { body: instructions === undefined ? {} : { instructions } })).body;
  }

  async reset(handoff?: string): Promise<void> {
    await this.#client.request("POST", `${this.path}/reset`, { body: handoff === undefined ? {} : { handoff } });
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

/**
 * Operations of the API (`API_ROUTES` in src/api/openapi.ts) that the typed client has no method for,
 * and why. A test checks that every other operation has its method (`CLIENT_OPERATIONS`).
 */
export const CLIENT_EXCLUDED_OPERATIONS: Readonly<Record<string, string>> = {
  health: "liveness probe, not an API call",
  openapi: "the document itself; fetch it directly",
  webhook: "sent by webhook senders, signed with the endpoint secret, not a bearer client",
  listModels: "not yet in the typed client",
  createSchedule: "not yet in the typed client",
  listSchedules: "not yet in the typed client",
  getSchedule: "not yet in the typed client",
  patchSchedule: "not yet in the typed client",
  deleteSchedule: "not yet in the typed client",
  ...Object.fromEntries(
    [
      "registerAgent", "listAgents", "deregisterAgent", "terminateAgent", "getAgentHook", "setHook", "clearHook", "ownHook", "activateHook", "touchHook",
      "completeHook", "listMail", "sendMail", "ackMail", "nudges", "getWitness", "patchWitness", "rigHealth", "hookFile", "chipsetExport",
    ].map((id) => [id, "the rig's routes (README \"The rig\") are not yet in the typed client"]),
  ),
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
  fork: "ConversationClient.fork",
  continueConversation: "ConversationClient.continue",
  collapse: "ConversationClient.collapse",
  reset: "ConversationClient.reset",
  getConfig: "ConversationClient.config",
  patchConfig: "ConversationClient.patchConfig",
  conversationWatchToken: "ConversationClient.watchToken",
  watchConversation: "ConversationClient.watch",
};
