/**
 * Chats as named pointers to branches (docs/frontends.md "A chat is a pointer"), inside the session object: the
 * operations the AI SDK chat routes and the AG-UI route use to find the conversation a chat id points at, to find a
 * message the chat already accepted, and to move the pointer to a fork (an edit, a regeneration, a new chat's first
 * message).
 *
 * The pointer is a sticky session value per chat id (`edge.chat`, additive). `root` and a decimal conversation id
 * point at that conversation until they move; any other id points nowhere until its first message, which starts a
 * conversation for it: a fork of the root at "start". A fork's creating commit moves the pointer, so a pointer never
 * names a conversation that does not exist. Transcripts are never rewritten: the old branch stays a conversation.
 *
 * Request keys are session-wide for life (§3.4): a message accepted on a fork the chat moved to is keyed
 * `chat:{messageId}@{fork}` (an AG-UI run's `idem:ag-ui {messageId}@{fork}`), and its user entry keeps the client's
 * message id as its key, so history shows that id.
 *
 * A message that moves the pointer (a new chat's first message, an edit, a regeneration) is accepted by `chatAccept`:
 * the input is admitted first (limits reserved, its request key checked), then the fork is made and the pointer moved
 * in its creating commit, then the input accepted on it; a refusal after the fork deletes the fork and puts the
 * pointer back. A refused request leaves the chat as it was.
 */
import { BACKGROUND_CONTEXT, type Call } from "../../core/call.js";
import { bindResult, type InputResult } from "../../core/inbox.js";
import { bind, sessionValue, withKey, type ValueSpec } from "../../core/state.js";
import { visibleEntry } from "../../core/validate.js";
import type { Entry, Id } from "../../storage/records.js";
import { Problem } from "../problems.js";
import type { AcceptResponse } from "../../api/responses.js";
import type { ConversationRef, SessionApi } from "./api.js";
import {
  accept,
  requestId,
  type AcceptRequest,
  type AcceptSession,
  type InputAdmission,
  type RequestSource,
} from "./input-ops.js";

/** Where a chat id points. */
export interface ChatPointer {
  readonly conversationId: Id;
  /** A routed thread's readable key (an inbound route key, kept when the chat id is its hash). */
  readonly route?: string;
}

const pointerBase = sessionValue<ChatPointer>("edge.chat");
function pointer(chatId: string): ValueSpec<ChatPointer> {
  return withKey(pointerBase, chatId);
}

/** A chat id: 1-128 characters `A-Z a-z 0-9 _ -` (an AG-UI thread id too). */
export const CHAT_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The request key's id of a message accepted on fork `conversationId` of a chat (the original keeps its own id). */
export function forkMessageKey(messageId: string, conversationId: Id): string {
  return `${messageId}@${conversationId}`;
}

/** The protocol a chat message came over: each keys its messages in a namespace of its own. */
export type ChatProtocol = "chat" | "ag-ui";

/** The request source of a chat message accepted under `key` (its id, or its fork key). */
export function chatSource(protocol: ChatProtocol, key: string): RequestSource {
  switch (protocol) {
    case "chat":
      return { type: "chat", id: key };
    case "ag-ui":
      // A space keeps it apart from every Idempotency-Key (visible ASCII).
      return { type: "idempotency", key: `ag-ui ${key}` };
    default: {
      const never: never = protocol;
      return never;
    }
  }
}

/**
 * Where a chat message that moves the pointer is accepted: a fork of `source` just before its entry `before` ("start":
 * at its start), which chat `chatId` points at from the fork's creating commit. `expect`: where the pointer must still
 * point (a concurrent move is a 409 conflict). `rekey`: the message is keyed `{messageId}@{fork}` (an edit, a
 * regeneration: the id was accepted before); otherwise under its own id (a new chat's first message).
 */
export interface ChatFork {
  readonly chatId: string;
  readonly source: ConversationRef;
  readonly before: Id | "start";
  readonly expect: Id | null;
  readonly protocol: ChatProtocol;
  readonly messageId: string;
  readonly rekey: boolean;
  /** The request key when it is not the chat message's (an inbound delivery's); only without `rekey`. */
  readonly requestSource?: RequestSource;
  /** A routed thread's readable key, kept with the pointer (as `chatFork`'s `route`). */
  readonly route?: string;
}

/** A user message the chat's branch already holds: its entry (absent while it is queued) and its text. */
export interface ChatMessage {
  readonly inputId?: Id;
  readonly entry?: Id;
  readonly text?: string;
  /** The key it was accepted under (the id a continuation resends under). */
  readonly key?: string;
}

