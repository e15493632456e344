/**
 * The AI SDK UI message streams inside the session object (docs/frontends.md): the internal
 * `POST /chat/{conversationId}` the Worker forwards after auth, accepting and answering
 * (http/routes/chat.ts). It follows one turn of the conversation's watch feed (frontends/ui-stream.ts turns it
 * into chunks) and ends at `finish` after the input's terminal result, after a pending item this turn waits
 * on, or (a resume) when the conversation has no live task. Nothing here writes: a dropped stream loses nothing.
 *
 * Body: `{ mode: "input", inputId, after?, skip? }` (a POST's turn: its input's, from the input's entry or,
 * continuing after answers, from `after`; `skip`: the pending ids the POST just answered) or
 * `{ mode: "live" }` (a resume: 204 when nothing is live, otherwise the live turn from its start).
 */
import { bindResult, isTerminalResult, type InputResult } from "../../core/inbox.js";
import type { ConversationEvent, ConversationView } from "../../core/watch.js";
import type { Id } from "../../storage/records.js";
import type { FeedOut, FeedSubscriber } from "../watch/feed.js";
import { keepAliveMs, type ConversationFeed } from "../watch/transport.js";
import { UI_SSE_DONE, UI_STREAM_HEADERS, UiTurn, uiSse, type UiChunk } from "../frontends/ui-stream.js";
import type { UiFinishReason } from "../frontends/ui-stream-chunks.js";
import { assistantMessageId } from "../frontends/ui-messages.js";
import { Problem } from "../problems.js";
import type { OpenSession } from "./opening.js";

export type ChatStreamRequest =
  | {
      readonly mode: "input";
      readonly inputId: Id;
      readonly after?: Id;
      readonly skip?: readonly string[];
      /** Tool calls the page already shows (the answered approvals'): their inputs are not sent again. */
      readonly known?: readonly string[];
    }
  | { readonly mode: "live" };

function isId(value: unknown): value is Id {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The Worker's request, checked (it is internal, but a malformed one is a 400, never a guess). */
export function chatStreamRequest(value: unknown): ChatStreamRequest {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    if (record["mode"] === "live") return { mode: "live" };
    const { inputId, after, skip, known } = record;
    const strings = (value: unknown): value is string[] =>
      Array.isArray(value) && value.every((s) => typeof s === "string");
    if (
      record["mode"] === "input" &&
      isId(inputId) &&
      (after === undefined || isId(after)) &&
      (skip === undefined || strings(skip)) &&
      (known === undefined || strings(known))
    )
      return {
        mode: "input",
        inputId,
        ...(after === undefined ? {} : { after }),
        ...(skip === undefined ? {} : { skip }),
        ...(known === undefined ? {} : { known }),
      };
  }
  throw new Problem("invalid_body", "not a chat stream request");
}

/** The text a terminal result without an answer shows (no detail: it may hold what a page must not see). */
function unanswered(result: Extract<InputResult, { status: "unanswered" }>): UiChunk {
  return result.reason === "aborted"
    ? { type: "abort", reason: "the turn was aborted" }
    : { type: "error", errorText: `the turn ended without an answer (${result.reason})` };
}

/** The newest user entry of a view: where a live turn starts. */
function liveStart(view: ConversationView): Id {
  let start = 0;
  for (const entry of view.entries) if (entry.kind === "user" && entry.id > start) start = entry.id;
  return start;
}

/**
 * `track`: a user's stream is held by the watch guard (watch/guard.ts), which calls its `end` at the token's expiry or
 * the user's revocation (an erasure's too); it answers the function that releases the stream when it ends on its own.
 */
