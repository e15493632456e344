/**
 * OpenAPI route declarations (src/api/openapi.ts) for the AI SDK chat routes (docs/frontends.md): what
 * `useChat` with `DefaultChatTransport` reaches, its UI message stream (protocol v1), resume and history.
 */
import { chatBody, chatMessagesResponse } from "./chat.js";
import { S, body, client, ok, type ApiRoute } from "./openapi-route.js";

const uiStream = {
  description:
    "The UI message stream (header x-vercel-ai-ui-message-stream: v1): data: lines of JSON parts ending data: [DONE]",
  stream: "text/event-stream",
} as const;

export const CHAT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${S}/chat`,
    operationId: "chat",
    summary:
      "useChat's POST: the chat id names a pointer to a branch; the newest user message is the input (a message the chat accepted is a continuation; the same id with another text is an edit, on a fork the chat moves to); regenerate-message runs an answer again on a fork; answered approvals answer their pending items",
    auth: client("input"),
    body: body(chatBody),
    responses: { 200: uiStream },
  },
  {
    method: "get",
    path: `${S}/chat/{conversation}/stream`,
    operationId: "chatResume",
    summary: "Resume: the live turn of the branch the chat points at, from its start; 204 when nothing is live",
    auth: client("conversation"),
    responses: { 200: uiStream, 204: { description: "Nothing is live", text: true } },
  },
  {
    method: "get",
    path: `${S}/chat/{conversation}/messages`,
    operationId: "chatMessages",
    summary:
      "The branch the chat points at as UIMessage[] (the ids the client gave its messages); [] for a chat with no message yet",
    auth: client("conversation"),
    responses: { 200: ok(chatMessagesResponse) },
  },
];