export interface ChatSessionOps {
  /** The conversation chat `chatId` points at; `conversationId` absent: a new chat, nothing yet. */
  chatBranch: { readonly args: [chatId: string]; readonly result: { readonly conversationId?: Id } };
  /** The user message `messageId` (a client id, or a history id `u{entry}`) visible on conversation `conversationId`. */
  chatMessage: {
    readonly args: [conversationId: Id, messageId: string, protocol?: ChatProtocol];
    readonly result: ChatMessage | null;
  };
  /**
   * Fork `source` just before its entry `before` ("start": at its start) and point `chatId` at the fork, in the fork's
   * creating commit. `expect`: where the pointer must still point (a concurrent move makes this a 409 conflict).
   * `route`: the readable key of a routed thread, kept with the pointer.
   */
  chatFork: {
    readonly args: [chatId: string, source: ConversationRef, before: Id | "start", expect: Id | null, route?: string];
    readonly result: { readonly conversationId: Id };
  };
  /**
   * Accept a message on a fork the chat moves to (`ChatFork`), admitted before the fork is made: a refused request
   * makes no fork and leaves the pointer. `request` carries no source: the fork names its key.
   */
  chatAccept: {
    readonly args: [fork: ChatFork, request: Omit<AcceptRequest, "source">, admission?: InputAdmission];
    readonly result: AcceptResponse;
  };
}

const call: Call = BACKGROUND_CONTEXT;

function defaultTarget(api: SessionApi, chatId: string): Id | undefined {
  if (chatId === "root") return api.harness.rootId;
  if (/^[0-9]{1,15}$/.test(chatId)) return Number(chatId);
  return undefined;
}

async function branch(api: SessionApi, chatId: string): Promise<{ conversationId?: Id }> {
  if (!CHAT_ID.test(chatId)) throw new Problem("invalid_body", "a chat id is 1-128 characters A-Z a-z 0-9 _ -", "id");
  const stored = (await api.harness.storage.getValue(bind(pointer(chatId), {})))?.value;
  const target = stored?.conversationId ?? defaultTarget(api, chatId);
  if (target === undefined) return {};
  // A conversation that does not exist (a decimal id never made, a deleted branch) is 404, as the routes say.
  const handle = await api.conversation(target);
  return { conversationId: handle.id };
}

function userText(entry: Entry | undefined): string | undefined {
  if (entry?.kind !== "user") return undefined;
  const parts: string[] = [];
  for (const message of entry.model ?? []) {
    if (message.role !== "user") continue;
    if (typeof message.content === "string") parts.push(message.content);
    else for (const block of message.content) if (block.type === "text") parts.push(block.text);
  }
  return parts.join("");
}

function entryOf(result: InputResult | undefined): Id | undefined {
  return result !== undefined && "entry" in result ? result.entry : undefined;
}

/** The conversation and its sources, nearest first (fork depth, never unrelated history). */
async function lineage(api: SessionApi, conversationId: Id): Promise<Id[]> {
  const out: Id[] = [];
  let id: Id | undefined = conversationId;
  while (id !== undefined && out.length < 64) {
    out.push(id);
    const record = (await api.harness.storage.getConversations([id])).get(id);
    id = record?.parent?.conversationId;
  }
  return out;
}

async function message(
  api: SessionApi,
  conversationId: Id,
  messageId: string,
  protocol: ChatProtocol,
): Promise<ChatMessage | null> {
  const storage = api.harness.storage;
  const byEntry = /^u([0-9]{1,15})$/.exec(messageId);
  if (byEntry !== null) {
    const entry = Number(byEntry[1]);
    if (await visibleEntry(storage, conversationId, entry)) {
      const stored = await api.harness.getEntry(entry, call);
      const text = userText(stored);
      if (text !== undefined) return { entry, text, ...(stored?.key === undefined ? {} : { key: stored.key }) };
    }
  }
  const keys = [...(await lineage(api, conversationId)).map((id) => forkMessageKey(messageId, id)), messageId];
  for (const key of keys) {
    const acceptance = await api.harness.acceptance(requestId(chatSource(protocol, key)), call);
    if (acceptance === undefined) continue;
    const result = (await storage.getValue(bindResult(acceptance.conversationId, acceptance.inputId)))?.value;
    const entry = entryOf(result);
    if (entry === undefined) {
      // Still queued: it belongs to this branch only if it was accepted on it.
      if (acceptance.conversationId === conversationId) return { inputId: acceptance.inputId, key };
      continue;
    }
    if (!(await visibleEntry(storage, conversationId, entry))) continue;
    const text = userText(await api.harness.getEntry(entry, call));
    return { inputId: acceptance.inputId, entry, key, ...(text === undefined ? {} : { text }) };
  }
  return null;
}

/**
 * The forks under way per open session and chat id. A fork reads where the chat points, then commits; two forks of one
 * chat at once (a sender's retry racing its first request, two deliveries of a new thread) would both read "nowhere"
 * and both fork, the later pointer winning over the conversation the first accepted into. So one chat's forks run one
 * after the other in the object: the second reads the first's pointer and answers 409 `conflict`.
 */
