/**
 * OpenAPI route declarations (src/api/openapi.ts) for watching (docs/api.md, §9.4): a conversation's or the
 * session's watch over SSE or WebSocket, and the watch tokens a browser puts in the watch URL.
 */
import { z } from "zod";
import { watchQuery, watchTokenBody } from "./schemas.js";
import { watchTokenResponse } from "./responses.js";
import { S, C, body, client, ok, type ApiRoute } from "./openapi-route.js";

const lastEventId = { "last-event-id": { schema: z.string().max(40), description: "Resume after this event id" } };

/** Watches and watch tokens, for a conversation and for the session. */
export const WATCH_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: `${C}/watch`,
    operationId: "watchConversation",
    summary: "Watch a conversation: SSE, or WebSocket with Upgrade: websocket",
    auth: { type: "watch" },
    query: watchQuery,
    headers: lastEventId,
    responses: {
      200: { description: "A view event, then one commit event per commit", stream: "text/event-stream" },
      101: { description: "WebSocket (Upgrade: websocket)", text: true },
    },
  },
  {
    method: "post",
    path: `${C}/watch-token`,
    operationId: "conversationWatchToken",
    summary: "A watch token for this conversation's watch",
    auth: client("watch"),
    body: body(watchTokenBody, false),
    responses: { 201: ok(watchTokenResponse, "Issued") },
  },
  {
    method: "get",
    path: `${S}/watch`,
    operationId: "watchSession",
    summary: "Watch the session",
    auth: { type: "watch" },
    query: watchQuery,
    headers: lastEventId,
    responses: {
      200: {
        description:
          "A view event, then one commit event per commit; a usage event's row is the whole usage row, as GET .../usage serves it",
        stream: "text/event-stream",
      },
      101: { description: "WebSocket (Upgrade: websocket)", text: true },
    },
  },
  {
    method: "post",
    path: `${S}/watch-token`,
    operationId: "sessionWatchToken",
    summary: "A watch token for the session watch",
    auth: client("watch"),
    body: body(watchTokenBody, false),
    responses: { 201: ok(watchTokenResponse, "Issued") },
  },
];
