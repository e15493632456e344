/**
 * The OpenAPI 3.1 document of the HTTP API (docs/api.md), generated from the wire schemas (src/api/schemas.ts,
 * src/api/responses.ts, src/api/problems.ts) with zod's JSON Schema output (draft 2020-12, the dialect
 * of OpenAPI 3.1). Served at `GET /v1/openapi.json`.
 *
 * A route is ONE declaration in `API_ROUTES`; the document is built from the table. A test compares the
 * table with the routes the Hono app registers, both ways, so a route added to the app without a
 * declaration (or declared but not served) fails the build's tests.
 */
import { z } from "zod";
import { PROBLEM_CODES, STATUS, problemBody } from "./problems.js";
import {
  acceptBody,
  acceptQuery,
  collapseBody,
  configPatch,
  conversationRef,
  emptyBody,
  entriesQuery,
  forkBody,
  idString,
  mintTokenBody,
  requestKey,
  resetBody,
  sessionConfig,
  sessionPatch,
  sessionsQuery,
  sessionName,
  tasksQuery,
  tenantName,
  watchQuery,
  watchTokenBody,
  webhookBody,
  toolResultBody,
  scheduleBody,
  schedulePatch,
  schedulesQuery,
  noQuery,
} from "./schemas.js";
import { inboundBody, inboundName } from "./inbound.js";
import { pendingAnswerBody, pendingAnsweredResponse, pendingIdParam, pendingListResponse } from "./pending.js";
import { deliveriesQuery, deliveryList, deliveryOut, endpointBody, endpointDeleted, endpointId, endpointList, endpointOut, endpointPatchBody } from "./webhook-endpoints.js";
import { limitsBody, limitsResponse, meUsageQuery, usageQuery, usageResponse as meteredUsage } from "./limits.js";
import { toolDefinitionBody, toolDeletedResponse, toolName, toolRecordOut, toolsListResponse } from "./tools.js";
import { issuerBody, issuerDeleted, issuerList, issuerName, issuerOut } from "./issuers.js";
import { mcpServerBody, mcpServerDeleted, mcpServerList, mcpServerName, mcpServerOut } from "./mcp-servers.js";
import { revokeResponse, templateBody, templateDeletedResponse, templateName, templateRecordOut, templatesListResponse, userSub } from "./templates.js";
import { agentId, attemptBody, completeBody, mailBody, mailQuery, registerBody, setHookBody, waitQuery, witnessPatch } from "./rig.js";
import {
  abortedResponse,
  conversationDeletedResponse,
  acceptResponse,
  acceptanceResponse,
  agentRecordOut,
  agentsResponse,
  clearFaultResponse,
  collapseResponse,
  configValuesOut,
  continueResponse,
  createSessionResponse,
  mintedTokenResponse,
  deletedResponse,
  toolResultRecorded,
  entriesResponse,
  forkResponse,
  hookFileOut,
  hookReadOut,
  inboundDeliveryResponse,
  inboundListResponse,
  inboundOut,
  inputResponse,
  inspectResponse,
  jsonValue,
  mailboxResponse,
  mailMessageOut,
  mailViewOut,
  modelsResponse,
  nudgesResponse,
  registerAgentResponse,
  releasedResponse,
  resetResponse,
  rigHealthOut,
  rigSettingsOut,
  scheduleViewOut,
  schedulesPage,
  sessionSummaryResponse,
  sessionsPage,
  sessionMetaResponse,
  shutdownResponse,
  snapshotResponse,
  taskOut,
  tasksResponse,
  usageResponse,
  watchTokenResponse,
} from "./responses.js";

export type HttpMethod = "get" | "put" | "post" | "patch" | "delete";

/** How a route authenticates. */
export type RouteAuth =
  /** `Authorization: Bearer <JWT>` with a role that has the capability. */
  | { readonly type: "bearer"; readonly capability: string }
  /** A bearer token, or a watch token in `?access_token=`. */
  | { readonly type: "watch" }
  /** A signature with the endpoint's secret: Standard Webhooks, or an inbound endpoint's platform format. */
  | { readonly type: "webhook" }
  | { readonly type: "none" };

/** A response: a JSON body with its schema, a stream, or plain text. */
export type RouteResponse = { readonly description: string } & ({ readonly json: z.ZodType } | { readonly stream: "text/event-stream" } | { readonly text: true });

/** One route, declared once. */
export interface ApiRoute {
  readonly method: HttpMethod;
  /** OpenAPI path template: `/v1/sessions/{session}/...`. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly auth: RouteAuth;
  readonly query?: z.ZodObject;
  /** Request headers; a signed route's headers are required unless `required: false` (one per format). */
  readonly headers?: Readonly<Record<string, { readonly schema: z.ZodType; readonly description: string; readonly required?: boolean }>>;
  readonly body?: { readonly schema: z.ZodType; readonly required: boolean };
  readonly responses: Readonly<Record<number, RouteResponse>>;
}

