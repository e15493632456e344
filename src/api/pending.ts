/**
 * Wire schemas of the pending list (docs/api.md "Pending"; part of the wire-schema module, so the OpenAPI
 * document covers them): the `{pendingId}` path parameter, the answer bodies of
 * `POST /v1/sessions/{session}/pending/{pendingId}` by item type, and the list and answer responses.
 */
import { z } from "zod";
import { jsonValue } from "./responses.js";

/**
 * An item's id names its task, type and the session's incarnation: `t12-approval-{incarnation}`, `t12-client-{incarnation}`
 * (`t12-approval` in a session created before incarnations).
 */
export const pendingIdParam = z
  .string()
  .regex(
    /^t[1-9][0-9]{0,15}-(approval|client)(-[0-9a-v]{10})?$/,
    "a pending item's id is t<task>-approval-<incarnation> or t<task>-client-<incarnation>",
  );

/** The answer to an approval: approve or deny, with an optional reason the model sees on a denial. */
export const approvalAnswerBody = z.strictObject({
  approve: z.boolean({ error: "approve is true or false" }),
  reason: z.string().max(4096, "reason is at most 4096 characters").optional(),
});

/**
 * The answer to a client tool: its output (a string is the text; anything else is shown as JSON) and whether it is an
 * error.
 */
export const clientAnswerBody = z.strictObject({
  output: jsonValue,
  isError: z.boolean({ error: "isError is true or false" }).optional(),
});

/** Either answer (the item's type, named by its id, decides which it must be). */
export const pendingAnswerBody = z.union([approvalAnswerBody, clientAnswerBody]);

export const pendingItemOut = z.strictObject({
  id: z.string(),
  type: z.enum(["client_tool", "approval"]),
  taskId: z.number().int(),
  conversationId: z.number().int(),
  name: z.string(),
  arguments: z.record(z.string(), jsonValue),
  createdAt: z.number(),
  deadline: z.number().optional(),
});

export const pendingListResponse = z.strictObject({ items: z.array(pendingItemOut) });

export const pendingAnsweredResponse = z.strictObject({ id: z.string(), answer: jsonValue, at: z.number() });

export type PendingItemResponse = z.infer<typeof pendingItemOut>;
export type PendingListResponse = z.infer<typeof pendingListResponse>;
export type PendingAnsweredResponse = z.infer<typeof pendingAnsweredResponse>;
/** An answer: `{ approve, reason? }` for an approval, `{ output, isError? }` for a client tool. */
export type PendingAnswerBody = z.input<typeof approvalAnswerBody> | z.input<typeof clientAnswerBody>;
