/**
 * Waiting input (§8.1; docs/api.md "Waiting input"): when an answer group ends without a final answer (failure,
 * terminate,
 * `onInterrupt: "fail"`), queued steer and followUp items are not consumed (§8.1) and reopen creates no
 * work by inference (§6.4), so nothing will place them until someone asks. They are recorded as waiting,
 * so a client can see it and continue explicitly, instead of finding them silently stuck:
 *
 * - `waitingInputs` (conversation value `pi.inbox.waiting`): the ids of the queued items that wait; the
 *   conversation snapshot marks each of them `waiting: true` and its watch sees the value change;
 * - `waitingConversations` (session value `pi.inbox.waiting`): the conversations holding waiting items,
 *   so a session watch gets a value event when one starts or stops waiting.
 *
 * Both are cleared in the commit that places the items into a new group (an explicit continue, an idle
 * accept, or any other boundary that lands them).
 */
import { queuedItems } from "../core/inbox.js";
import { bindTo, conversationValue, sessionValue } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id } from "../storage/records.js";

export const waitingInputs = conversationValue<Id[]>("pi.inbox.waiting", { rewind: false });
export const waitingConversations = sessionValue<Id[]>("pi.inbox.waiting");

/** The group ended without a final answer: record the queued steer/followUp items as waiting. */
export async function markWaiting(b: TxBuilder, conversationId: Id): Promise<void> {
  const ids = (await queuedItems(b, conversationId))
    .filter((item) => item.value.mode === "steer" || item.value.mode === "followUp")
    .map((item) => item.id);
  if (ids.length === 0) return;
  b.value(bindTo(waitingInputs, conversationId)).set(ids);
  const conversations = (await b.value(waitingConversations).get()) ?? [];
  if (!conversations.includes(conversationId))
    b.value(waitingConversations).set([...conversations, conversationId].sort((x, y) => x - y));
}

/** The conversation's queued items were placed into a group: nothing waits any more. One read when nothing did. */
export async function clearWaiting(b: TxBuilder, conversationId: Id): Promise<void> {
  if ((await b.value(bindTo(waitingInputs, conversationId)).get()) === undefined) return;
  b.value(bindTo(waitingInputs, conversationId)).delete();
  const conversations = (await b.value(waitingConversations).get()) ?? [];
  const rest = conversations.filter((id) => id !== conversationId);
  if (rest.length === 0) b.value(waitingConversations).delete();
  else b.value(waitingConversations).set(rest);
}
