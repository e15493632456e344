/**
 * OpenAPI route declarations (src/api/openapi.ts) for sessions and their conversations (docs/api.md): the
 * session lifecycle and directory, user-token minting, inputs and acceptances, conversation snapshots,
 * transcript, abort, fork, collapse, reset and config, the operator routes, models, waiting input and
 * schedules (docs/jobs.md "Schedules"). Each group is spread into `API_ROUTES` in document order.
 */
import {
  acceptBody,
  acceptQuery,
  collapseBody,
  configPatch,
  emptyBody,
  entriesQuery,
  forkBody,
  mintTokenBody,
  requestKey,
  resetBody,
  sessionConfig,
  sessionPatch,
  sessionsQuery,
  tasksQuery,
  scheduleBody,
  schedulePatch,
  schedulesQuery,
  noQuery,
} from "./schemas.js";
import { importResponse, MAX_IMPORT_BYTES, rigResumeResponse } from "./transfer.js";
import {
  abortedResponse,
  conversationDeletedResponse,
  acceptResponse,
  acceptanceResponse,
  clearFaultResponse,
  collapseResponse,
  configValuesOut,
  continueResponse,
  createSessionResponse,
  mintedTokenResponse,
  deletedResponse,
  entriesResponse,
  forkResponse,
  inputResponse,
  inspectResponse,
  modelsResponse,
  releasedResponse,
  resetResponse,
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
} from "./responses.js";
import { S, C, body, client, ok, type ApiRoute } from "./openapi-route.js";

const idempotencyKey = {
  "idempotency-key": {
    schema: requestKey,
    description:
      "The request key (IETF Idempotency-Key): a retry with the same body returns the original acceptance; another body or conversation is 422",
  },
};

/**
 * Sessions: create (by name or named by the server), read, list, change, delete; user tokens for browsers
 * (docs/users.md).
 */
export const SESSION_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: S,
    operationId: "createSession",
    summary: "Create a session (201; 200 with the same config; 409 with another)",
    auth: client("session.create"),
    body: body(sessionConfig, false),
    responses: {
      201: ok(createSessionResponse, "Created"),
      200: ok(createSessionResponse, "Exists with the same config"),
    },
  },
  {
    method: "get",
    path: S,
    operationId: "getSession",
    summary: "Session summary",
    auth: client("session.read"),
    responses: { 200: ok(sessionSummaryResponse) },
  },
  {
    method: "get",
    path: "/v1/sessions",
    operationId: "listSessions",
    summary:
      "The tenant's sessions (directory), newest activity first; filters combine: owner, status, activeSince/activeBefore, q, and metadata.{key}={value} (one parameter per key, every pair must match)",
    auth: client("session.read"),
    query: sessionsQuery,
    responses: { 200: ok(sessionsPage) },
  },
  {
    method: "post",
    path: "/v1/sessions",
    operationId: "createSessionNamedByServer",
    summary: "Create a session under a new unguessable name (201 with Location; the way for browsers, docs/users.md)",
    auth: client("session.create"),
    body: body(sessionConfig, false),
    responses: { 201: ok(createSessionResponse, "Created") },
  },
  {
    method: "post",
    path: "/v1/tokens",
    operationId: "mintUserToken",
    summary: "Mint a user token for an end user (operator; at most one hour, docs/users.md)",
    auth: client("tokens"),
    body: body(mintTokenBody),
    responses: { 201: ok(mintedTokenResponse, "Minted") },
  },
  {
    method: "patch",
    path: S,
    operationId: "patchSession",
    summary:
      "Change the session's directory title, labels and metadata (merged: a value sets a key, null deletes it), or (operators and clients) its variables: a value sets one, null removes it",
    auth: client("session.create"),
    body: body(sessionPatch),
    responses: { 200: ok(sessionMetaResponse) },
  },
  {
    method: "delete",
    path: S,
    operationId: "deleteSession",
    summary: "Delete the session (every row, its alarm, its watchers)",
    auth: client("delete"),
    responses: { 200: ok(deletedResponse) },
  },
];

