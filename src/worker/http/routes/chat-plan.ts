/**
 * What a chat request does with its newest user message, the one rule the AI SDK chat route and the AG-UI route share
 * (docs/frontends.md "A chat is a pointer"): matched by its id against the branch the chat points at, a message the
 * chat holds with the same text and images is a continuation (no new input); with another text or other images an
 * edit (a fork just before it, the pointer moved there); a new one an input on the branch (or, for a chat that points nowhere yet, on a fork of the
 * root at "start"). A regeneration forks just before the newest user message and accepts it again.
 *
 * Accepting a plan that moves the pointer goes through the session's `chatAccept` (session/chat-ops.ts): admitted
 * before the fork is made, so a refused request leaves the chat as it was.
 */
import type { AcceptResponse } from "../../../api/responses.js";
import type { Id } from "../../../storage/records.js";
import type { Env } from "../../env.js";
import type { Payer } from "../../limits/admission.js";
import { Problem } from "../../problems.js";
import { imagesKey, type ReadContent } from "../../frontends/content-parts.js";
import { chatSource, type ChatProtocol } from "../../session/chat-ops.js";
import type { AcceptRequest } from "../../session/input-ops.js";
import type { SessionRpc } from "../../session/rpc.js";
import { acceptedBy, acceptedOnFork } from "./accepting.js";
import { run } from "./shared.js";

/** What a request does with its newest user message. */
export type Plan =
  /** Already accepted on this branch (or no user message): answers only, then the turn's stream. */
  | { readonly kind: "continue"; readonly inputId?: Id }
  /** A new input on the branch (a new chat: on a fork of the root at "start" the chat moves to). */
  | { readonly kind: "input"; readonly read: ReadContent; readonly messageId: string }
  /** An edit or a regeneration: fork the branch before `before`, accept `read` there, move the pointer. */
  | { readonly kind: "fork"; readonly before: Id | "start"; readonly read: ReadContent; readonly messageId: string };

export type Trigger = "submit-message" | "regenerate-message";

/** Whether the user entry `entry` (on the branch) carries the images `read` does: same text, other images is an edit. */
async function sameImages(stub: SessionRpc, branch: Id, entry: Id, read: ReadContent): Promise<boolean> {
  const page = await run(stub.op("entries", branch, { after: entry - 1, limit: 1 }));
  const stored = page.items[0];
  if (stored?.id !== entry) return true;
  const message = stored.model?.find((m) => m.role === "user");
  return imagesKey(message?.role === "user" ? message.content : "") === imagesKey(read.input);
}

export async function planOf(
  stub: SessionRpc,
  branch: Id | undefined,
  trigger: Trigger,
  user: { readonly id: string; readonly text: string; readonly read: ReadContent } | undefined,
  protocol: ChatProtocol,
): Promise<Plan> {
  const found =
    branch === undefined || user === undefined ? null : await run(stub.op("chatMessage", branch, user.id, protocol));
  if (trigger === "regenerate-message") {
    if (user === undefined || found === null || found.entry === undefined)
      throw new Problem(
        "invalid_body",
        "regenerate-message runs again the answer to a user message this chat holds; none was found",
        protocol === "chat" ? "messageId" : "forwardedProps.trigger",
      );
    // The page's copy of the message, images and all, when its text is the one the chat holds.
    const read =
      found.text === undefined || found.text === user.text
        ? user.read
        : { input: found.text, text: found.text, images: [] };
    return { kind: "fork", before: found.entry, read, messageId: user.id };
  }
  if (user === undefined) return { kind: "continue" };
  if (found === null) return { kind: "input", read: user.read, messageId: user.id };
  const same =
    found.text === undefined ||
    (found.text === user.text &&
      (found.entry === undefined || branch === undefined || (await sameImages(stub, branch, found.entry, user.read))));
  if (same) return { kind: "continue", ...(found.inputId === undefined ? {} : { inputId: found.inputId }) };
  if (found.entry === undefined)
    throw new Problem(
      "idempotency_key_reused",
      "this message is still queued with another text; wait until it is placed to edit it",
      "messages",
    );
  return { kind: "fork", before: found.entry, read: user.read, messageId: user.id };
}

/** Where a chat request's input goes: the chat, the branch it points at (undefined: nowhere yet), who pays. */
export interface ChatTarget {
  readonly env: Env;
  readonly payer: Payer;
  readonly stub: SessionRpc;
  readonly session: string;
  readonly chatId: string;
  readonly branch: Id | undefined;
  readonly protocol: ChatProtocol;
}

/**
 * Accept a plan's input: on the branch, or on the fork it moves the chat to (a new chat's first message, an edit, a
 * regeneration), admitted before the fork is made. `request`: the rest of the accept (its hash, a run's tools).
 */
export async function acceptPlan(
  target: ChatTarget,
  plan: Extract<Plan, { kind: "input" | "fork" }>,
  request: Omit<AcceptRequest, "input" | "source" | "messageId">,
): Promise<AcceptResponse> {
  const { env, payer, stub, session, chatId, branch, protocol } = target;
  const accept = { ...request, input: plan.read.input, messageId: plan.messageId };
  if (plan.kind === "input" && branch !== undefined)
    return acceptedBy(env, payer, stub, session, branch, {
      ...accept,
      source: chatSource(protocol, plan.messageId),
    });
  const fork =
    plan.kind === "fork" && branch !== undefined
      ? { source: branch, before: plan.before, expect: branch, rekey: true }
      : { source: "root" as const, before: "start" as const, expect: null, rekey: false };
  return acceptedOnFork(env, payer, stub, session, { chatId, protocol, messageId: plan.messageId, ...fork }, accept);
}