/** Path parameters by name: their schemas (every `{name}` in a path must be listed). */
export const PATH_PARAMETERS: Readonly<Record<string, z.ZodType>> = {
  session: sessionName,
  conversation: conversationRef,
  inputId: idString,
  taskId: idString,
  requestKey,
  tenant: tenantName,
  scheduleId: idString,
  agentId,
  mailId: idString,
  name: inboundName,
  issuer: issuerName,
  pendingId: pendingIdParam,
  endpointId,
  deliveryId: z.string().describe("{event element}.{endpoint id}"),
  tool: toolName,
  server: mcpServerName,
  template: templateName,
  sub: userSub,
  file: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}\.json$/, "{agent_id}.json"),
};

const S = "/v1/sessions/{session}";
const C = `${S}/conversations/{conversation}`;
const client = (capability: string): RouteAuth => ({ type: "bearer", capability });
const ok = (json: z.ZodType, description = "OK"): RouteResponse => ({ description, json });
const body = (schema: z.ZodType, required = true): ApiRoute["body"] => ({ schema, required });
const idempotencyKey = { "idempotency-key": { schema: requestKey, description: "The request key (IETF Idempotency-Key): a retry with the same body returns the original acceptance; another body or conversation is 422" } };
const ifMatchHeader = { "if-match": { schema: z.string(), description: 'An ETag this server sent ("<version>"), or *: 412 precondition_failed unless it names the current version' } };
const lastEventId = { "last-event-id": { schema: z.string().max(40), description: "Resume after this event id" } };

/**
 * The mail body as documented: its payload is any JSON value, which the validator defines recursively
 * (a `$ref` into the schema's own `$defs`, which a path-level schema in the document cannot resolve).
 */
