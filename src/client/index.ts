/**
 * The typed pico-edge HTTP client: routes, SSE parsing with resume, and the core's watch reducers.
 */
export * from "./client.js";
export { PicoApiError, type ClientOptions, type ClientTransport } from "./transport.js";
export * from "./conversation.js";
export * from "./rig.js";
export { Watch, type WatchOptions } from "./watch.js";
export * from "./inbound.js";
export * from "./inbound-endpoints.js";
export * from "./pending.js";
export * from "./webhook-endpoints.js";
export * from "./tools.js";
export * from "./issuers.js";
export * from "./api-keys.js";
export * from "./limits.js";
export * from "./end-users.js";
export * from "./mcp-servers.js";
export * from "./users.js";
export * from "./sse.js";
export { applyEvent, applyMessage, applySessionEvent, applySessionMessage } from "../core/watch-reduce.js";
export type {
  ConversationEvent,
  ConversationView,
  SessionEvent,
  SessionView,
  WatchMessage,
} from "../core/watch-types.js";
