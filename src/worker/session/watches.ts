/**
 * The session object's watch plumbing (docs/api.md "Watching"): the internal watch route the Worker
 * forwards after auth (SSE, or a WebSocket upgrade the object accepts hibernatable), the sockets
 * registered with a feed of the open harness (re-registered after hibernation or a reopen), and the guard
 * that closes users' watches at their token's expiry or on revocation (watch/guard.ts). The transports
 * themselves are watch/transport.ts.
 */
import { Hono } from "hono";
import type { Clock } from "../../core/host.js";
import type { Env } from "../env.js";
import { hostReport } from "../platform/host-config.js";
import { Problem, toProblem } from "../problems.js";
import type { FeedSubscriber } from "../watch/feed.js";
import { objectWatchGuard, watcherFromHeaders, type WatchGuard } from "../watch/guard.js";
import {
  readAttachment,
  sendableCloseCode,
  socketSubscriber,
  sseResponse,
  userPresenter,
  type AnyFeed,
  type ConversationFeed,
  type Watcher,
  type WatchTarget,
} from "../watch/transport.js";
import type { OpenSession } from "./opening.js";
import { chatStream, chatStreamRequest } from "./chat-streams.js";

export class SessionWatches {
  readonly #ctx: DurableObjectState;
  /** The open session (opening or reopening it when needed). */
  readonly #acquire: () => Promise<OpenSession>;
  /** Sockets registered with a feed of the open harness (after hibernation this starts empty). */
  readonly #sockets = new Map<WebSocket, { feed: AnyFeed; subscriber: FeedSubscriber<unknown, unknown> }>();
  /** Users' watches: closed at their token's expiry or on revocation (watch/guard.ts). */
  readonly #guard: WatchGuard;
  readonly #app: Hono;

  /** `due`: when the guard next needs the alarm (its earliest expiry). */
  constructor(
    ctx: DurableObjectState,
    env: Env,
    clock: Clock,
    due: (at: number | undefined) => void,
    acquire: () => Promise<OpenSession>,
  ) {
    this.#ctx = ctx;
    this.#acquire = acquire;
    // Hibernated sockets answer pings without waking the object.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    this.#app = this.#buildApp();
    this.#guard = objectWatchGuard(ctx, env, clock, due, (ws) => this.drop(ws));
  }

  /** Serve a watch request the Worker forwarded (authenticated and validated). */
  async fetch(request: Request): Promise<Response> {
    return this.#app.fetch(request);
  }

  /** On the alarm: close the watches whose token expired. */
  sweep(): void {
    this.#guard.sweep();
  }

  /** A revocation: close `sub`'s watches issued before `before` (Unix seconds). */
  revoke(sub: string, before: number): { readonly closed: number } {
    return this.#guard.revoke(sub, before);
  }

  /** Register every accepted socket that no feed of this harness serves yet (after hibernation). */
  async rewatch(session: OpenSession): Promise<void> {
    for (const ws of this.#ctx.getWebSockets()) {
      if (this.#sockets.has(ws)) continue;
      const attachment = readAttachment(ws);
      if (attachment === undefined) {
        ws.close(1011, "unknown watch");
        continue;
      }
      try {
        await this.#watchSocket(session, ws, attachment.target, attachment.lastEventId, attachment.watcher);
      } catch {
        ws.close(1000, "the watched conversation is gone");
      }
    }
  }

  /** Forget every registration (the feeds they were on are closed: the session reopens or is deleted). */
  forget(): void {
    this.#sockets.clear();
  }

  /**
   * Send every watcher its close frame (the session is being deleted). The object is not reset to drop the
   * connections sooner (ctx.abort is logged as an uncaught exception): workerd keeps the TCP connection of
   * a socket whose close the server started until the instance goes idle, about 10 s, though the close
   * handshake is done.
   */
  endAll(reason: string): void {
    for (const ws of this.#ctx.getWebSockets()) {
      try {
        ws.close(1000, reason);
      } catch {
        // already closed
      }
    }
  }

  /** The client started the close: complete the handshake and unregister the socket. */
  closed(ws: WebSocket, code: number, reason: string): void {
    // Until the server's side is closed too the runtime keeps the socket, and its connection stays open
    // until the instance goes idle.
    if (ws.readyState !== WebSocket.CLOSED) {
      try {
        ws.close(sendableCloseCode(code), reason);
      } catch {
        // already closed
      }
    }
    this.drop(ws);
  }

  drop(ws: WebSocket): void {
    const registered = this.#sockets.get(ws);
    if (registered === undefined) return;
    this.#sockets.delete(ws);
    (registered.feed as AnyFeed & { unsubscribe(s: FeedSubscriber<unknown, unknown>): void }).unsubscribe(
      registered.subscriber,
    );
  }

  async #feedOf(session: OpenSession, target: WatchTarget): Promise<AnyFeed> {
    if (target.type === "conversation") await session.api.conversation(target.id);
    return session.feeds.target(target);
  }

