/**
 * The pending list: every call that waits for a person or a frontend (an approval before a tool runs, a
 * client tool's output). One item per waiting call, kept in sticky session state so a watch carries it
 * and a page that reloads finds exactly what is waiting:
 *
 *   session value      pi.pending  = every item of the session
 *   conversation value pi.pending  = the items of that conversation (not inherited by forks)
 *
 * An answer is recorded as the waiting task's sticky `pico.wait` answer (src/core/answers.ts); the task
 * consumes it and removes the item in the commit that records what the answer caused.
 */
import { conversationValue, sessionValue } from "../core/state.js";
import type { Id, JsonObject, JsonValue } from "../storage/records.js";

export type PendingType = "approval" | "client_tool";

/** What the parked tool task keeps of its item. */
export type PendingRef = {
  id: string;
  type: PendingType;
  createdAt: number;
  deadline?: number;
};

export type PendingItem = PendingRef & {
  taskId: Id;
  conversationId: Id;
  name: string;
  arguments: JsonObject;
};

/** How an item left the list (kept on the tool task so a late answer is refused with what happened). */
export type PendingResolution = {
  id: string;
  type: PendingType;
  outcome: "answered" | "timeout" | "aborted";
  answer?: JsonValue;
  at: number;
};

/** The answers the pending route accepts, by item type. */
export type PendingAnswer =
  | { readonly type: "approval"; readonly approve: boolean; readonly reason?: string }
  | { readonly type: "client_tool"; readonly output: JsonValue; readonly isError?: boolean };

export const pendingAll = sessionValue<PendingItem[]>("pi.pending");
export const pendingHere = conversationValue<PendingItem[]>("pi.pending", { rewind: false });

/**
 * An item's id names its task, type and the session's incarnation (incarnation.ts): `t12-approval-{incarnation}`,
 * `t12-client-{incarnation}`; a session without an incarnation (created before them) has `t12-approval`.
 */
export function pendingId(taskId: Id, type: PendingType, incarnation: string | undefined): string {
  const id = `t${taskId}-${type === "approval" ? "approval" : "client"}`;
  return incarnation === undefined ? id : `${id}-${incarnation}`;
}

/** The task, type and incarnation an item id names; undefined for anything else. */
export function parsePendingId(
  id: string,
): { readonly taskId: Id; readonly type: PendingType; readonly incarnation?: string } | undefined {
  const match = /^t([1-9][0-9]{0,15})-(approval|client)(?:-([0-9a-v]{10}))?$/.exec(id);
  if (match === null) return undefined;
  return {
    taskId: Number(match[1]),
    type: match[2] === "approval" ? "approval" : "client_tool",
    ...(match[3] === undefined ? {} : { incarnation: match[3] }),
  };
}
