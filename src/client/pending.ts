/**
 * The typed client's pending list (docs/api.md "Pending"): what waits for a person or the frontend, an
 * approval before a tool runs or a client tool's output. Reached from a session or a conversation:
 * `client.session("s").pending()`, `client.session("s").conversation("root").pending()`, and
 * `client.session("s").answer(id, body)`. A second answer fails with PicoApiError `already_answered`
 * whose `problem.answer` is the answer recorded first; an item closed by an abort or its deadline fails
 * with `pending_closed` (`problem.outcome`).
 *
 * @example
 * const { items } = await client.session("support").pending();
 * for (const item of items) {
 *   if (item.type === "approval") await client.session("support").answer(item.id, { approve: true });
 *   else await client.session("support").answer(item.id, { output: await runInBrowser(item.name, item.arguments) });
 * }
 */
import type { PendingAnswerBody, PendingAnsweredResponse, PendingListResponse } from "../api/pending.js";
import type { Requester } from "./inbound.js";

export type {
  PendingAnswerBody,
  PendingAnsweredResponse,
  PendingItemResponse,
  PendingListResponse,
} from "../api/pending.js";

/** The items of a session (`path` = `/v1/sessions/{session}`) or of one conversation (its path). */
export async function listPending(client: Requester, path: string): Promise<PendingListResponse> {
  return (await client.request<PendingListResponse>("GET", `${path}/pending`)).body;
}

/** Answer item `id` of the session at `path`, once. */
export async function answerPending(
  client: Requester,
  path: string,
  id: string,
  body: PendingAnswerBody,
): Promise<PendingAnsweredResponse> {
  return (await client.request<PendingAnsweredResponse>("POST", `${path}/pending/${encodeURIComponent(id)}`, { body }))
    .body;
}

/** The pending routes' client methods (CLIENT_OPERATIONS in client.ts). */
export const PENDING_CLIENT_OPERATIONS: Readonly<Record<string, string>> = {
  listPending: "SessionClient.pending",
  listConversationPending: "ConversationClient.pending",
  answerPending: "SessionClient.answer",
};