  async #watchSocket(
    session: OpenSession,
    ws: WebSocket,
    target: WatchTarget,
    lastEventId: string | undefined,
    watcher?: Watcher,
  ): Promise<void> {
    const feed = await this.#feedOf(session, target);
    const subscriber = socketSubscriber(ws, target, watcher);
    this.#sockets.set(ws, { feed, subscriber });
    ws.serializeAttachment({ target, lastEventId, ...(watcher === undefined ? {} : { watcher }) });
    (feed as AnyFeed & { subscribe(s: FeedSubscriber<unknown, unknown>, id: string | undefined): void }).subscribe(
      subscriber,
      lastEventId,
    );
  }

  /** The object's internal watch routes (the Worker authenticated and validated the request). */
  #buildApp(): Hono {
    const app = new Hono();
    // The AI SDK UI message stream of one turn (session/chat-streams.ts); the Worker accepted and answered.
    app.post("/chat/:conversation", async (c) => {
      const watcher = watcherFromHeaders(c.req.raw.headers);
      const refused = this.#guard.refusal(watcher);
      if (refused !== undefined) return refused.response();
      try {
        const request = chatStreamRequest(await c.req.json<unknown>());
        const session = await this.#acquire();
        const raw = c.req.param("conversation");
        const id = raw === "root" ? session.harness.rootId : Number(raw);
        const feed = (await this.#feedOf(session, { type: "conversation", id })) as ConversationFeed;
        // A user's resume is a watch: it ends at its token's expiry or the user's revocation (watch/guard.ts).
        const track = watcher === undefined ? undefined : (end: () => void) => this.#guard.stream(watcher, end);
        return chatStream(session, feed, id, request, c.req.raw.signal, track);
      } catch (error) {
        return toProblem(error, (report) => hostReport({ type: "harness", report })).response();
      }
    });
    app.get("/watch/:target", async (c) => {
      const raw = c.req.param("target");
      const lastEventId = c.req.header("last-event-id") ?? undefined;
      const watcher = watcherFromHeaders(c.req.raw.headers);
      const refused = this.#guard.refusal(watcher);
      if (refused !== undefined) return refused.response();
      let session: OpenSession;
      let feed: AnyFeed;
      let target: WatchTarget;
      try {
        session = await this.#acquire();
        target =
          raw === "session"
            ? { type: "session" }
            : { type: "conversation", id: raw === "root" ? session.harness.rootId : Number(raw) };
        feed = await this.#feedOf(session, target);
      } catch (error) {
        return toProblem(error, (report) => hostReport({ type: "harness", report })).response();
      }
      if (c.req.header("upgrade")?.toLowerCase() === "websocket") {
        const pair = new WebSocketPair();
        const [client, server] = [pair[0], pair[1]];
        this.#ctx.acceptWebSocket(server);
        await this.#watchSocket(session, server, target, lastEventId, watcher);
        this.#guard.schedule();
        return new Response(null, { status: 101, webSocket: client });
      }
      return sseResponse(
        c,
        feed,
        lastEventId,
        watcher === undefined ? undefined : (end) => this.#guard.stream(watcher, end),
        // A user's watch shows the user's view of tasks (no remote call's URL).
        watcher === undefined ? undefined : userPresenter(target),
      );
    });
    app.notFound(() => new Problem("route_not_found", "no such watch route").response());
    return app;
  }
}
