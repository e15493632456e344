/**
 * The pending list's writes (types in pending-types.ts): one helper adds an item to both sticky values
 * (the session's `pi.pending` and its conversation's `pi.pending`) and one removes it from both, always
 * in the commit that parks or unparks the waiting task, so the list and the tasks never disagree.
 */
import { bindTo } from "../core/state.js";
import type { TxBuilder } from "../core/tx.js";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";
import { pendingAll, pendingHere, type PendingItem, type PendingType } from "./pending-types.js";

/**
 * Change the session's and the conversation's lists in one write each: remove item `remove`, add (or
 * replace) `add`. A transaction reads stored values, not its own writes, so a commit changes the lists
 * through one call of this.
 */
export async function updatePending(
  b: TxBuilder,
  conversationId: Id,
  change: { readonly remove?: string; readonly add?: PendingItem },
): Promise<void> {
  const drop = (items: readonly PendingItem[]): PendingItem[] =>
    items.filter((i) => i.id !== change.remove && i.id !== change.add?.id);
  for (const spec of [pendingAll, bindTo(pendingHere, conversationId)]) {
    const items = (await b.value(spec).get()) ?? [];
    const next = [...drop(items), ...(change.add === undefined ? [] : [change.add])];
    if (next.length === 0) {
      if (items.length > 0) b.value(spec).delete();
    } else b.value(spec).set(next);
  }
}

/** An approval answer as recorded by the route; undefined when the value is not one. */
export function approvalAnswer(answer: JsonValue): { readonly approve: boolean; readonly reason?: string } | undefined {
  const value = objectOf(answer);
  if (value === undefined) return undefined;
  const approve = value["approve"];
  const reason = value["reason"];
  if (typeof approve !== "boolean") return undefined;
  return typeof reason === "string" ? { approve, reason } : { approve };
}

/** A client tool's answer as recorded by the route; undefined when the value is not one. */
export function clientAnswer(answer: JsonValue): { readonly output: JsonValue; readonly isError: boolean } | undefined {
  const value = objectOf(answer);
  if (value === undefined || !Object.hasOwn(value, "output")) return undefined;
  const output = value["output"];
  if (output === undefined) return undefined;
  return { output, isError: value["isError"] === true };
}

/** The type of answer an item takes, by its id's type. */
export function answerFits(type: PendingType, value: JsonValue): boolean {
  return type === "approval" ? approvalAnswer(value) !== undefined : clientAnswer(value) !== undefined;
}

function objectOf(value: JsonValue): JsonObject | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as JsonObject) : undefined;
}