/** Inputs: accept or queue, read, withdraw; the acceptance an Idempotency-Key names. */
export const INPUT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${C}/inputs`,
    operationId: "accept",
    summary: "Accept input, or queue it with a mode",
    auth: client("input"),
    query: acceptQuery,
    headers: idempotencyKey,
    body: body(acceptBody),
    responses: {
      201: ok(acceptResponse, "Accepted"),
      200: ok(acceptResponse, "The original acceptance of this Idempotency-Key"),
    },
  },
  {
    method: "get",
    path: `${S}/inputs/{inputId}`,
    operationId: "getInput",
    summary: "An input's result",
    auth: client("input"),
    responses: { 200: ok(inputResponse) },
  },
  {
    method: "delete",
    path: `${S}/inputs/{inputId}`,
    operationId: "withdrawInput",
    summary: "Withdraw a queued input",
    auth: client("input"),
    responses: { 200: ok(inputResponse) },
  },
  {
    method: "get",
    path: `${S}/acceptances/{requestKey}`,
    operationId: "getAcceptance",
    summary: "The acceptance an Idempotency-Key names",
    auth: client("input"),
    responses: { 200: ok(acceptanceResponse) },
  },
];

/** A conversation: snapshot, transcript, abort, delete, fork, collapse, reset, generation config. */
export const CONVERSATION_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: C,
    operationId: "getConversation",
    summary: "Conversation snapshot",
    auth: client("conversation"),
    responses: { 200: ok(snapshotResponse) },
  },
  {
    method: "get",
    path: `${C}/entries`,
    operationId: "listEntries",
    summary: "Transcript pages (fork-aware)",
    auth: client("conversation"),
    query: entriesQuery,
    responses: { 200: ok(entriesResponse) },
  },
  {
    method: "post",
    path: `${C}/abort`,
    operationId: "abortConversation",
    summary: "Abort the foreground work",
    auth: client("conversation"),
    body: body(emptyBody, false),
    responses: { 200: ok(abortedResponse) },
  },
  {
    method: "delete",
    path: C,
    operationId: "deleteConversation",
    summary: "Delete a non-root conversation with every conversation it owns (409 busy while any of them runs)",
    auth: client("conversation"),
    responses: { 200: ok(conversationDeletedResponse) },
  },
  {
    method: "post",
    path: `${C}/fork`,
    operationId: "fork",
    summary: "Fork at an entry",
    auth: client("conversation"),
    body: body(forkBody),
    responses: { 201: ok(forkResponse, "Forked") },
  },
  {
    method: "post",
    path: `${C}/collapse`,
    operationId: "collapse",
    summary: "Collapse the context",
    auth: client("conversation"),
    body: body(collapseBody, false),
    responses: { 202: ok(collapseResponse, "The collapse task") },
  },
  {
    method: "post",
    path: `${C}/reset`,
    operationId: "reset",
    summary: "Reset, or hand off",
    auth: client("conversation"),
    body: body(resetBody, false),
    responses: { 200: ok(resetResponse) },
  },
  {
    method: "get",
    path: `${C}/config`,
    operationId: "getConfig",
    summary: "Generation config",
    auth: client("config"),
    responses: { 200: ok(configValuesOut) },
  },
  {
    method: "patch",
    path: `${C}/config`,
    operationId: "patchConfig",
    summary: "Change the generation config",
    auth: client("config"),
    body: body(configPatch),
    responses: { 200: ok(configValuesOut) },
  },
];

/** Usage rows and the operator's view of a session: tasks, inspect, shutdown, fault. */
export const OPERATOR_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: `${S}/usage`,
    operationId: "usage",
    summary: "Usage totals and rows",
    auth: client("usage"),
    query: entriesQuery.pick({ after: true, limit: true }),
    responses: { 200: ok(usageResponse) },
  },
  {
    method: "get",
    path: `${S}/export`,
    operationId: "exportSession",
    summary:
      "The session as JSONL: a header line, then its batches in sequence order (an operator's whole, a user's redacted)",
    auth: client("export"),
    query: noQuery,
    responses: { 200: { description: "JSONL, streamed", stream: "application/jsonl" } },
  },
  {
    method: "post",
    path: `${S}/import`,
    operationId: "importSession",
    summary: `Import an export (application/jsonl, at most ${MAX_IMPORT_BYTES} bytes) as this new session (operator)`,
    auth: client("import"),
    query: noQuery,
    responses: { 201: ok(importResponse, "Imported") },
  },
  {
    method: "post",
    path: `${S}/rig/resume`,
    operationId: "resumeRig",
    summary: "Resume the rig an import paused: GUPP and the witness run again (operator)",
    auth: client("import"),
    body: body(emptyBody, false),
    responses: { 200: ok(rigResumeResponse) },
  },
  {
    method: "get",
    path: `${S}/tasks`,
    operationId: "listTasks",
    summary: "Tasks (operator)",
    auth: client("tasks"),
    query: tasksQuery,
    responses: { 200: ok(tasksResponse) },
  },
  {
    method: "post",
    path: `${S}/tasks/{taskId}/abort`,
    operationId: "abortTask",
    summary: "Mark a live task for abort (operator): the task after the mark",
    auth: client("tasks"),
    body: body(emptyBody, false),
    responses: { 200: ok(taskOut) },
  },
  {
    method: "post",
    path: `${S}/tasks/{taskId}/release`,
    operationId: "releaseTask",
    summary: "Release a quarantined task (operator)",
    auth: client("quarantine"),
    body: body(emptyBody, false),
    responses: { 200: ok(releasedResponse) },
  },
  {
    method: "get",
    path: `${S}/inspect`,
    operationId: "inspect",
    summary: "Driver state, fault, kill counters, quarantine (operator)",
    auth: client("inspect"),
    responses: { 200: ok(inspectResponse) },
  },
  {
    method: "post",
    path: `${S}/shutdown`,
    operationId: "shutdown",
    summary: "Shut the session down (operator)",
    auth: client("shutdown"),
    body: body(emptyBody, false),
    responses: { 200: ok(shutdownResponse) },
  },
  {
    method: "post",
    path: `${S}/fault/clear`,
    operationId: "clearFault",
    summary: "Clear the session fault (operator)",
    auth: client("fault"),
    body: body(emptyBody, false),
    responses: { 200: ok(clearFaultResponse) },
  },
];

/** Models (docs/models.md). */
export const MODEL_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: "/v1/models",
    operationId: "listModels",
    summary: "The models this deployment can use",
    auth: client("config"),
    query: noQuery,
    responses: { 200: ok(modelsResponse) },
  },
];

/** Waiting input (docs/api.md "Waiting input"). */
export const WAITING_INPUT_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${C}/continue`,
    operationId: "continueConversation",
    summary: "Place queued input that waits (its group ended without a final answer) into a new turn",
    auth: client("conversation"),
    body: body(emptyBody, false),
    responses: { 200: ok(continueResponse) },
  },
];

