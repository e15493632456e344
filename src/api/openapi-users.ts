/**
 * OpenAPI route declarations (src/api/openapi.ts) for users and identity (docs/users.md): the tenant's
 * identity providers, limits and metered usage, session templates and user revocation, and the profiles
 * sessions and templates name (docs/api.md "Profiles").
 */
import { emptyBody, noQuery, tenantRetention } from "./schemas.js";
import { statsResponse } from "./stats.js";
import { limitsBody, limitsResponse, meUsageQuery, usageQuery, usageResponse as meteredUsage } from "./limits.js";
import { issuerBody, issuerDeleted, issuerList, issuerOut } from "./issuers.js";
import { apiKeyBody, apiKeyCreated, apiKeyDeleted, apiKeyList } from "./api-keys.js";
import {
  erasureResponse,
  revokeResponse,
  templateBody,
  templateDeletedResponse,
  templateRecordOut,
  templatesListResponse,
} from "./templates.js";
import { profileBody, profileDeletedResponse, profileRecordOut, profilesListResponse } from "./profiles.js";
import { body, client, ifMatchHeader, ok, type ApiRoute } from "./openapi-route.js";

/** The tenant's identity providers (docs/users.md "Identity providers"). */
export const ISSUER_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/issuers/{issuer}",
    operationId: "putIssuer",
    summary:
      "Register or replace an identity provider whose tokens act as user tokens (422 invalid_issuer names the field)",
    auth: client("issuers"),
    query: noQuery,
    body: body(issuerBody),
    responses: { 201: ok(issuerOut, "Created"), 200: ok(issuerOut, "Replaced") },
  },
  {
    method: "get",
    path: "/v1/issuers",
    operationId: "listIssuers",
    summary: "The tenant's identity providers",
    auth: client("issuers"),
    query: noQuery,
    responses: { 200: ok(issuerList) },
  },
  {
    method: "get",
    path: "/v1/issuers/{issuer}",
    operationId: "getIssuer",
    summary: "One identity provider; 404 issuer_not_found",
    auth: client("issuers"),
    query: noQuery,
    responses: { 200: ok(issuerOut) },
  },
  {
    method: "delete",
    path: "/v1/issuers/{issuer}",
    operationId: "deleteIssuer",
    summary: "Remove an identity provider: its tokens are refused within 60 s",
    auth: client("issuers"),
    query: noQuery,
    responses: { 200: ok(issuerDeleted) },
  },
];

/** The tenant's API keys (docs/users.md "API keys"). */
export const API_KEY_ROUTES: readonly ApiRoute[] = [
  {
    method: "post",
    path: "/v1/api-keys",
    operationId: "createApiKey",
    summary:
      "Create an API key: a long-lived bearer credential of role operator or client; its secret is answered this once",
    auth: client("keys"),
    query: noQuery,
    body: body(apiKeyBody),
    responses: { 201: ok(apiKeyCreated, "Created") },
  },
  {
    method: "get",
    path: "/v1/api-keys",
    operationId: "listApiKeys",
    summary: "The tenant's API keys (never a secret): prefix, role, scope, created, last used, expires",
    auth: client("keys"),
    query: noQuery,
    responses: { 200: ok(apiKeyList) },
  },
  {
    method: "delete",
    path: "/v1/api-keys/{key}",
    operationId: "deleteApiKey",
    summary: "Delete an API key: refused at once where deleted, within 5 s everywhere; 404 not_found",
    auth: client("keys"),
    query: noQuery,
    responses: { 200: ok(apiKeyDeleted) },
  },
];

/** Limits and usage (docs/users.md "Limits and usage"). */
export const LIMITS_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/limits",
    operationId: "putLimits",
    summary: "Replace the tenant's limits, per user and for the tenant (422 invalid_limits names the field)",
    auth: client("limits"),
    query: noQuery,
    body: body(limitsBody),
    responses: { 200: ok(limitsResponse) },
  },
  {
    method: "get",
    path: "/v1/limits",
    operationId: "getLimits",
    summary: "The tenant's limits",
    auth: client("limits"),
    query: noQuery,
    responses: { 200: ok(limitsResponse) },
  },
  {
    method: "get",
    path: "/v1/usage",
    operationId: "getUsage",
    summary:
      "Inputs, tokens and cost by user and UTC day, and by model (one user with ?sub=); metered with or without limits",
    auth: client("limits"),
    query: usageQuery,
    responses: { 200: ok(meteredUsage) },
  },
  {
    method: "get",
    path: "/v1/me/usage",
    operationId: "getMyUsage",
    summary: "The token's own user's inputs, tokens and cost by UTC day (a token with sub)",
    auth: client("usage"),
    query: meUsageQuery,
    responses: { 200: ok(meteredUsage) },
  },
  {
    method: "get",
    path: "/v1/stats",
    operationId: "getStats",
    summary:
      "Operator signals: sessions by status, live and quarantined tasks, outbox backlog and dead deliveries, pending items and their earliest deadline, from the counters sessions push to the directory (at most stalenessMs old)",
    auth: client("inspect"),
    query: noQuery,
    responses: { 200: ok(statsResponse) },
  },
];

