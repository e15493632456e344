/**
 * The ownership chain of a conversation, outermost first (root ... conversation): what scoped hook
 * handlers are resolved against (§8.7). Depth reads through owner links, never history.
 */
import type { Call } from "../core/call.js";
import type { TaskRuntime } from "../core/runtime.js";
import type { Id } from "../storage/records.js";

export async function ownershipChain(
  runtime: Pick<TaskRuntime, "conversation" | "getTask">,
  conversationId: Id,
  call: Call,
): Promise<Id[]> {
  const chain: Id[] = [];
  let current: Id | undefined = conversationId;
  while (current !== undefined && !chain.includes(current)) {
    chain.unshift(current);
    const handle = await runtime.conversation(current, call);
    const owner = handle?.record.owner;
    if (owner === undefined) break;
    current = (await runtime.getTask(owner, call))?.conversationId;
  }
  return chain;
}
