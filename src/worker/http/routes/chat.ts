/**
 * The AI SDK chat routes (docs/frontends.md, docs/api.md "Chat"), what `useChat` with
 * `DefaultChatTransport({ api: ".../v1/sessions/{session}/chat" })` reaches:
 *
 *   POST /:session/chat                        accept the newest user message (or continue), stream its turn
 *   GET  /:session/chat/:conversation/stream   resume: the live turn of the chat's branch; 204 when idle
 *   GET  /:session/chat/:conversation/messages the chat's branch as UIMessage[] ([] for a chat with no message yet)
 *
 * The chat id names a pointer to a branch (session/chat-ops.ts). The newest user message is matched by its id
 * against the branch (chat-plan.ts, the rule the AG-UI route shares): one the chat holds with the same text and images
 * is a continuation (no new input), with another text or other images an edit (a fork just before it, the pointer
 * moved); a new one is an input, accepted like `POST .../inputs` (limits admitted and counted, accepting.ts) under its
 * message id as the request key. `regenerate-message` forks just before the answered message and accepts it again. A
 * fork is made only after its input was admitted, so a refused request leaves the chat as it was. Tool parts the page answered after that message
 * (`approval-responded`, or a client tool's output) answer their pending items through the pending answer path,
 * once each, checked against the durable list before anything is written, and recorded after the input was
 * admitted, so a refused input records none.
 * The newest user message's `file` parts are images for the model or refused naming the part, never dropped
 * (frontends/content-parts.ts, the rules AG-UI shares), checked against the conversation's model before anything is
 * written (model-inputs.ts).
 * The session's transcript is the truth and the body's earlier messages never rewrite it. The stream itself comes
 * from the session object (session/chat-streams.ts).
 */
import { Hono } from "hono";
import { approvalRespondedPart, chatBody, toolOutputPart, type UiMessageBody } from "../../../api/chat.js";
import type { Id, JsonValue } from "../../../storage/records.js";
import { requires, type AppEnv } from "../../identity/auth.js";
import { payerOf } from "../../limits/admission.js";
import { Problem } from "../../problems.js";
import { noQuery, parse, requestKey, type ConversationRef } from "../../schemas.js";
import type { SessionRpc } from "../../session/rpc.js";
import { callIdOf, uiMessages } from "../../frontends/ui-messages.js";
import { readUiParts, type ReadContent } from "../../frontends/content-parts.js";
import { WATCHER_HEADER } from "../../watch/guard.js";
import { acceptPlan, planOf } from "./chat-plan.js";
import { checkImagesFor } from "./model-inputs.js";
import { body, query, run, session, sessionParam, type AppContext } from "./shared.js";
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

/**
 * SHA-256 of the input (its text, and its images when it has any): a resend of a message id with another body is 422
 * idempotency_key_reused.
 */
async function inputHash(read: ReadContent): Promise<string> {
  const body = typeof read.input === "string" ? { chat: read.text } : { chat: read.text, content: read.input };
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify(body)));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/**
 * The newest user message, if the body has one: its index, id, text and what it carries to the model (its parts read
 * by frontends/content-parts.ts: a file part is an image, or refused naming it; never dropped). 400 naming the field
 * when it carries neither text nor an image.
 */