const mailBodyDoc = mailBody.extend({ payload: z.union([z.string().min(1).max(100_000), z.record(z.string(), z.unknown())]) });
/** Every route of the API. Add a route here when you add it to the app (a test enforces both ways). */
export const API_ROUTES: readonly ApiRoute[] = [
  { method: "get", path: "/health", operationId: "health", summary: "Liveness", auth: { type: "none" }, responses: { 200: { description: "ok", text: true } } },
  { method: "get", path: "/v1/openapi.json", operationId: "openapi", summary: "This document", auth: { type: "none" }, responses: { 200: ok(z.record(z.string(), jsonValue), "The OpenAPI 3.1 document") } },
  {
    method: "put", path: S, operationId: "createSession", summary: "Create a session (201; 200 with the same config; 409 with another)", auth: client("session.create"),
    body: body(sessionConfig, false), responses: { 201: ok(createSessionResponse, "Created"), 200: ok(createSessionResponse, "Exists with the same config") },
  },
  { method: "get", path: S, operationId: "getSession", summary: "Session summary", auth: client("session.read"), responses: { 200: ok(sessionSummaryResponse) } },
  {
    method: "get", path: "/v1/sessions", operationId: "listSessions", summary: "The tenant's sessions (directory), newest activity first", auth: client("session.read"),
    query: sessionsQuery, responses: { 200: ok(sessionsPage) },
  },
  {
    method: "post", path: "/v1/sessions", operationId: "createSessionNamedByServer", summary: "Create a session under a new unguessable name (201 with Location; the way for browsers, docs/users.md)", auth: client("session.create"),
    body: body(sessionConfig, false), responses: { 201: ok(createSessionResponse, "Created") },
  },
  {
    method: "post", path: "/v1/tokens", operationId: "mintUserToken", summary: "Mint a user token for an end user (operator; at most one hour, docs/users.md)", auth: client("tokens"),
    body: body(mintTokenBody), responses: { 201: ok(mintedTokenResponse, "Minted") },
  },
  { method: "patch", path: S, operationId: "patchSession", summary: "Change the session's directory title and labels", auth: client("session.create"), body: body(sessionPatch), responses: { 200: ok(sessionMetaResponse) } },
  { method: "delete", path: S, operationId: "deleteSession", summary: "Delete the session (every row, its alarm, its watchers)", auth: client("delete"), responses: { 200: ok(deletedResponse) } },
  {
    method: "post", path: `${C}/inputs`, operationId: "accept", summary: "Accept input, or queue it with a mode", auth: client("input"),
    query: acceptQuery, headers: idempotencyKey, body: body(acceptBody), responses: { 201: ok(acceptResponse, "Accepted"), 200: ok(acceptResponse, "The original acceptance of this Idempotency-Key") },
  },
  { method: "get", path: `${S}/inputs/{inputId}`, operationId: "getInput", summary: "An input's result", auth: client("input"), responses: { 200: ok(inputResponse) } },
  { method: "delete", path: `${S}/inputs/{inputId}`, operationId: "withdrawInput", summary: "Withdraw a queued input", auth: client("input"), responses: { 200: ok(inputResponse) } },
  { method: "get", path: `${S}/acceptances/{requestKey}`, operationId: "getAcceptance", summary: "The acceptance an Idempotency-Key names", auth: client("input"), responses: { 200: ok(acceptanceResponse) } },
  { method: "get", path: C, operationId: "getConversation", summary: "Conversation snapshot", auth: client("conversation"), responses: { 200: ok(snapshotResponse) } },
  { method: "get", path: `${C}/entries`, operationId: "listEntries", summary: "Transcript pages (fork-aware)", auth: client("conversation"), query: entriesQuery, responses: { 200: ok(entriesResponse) } },
  { method: "post", path: `${C}/abort`, operationId: "abortConversation", summary: "Abort the foreground work", auth: client("conversation"), body: body(emptyBody, false), responses: { 200: ok(abortedResponse) } },
  {
    method: "delete", path: C, operationId: "deleteConversation", summary: "Delete a non-root conversation with every conversation it owns (409 busy while any of them runs)", auth: client("conversation"),
    responses: { 200: ok(conversationDeletedResponse) },
  },
  { method: "post", path: `${C}/fork`, operationId: "fork", summary: "Fork at an entry", auth: client("conversation"), body: body(forkBody), responses: { 201: ok(forkResponse, "Forked") } },
  { method: "post", path: `${C}/collapse`, operationId: "collapse", summary: "Collapse the context", auth: client("conversation"), body: body(collapseBody, false), responses: { 202: ok(collapseResponse, "The collapse task") } },
  { method: "post", path: `${C}/reset`, operationId: "reset", summary: "Reset, or hand off", auth: client("conversation"), body: body(resetBody, false), responses: { 200: ok(resetResponse) } },
  { method: "get", path: `${C}/config`, operationId: "getConfig", summary: "Generation config", auth: client("config"), responses: { 200: ok(configValuesOut) } },
  { method: "patch", path: `${C}/config`, operationId: "patchConfig", summary: "Change the generation config", auth: client("config"), body: body(configPatch), responses: { 200: ok(configValuesOut) } },
  {
    method: "get", path: `${C}/watch`, operationId: "watchConversation", summary: "Watch a conversation: SSE, or WebSocket with Upgrade: websocket", auth: { type: "watch" },
    query: watchQuery, headers: lastEventId, responses: { 200: { description: "A view event, then one commit event per commit", stream: "text/event-stream" }, 101: { description: "WebSocket (Upgrade: websocket)", text: true } },
  },
  { method: "post", path: `${C}/watch-token`, operationId: "conversationWatchToken", summary: "A watch token for this conversation's watch", auth: client("watch"), body: body(watchTokenBody, false), responses: { 201: ok(watchTokenResponse, "Issued") } },
  {
    method: "get", path: `${S}/watch`, operationId: "watchSession", summary: "Watch the session", auth: { type: "watch" },
    query: watchQuery, headers: lastEventId, responses: { 200: { description: "A view event, then one commit event per commit; a usage event's row is the whole usage row, as GET .../usage serves it", stream: "text/event-stream" }, 101: { description: "WebSocket (Upgrade: websocket)", text: true } },
  },
  { method: "post", path: `${S}/watch-token`, operationId: "sessionWatchToken", summary: "A watch token for the session watch", auth: client("watch"), body: body(watchTokenBody, false), responses: { 201: ok(watchTokenResponse, "Issued") } },
  { method: "get", path: `${S}/usage`, operationId: "usage", summary: "Usage totals and rows", auth: client("usage"), query: entriesQuery.pick({ after: true, limit: true }), responses: { 200: ok(usageResponse) } },
  { method: "get", path: `${S}/tasks`, operationId: "listTasks", summary: "Tasks (operator)", auth: client("tasks"), query: tasksQuery, responses: { 200: ok(tasksResponse) } },
  { method: "post", path: `${S}/tasks/{taskId}/abort`, operationId: "abortTask", summary: "Mark a live task for abort (operator): the task after the mark", auth: client("tasks"), body: body(emptyBody, false), responses: { 200: ok(taskOut) } },
  { method: "post", path: `${S}/tasks/{taskId}/release`, operationId: "releaseTask", summary: "Release a quarantined task (operator)", auth: client("quarantine"), body: body(emptyBody, false), responses: { 200: ok(releasedResponse) } },
  { method: "get", path: `${S}/inspect`, operationId: "inspect", summary: "Driver state, fault, kill counters, quarantine (operator)", auth: client("inspect"), responses: { 200: ok(inspectResponse) } },
  { method: "post", path: `${S}/shutdown`, operationId: "shutdown", summary: "Shut the session down (operator)", auth: client("shutdown"), body: body(emptyBody, false), responses: { 200: ok(shutdownResponse) } },
  { method: "post", path: `${S}/fault/clear`, operationId: "clearFault", summary: "Clear the session fault (operator)", auth: client("fault"), body: body(emptyBody, false), responses: { 200: ok(clearFaultResponse) } },
  {
    method: "post", path: "/v1/webhooks/{tenant}/{session}/{conversation}", operationId: "webhook", summary: "Queue input from a signed webhook (Standard Webhooks, per-endpoint secret)", auth: { type: "webhook" },
    headers: {
      "webhook-id": { schema: z.string(), description: "The delivery id (the request key)" },
      "webhook-timestamp": { schema: z.string(), description: "Unix seconds" },
      "webhook-signature": { schema: z.string(), description: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" },
    },
    body: body(webhookBody), responses: { 202: ok(acceptResponse, "Queued"), 200: ok(acceptResponse, "A redelivery: the first acceptance") },
  },
  {
    method: "post", path: "/v1/tool-results/{tenant}/{session}/{taskId}", operationId: "toolResult", summary: "An HTTP tool's late result (after its 202), signed with the tool's secret; recorded once", auth: { type: "webhook" },
    headers: {
      "webhook-id": { schema: z.string(), description: "{session}:{taskId}, the id of the request to the tool" },
      "webhook-timestamp": { schema: z.string(), description: "Unix seconds" },
      "webhook-signature": { schema: z.string(), description: "v1,<base64 HMAC-SHA256 of id.timestamp.body> with the tool's secret" },
    },
    body: body(toolResultBody), responses: { 200: ok(toolResultRecorded, "Recorded") },
  },
  // Inbound endpoints (docs/integrations.md "Events in")
  {
    method: "put", path: `${S}/inbound/{name}`, operationId: "putInbound", summary: "Point a sender (standard, github, slack or stripe format) at a conversation; a standard endpoint's generated secret is answered once", auth: client("inbound"),
    body: body(inboundBody), responses: { 201: ok(inboundOut, "Created"), 200: ok(inboundOut, "Replaced") },
  },
  { method: "get", path: `${S}/inbound`, operationId: "listInbound", summary: "The session's inbound endpoints (never their secrets)", auth: client("inbound"), responses: { 200: ok(inboundListResponse) } },
  { method: "get", path: `${S}/inbound/{name}`, operationId: "getInbound", summary: "One inbound endpoint (never its secret)", auth: client("inbound"), responses: { 200: ok(inboundOut) } },
  { method: "delete", path: `${S}/inbound/{name}`, operationId: "deleteInbound", summary: "Delete an inbound endpoint: its deliveries are refused from now on", auth: client("inbound"), responses: { 200: ok(deletedResponse) } },
  {
    method: "post", path: "/v1/inbound/{tenant}/{session}/{name}", operationId: "inboundDelivery", summary: "A delivery from an integration, verified in the endpoint's format; queues input (or answers a GitHub ping or Slack url_verification)", auth: { type: "webhook" },
    headers: {
      "x-hub-signature-256": { schema: z.string(), description: "github: sha256=<hex HMAC-SHA256 of the raw body>; X-GitHub-Delivery is the delivery id", required: false },
      "x-slack-signature": { schema: z.string(), description: "slack: v0=<hex HMAC-SHA256 of v0:{X-Slack-Request-Timestamp}:{body}>", required: false },
      "stripe-signature": { schema: z.string(), description: "stripe: t=<seconds>,v1=<hex HMAC-SHA256 of {t}.{body}>", required: false },
      "webhook-signature": { schema: z.string(), description: "standard: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)", required: false },
    },
    body: body(z.record(z.string(), jsonValue)),
    responses: { 200: ok(inboundDeliveryResponse, "Accepted ({ inputId, duplicate }), or the platform's handshake answer") },
  },
  // Pending list (docs/api.md "Pending"): approvals and client tools waiting for an answer
  { method: "get", path: `${S}/pending`, operationId: "listPending", summary: "The session's pending items (approvals, client tools)", auth: client("pending"), query: noQuery, responses: { 200: ok(pendingListResponse) } },
  { method: "get", path: `${C}/pending`, operationId: "listConversationPending", summary: "One conversation's pending items", auth: client("pending"), query: noQuery, responses: { 200: ok(pendingListResponse) } },
  {
    method: "post", path: `${S}/pending/{pendingId}`, operationId: "answerPending", summary: "Answer a pending item once: an approval { approve, reason? }, a client tool { output, isError? }; 409 already_answered (with answer) or pending_closed (with outcome)", auth: client("pending"),
    query: noQuery, body: body(pendingAnswerBody), responses: { 200: ok(pendingAnsweredResponse) },
  },
  // The session as an MCP server (docs/mcp.md "Every session as an MCP server"); GET and DELETE answer 405
  {
    method: "post", path: `${S}/mcp`, operationId: "mcp", summary: "MCP over streamable HTTP (JSON responses, stateless; Accept: application/json, text/event-stream): tools send_message, get_result, get_transcript, list_pending, respond_pending", auth: client("input"),
    query: noQuery, headers: { "mcp-protocol-version": { schema: z.string().max(40), description: "The negotiated MCP protocol version (after initialize)" } },
    body: body(z.union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))]).describe("A JSON-RPC message (or batch)")),
    responses: { 200: ok(z.record(z.string(), z.unknown()).describe("The JSON-RPC response(s)"), "JSON-RPC response"), 202: { description: "Accepted (notifications only): no body", text: true } },
  },
  // Events out (docs/integrations.md "Events out")
  { method: "post", path: "/v1/webhook-endpoints", operationId: "createWebhookEndpoint", summary: "Register an endpoint for the tenant's events; its whsec_ secret is answered once", auth: client("webhooks"), query: noQuery, body: body(endpointBody), responses: { 201: ok(endpointOut, "Created (with secret)") } },
  { method: "get", path: "/v1/webhook-endpoints", operationId: "listWebhookEndpoints", summary: "The tenant's endpoints (never their secrets)", auth: client("webhooks"), query: noQuery, responses: { 200: ok(endpointList) } },
  { method: "get", path: "/v1/webhook-endpoints/{endpointId}", operationId: "getWebhookEndpoint", summary: "One endpoint (never its secret)", auth: client("webhooks"), query: noQuery, responses: { 200: ok(endpointOut) } },
  { method: "patch", path: "/v1/webhook-endpoints/{endpointId}", operationId: "patchWebhookEndpoint", summary: "Change url, events, sessions, description; enabled: false disables, true re-enables", auth: client("webhooks"), query: noQuery, body: body(endpointPatchBody), responses: { 200: ok(endpointOut) } },
  { method: "delete", path: "/v1/webhook-endpoints/{endpointId}", operationId: "deleteWebhookEndpoint", summary: "Delete an endpoint: its pending deliveries die", auth: client("webhooks"), query: noQuery, responses: { 200: ok(endpointDeleted) } },
  { method: "post", path: "/v1/webhook-endpoints/{endpointId}/rotate-secret", operationId: "rotateWebhookEndpointSecret", summary: "A new secret (answered once); the old one signs too for 24 h", auth: client("webhooks"), query: noQuery, responses: { 200: ok(endpointOut) } },
  { method: "get", path: `${S}/deliveries`, operationId: "listDeliveries", summary: "The session's event deliveries, newest first", auth: client("webhooks"), query: deliveriesQuery, responses: { 200: ok(deliveryList) } },
  { method: "post", path: `${S}/deliveries/{deliveryId}/retry`, operationId: "retryDelivery", summary: "Send a delivery again now, with a fresh retry window", auth: client("webhooks"), query: noQuery, responses: { 200: ok(deliveryOut) } },
  // The tenant's tool catalog (docs/tools.md)
  {
    method: "put", path: "/v1/tools/{tool}", operationId: "putTool", summary: "Define or replace a tool of the tenant's catalog (ETag: its version; If-Match makes it conditional; 422 invalid_tool names the field)", auth: client("tools"),
    headers: ifMatchHeader, body: body(toolDefinitionBody), responses: { 201: ok(toolRecordOut, "Created"), 200: ok(toolRecordOut, "Replaced") },
  },
  { method: "get", path: "/v1/tools", operationId: "listTools", summary: "The tenant's live tools (ETag: the catalog version)", auth: client("tools"), query: noQuery, responses: { 200: ok(toolsListResponse) } },
  { method: "get", path: "/v1/tools/{tool}", operationId: "getTool", summary: "One live tool (ETag: its version); a deleted tool is 404", auth: client("tools"), query: noQuery, responses: { 200: ok(toolRecordOut) } },
  {
    method: "delete", path: "/v1/tools/{tool}", operationId: "deleteTool", summary: "Delete a tool: sessions may still select it, its new calls settle as a tool error", auth: client("tools"),
    headers: ifMatchHeader, responses: { 200: ok(toolDeletedResponse) },
  },
  // The tenant's identity providers (docs/users.md "Identity providers")
  {
    method: "put", path: "/v1/issuers/{issuer}", operationId: "putIssuer", summary: "Register or replace an identity provider whose tokens act as user tokens (422 invalid_issuer names the field)", auth: client("issuers"),
    query: noQuery, body: body(issuerBody), responses: { 201: ok(issuerOut, "Created"), 200: ok(issuerOut, "Replaced") },
  },
  { method: "get", path: "/v1/issuers", operationId: "listIssuers", summary: "The tenant's identity providers", auth: client("issuers"), query: noQuery, responses: { 200: ok(issuerList) } },
  { method: "get", path: "/v1/issuers/{issuer}", operationId: "getIssuer", summary: "One identity provider; 404 issuer_not_found", auth: client("issuers"), query: noQuery, responses: { 200: ok(issuerOut) } },
  { method: "delete", path: "/v1/issuers/{issuer}", operationId: "deleteIssuer", summary: "Remove an identity provider: its tokens are refused within 60 s", auth: client("issuers"), query: noQuery, responses: { 200: ok(issuerDeleted) } },
  // Limits and usage (docs/users.md "Limits and usage")
  { method: "put", path: "/v1/limits", operationId: "putLimits", summary: "Replace the tenant's limits, per user and for the tenant (422 invalid_limits names the field)", auth: client("limits"), query: noQuery, body: body(limitsBody), responses: { 200: ok(limitsResponse) } },
  { method: "get", path: "/v1/limits", operationId: "getLimits", summary: "The tenant's limits", auth: client("limits"), query: noQuery, responses: { 200: ok(limitsResponse) } },
  { method: "get", path: "/v1/usage", operationId: "getUsage", summary: "Inputs, tokens and cost by user and UTC day (one user with ?sub=)", auth: client("limits"), query: usageQuery, responses: { 200: ok(meteredUsage) } },
  { method: "get", path: "/v1/me/usage", operationId: "getMyUsage", summary: "The token's own user's inputs, tokens and cost by UTC day (a token with sub)", auth: client("usage"), query: meUsageQuery, responses: { 200: ok(meteredUsage) } },
  // The tenant's remote MCP servers as tool sources (docs/mcp.md)
  {
    method: "put", path: "/v1/mcp-servers/{server}", operationId: "putMcpServer", summary: "Register or replace an MCP server: its tool list is read and pinned (502 mcp_server_unreachable writes nothing); header values are write-only; 422 invalid_mcp_server names the field", auth: client("mcp"),
    query: noQuery, body: body(mcpServerBody), responses: { 201: ok(mcpServerOut, "Created"), 200: ok(mcpServerOut, "Replaced") },
  },
  { method: "get", path: "/v1/mcp-servers", operationId: "listMcpServers", summary: "The tenant's MCP servers (header names only, never values)", auth: client("mcp"), query: noQuery, responses: { 200: ok(mcpServerList) } },
  { method: "get", path: "/v1/mcp-servers/{server}", operationId: "getMcpServer", summary: "One MCP server: its pinned tools, each selectable as {server}__{tool} or listed with the reason it is not", auth: client("mcp"), query: noQuery, responses: { 200: ok(mcpServerOut) } },
  { method: "delete", path: "/v1/mcp-servers/{server}", operationId: "deleteMcpServer", summary: "Remove an MCP server: its tools stay selectable, their new calls settle as a tool error", auth: client("mcp"), query: noQuery, responses: { 200: ok(mcpServerDeleted) } },
  { method: "post", path: "/v1/mcp-servers/{server}/refresh", operationId: "refreshMcpServer", summary: "Read the server's tool list again and pin it (a failure keeps the old snapshot: 502 mcp_server_unreachable)", auth: client("mcp"), query: noQuery, responses: { 200: ok(mcpServerOut) } },
  // Session templates and users (docs/users.md)
  {
    method: "put", path: "/v1/templates/{template}", operationId: "putTemplate", summary: "Define or replace a session template: the session PUT's fields plus userSettable (ETag: its version; If-Match makes it conditional; 422 invalid_template names the field)", auth: client("templates"),
    headers: ifMatchHeader, body: body(templateBody), responses: { 201: ok(templateRecordOut, "Created"), 200: ok(templateRecordOut, "Replaced") },
  },
  { method: "get", path: "/v1/templates", operationId: "listTemplates", summary: "The tenant's session templates", auth: client("templates"), query: noQuery, responses: { 200: ok(templatesListResponse) } },
  { method: "get", path: "/v1/templates/{template}", operationId: "getTemplate", summary: "One session template (ETag: its version)", auth: client("templates"), query: noQuery, responses: { 200: ok(templateRecordOut) } },
  {
    method: "delete", path: "/v1/templates/{template}", operationId: "deleteTemplate", summary: "Delete a session template: sessions created from it keep what it said", auth: client("templates"),
    headers: ifMatchHeader, responses: { 200: ok(templateDeletedResponse) },
  },
  { method: "post", path: "/v1/users/{sub}/revoke", operationId: "revokeUser", summary: "Refuse the user's tokens issued before now and close its open watches", auth: client("users"), query: noQuery, body: body(emptyBody, false), responses: { 200: ok(revokeResponse) } },
  // Models (docs/models.md)
  { method: "get", path: "/v1/models", operationId: "listModels", summary: "The models this deployment can use", auth: client("config"), query: noQuery, responses: { 200: ok(modelsResponse) } },
  // Waiting input (docs/api.md "Waiting input")
  { method: "post", path: `${C}/continue`, operationId: "continueConversation", summary: "Place queued input that waits (its group ended without a final answer) into a new turn", auth: client("conversation"), body: body(emptyBody, false), responses: { 200: ok(continueResponse) } },
  // Schedules (docs/jobs.md "Schedules")
  { method: "post", path: `${S}/schedules`, operationId: "createSchedule", summary: "A recurring input (every ms or cron)", auth: client("conversation"), body: body(scheduleBody), responses: { 201: ok(scheduleViewOut, "Created") } },
  { method: "get", path: `${S}/schedules`, operationId: "listSchedules", summary: "Schedules with their next and last run", auth: client("conversation"), query: schedulesQuery, responses: { 200: ok(schedulesPage) } },
  { method: "get", path: `${S}/schedules/{scheduleId}`, operationId: "getSchedule", summary: "One schedule", auth: client("conversation"), responses: { 200: ok(scheduleViewOut) } },
  { method: "patch", path: `${S}/schedules/{scheduleId}`, operationId: "patchSchedule", summary: "Pause, resume or edit a schedule (input, mode, catchUp, every or cron, timezone)", auth: client("conversation"), body: body(schedulePatch), responses: { 200: ok(scheduleViewOut) } },
  { method: "delete", path: `${S}/schedules/{scheduleId}`, operationId: "deleteSchedule", summary: "End a schedule", auth: client("conversation"), responses: { 200: ok(scheduleViewOut) } },
  // The rig: roles and the agent claim are checked per route (docs/rig.md)
  { method: "put", path: `${S}/rig/agents/{agentId}`, operationId: "registerAgent", summary: "Register an agent (mayor, operator)", auth: client("rig"), body: body(registerBody), responses: { 201: ok(registerAgentResponse, "Registered"), 200: ok(registerAgentResponse, "Already registered the same way") } },
  { method: "get", path: `${S}/rig/agents`, operationId: "listAgents", summary: "Agents with their hook and health", auth: client("rig"), responses: { 200: ok(agentsResponse) } },
  { method: "delete", path: `${S}/rig/agents/{agentId}`, operationId: "deregisterAgent", summary: "Deregister an agent whose hook is empty (mayor)", auth: client("rig"), responses: { 200: ok(deletedResponse) } },
  { method: "post", path: `${S}/rig/agents/{agentId}/terminate`, operationId: "terminateAgent", summary: "Abort a conversation agent's work (mayor)", auth: client("rig"), body: body(emptyBody, false), responses: { 200: ok(agentRecordOut) } },
  { method: "get", path: `${S}/rig/agents/{agentId}/hook`, operationId: "getAgentHook", summary: "An agent's hook (ETag, Hook-Attempt); ?wait= long-polls until it is not empty", auth: client("rig"), query: waitQuery, responses: { 200: ok(hookReadOut) } },
  { method: "put", path: `${S}/rig/agents/{agentId}/hook`, operationId: "setHook", summary: "empty -> pending (mayor); If-Match makes it conditional", auth: client("rig"), body: body(setHookBody), responses: { 200: ok(hookFileOut) } },
  { method: "delete", path: `${S}/rig/agents/{agentId}/hook`, operationId: "clearHook", summary: "pending, active or completed -> empty (mayor): completed after verifying, pending or active to reassign the work", auth: client("rig"), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/hook`, operationId: "ownHook", summary: "The calling agent's hook; ?wait= long-polls until it is not empty", auth: client("rig"), query: waitQuery, responses: { 200: ok(hookReadOut) } },
  { method: "post", path: `${S}/rig/hook/activate`, operationId: "activateHook", summary: "pending -> active (the owning agent; attempt required)", auth: client("rig"), body: body(attemptBody), responses: { 200: ok(hookFileOut) } },
  { method: "post", path: `${S}/rig/hook/touch`, operationId: "touchHook", summary: "Update last_activity (throttled; attempt required)", auth: client("rig"), body: body(attemptBody), responses: { 200: ok(hookFileOut) } },
  { method: "post", path: `${S}/rig/hook/complete`, operationId: "completeHook", summary: "active -> completed (the owning agent; attempt required)", auth: client("rig"), body: body(completeBody), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/mail`, operationId: "listMail", summary: "The caller's mailbox, a page by cursor (?after=&limit=, next while more remain)", auth: client("rig"), query: mailQuery, responses: { 200: ok(mailboxResponse) } },
  { method: "post", path: `${S}/rig/mail`, operationId: "sendMail", summary: "Send durable mail", auth: client("rig"), body: body(mailBodyDoc), responses: { 201: ok(mailMessageOut, "Sent") } },
  { method: "post", path: `${S}/rig/mail/{mailId}/ack`, operationId: "ackMail", summary: "Acknowledge a message", auth: client("rig"), body: body(emptyBody, false), responses: { 200: ok(mailViewOut) } },
  { method: "get", path: `${S}/rig/nudges`, operationId: "nudges", summary: "Nudges for an external agent since it last asked; ?wait= long-polls", auth: client("rig"), query: waitQuery, responses: { 200: ok(nudgesResponse) } },
  { method: "get", path: `${S}/rig/witness`, operationId: "getWitness", summary: "The witness's settings", auth: client("rig"), responses: { 200: ok(rigSettingsOut) } },
  { method: "patch", path: `${S}/rig/witness`, operationId: "patchWitness", summary: "Change the witness's settings (mayor, operator)", auth: client("rig"), body: body(witnessPatch), responses: { 200: ok(rigSettingsOut) } },
  { method: "get", path: `${S}/rig/health`, operationId: "rigHealth", summary: "RigHealthReport", auth: client("rig"), responses: { 200: ok(rigHealthOut) } },
  { method: "get", path: `${S}/rig/chipset/state/hooks/{file}`, operationId: "hookFile", summary: "A hook as .chipset/state/hooks/{agent_id}.json", auth: client("rig"), responses: { 200: ok(hookFileOut) } },
  { method: "get", path: `${S}/rig/chipset/state`, operationId: "chipsetExport", summary: "The .chipset/state tree as a tar archive", auth: client("rig"), responses: { 200: { description: "application/x-tar", text: true } } },
];

