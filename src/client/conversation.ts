/**
 * The typed client's conversation routes (docs/api.md "Routes", "Watch"): accept input, read the
 * conversation and its entries, abort, fork, continue, collapse, reset, its config, its pending items,
 * and its watch. Reached from a session: `client.session("s").conversation("root")`.
 *
 * @example
 * const root = client.session("demo").conversation("root");
 * const { inputId } = await root.accept("hello", { idempotencyKey: "k1", wait: 10 });
 * const watch = root.watch({ onChange: (view) => render(view) });
 */
import type { UserInput } from "../core/entries.js";
import { applyMessage } from "../core/watch-reduce.js";
import type { ConversationEvent, ConversationView } from "../core/watch-types.js";
import type {
  AbortedResponse,
  AcceptResponse,
  CollapseResponse,
  ConfigPatch,
  ConfigValues,
  ContinueResponse,
  ConversationDeletedResponse,
  ConversationSnapshot,
  ForkResponse,
  ResetResponse,
  WatchTokenResponse,
} from "../api/responses.js";
import type { AcceptBody } from "../api/schemas.js";
import type { UiMessageBody } from "../api/chat.js";
import type { Entry, Id, Page } from "../storage/records.js";
import { listPending, type PendingListResponse } from "./pending.js";
import type { SseFrame } from "./sse.js";
import { queryString, type ClientTransport } from "./transport.js";
import { openFrames, Watch, type WatchOptions } from "./watch.js";

export interface AcceptOptions {
  readonly idempotencyKey?: string;
  readonly mode?: AcceptBody["mode"];
  readonly whenBusy?: AcceptBody["whenBusy"];
  /** Wait up to this many seconds for the result. */
  readonly wait?: number;
}

/** The conversation's operations and the client methods that call them (merged into CLIENT_OPERATIONS in client.ts). */
export const CONVERSATION_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
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
  chatMessages: "ConversationClient.chatMessages",
};

export class ConversationClient {
  readonly #client: ClientTransport;
  readonly path: string;

  constructor(client: ClientTransport, path: string) {
    this.#client = client;
    this.path = path;
  }

  async accept(input: UserInput, options: AcceptOptions = {}): Promise<AcceptResponse> {
    const headers: Record<string, string> =
      options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey };
    const qs = options.wait === undefined ? "" : `?wait=${options.wait}`;
    const body = {
      input,
      ...(options.mode === undefined ? {} : { mode: options.mode }),
      ...(options.whenBusy === undefined ? {} : { whenBusy: options.whenBusy }),
    };
    return (await this.#client.request<AcceptResponse>("POST", `${this.path}/inputs${qs}`, { body, headers })).body;
  }

  pending(): Promise<PendingListResponse> {
    return listPending(this.#client, this.path);
  }
  async snapshot(): Promise<ConversationSnapshot> {
    return (await this.#client.request<ConversationSnapshot>("GET", this.path)).body;
  }

  async entries(query: { before?: Id; after?: Id; limit?: number; kind?: string } = {}): Promise<Page<Entry>> {
    return (await this.#client.request<Page<Entry>>("GET", `${this.path}/entries${queryString(query)}`)).body;
  }

  /** The transcript as the AI SDK's `UIMessage[]` (docs/frontends.md): a page starts `useChat` from it. */
  async chatMessages(): Promise<UiMessageBody[]> {
    const path = `${this.path.replace("/conversations/", "/chat/")}/messages`;
    return (await this.#client.request<UiMessageBody[]>("GET", path)).body;
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
    return (
      await this.#client.request<CollapseResponse>("POST", `${this.path}/collapse`, {
        body: instructions === undefined ? {} : { instructions },
      })
    ).body;
  }

  async reset(handoff?: string): Promise<ResetResponse> {
    return (
      await this.#client.request<ResetResponse>("POST", `${this.path}/reset`, {
        body: handoff === undefined ? {} : { handoff },
      })
    ).body;
  }

  async config(): Promise<ConfigValues> {
    return (await this.#client.request<ConfigValues>("GET", `${this.path}/config`)).body;
  }

  async patchConfig(patch: ConfigPatch): Promise<ConfigValues> {
    return (await this.#client.request<ConfigValues>("PATCH", `${this.path}/config`, { body: patch })).body;
  }

  /** A watch token for this conversation's watch (what `?access_token=` takes: EventSource, WebSocket). */
  async watchToken(ttlSeconds?: number): Promise<WatchTokenResponse> {
    return (
      await this.#client.request<WatchTokenResponse>("POST", `${this.path}/watch-token`, {
        body: ttlSeconds === undefined ? {} : { ttlSeconds },
      })
    ).body;
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
