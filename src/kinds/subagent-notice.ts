/**
 * The completion notice of a delegated subagent (§8.3 delegation, §8.6 "learns of it without polling").
 * A `subagent` call that ran past its blocking budget settles with `delegated: <child conversation>`; its
 * settlement records a sticky notice request keyed by the child (which input it waits for, where to
 * report), or, when that input has already resolved, places the notice itself. The commit that resolves
 * the input (the child's final answer, or its group ending unanswered) consumes the request and appends
 * the notice to the parent in the same commit, so the parent hears of it once, whichever comes first.
 *
 * The notice is a built-in `notice` entry (§2.1) with a stored SystemMessage the parent's next
 * generation reads; it is written with `write` (appended now when the parent is idle, else placed at its
 * next boundary, §5.8).
 */
import type { SystemMessage } from "@earendil-works/pi-ai";
import { noticeEntry, noticeKind } from "../core/entries.js";
import { bindResult, type InputResult } from "../core/inbox.js";
import { sessionValue, withKey } from "../core/state.js";
import { conversationTx, type TxBuilder } from "../core/tx.js";
import type { Entry, Id, JsonObject } from "../storage/records.js";

/** A sticky request for a delegated subagent's notice: set by the delegating call's settlement. */
export interface SubagentNoticeRequest extends JsonObject {
  /** The parent conversation the call ran in: where the notice goes. */
  conversationId: Id;
  /** The tool call whose result said "still running as subagent N". */
  callId: string;
  /** The child's input the call was waiting for. */
  inputId: Id;
}

const subagentNotices = sessionValue<SubagentNoticeRequest>("pi.subagent.notice");

/** The notice request of a child conversation (one per child: a later delegation replaces it). */
export function subagentNoticeRequest(child: Id) {
  return withKey(subagentNotices, String(child));
}

/** Characters of the child's answer a notice carries (its tail). */
const NOTICE_TAIL_CHARS = 2000;

/**
 * Delegation settlement (§8.3) of a subagent call, in the settling commit: if the child's input is still
 * open, request its notice; if it already resolved, place the notice now. Either way, one notice.
 */
export async function delegateSubagentNotice(
  b: TxBuilder,
  conversationId: Id,
  child: Id,
  inputId: Id,
  callId: string,
): Promise<void> {
  const result = await b.value(bindResult(child, inputId)).get();
  if (result !== undefined && (result.status === "done" || result.status === "unanswered")) {
    await appendSubagentNotice(b, conversationId, child, inputId, result);
    return;
  }
  b.value(subagentNoticeRequest(child)).set({ conversationId, callId, inputId });
}

/**
 * Called where an input's group resolves (placement.ts): when the resolved input is the one a delegated
 * call waits for, consume the request and append the notice, in the resolving commit. Only an owned
 * conversation (a subagent) can have a request, so other conversations pay one cached record read.
 */
export async function consumeSubagentNotice(
  b: TxBuilder,
  conversationId: Id,
  inputId: Id,
  result: Extract<InputResult, { status: "done" | "unanswered" }>,
): Promise<void> {
  const record = await b.getConversation(conversationId);
  if (record?.owner === undefined) return;
  const addr = subagentNoticeRequest(conversationId);
  const request = await b.value(addr).get();
  if (request?.inputId !== inputId) return;
  b.value(addr).delete();
  await appendSubagentNotice(b, request.conversationId, conversationId, inputId, result);
}

async function appendSubagentNotice(
  b: TxBuilder,
  parent: Id,
  child: Id,
  inputId: Id,
  result: Extract<InputResult, { status: "done" | "unanswered" }>,
): Promise<void> {
  let body: string;
  switch (result.status) {
    case "done": {
      const answer = result.answer === undefined ? undefined : await entryInBatch(b, result.answer);
      const text = answer === undefined ? "" : entryText(answer);
      const tail = text.length > NOTICE_TAIL_CHARS ? text.slice(text.length - NOTICE_TAIL_CHARS) : text;
      body =
        tail === ""
          ? `Subagent ${child} answered input ${inputId} without text. Use subagent wait with id ${child} for its answer.`
          : `Subagent ${child} answered input ${inputId}${tail.length < text.length ? ` (last ${tail.length} characters)` : ""}:\n${tail}`;
      break;
    }
    case "unanswered":
      body = `Subagent ${child} did not answer input ${inputId}: ${result.reason}${result.detail === undefined ? "" : ` (${result.detail})`}.`;
      break;
    default: {
      const never: never = result;
      throw new Error(`unknown input result ${JSON.stringify(never)}`);
    }
  }
  const message: SystemMessage = { role: "system", content: body, timestamp: b.now() };
  conversationTx(b, parent).write(
    noticeKind,
    noticeEntry({ subagent: { id: child, inputId, status: result.status } }, message),
  );
}

/** An entry written earlier in this batch (an answer lands in the commit that resolves its input), or committed. */
async function entryInBatch(b: TxBuilder, id: Id): Promise<Entry | undefined> {
  for (const write of b.writes) if (write.type === "entry" && write.entry.id === id) return write.entry;
  return b.getEntry(id);
}

/** The text parts of an entry's model messages, joined (a subagent's answer as plain text). */
export function entryText(entry: Entry): string {
  const parts: string[] = [];
  for (const message of entry.model ?? []) {
    const content = (message as { content?: unknown }).content;
    if (typeof content === "string") parts.push(content);
    else if (Array.isArray(content)) {
      for (const part of content as { type?: unknown; text?: unknown }[])
        if (part.type === "text" && typeof part.text === "string") parts.push(part.text);
    }
  }
  return parts.join("");
}
