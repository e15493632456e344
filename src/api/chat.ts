/**
 * Wire schemas of the AI SDK chat routes (docs/frontends.md; `ai` 7's `DefaultChatTransport`): the POST body
 * `{ id, messages, trigger, messageId }` (plus the page's own `body` fields, kept and ignored), the UI
 * messages and parts this service reads, and `GET .../chat/{conversation}/messages`' answer.
 */
import { z } from "zod";
import { jsonValue } from "./responses.js";

/** A part of a UI message: its `type`, everything else as the page sent it. */
export const uiPart = z.looseObject({ type: z.string().min(1).max(200) });

export const uiMessage = z.looseObject({
  id: z.string().max(200),
  role: z.enum(["system", "user", "assistant"]),
  parts: z.array(uiPart).max(10_000),
});
export type UiMessageBody = z.output<typeof uiMessage>;

/**
 * `POST /v1/sessions/{session}/chat`: the chat id names a pointer to a branch (docs/frontends.md): any 1-128
 * characters `A-Z a-z 0-9 _ -`. `messages` is the page's history; `message` alone is the AI SDK's "send only the
 * last message" form.
 */
export const chatBody = z
  .looseObject({
    id: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, "a chat id is 1-128 characters A-Z a-z 0-9 _ -"),
    messages: z.array(uiMessage).min(1, "messages holds at least one message").max(10_000).optional(),
    message: uiMessage.optional(),
    trigger: z.enum(["submit-message", "regenerate-message"]).default("submit-message"),
    messageId: z.string().max(200).optional(),
  })
  .refine((body) => body.messages !== undefined || body.message !== undefined, {
    message: "the body holds messages (or message)",
    path: ["messages"],
  });

/** A tool part the page answered with `addToolApprovalResponse`. */
export const approvalRespondedPart = z.looseObject({
  type: z.string().regex(/^(tool-.+|dynamic-tool)$/),
  toolCallId: z.string().min(1).max(200),
  state: z.literal("approval-responded"),
  approval: z.looseObject({
    id: z.string().min(1).max(200),
    approved: z.boolean(),
    reason: z.string().max(4096).optional(),
  }),
});

/** A tool part the page added an output to (`addToolOutput`): a client tool's answer. */
export const toolOutputPart = z.discriminatedUnion("state", [
  z.looseObject({
    type: z.string().regex(/^(tool-.+|dynamic-tool)$/),
    toolCallId: z.string().min(1).max(200),
    state: z.literal("output-available"),
    output: jsonValue,
  }),
  z.looseObject({
    type: z.string().regex(/^(tool-.+|dynamic-tool)$/),
    toolCallId: z.string().min(1).max(200),
    state: z.literal("output-error"),
    errorText: z.string().max(100_000),
  }),
]);

/** A text part of a user message. */
export const textPart = z.looseObject({ type: z.literal("text"), text: z.string() });

/** `GET .../chat/{conversation}/messages`: the transcript as `UIMessage[]`, ids derived from entry ids. */
export const chatMessagesResponse = z.array(uiMessage);
