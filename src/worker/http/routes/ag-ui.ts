/**
 * AG-UI 1.0 over HTTP + SSE (docs/api.md "AG-UI"): `POST /v1/sessions/{session}/ag-ui` takes `RunAgentInput` and
 * streams the run's AG-UI events. `threadId` names a chat: a pointer to a branch (session/chat-ops.ts). The last user
 * message of `messages` follows the chat route's rule (chat-plan.ts): new, it is the run's input, accepted once under
 * its message id (a run sent again is the same input, never a second turn: it streams what the page does not hold
 * yet); accepted with another text, an edit on a fork the thread moves to; `forwardedProps.trigger:
 * "regenerate-message"` runs its answer again on a fork. A run whose page lacks messages the thread holds (or that
 * moved the thread) starts with `MESSAGES_SNAPSHOT`. `resume[]` answers the pending approvals a previous
 * run's `interrupt` outcome named; a tool message answers a pending client tool by its tool call id. The page's
 * `tools` are client tools of the turn the input starts (kinds/run-tools.ts). Everything is checked before
 * anything is written: the conversation, the page's tools (a name a selected or built-in tool has is 422
 * `invalid_tool`), the answers against the durable pending list (a second answer is its 409 `already_answered`).
 *
 * The events come from the conversation's durable watch (the session object's SSE watch, folded with the core
 * reducer; frontends/ag-ui-events.ts), so every token sent was committed; the run ends with `RUN_FINISHED` (`success`;
 * `interrupt` while an approval waits; `success` with `pendingToolCallIds` while a client tool waits; `cancelled`
 * after an abort) or `RUN_ERROR` (the turn failed).
 */