/** Schedules (docs/jobs.md "Schedules"). */
export const SCHEDULE_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: `${S}/schedules`,
    operationId: "createSchedule",
    summary: "A recurring input (every ms or cron)",
    auth: client("conversation"),
    body: body(scheduleBody),
    responses: { 201: ok(scheduleViewOut, "Created") },
  },
  {
    method: "get",
    path: `${S}/schedules`,
    operationId: "listSchedules",
    summary: "Schedules with their next and last run",
    auth: client("conversation"),
    query: schedulesQuery,
    responses: { 200: ok(schedulesPage) },
  },
  {
    method: "get",
    path: `${S}/schedules/{scheduleId}`,
    operationId: "getSchedule",
    summary: "One schedule",
    auth: client("conversation"),
    responses: { 200: ok(scheduleViewOut) },
  },
  {
    method: "patch",
    path: `${S}/schedules/{scheduleId}`,
    operationId: "patchSchedule",
    summary: "Pause, resume or edit a schedule (input, mode, catchUp, every or cron, timezone)",
    auth: client("conversation"),
    body: body(schedulePatch),
    responses: { 200: ok(scheduleViewOut) },
  },
  {
    method: "delete",
    path: `${S}/schedules/{scheduleId}`,
    operationId: "deleteSchedule",
    summary: "End a schedule",
    auth: client("conversation"),
    responses: { 200: ok(scheduleViewOut) },
  },
];