function newestUserMessage(
  messages: readonly UiMessageBody[],
): { index: number; id: string; text: string; read: ReadContent } | undefined {
  let index = messages.length - 1;
  while (index >= 0 && messages[index]?.role !== "user") index -= 1;
  const message = messages[index];
  if (message === undefined) return undefined;
  const id = parse(requestKey, message.id, "invalid_body", `messages[${index}].id`);
  const read = readUiParts(message.parts, `messages[${index}]`);
  if (read.text.trim() === "" && read.images.length === 0)
    throw new Problem("invalid_body", "the user message has no text or image part", `messages[${index}].parts`);
  return { index, id, text: read.text, read };
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

/** Two answers to an approval are the same answer when they approve alike (a reason may differ in wording). */
function sameApproval(recorded: unknown, approval: Approval): boolean {
  return (
    recorded !== null &&
    typeof recorded === "object" &&
    !Array.isArray(recorded) &&
    (recorded as Record<string, unknown>)["approve"] === approval.approve
  );
}

/**
 * Check each approval against the durable pending list before anything is written: one of this conversation's
 * items is answered; one that left every list is asked of the answer path, which refuses without writing (the item
 * is not waiting) and says what happened to it: the same answer recorded before is a resend, left out (200); another
 * answer is 409 already_answered, a closed item 409 pending_closed, an id never issued 404; another conversation's
 * item is 404. Answers the approvals still to be recorded.
 */
async function checkApprovals(
  stub: SessionRpc,
  ref: ConversationRef,
  approvals: readonly Approval[],
): Promise<Approval[]> {
  if (approvals.length === 0) return [];
  const here = new Set((await run(stub.op("pending", ref))).map((item) => item.id));
  if (approvals.every((approval) => here.has(approval.id))) return [...approvals];
  const elsewhere = new Set((await run(stub.op("pending", null))).map((item) => item.id));
  const out: Approval[] = [];
  for (const approval of approvals) {
    if (here.has(approval.id)) {
      out.push(approval);
      continue;
    }
    if (elsewhere.has(approval.id))
      throw new Problem("pending_not_found", `${approval.id} is not pending in this conversation`, "messages");
    try {
      await run(stub.op("answerPending", approval.id, approvalAnswer(approval)));
      out.push(approval);
    } catch (error) {
      if (
        error instanceof Problem &&
        error.code === "already_answered" &&
        sameApproval(error.extra["answer"], approval)
      )
        continue;
      throw error;
    }
  }
  return out;
}

function approvalAnswer(approval: Approval): JsonValue {
  return { approve: approval.approve, ...(approval.reason === undefined ? {} : { reason: approval.reason }) };
}

chatRoutes.post("/:session/chat", requires("input"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const chat = await body(c, chatBody);
  const messages = chat.messages ?? (chat.message === undefined ? [] : [chat.message]);
  const branch = (await run(stub.op("chatBranch", chat.id))).conversationId;
  const user = newestUserMessage(messages);
  const plan = await planOf(stub, branch, chat.trigger, user, "chat");
  if (plan.kind === "continue" && branch === undefined)
    throw new Problem("invalid_body", "messages holds no user message", "messages");
  // Images only for a model that takes them (415 naming the part and the model), checked before anything is written.
  if (plan.kind !== "continue") await checkImagesFor(c.env, stub, branch ?? "root", plan.read);
  // Answers belong to the branch as it is; an edit or a regeneration leaves them behind with the old branch.
  const answering = plan.kind === "fork" || branch === undefined ? [] : messages;
  const after = user?.index ?? -1;
  const approvals = branch === undefined ? [] : await checkApprovals(stub, branch, answeredApprovals(answering, after));
  const answers: Answer[] = [
    ...approvals.map((approval) => ({
      id: approval.id,
      toolCallId: approval.toolCallId,
      answer: approvalAnswer(approval),
    })),
    ...(branch === undefined ? [] : await clientAnswers(stub, branch, toolOutputs(answering, after))),
  ];
  if (user === undefined && answers.length === 0)
    throw new Problem("invalid_body", "messages holds no user message and answers nothing", "messages");
  let inputId: Id | undefined;
  let conversation: Id;
  if (plan.kind === "continue") {
    conversation = branch ?? 0;
    inputId = plan.inputId;
  } else {
    // A new chat starts its own conversation (a fork of the root at "start"); an edit or a regeneration forks the
    // branch just before the user entry it replaces. The input is admitted before the fork is made.
    const target = { env: c.env, payer: payerOf(c.get("claims")), stub, session: sessionParam(c), chatId: chat.id };
    const accepted = await acceptPlan({ ...target, branch, protocol: "chat" }, plan, {
      requestHash: await inputHash(plan.read),
    });
    conversation = accepted.conversationId;
    inputId = accepted.inputId;
  }
  // Entries committed after this belong to the continuation an answer lets run.
  let since: Id | undefined;
  if (answers.length > 0) {
    since = (await run(stub.op("summary"))).lastSeq;
    for (const answer of answers) await run(stub.op("answerPending", answer.id, answer.answer));
  }
  // A user's stream is held like a watch (http/routes/watch.ts `userWatcher`): a revocation or an erasure ends it at
  // once, its token's expiry too; the turn goes on.
  const watcher = await userWatcher(c);
  return stub.fetch(
    new Request(`https://session.internal/chat/${conversation}`, {
      method: "POST",
      body: JSON.stringify(
        inputId === undefined
          ? { mode: "live" }
          : {
              mode: "input",
              inputId,
              ...(since === undefined ? {} : { after: since }),
              skip: answers.map((answer) => answer.id),
              known: answers.map((answer) => answer.toolCallId),
            },
      ),
      signal: c.req.raw.signal,
      ...(watcher === undefined ? {} : { headers: { [WATCHER_HEADER]: JSON.stringify(watcher) } }),
    }),
  );
});

/** The conversation the path's chat id points at (undefined: a chat with no message yet). */
async function pointedAt(c: AppContext): Promise<Id | undefined> {
  return (await run(session(c).op("chatBranch", c.req.param("conversation") ?? ""))).conversationId;
}

/**
 * A resume is a watch of the live turn: a user's is recorded with the directory like a watch's (http/routes/watch.ts
 * `userWatcher`), so it ends at its token's expiry and when the user's tokens are revoked or the user is erased.
 */
chatRoutes.get("/:session/chat/:conversation/stream", requires("conversation"), async (c) => {
  query(c, noQuery);
  const id = await pointedAt(c);
  if (id === undefined) return c.body(null, 204);
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
  query(c, noQuery);
  const ref = await pointedAt(c);
  if (ref === undefined) return c.json([]);
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
