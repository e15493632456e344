/**
 * The AI SDK chat routes (docs/frontends.md, docs/api.md "Chat"), what `useChat` with
 * `DefaultChatTransport({ api: ".../v1/sessions/{session}/chat" })` reaches:
 *
 *   POST /:session/chat                              accept the newest user message, stream its turn
 *   GET  /:session/chat/:conversation/stream         resume: the live turn from its start; 204 when idle
 *   GET  /:session/chat/:conversation/messages       the transcript as UIMessage[]
 *
 * The POST's `id` (the chat id) names the conversation. The newest user message is the input, accepted
 * like `POST .../inputs` (limits admitted and counted, accepting.ts) under its message id as the request key
 * (a resend is the same input). Tool parts the page answered after that message (`approval-responded`, or a
 * client tool's output) answer their pending items through the pending answer path, once each, checked
 * against the durable list.
 * Everything is validated before anything is written; the session's transcript is the truth and the
 * body's earlier messages never rewrite it. The stream itself comes from the session object
 * (session/chat-streams.ts).
 */
import { Hono } from "hono";
import { approvalRespondedPart, chatBody, textPart, toolOutputPart, type UiMessageBody } from "../../../api/chat.js";
import type { Id, JsonValue } from "../../../storage/records.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { payerOf } from "../../limits/admission.js";
import { Problem } from "../../problems.js";
import { conversationRef, noQuery, parse, requestKey, type ConversationRef } from "../../schemas.js";
import type { SessionRpc } from "../../session/rpc.js";
import { callIdOf, uiMessages } from "../../watch/ui-messages.js";
import { WATCHER_HEADER } from "../../watch/guard.js";
import { acceptedBy } from "./accepting.js";
import { body, conversationParam, query, run, session, sessionParam, type AppContext } from "./shared.js";
import { userWatcher } from "./watch.js";

export const chatRoutes = new Hono<AppEnv>();

/** An approval the page answered: the pending item's id, the answer, and the tool call it is on. */
interface Approval {
  readonly id: string;
  readonly approve: boolean;
  readonly reason?: string;
  readonly toolCallId: string;
}

/** An answer to one pending item: an approval's, or a client tool's output. */
interface Answer {
  readonly id: string;
  readonly answer: JsonValue;
  readonly toolCallId: string;
}

/** A tool output the page added (`addToolOutput`) after the newest user message. */
interface ToolOutput {
  readonly toolCallId: string;
  readonly output: JsonValue;
  readonly isError: boolean;
}

/** SHA-256 of the input text: a resend of a message id with another text is 422 idempotency_key_reused. */
async function textHash(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify({ chat: text })));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/** The newest user message: its index, request key and text (400 naming the field when it has none). */
function newestUserMessage(messages: readonly UiMessageBody[]): { index: number; key: string; text: string } {
  let index = messages.length - 1;
  while (index >= 0 && messages[index]?.role !== "user") index -= 1;
  const message = messages[index];
  if (message === undefined) throw new Problem("invalid_body", "messages holds no user message", "messages");
  const key = parse(requestKey, message.id, "invalid_body", `messages[${index}].id`);
  const text = message.parts
    .map((part) => {
      const parsed = textPart.safeParse(part);
      return parsed.success ? parsed.data.text : "";
    })
    .join("");
  if (text.trim() === "")
    throw new Problem("invalid_body", "the user message has no text part", `messages[${index}].parts`);
  return { index, key, text };
}

/** The approvals answered in the assistant messages after the newest user message. */
function answeredApprovals(messages: readonly UiMessageBody[], after: number): Approval[] {
  const out: Approval[] = [];
  for (const [m, message] of messages.entries()) {
    if (m <= after || message.role !== "assistant") continue;
    for (const part of message.parts) {
      if (!("state" in part) || part["state"] !== "approval-responded") continue;
      const parsed = parse(approvalRespondedPart, part, "invalid_body", `messages[${m}].parts`);
      out.push({
        id: parsed.approval.id,
        approve: parsed.approval.approved,
        toolCallId: parsed.toolCallId,
        ...(parsed.approval.reason === undefined ? {} : { reason: parsed.approval.reason }),
      });
    }
  }
  return out;
}

/** The tool outputs the page added in the assistant messages after the newest user message. */
function toolOutputs(messages: readonly UiMessageBody[], after: number): ToolOutput[] {
  const out: ToolOutput[] = [];
  for (const [m, message] of messages.entries()) {
    if (m <= after || message.role !== "assistant") continue;
    for (const part of message.parts) {
      const state = "state" in part ? part["state"] : undefined;
      if (state !== "output-available" && state !== "output-error") continue;
      const parsed = parse(toolOutputPart, part, "invalid_body", `messages[${m}].parts`);
      out.push(
        parsed.state === "output-available"
          ? { toolCallId: parsed.toolCallId, output: parsed.output, isError: false }
          : { toolCallId: parsed.toolCallId, output: parsed.errorText, isError: true },
      );
    }
  }
  return out;
}

/**
 * The client tools among `outputs` that wait in this conversation's pending list (matched by their task's
 * tool call id): their answers. Any other output (a server tool's, one answered before) is the page's copy.
 */