export function chatStream(
  session: OpenSession,
  feed: ConversationFeed,
  conversationId: Id,
  request: ChatStreamRequest,
  signal: AbortSignal,
  track?: (end: () => void) => () => void,
): Response {
  if (request.mode === "live" && currentView(feed)?.tasks.length === 0) return new Response(null, { status: 204 });
  const turn = new UiTurn(
    request.mode === "input" ? request.after : undefined,
    request.mode === "input" ? request.known : undefined,
  );
  const skip = new Set(request.mode === "input" ? (request.skip ?? []) : []);
  const encoder = new TextEncoder();
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  let ended = false;
  let chain: Promise<void> = Promise.resolve();
  let stopCommits: () => void = () => undefined;
  let untrack: () => void = () => undefined;

  const write = async (chunks: readonly UiChunk[]): Promise<void> => {
    if (chunks.length > 0) await writer.write(encoder.encode(chunks.map(uiSse).join("")));
  };
  // `start` waits for the turn's user entry: the assistant message's id is `a{that entry}`, as the history says.
  let started = false;
  const start = async (userEntry: Id | undefined): Promise<void> => {
    if (started) return;
    started = true;
    await write([{ type: "start", ...(userEntry === undefined ? {} : { messageId: assistantMessageId(userEntry) }) }]);
  };
  // An SSE comment now and then keeps proxies from closing a quiet stream (a queued input, a parked call).
  const keepAlive = setInterval(() => {
    if (!ended) void writer.write(encoder.encode(": keep-alive\n\n")).catch(() => stop());
  }, keepAliveMs());
  const stop = (): void => {
    ended = true;
    clearInterval(keepAlive);
    feed.unsubscribe(subscriber);
    stopCommits();
    untrack();
  };
  const finish = async (last: readonly UiChunk[], finishReason: UiFinishReason): Promise<void> => {
    if (ended) return;
    stop();
    await start(undefined);
    const metadata = turn.metadata;
    await write([
      ...turn.close(),
      ...last,
      { type: "finish", finishReason, ...(metadata === undefined ? {} : { messageMetadata: metadata }) },
    ]);
    await writer.write(encoder.encode(UI_SSE_DONE));
    await writer.close();
  };
  const process = async (): Promise<void> => {
    if (ended) return;
    let result: InputResult | undefined;
    if (request.mode === "input") {
      result = (await session.harness.storage.getValue(bindResult(conversationId, request.inputId)))?.value;
      const entry = result !== undefined && "entry" in result ? result.entry : undefined;
      if (entry !== undefined) {
        turn.startAfter(entry);
        await start(entry);
      } else if (isTerminalResult(result)) await start(undefined);
    } else if (turn.view !== undefined) {
      const from = liveStart(turn.view);
      await start(from === 0 ? undefined : from);
    }
    const terminal = isTerminalResult(result);
    const step = turn.step(terminal && result?.status === "done" ? result.answer : undefined, skip);
    await write(step.chunks);
    if (step.waiting) await finish([], "tool-calls");
    else if (terminal && result !== undefined)
      await finish(
        result.status === "unanswered" ? [unanswered(result)] : [],
        result.status === "unanswered" ? (result.reason === "aborted" ? "other" : "error") : "stop",
      );
    else if (request.mode === "live" && turn.view !== undefined && turn.view.tasks.length === 0)
      await finish([], "stop");
  };
  const schedule = (): void => {
    chain = chain.then(process).catch(() => {
      // The page went away (a write failed) or a read failed: stop; the turn goes on, a resume finds it.
      stop();
      void writer.abort().catch(() => undefined);
    });
  };
  const subscriber: FeedSubscriber<ConversationView, ConversationEvent> = {
    send(out: FeedOut<ConversationView, ConversationEvent>) {
      turn.fold(out);
      if (request.mode === "live" && out.type === "view") turn.startAfter(liveStart(out.view));
      schedule();
    },
    end() {
      chain = chain
        .then(() => finish([{ type: "error", errorText: "the session closed; resume the stream" }], "other"))
        .catch(() => stop());
    },
  };
  signal.addEventListener("abort", stop);
  // Revoked means gone: the stream ends now, not after what the chain still has to send (a page that reads slowly
  // keeps it waiting on writes). The writer keeps order: what was written before stays before the error.
  const cut = async (errorText: string): Promise<void> => {
    if (ended) return;
    stop();
    await start(undefined);
    await write([
      { type: "error", errorText },
      { type: "finish", finishReason: "other" },
    ]);
    await writer.write(encoder.encode(UI_SSE_DONE));
    await writer.close();
  };
  if (track !== undefined)
    untrack = track(() => {
      void cut("the token expired or was revoked; get a new token").catch(() => undefined);
    });
  feed.subscribe(subscriber, undefined);
  // The input's result may change in a commit this watch has nothing for: check after every commit.
  if (request.mode === "input") stopCommits = session.harness.onCommit(() => schedule());
  return new Response(readable, { status: 200, headers: UI_STREAM_HEADERS });
}

/** The feed's current view (a subscription's first message), without staying subscribed; undefined while it resyncs. */
function currentView(feed: ConversationFeed): ConversationView | undefined {
  let view: ConversationView | undefined;
  const probe: FeedSubscriber<ConversationView, ConversationEvent> = {
    send(out) {
      if (out.type === "view") view = out.view;
    },
    end() {
      // the feed ended: no view
    },
  };
  feed.subscribe(probe, undefined);
  feed.unsubscribe(probe);
  return view;
}