const forking = new WeakMap<SessionApi, Map<string, Promise<unknown>>>();

async function oneAtATime<T>(api: SessionApi, chatId: string, work: () => Promise<T>): Promise<T> {
  let chats = forking.get(api);
  if (chats === undefined) forking.set(api, (chats = new Map()));
  const running = (chats.get(chatId) ?? Promise.resolve()).catch(() => undefined).then(work);
  chats.set(chatId, running);
  try {
    return await running;
  } finally {
    if (chats.get(chatId) === running) chats.delete(chatId);
  }
}

async function fork(
  api: SessionApi,
  chatId: string,
  source: ConversationRef,
  before: Id | "start",
  expect: Id | null,
  route?: string,
): Promise<{ conversationId: Id }> {
  const sourceId = (await api.conversation(source)).id;
  let at: Id | "start" = "start";
  if (before !== "start") {
    const previous = await api.harness.storage.scanEntries({ conversationId: sourceId, before, limit: 1 });
    at = previous.items[0]?.id ?? "start";
  }
  const current = await branch(api, chatId);
  if ((current.conversationId ?? null) !== expect)
    throw new Problem("conflict", `chat ${chatId} moved while this request ran; reload it and send again`, "id");
  const { conversationId } = await api.fork(sourceId, { at }, (b, child) => {
    b.value(bind(pointer(chatId), {})).set({ conversationId: child, ...(route === undefined ? {} : { route }) });
  });
  return { conversationId };
}

/** The pointer of `chatId` as it stood before a fork moved it (absent: it had never moved). */
async function pointerNow(api: SessionApi, chatId: string): Promise<ChatPointer | undefined> {
  return (await api.harness.storage.getValue(bind(pointer(chatId), {})))?.value;
}

async function chatAccept(
  session: AcceptSession,
  target: ChatFork,
  request: Omit<AcceptRequest, "source">,
  admission: InputAdmission | undefined,
): Promise<AcceptResponse> {
  const { api } = session;
  const plain = target.requestSource ?? chatSource(target.protocol, target.messageId);
  let previous: ChatPointer | undefined;
  return accept(
    session,
    target.source,
    // A new chat's first message is reserved under its own key (a retry rides on it); a rekeyed one is new each time.
    target.rekey ? request : { ...request, source: plain },
    admission,
    {
      check: async () => {
        const current = await branch(api, target.chatId);
        if ((current.conversationId ?? null) !== target.expect)
          throw new Problem(
            "conflict",
            `chat ${target.chatId} moved while this request ran; reload it and send again`,
            "id",
          );
        // The first message of a new chat under an id accepted elsewhere: the accepting commit's refusal, made here.
        const prior = target.rekey ? undefined : await api.harness.acceptance(requestId(plain), call);
        if (prior !== undefined)
          throw new Problem(
            "idempotency_key_reused",
            `message ${target.messageId} was accepted on conversation ${prior.conversationId}; a new message needs a new id`,
            "messages",
          );
      },
      open: async () => {
        previous = await pointerNow(api, target.chatId);
        const { conversationId } = await fork(
          api,
          target.chatId,
          target.source,
          target.before,
          target.expect,
          target.route,
        );
        return target.rekey
          ? {
              conversationId,
              source: chatSource(target.protocol, forkMessageKey(target.messageId, conversationId)),
            }
          : { conversationId };
      },
      undo: async (conversationId) => {
        await api.harness.commit(async (tx) => {
          tx.deleteConversation(conversationId);
          const value = tx.value(bind(pointer(target.chatId), {}));
          if (previous === undefined) value.delete();
          else value.set(previous);
        }, call);
      },
    },
  );
}

/** The chat entries of the SessionObject's op table, over the open session. */
export function chatOps<S extends AcceptSession>(): {
  readonly [K in keyof ChatSessionOps]: (
    session: S,
    ...args: ChatSessionOps[K]["args"]
  ) => Promise<ChatSessionOps[K]["result"]>;
} {
  return {
    chatBranch: (s, chatId) => branch(s.api, chatId),
    chatMessage: (s, conversationId, messageId, protocol) =>
      message(s.api, conversationId, messageId, protocol ?? "chat"),
    chatFork: (s, chatId, source, before, expect, route) =>
      oneAtATime(s.api, chatId, () => fork(s.api, chatId, source, before, expect, route)),
    // One chat's pointer moves run one after the other (oneAtATime): the admission, the fork and the accept.
    chatAccept: (s, target, request, admission) =>
      oneAtATime(s.api, target.chatId, () => chatAccept(s, target, request, admission)),
  };
}