type JsonSchema = Record<string, unknown>;

function schemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema;
  return rest;
}

function parametersOf(route: ApiRoute): JsonSchema[] {
  const out: JsonSchema[] = [];
  for (const match of route.path.matchAll(/\{([A-Za-z]+)\}/g)) {
    const name = match[1] ?? "";
    const schema = PATH_PARAMETERS[name];
    if (schema === undefined) throw new Error(`path parameter {${name}} of ${route.path} has no schema in PATH_PARAMETERS`);
    out.push({ name, in: "path", required: true, schema: schemaOf(schema, "input") });
  }
  if (route.query !== undefined) {
    const object = schemaOf(route.query, "input");
    const properties = (object["properties"] ?? {}) as Record<string, JsonSchema>;
    const required = new Set((object["required"] ?? []) as string[]);
    for (const [name, schema] of Object.entries(properties)) out.push({ name, in: "query", required: required.has(name), schema });
  }
  for (const [name, header] of Object.entries(route.headers ?? {})) out.push({ name, in: "header", required: header.required ?? route.auth.type === "webhook", description: header.description, schema: schemaOf(header.schema, "input") });
  return out;
}

function securityOf(auth: RouteAuth): JsonSchema[] {
  switch (auth.type) {
    case "bearer":
      return [{ bearer: [] }];
    case "watch":
      return [{ bearer: [] }, { watchToken: [] }];
    case "webhook":
    case "none":
      return [];
    default: {
      const never: never = auth;
      return never;
    }
  }
}