import { Hono } from "hono";
import { compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";
import { streamSSE } from "hono/streaming";
import type { SSEStreamingApi } from "hono/streaming";
import { applyMessage } from "../../../core/watch-reduce.js";
import type { ConversationEvent, ConversationView } from "../../../core/watch-types.js";
import { bindTo } from "../../../core/state.js";
import type { InputResult } from "../../../core/inbox.js";
import { addressKey } from "../../../storage/shared.js";
import { parsePendingId, pendingHere, type PendingItem } from "../../../kinds/pending-types.js";
import { runAgentInput, type AgUiMessage, type AgUiResume, type RunAgentInputBody } from "../../../api/ag-ui.js";
import { requires, ROLE_CAPABILITIES, type AppEnv } from "../../identity/auth.js";
import { payerOf } from "../../limits/admission.js";
import { Problem } from "../../problems.js";
import { noQuery } from "../../schemas.js";
import type { Entry, Id, JsonObject, JsonValue, Task } from "../../../storage/records.js";
import type { OfferedTool } from "../../../kinds/catalog-types.js";
import { builtinTools } from "../../session/kinds.js";
import type { SessionRpc } from "../../session/rpc.js";
import {
  AgUiTurn,
  type AgUiEvent,
  type AgUiInterrupt,
  type AgUiOutcome,
  type Held,
} from "../../frontends/ag-ui-events.js";
import { readSseMessages } from "../../frontends/ag-ui-sse.js";
import { agUiMessages, type AgUiMessageOut } from "../../frontends/ag-ui-messages.js";
import { agUiUserContent, readAgUiContent } from "../../frontends/content-parts.js";
import { acceptPlan, planOf, type Trigger } from "./chat-plan.js";
import { checkImagesFor } from "./model-inputs.js";
import { userWatcher } from "./watch.js";
import { WATCHER_HEADER } from "../../watch/guard.js";
import { body, query, run, session, sessionParam, type AppContext } from "./shared.js";

export const agUiRoutes = new Hono<AppEnv>();

function textOf(content: string | readonly { readonly text: string }[]): string {
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}

/** What the page holds: its messages' ids, tool calls and tool results. */
function heldOf(messages: readonly AgUiMessage[]): Held {
  const ids = new Set<string>();
  const calls = new Set<string>();
  const results = new Set<string>();
  for (const message of messages) {
    ids.add(message.id);
    if (message.role === "assistant") for (const call of message.toolCalls ?? []) calls.add(call.id);
    if (message.role === "tool") results.add(message.toolCallId);
  }
  return { messages: ids, toolCalls: calls, toolResults: results };
}

/** The tool call id of a pending item's tool task (its state's `call`, kinds/states.ts). */
function callIdOf(tasks: readonly Task[], item: PendingItem): string | undefined {
  const task = tasks.find((t) => t.id === item.taskId);
  const call = task?.state["call"];
  if (call === null || typeof call !== "object" || Array.isArray(call)) return undefined;
  const id = (call as { id?: unknown }).id;
  return typeof id === "string" ? id : undefined;
}

interface PlannedAnswer {
  readonly id: string;
  readonly answer: JsonValue;
}

/**
 * The answers this run carries, checked against the conversation's pending list (read only): each resume entry must
 * name a pending approval; a tool message answers the pending client tool of its tool call id (a tool message for
 * anything else is the page's copy of a settled result, and is ignored).
 */
async function plannedAnswers(
  stub: SessionRpc,
  input: RunAgentInputBody,
  ref: "root" | number,
): Promise<readonly PlannedAnswer[]> {
  const resume = input.resume ?? [];
  const tools = input.messages.filter((m) => m.role === "tool");
  if (resume.length === 0 && tools.length === 0) return [];
  const items = await run(stub.op("pending", ref));
  const out: PlannedAnswer[] = [];
  const elsewhere =
    resume.length === 0 ? new Set<string>() : new Set((await run(stub.op("pending", null))).map((item) => item.id));
  for (const [index, entry] of resume.entries()) {
    // An approval no longer listed is still answered through the pending list, which refuses it with what
    // happened (409 `already_answered` with the first answer, `pending_closed`) and writes nothing; one waiting in
    // another conversation is not this thread's to answer.
    const listed = items.some((i) => i.id === entry.interruptId);
    if (!listed && (parsePendingId(entry.interruptId)?.type !== "approval" || elsewhere.has(entry.interruptId)))
      throw new Problem(
        "pending_not_found",
        `no approval of this thread is pending under ${entry.interruptId}`,
        `resume.${index}.interruptId`,
      );
    const answer = resumeAnswer(entry);
    if (!listed) {
      // Left the list: the same answer again is a resend (left out); another is the answer path's refusal.
      try {
        await run(stub.op("answerPending", entry.interruptId, answer));
      } catch (error) {
        if (error instanceof Problem && error.code === "already_answered" && sameAnswer(error.extra["answer"], answer))
          continue;
        throw error;
      }
    }
    out.push({ id: entry.interruptId, answer });
  }
  const clients = items.filter((i) => i.type === "client_tool");
  if (clients.length === 0 || tools.length === 0) return out;
  const { tasks } = await run(stub.op("snapshot", ref));
  for (const item of clients) {
    const callId = callIdOf(tasks, item);
    const message = tools.find((m) => m.role === "tool" && m.toolCallId === callId);
    if (callId === undefined || message === undefined || message.role !== "tool") continue;
    const output = textOf(message.content);
    out.push({ id: item.id, answer: message.error === undefined ? { output } : { output, isError: true } });
  }
  return out;
}

function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** An approval's answer from a resume entry: any payload but `false` or `{ approve: false }` approves. */
function resumeAnswer(entry: AgUiResume): JsonValue {
  if (entry.status === "cancelled") return { approve: false, reason: "cancelled by the page" };
  const payload = entry.payload;
  const approve = payload !== false && !(isRecord(payload) && payload["approve"] === false);
  const reason =
    isRecord(payload) && typeof payload["reason"] === "string" ? payload["reason"].slice(0, 2000) : undefined;
  return reason === undefined ? { approve } : { approve, reason };
}

function sameAnswer(recorded: unknown, answer: JsonValue): boolean {
  return isRecord(recorded) && isRecord(answer) && recorded["approve"] === answer["approve"];
}

const BUILTIN_NAMES = new Set(builtinTools.map((tool) => tool.name));

/**
 * The page's tools as client tools of the run's turn (kinds/run-tools.ts): a name the session selects or a built-in
 * tool has is 422 `invalid_tool` (a page tool never shadows one), as is a name given twice or parameters that do not
 * compile with the validator the call's arguments are checked with.
 */
function pageTools(input: RunAgentInputBody, selected: ReadonlySet<string>): OfferedTool[] {
  const seen = new Set<string>();
  return input.tools.map((tool, index) => {
    const at = `tools.${index}.name`;
    if (selected.has(tool.name) || BUILTIN_NAMES.has(tool.name))
      throw new Problem(
        "invalid_tool",
        `the session has a tool named ${tool.name}; a page tool needs another name`,
        at,
      );
    if (seen.has(tool.name)) throw new Problem("invalid_tool", `the page offers ${tool.name} twice`, at);
    seen.add(tool.name);
    const parameters: JsonObject =
      tool.parameters === undefined || Object.keys(tool.parameters).length === 0
        ? { type: "object", properties: {} }
        : (tool.parameters as JsonObject);
    try {
      compile(parameters, { formats, coerce: true });
    } catch (error) {
      throw new Problem(
        "invalid_tool",
        `parameters: the schema does not compile: ${error instanceof Error ? error.message : String(error)}`,
        `tools.${index}.parameters`,
      );
    }
    return { name: tool.name, description: tool.description, parameters };
  });
}

/** The AG-UI protocol version this route speaks (`RUN_STARTED.protocolVersion`). */
export const AG_UI_PROTOCOL_VERSION = "1.0";

/**
 * How a run asks for what it does: `forwardedProps.trigger: "regenerate-message"` runs the answer to its newest user
 * message again (on a fork the thread moves to); anything else submits (AG-UI has no trigger of its own).
 */
function triggerOf(input: RunAgentInputBody): Trigger {
  const props = input.forwardedProps;
  return isRecord(props) && props["trigger"] === "regenerate-message" ? "regenerate-message" : "submit-message";
}

agUiRoutes.post("/:session/ag-ui", requires("input"), async (c) => {
  const stub = session(c);
  query(c, noQuery);
  const input = await body(c, runAgentInput);
  const claims = c.get("claims");
  // The thread id names a chat: a pointer to a branch (session/chat-ops.ts); a new one has no conversation yet.
  const branch = (await run(stub.op("chatBranch", input.threadId))).conversationId;
  // The conversation's config (404 for a conversation that does not exist); the page's tools may not shadow a
  // selected tool.
  const config = await run(stub.op("getConfig", branch ?? "root"));
  const runTools = pageTools(input, new Set(config.selectedTools ?? []));
  const trigger = triggerOf(input);
  const users = input.messages.filter((m) => m.role === "user");
  const user = users[users.length - 1];
  if ((user === undefined || user.role !== "user") && trigger === "submit-message") {
    // A page loading its thread: what the thread holds, and how the last run stands.
    if ((input.resume ?? []).length > 0 || input.messages.some((m) => m.role === "tool"))
      throw new Problem("invalid_body", "messages: answers need the run's user message", "messages");
    return snapshotRun(c, stub, input, branch);
  }
  // Text and images, read by the frontends' one reader (415/413 naming the part).
  const read =
    user === undefined || user.role !== "user"
      ? undefined
      : readAgUiContent(user.content, `messages.${input.messages.indexOf(user)}.content`);
  const newest = user === undefined || read === undefined ? undefined : { id: user.id, text: read.text, read };
  // The same rule as the chat route's (chat-plan.ts): a continuation, a new input, or an edit or a regeneration on a
  // fork the thread moves to.
  const plan = await planOf(stub, branch, trigger, newest, "ag-ui");
  // Images only for a model that takes them (415 naming the part and the model), checked before anything is written.
  if (plan.kind !== "continue") await checkImagesFor(c.env, stub, branch ?? "root", plan.read);
  // Answers belong to the branch as it is; an edit or a regeneration leaves them behind with the old branch.
  const answers = branch === undefined || plan.kind === "fork" ? [] : await plannedAnswers(stub, input, branch);
  if (answers.length > 0 && claims.role !== "user" && !ROLE_CAPABILITIES[claims.role].has("pending"))
    throw new Problem("forbidden", `role ${claims.role} may not answer pending items (needs pending)`);
  let inputId: Id | undefined;
  let conversation: Id;
  if (plan.kind === "continue") {
    if (branch === undefined) throw new Problem("invalid_body", "messages holds no user message", "messages");
    conversation = branch;
    inputId = plan.inputId;
  } else {
    // The input first: admitted (limits, key, busy) before any answer it carries is recorded, and before the fork a
    // new thread, an edit or a regeneration moves the thread to, so a refusal records and makes nothing.
    const target = { env: c.env, payer: payerOf(claims), stub, session: sessionParam(c), chatId: input.threadId };
    const accepted = await acceptPlan({ ...target, branch, protocol: "ag-ui" }, plan, {
      requestHash: await sha256(JSON.stringify({ input: plan.read.input })),
      ...(runTools.length === 0 ? {} : { runTools }),
    });
    conversation = accepted.conversationId;
    inputId = accepted.inputId;
  }
  for (const answer of answers) await run(stub.op("answerPending", answer.id, answer.answer));
  // A continuation of a message sent another way (no input of this thread's to follow): the thread as it stands.
  if (inputId === undefined) return snapshotRun(c, stub, input, conversation);
  // The page's list lacks what the server holds (another tab, a reload, a page that kept no history), or the run moved
  // the thread to a fork: the run starts with the thread's messages, and the page's own new message if it is queued.
  // What comes before the input's user entry is the snapshot's; the input's turn streams as events.
  let held = heldOf(input.messages);
  let snapshot: AgUiMessageOut[] | undefined;
  const placedAt = entryOf((await run(stub.op("input", inputId))).result);
  const before = (await entriesOf(stub, conversation)).filter((entry) => placedAt === undefined || entry.id < placedAt);
  const shown = agUiMessages(before);
  if (plan.kind === "fork" || lacks(held, shown)) {
    const sent = plan.kind === "continue" ? newest?.read.input : plan.read.input;
    snapshot =
      newest === undefined || sent === undefined
        ? shown
        : [...shown, { id: newest.id, role: "user", content: agUiUserContent(sent) }];
    held = withHeld(held, snapshot);
  }
  // A user's run is held like a watch (http/routes/watch.ts `userWatcher`): a revocation or an erasure ends the
  // upstream watch at once, and with it the run (RUN_ERROR); the turn goes on.
  const watcher = await userWatcher(c);
  const upstream = await stub.fetch(
    new Request(`https://session.internal/watch/${conversation}`, {
      signal: c.req.raw.signal,
      ...(watcher === undefined ? {} : { headers: { [WATCHER_HEADER]: JSON.stringify(watcher) } }),
    }),
  );
  if (!upstream.ok || upstream.body === null) return upstream;
  const source = upstream.body;
  const answered = new Set(answers.map((a) => a.id));
  const following = inputId;
  return streamSSE(c, async (stream) => {
    const reader = source.getReader();
    stream.onAbort(() => void reader.cancel().catch(() => undefined));
    const send = (event: AgUiEvent): Promise<void> => stream.writeSSE({ data: JSON.stringify(event) });
    await send(runStarted(input));
    if (snapshot !== undefined) await send({ type: "MESSAGES_SNAPSHOT", messages: snapshot });
    try {
      const end = await follow(stub, reader, following, held, answered, stream, send);
      await send(
        end.type === "error"
          ? { type: "RUN_ERROR", message: end.message, code: end.code }
          : { type: "RUN_FINISHED", threadId: input.threadId, runId: input.runId, outcome: end.outcome },
      );
    } catch (error) {
      if (!stream.aborted)
        await send({ type: "RUN_ERROR", message: error instanceof Error ? error.message : "the run failed" });
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  });
});

/** The user entry of an input's result (undefined while it is queued). */
function entryOf(result: InputResult): Id | undefined {
  return result.status === "queued" ? undefined : result.entry;
}

/** Whether the page's list lacks a message the server shows (a tool result counts by its tool call id). */
function lacks(held: Held, shown: readonly AgUiMessageOut[]): boolean {
  return shown.some((message) => {
    switch (message.role) {
      case "user":
        return !held.messages.has(message.id);
      case "assistant":
        return (
          !held.messages.has(message.id) &&
          !(message.toolCalls !== undefined && message.toolCalls.every((call) => held.toolCalls.has(call.id)))
        );
      case "tool":
        return !held.toolResults.has(message.toolCallId) && !held.messages.has(message.id);
      default: {
        const never: never = message;
        return never;
      }
    }
  });
}

/** What the page holds once it applied `snapshot` (it replaces the page's list). */
function withHeld(held: Held, snapshot: readonly AgUiMessageOut[]): Held {
  const messages = new Set(held.messages);
  const toolCalls = new Set(held.toolCalls);
  const toolResults = new Set(held.toolResults);
  for (const message of snapshot) {
    messages.add(message.id);
    if (message.role === "assistant") for (const call of message.toolCalls ?? []) toolCalls.add(call.id);
    if (message.role === "tool") toolResults.add(message.toolCallId);
  }
  return { messages, toolCalls, toolResults };
}

/** Every entry of conversation `ref`, page by page. */
async function entriesOf(stub: SessionRpc, ref: Id): Promise<Entry[]> {
  const entries: Entry[] = [];
  let cursor: Id | undefined;
  for (;;) {
    const page = await run(
      stub.op("entries", ref, { limit: PAGE, ...(cursor === undefined ? {} : { after: cursor }) }),
    );
    entries.push(...page.items);
    if (page.next === undefined) return entries;
    cursor = page.next;
  }
}

function runStarted(input: RunAgentInputBody): AgUiEvent {
  return {
    type: "RUN_STARTED",
    threadId: input.threadId,
    runId: input.runId,
    protocolVersion: AG_UI_PROTOCOL_VERSION,
    ...(input.parentRunId === undefined ? {} : { parentRunId: input.parentRunId }),
  };
}

/** Entries read per page for a snapshot. */
const PAGE = 200;

/**
 * A run without a new user message (a page loading its thread): `RUN_STARTED`, `MESSAGES_SNAPSHOT` of the thread's
 * branch, and `RUN_FINISHED` (`interrupt` naming the approvals that wait, else `success`). Writes nothing.
 */
async function snapshotRun(
  c: AppContext,
  stub: SessionRpc,
  input: RunAgentInputBody,
  branch: number | undefined,
): Promise<Response> {
  const entries: Entry[] = [];
  let pending: PendingItem[] = [];
  let tasks: readonly Task[] = [];
  if (branch !== undefined) {
    entries.push(...(await entriesOf(stub, branch)));
    pending = await run(stub.op("pending", branch));
    tasks = (await run(stub.op("snapshot", branch))).tasks;
  }
  const approvals = pending.filter((item) => item.type === "approval");
  return streamSSE(c, async (stream) => {
    const send = (event: AgUiEvent): Promise<void> => stream.writeSSE({ data: JSON.stringify(event) });
    await send(runStarted(input));
    await send({ type: "MESSAGES_SNAPSHOT", messages: agUiMessages(entries) });
    await send({
      type: "RUN_FINISHED",
      threadId: input.threadId,
      runId: input.runId,
      outcome:
        approvals.length > 0
          ? { type: "interrupt", interrupts: approvals.map((item) => interruptOfTasks(tasks, item)) }
          : { type: "success" },
    });
  });
}

type RunEnd =
  | { readonly type: "finished"; readonly outcome: AgUiOutcome }
  | { readonly type: "error"; readonly message: string; readonly code: string };

/** The pending items of the watched conversation, as its view holds them. */
function pendingOf(view: ConversationView): readonly PendingItem[] {
  const value = view.values[addressKey(bindTo(pendingHere, view.conversation.id))];
  return Array.isArray(value) ? (value as unknown as PendingItem[]) : [];
}

function interruptOf(view: ConversationView, item: PendingItem): AgUiInterrupt {
  return interruptOfTasks(view.tasks, item);
}

function interruptOfTasks(tasks: readonly Task[], item: PendingItem): AgUiInterrupt {
  const callId = callIdOf(tasks, item);
  return {
    id: item.id,
    reason: "tool_approval",
    message: `approve the call of ${item.name}?`,
    ...(callId === undefined ? {} : { toolCallId: callId }),
    responseSchema: {
      type: "object",
      properties: { approve: { type: "boolean" }, reason: { type: "string" } },
      required: ["approve"],
    },
    ...(item.deadline === undefined ? {} : { expiresAt: new Date(item.deadline).toISOString() }),
  };
}

/** How a terminal input result ends the run. */
function endOf(result: InputResult): RunEnd | undefined {
  switch (result.status) {
    case "queued":
    case "placed":
      return undefined;
    case "done":
      return { type: "finished", outcome: { type: "success" } };
    case "unanswered":
      switch (result.reason) {
        case "aborted":
          return { type: "finished", outcome: { type: "cancelled" } };
        case "terminated":
          return { type: "error", message: result.detail ?? "the turn was terminated", code: "turn_terminated" };
        case "failed":
          return { type: "error", message: result.detail ?? "the turn failed", code: "turn_failed" };
        default: {
          const never: never = result.reason;
          return never;
        }
      }
    default: {
      const never: never = result;
      return never;
    }
  }
}

/** Whether the view has caught up with a terminal result: its answer entry, or no turn task left. */
function caughtUp(view: ConversationView, result: InputResult): boolean {
  if (result.status === "done" && result.answer !== undefined) {
    const answer = result.answer;
    return view.entries.some((entry) => entry.id >= answer);
  }
  return view.tasks.every((task) => task.turn !== true);
}

/**
 * Follow the conversation's watch until the input's run ends: send the events each folded message adds, and answer
 * how it ended. The input's result is read again after each commit that may change it (not after preview output).
 */
async function follow(
  stub: SessionRpc,
  reader: ReadableStreamDefaultReader<Uint8Array>,
  inputId: number,
  held: Held,
  answered: ReadonlySet<string>,
  stream: SSEStreamingApi,
  send: (event: AgUiEvent) => Promise<void>,
): Promise<RunEnd> {
  const turn = new AgUiTurn(held);
  let view: ConversationView | undefined;
  let result: InputResult | undefined;
  for await (const message of readSseMessages(reader)) {
    if (stream.aborted) return { type: "error", message: "the page went away", code: "disconnected" };
    if (message.type === "comment") {
      await stream.write(": keep-alive\n\n");
      continue;
    }
    let check = false;
    if (message.event === "view") {
      view = JSON.parse(message.data) as ConversationView;
      check = true;
    } else if (message.event === "commit" && view !== undefined) {
      const commit = JSON.parse(message.data) as { seq: number; events: ConversationEvent[] };
      view = applyMessage(view, commit);
      check = commit.events.some((event) => event.type !== "task_output");
    }
    if (view === undefined) continue;
    if (check || result === undefined) {
      result = (await run(stub.op("input", inputId))).result;
      if (result.status === "placed") turn.placed(result.entry);
      if (result.status === "done") turn.placed(result.entry, result.answer);
      if (result.status === "unanswered" && result.entry !== undefined) turn.placed(result.entry);
    }
    for (const event of turn.update(view)) await send(event);
    const end = endOf(result);
    if (end !== undefined) {
      if (!caughtUp(view, result)) continue;
      for (const event of turn.close()) await send(event);
      return end;
    }
    const waiting = pendingOf(view).filter((item) => !answered.has(item.id));
    if (check && waiting.length > 0) {
      for (const event of turn.close()) await send(event);
      const approvals = waiting.filter((item) => item.type === "approval");
      if (approvals.length > 0)
        return {
          type: "finished",
          outcome: {
            type: "interrupt",
            interrupts: approvals.map((item) => interruptOf(view as ConversationView, item)),
          },
        };
      const ids = waiting.flatMap((item) => callIdOf(view?.tasks ?? [], item) ?? []);
      return { type: "finished", outcome: { type: "success", pendingToolCallIds: ids } };
    }
  }
  return { type: "error", message: "the session closed the watch", code: "watch_closed" };
}