async function clientAnswers(
  stub: SessionRpc,
  ref: ConversationRef,
  outputs: readonly ToolOutput[],
): Promise<Answer[]> {
  if (outputs.length === 0) return [];
  const items = (await run(stub.op("pending", ref))).filter((item) => item.type === "client_tool");
  if (items.length === 0) return [];
  const { tasks } = await run(stub.op("snapshot", ref));
  const answers: Answer[] = [];
  for (const output of outputs) {
    const item = items.find((i) => callIdOf(tasks.find((task) => task.id === i.taskId)) === output.toolCallId);
    if (item !== undefined)
      answers.push({
        id: item.id,
        toolCallId: output.toolCallId,
        answer: output.isError ? { output: output.output, isError: true } : { output: output.output },
      });
  }
  return answers;
}

/**
 * Check each approval against the durable pending list: one of this conversation's items is answered; one
 * that left every list goes to the answer path too, which answers what happened to it (409
 * already_answered or pending_closed, 404 for an id never issued); another conversation's item is 404.
 */
async function checkApprovals(stub: SessionRpc, ref: ConversationRef, approvals: readonly Approval[]): Promise<void> {
  if (approvals.length === 0) return;
  const here = new Set((await run(stub.op("pending", ref))).map((item) => item.id));
  if (approvals.every((approval) => here.has(approval.id))) return;
  const elsewhere = new Set((await run(stub.op("pending", null))).map((item) => item.id));
  for (const approval of approvals)
    if (!here.has(approval.id) && elsewhere.has(approval.id))
      throw new Problem("pending_not_found", `${approval.id} is not pending in this conversation`, "messages");
}

chatRoutes.post("/:session/chat", requires("input"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const chat = await body(c, chatBody);
  if (chat.trigger === "regenerate-message")
    throw new Problem(
      "unsupported_trigger",
      "regenerating a message is not supported yet; send a new message (or fork the conversation)",
      "trigger",
    );
  const ref = parse(conversationRef, chat.id, "invalid_body", "id");
  const user = newestUserMessage(chat.messages);
  const approvals = answeredApprovals(chat.messages, user.index);
  const outputs = toolOutputs(chat.messages, user.index);
  await checkApprovals(stub, ref, approvals);
  const answers: Answer[] = [
    ...approvals.map((approval) => ({
      id: approval.id,
      toolCallId: approval.toolCallId,
      answer: { approve: approval.approve, ...(approval.reason === undefined ? {} : { reason: approval.reason }) },
    })),
    ...(await clientAnswers(stub, ref, outputs)),
  ];
  // Entries committed after this belong to the continuation an answer lets run.
  let after: Id | undefined;
  if (answers.length > 0) {
    after = (await run(stub.op("summary"))).lastSeq;
    for (const answer of answers) await run(stub.op("answerPending", answer.id, answer.answer));
  }
  const accepted = await acceptedBy(c.env, payerOf(c.get("claims")), stub, sessionParam(c), ref, {
    input: user.text,
    source: { type: "chat", id: user.key },
    requestHash: await textHash(user.text),
  });
  return stub.fetch(
    new Request(`https://session.internal/chat/${accepted.conversationId}`, {
      method: "POST",
      body: JSON.stringify({
        mode: "input",
        inputId: accepted.inputId,
        ...(after === undefined ? {} : { after }),
        skip: answers.map((answer) => answer.id),
        known: answers.map((answer) => answer.toolCallId),
      }),
      signal: c.req.raw.signal,
    }),
  );
});

/** The conversation's id in the session object's terms (404 for an unknown one). */
async function conversationId(c: AppContext): Promise<Id> {
  return (await run(session(c).op("snapshot", conversationParam(c)))).conversation.id;
}

/**
 * A resume is a watch of the live turn: a user's is recorded with the directory like a watch's (http/routes/watch.ts
 * `userWatcher`), so it ends at its token's expiry and when the user's tokens are revoked or the user is erased.
 */
chatRoutes.get("/:session/chat/:conversation/stream", requires("conversation"), async (c) => {
  query(c, noQuery);
  const id = await conversationId(c);
  const watcher = await userWatcher(c);
  return session(c).fetch(
    new Request(`https://session.internal/chat/${id}`, {
      method: "POST",
      body: JSON.stringify({ mode: "live" }),
      signal: c.req.raw.signal,
      ...(watcher === undefined ? {} : { headers: { [WATCHER_HEADER]: JSON.stringify(watcher) } }),
    }),
  );
});

/** Entries read per page for the history. */
const PAGE = 200;

chatRoutes.get("/:session/chat/:conversation/messages", requires("conversation"), async (c) => {
  const stub = session(c);
  const ref = conversationParam(c);
  query(c, noQuery);
  const snapshot = await run(stub.op("snapshot", ref));
  const entries = [];
  let cursor: Id | undefined;
  for (;;) {
    const page = await run(
      stub.op("entries", ref, { limit: PAGE, ...(cursor === undefined ? {} : { after: cursor }) }),
    );
    entries.push(...page.items);
    if (page.next === undefined) break;
    cursor = page.next;
  }
  const pending = await run(stub.op("pending", ref));
  return c.json(uiMessages(entries, pending, snapshot.tasks));
});