function responseOf(response: RouteResponse): JsonSchema {
  if ("json" in response) return { description: response.description, content: { "application/json": { schema: schemaOf(response.json, "output") } } };
  if ("stream" in response) return { description: response.description, content: { [response.stream]: { schema: { type: "string" } } } };
  return { description: response.description, content: { "text/plain": { schema: { type: "string" } } } };
}

/** The problem statuses every route may answer, by status. */
function problemResponses(): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  const statuses = [...new Set(PROBLEM_CODES.map((code) => STATUS[code]))].sort((a, b) => a - b);
  for (const status of statuses) {
    const codes = PROBLEM_CODES.filter((code) => STATUS[code] === status);
    out[String(status)] = { description: `Problem (${codes.join(", ")})`, content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } } };
  }
  return out;
}

/** The OpenAPI 3.1 document of `routes` (default: every route of the API). */
export function openApiDocument(routes: readonly ApiRoute[] = API_ROUTES): JsonSchema {
  const problems = problemResponses();
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of routes) {
    const responses: Record<string, JsonSchema> = {};
    for (const [status, response] of Object.entries(route.responses)) responses[status] = responseOf(response);
    for (const [status, problem] of Object.entries(problems)) if (responses[status] === undefined) responses[status] = problem;
    const operation: JsonSchema = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.auth.type === "bearer" ? { description: `Needs a token whose role grants \`${route.auth.capability}\`.` } : {}),
      security: securityOf(route.auth),
      parameters: parametersOf(route),
      ...(route.body === undefined ? {} : { requestBody: { required: route.body.required, content: { "application/json": { schema: schemaOf(route.body.schema, "input") } } } }),
      responses,
    };
    (paths[route.path] ??= {})[route.method] = operation;
  }
  return {
    openapi: "3.1.0",
    info: { title: "pico-edge", version: "1", description: "Durable agent sessions (pico v3) on Cloudflare Workers. Errors are RFC 9457 problem+json with a stable code." },
    servers: [{ url: "/" }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "HS256 JWT with tenant, role and exp (lifetime at most TOKEN_MAX_LIFETIME_SECONDS); agent tokens also carry agent (the agent id) and sessions (the session names they may act in; 401 on any other session)" },
        watchToken: { type: "apiKey", in: "query", name: "access_token", description: "A watch token from POST .../watch-token (watch routes only; a normal bearer token in a URL is refused)" },
      },
      schemas: { Problem: schemaOf(problemBody, "output") },
    },
  };
}