/** Session templates and users (docs/users.md). */
export const TEMPLATE_ROUTES: readonly ApiRoute[] = [
  {
    method: "get",
    path: "/v1/retention",
    operationId: "getRetention",
    summary:
      "The tenant's default retention (null: none): sessions created without a template's own are deleted that many days after their last activity",
    auth: client("templates"),
    query: noQuery,
    responses: { 200: ok(tenantRetention) },
  },
  {
    method: "put",
    path: "/v1/retention",
    operationId: "putRetention",
    summary: "Set (null: clear) the tenant's default retention; existing sessions keep what they were created with",
    auth: client("templates"),
    query: noQuery,
    body: body(tenantRetention),
    responses: { 200: ok(tenantRetention) },
  },
  {
    method: "put",
    path: "/v1/templates/{template}",
    operationId: "putTemplate",
    summary:
      "Define or replace a session template: the session PUT's fields plus userSettable (ETag: its version; If-Match makes it conditional; 422 invalid_template names the field)",
    auth: client("templates"),
    headers: ifMatchHeader,
    body: body(templateBody),
    responses: { 201: ok(templateRecordOut, "Created"), 200: ok(templateRecordOut, "Replaced") },
  },
  {
    method: "get",
    path: "/v1/templates",
    operationId: "listTemplates",
    summary: "The tenant's session templates",
    auth: client("templates"),
    query: noQuery,
    responses: { 200: ok(templatesListResponse) },
  },
  {
    method: "get",
    path: "/v1/templates/{template}",
    operationId: "getTemplate",
    summary: "One session template (ETag: its version)",
    auth: client("templates"),
    query: noQuery,
    responses: { 200: ok(templateRecordOut) },
  },
  {
    method: "delete",
    path: "/v1/templates/{template}",
    operationId: "deleteTemplate",
    summary: "Delete a session template: sessions created from it keep what it said",
    auth: client("templates"),
    headers: ifMatchHeader,
    responses: { 200: ok(templateDeletedResponse) },
  },
  {
    method: "post",
    path: "/v1/users/{sub}/revoke",
    operationId: "revokeUser",
    summary: "Refuse the user's tokens issued before now and close its open watches",
    auth: client("users"),
    query: noQuery,
    body: body(emptyBody, false),
    responses: { 200: ok(revokeResponse) },
  },
  {
    method: "post",
    path: "/v1/users/{sub}/erase",
    operationId: "eraseUser",
    summary:
      "Erase a user: delete its sessions (with their outbox rows), usage and directory rows, refuse its tokens issued before now and its creates while it runs; durable, ends with a signed user.erased event (202; 200: its erasure already running)",
    auth: client("users"),
    query: noQuery,
    body: body(emptyBody, false),
    responses: { 202: ok(erasureResponse, "Started"), 200: ok(erasureResponse, "Already running") },
  },
  {
    method: "get",
    path: "/v1/erasures/{erasure}",
    operationId: "getErasure",
    summary: "Where an erasure stands: sessions found, deleted, remaining (404 erasure_not_found)",
    auth: client("users"),
    query: noQuery,
    responses: { 200: ok(erasureResponse) },
  },
];

/** The tenant's profiles (docs/api.md "Profiles"): what the agent is, named by sessions and templates. */
export const PROFILE_ROUTES: readonly ApiRoute[] = [
  {
    method: "put",
    path: "/v1/profiles/{profile}",
    operationId: "putProfile",
    summary:
      "Define a profile or make its next version: ordered sections { id, text } (ETag: its version; If-Match makes it conditional; 422 invalid_profile names the field)",
    auth: client("profiles"),
    query: noQuery,
    headers: ifMatchHeader,
    body: body(profileBody),
    responses: { 201: ok(profileRecordOut, "Created"), 200: ok(profileRecordOut, "A new version") },
  },
  {
    method: "get",
    path: "/v1/profiles",
    operationId: "listProfiles",
    summary: "The tenant's live profiles, each at its latest version",
    auth: client("profiles"),
    query: noQuery,
    responses: { 200: ok(profilesListResponse) },
  },
  {
    method: "get",
    path: "/v1/profiles/{profile}",
    operationId: "getProfile",
    summary: "A profile's latest version (ETag: its version); a deleted profile is 404",
    auth: client("profiles"),
    query: noQuery,
    responses: { 200: ok(profileRecordOut) },
  },
  {
    method: "delete",
    path: "/v1/profiles/{profile}",
    operationId: "deleteProfile",
    summary: "Delete a profile; 409 profile_in_use while a session template names it",
    auth: client("profiles"),
    query: noQuery,
    headers: ifMatchHeader,
    responses: { 200: ok(profileDeletedResponse) },
  },
];
