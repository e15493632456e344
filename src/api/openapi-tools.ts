/**
 * OpenAPI route declarations (src/api/openapi.ts) for tools (docs/tools.md, docs/mcp.md): an HTTP tool's
 * signed late result, the pending list (approvals and client tools), the session as an MCP server, the
 * tenant's tool catalog and its remote MCP servers.
 */
import { z } from "zod";
import { toolResultBody, noQuery } from "./schemas.js";
import { pendingAnswerBody, pendingAnsweredResponse, pendingListResponse } from "./pending.js";
import {
  toolDefinitionBody,
  toolDeletedResponse,
  toolPutResponse,
  toolRecordOut,
  toolSecretRotated,
  toolsListResponse,
} from "./tools.js";
import { mcpServerBody, mcpServerDeleted, mcpServerList, mcpServerOut } from "./mcp-servers.js";
import { toolResultRecorded } from "./responses.js";
import { S, C, body, client, ifMatchHeader, ok, type ApiRoute } from "./openapi-route.js";

/** An HTTP tool's late result, signed with the tool's secret (docs/tools.md). */
export const TOOL_RESULT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: "/v1/tool-results/{tenant}/{session}/{taskId}",
    operationId: "toolResult",
    summary: "An HTTP tool's late result (after its 202), signed with the tool's secret; recorded once",
    auth: { type: "webhook" },
    headers: {
      "webhook-id": {
        schema: z.string(),
        description: "{session}:{incarnation}:{taskId}, the id of the request to the tool",
      },
      "webhook-timestamp": { schema: z.string(), description: "Unix seconds" },
      "webhook-signature": {
        schema: z.string(),
        description: "v1,<base64 HMAC-SHA256 of id.timestamp.body> with the tool's secret",
      },
    },
    body: body(toolResultBody),
    responses: { 200: ok(toolResultRecorded, "Recorded") },
  },
];

/** Pending list (docs/api.md "Pending"): approvals and client tools waiting for an answer. */
export const PENDING_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: `${S}/pending`,
    operationId: "listPending",
    summary: "The session's pending items (approvals, client tools)",
    auth: client("pending"),
    query: noQuery,
    responses: { 200: ok(pendingListResponse) },
  },
  {
    method: "get",
    path: `${C}/pending`,
    operationId: "listConversationPending",
    summary: "One conversation's pending items",
    auth: client("pending"),
    query: noQuery,
    responses: { 200: ok(pendingListResponse) },
  },
  {
    method: "post",
    path: `${S}/pending/{pendingId}`,
    operationId: "answerPending",
    summary:
      "Answer a pending item once: an approval { approve, reason? }, a client tool { output, isError? }; 409 already_answered (with answer) or pending_closed (with outcome)",
    auth: client("pending"),
    query: noQuery,
    body: body(pendingAnswerBody),
    responses: { 200: ok(pendingAnsweredResponse) },
  },
];

/** The session as an MCP server (docs/mcp.md "Every session as an MCP server"); GET and DELETE answer 405. */
export const SESSION_MCP_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${S}/mcp`,
    operationId: "mcp",
    summary:
      "MCP over streamable HTTP (JSON responses, stateless; Accept: application/json, text/event-stream): tools send_message, get_result, get_transcript, list_pending, respond_pending",
    auth: client("input"),
    query: noQuery,
    headers: {
      "mcp-protocol-version": {
        schema: z.string().max(40),
        description: "The negotiated MCP protocol version (after initialize)",
      },
    },
    body: body(
      z
        .union([z.record(z.string(), z.unknown()), z.array(z.record(z.string(), z.unknown()))])
        .describe("A JSON-RPC message (or batch)"),
    ),
    responses: {
      200: ok(z.record(z.string(), z.unknown()).describe("The JSON-RPC response(s)"), "JSON-RPC response"),
      202: { description: "Accepted (notifications only): no body", text: true },
    },
  },
];

/** The tenant's tool catalog (docs/tools.md). */
export const TOOL_CATALOG_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/tools/{tool}",
    operationId: "putTool",
    summary:
      "Define or replace a tool of the tenant's catalog (ETag: its version; If-Match makes it conditional; 422 invalid_tool names the field)",
    auth: client("tools"),
    headers: ifMatchHeader,
    body: body(toolDefinitionBody),
    responses: { 201: ok(toolPutResponse, "Created"), 200: ok(toolPutResponse, "Replaced") },
  },
  {
    method: "post",
    path: "/v1/tools/{tool}/rotate-secret",
    operationId: "rotateToolSecret",
    summary:
      "Rotate an HTTP tool's signing secret: new calls sign with the next generation (answered once); the previous one verifies late results for 7 days",
    auth: client("tools"),
    query: noQuery,
    responses: { 200: ok(toolSecretRotated) },
  },
  {
    method: "get",
    path: "/v1/tools",
    operationId: "listTools",
    summary: "The tenant's live tools (ETag: the catalog version)",
    auth: client("tools"),
    query: noQuery,
    responses: { 200: ok(toolsListResponse) },
  },
  {
    method: "get",
    path: "/v1/tools/{tool}",
    operationId: "getTool",
    summary: "One live tool (ETag: its version); a deleted tool is 404",
    auth: client("tools"),
    query: noQuery,
    responses: { 200: ok(toolRecordOut) },
  },
  {
    method: "delete",
    path: "/v1/tools/{tool}",
    operationId: "deleteTool",
    summary: "Delete a tool: sessions may still select it, its new calls settle as a tool error",
    auth: client("tools"),
    headers: ifMatchHeader,
    responses: { 200: ok(toolDeletedResponse) },
  },
];

/** The tenant's remote MCP servers as tool sources (docs/mcp.md). */
export const MCP_SERVER_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/mcp-servers/{server}",
    operationId: "putMcpServer",
    summary:
      "Register or replace an MCP server: its tool list is read and pinned (502 mcp_server_unreachable writes nothing); header values are write-only; 422 invalid_mcp_server names the field",
    auth: client("mcp"),
    query: noQuery,
    body: body(mcpServerBody),
    responses: { 201: ok(mcpServerOut, "Created"), 200: ok(mcpServerOut, "Replaced") },
  },
  {
    method: "get",
    path: "/v1/mcp-servers",
    operationId: "listMcpServers",
    summary: "The tenant's MCP servers (header names only, never values)",
    auth: client("mcp"),
    query: noQuery,
    responses: { 200: ok(mcpServerList) },
  },
  {
    method: "get",
    path: "/v1/mcp-servers/{server}",
    operationId: "getMcpServer",
    summary:
      "One MCP server: its pinned tools, each selectable as {server}__{tool} or listed with the reason it is not",
    auth: client("mcp"),
    query: noQuery,
    responses: { 200: ok(mcpServerOut) },
  },
  {
    method: "delete",
    path: "/v1/mcp-servers/{server}",
    operationId: "deleteMcpServer",
    summary: "Remove an MCP server: its tools stay selectable, their new calls settle as a tool error",
    auth: client("mcp"),
    query: noQuery,
    responses: { 200: ok(mcpServerDeleted) },
  },
  {
    method: "post",
    path: "/v1/mcp-servers/{server}/refresh",
    operationId: "refreshMcpServer",
    summary:
      "Read the server's tool list again and pin it (a failure keeps the old snapshot: 502 mcp_server_unreachable)",
    auth: client("mcp"),
    query: noQuery,
    responses: { 200: ok(mcpServerOut) },
  },
];
